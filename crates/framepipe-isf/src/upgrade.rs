//! ISF 1.0 files, upgraded as the spec's "Differences from the first version" says:
//!
//! * the top-level `PERSISTENT_BUFFERS` (an array of names, or an object of name →
//!   `{ WIDTH, HEIGHT, FLOAT }`) becomes `PERSISTENT` (and those attributes) on the buffers the
//!   passes render into; one no pass renders into is still declared, so the GLSL can read it;
//! * `vv_FragNormCoord` is `isf_FragNormCoord` and `vv_vertShaderInit` is
//!   `isf_vertShaderInit` (renamed in the GLSL when it is assembled, [`RENAMES`]).
//!
//! A file without `ISFVSN` is an ISF 1.0 file. The renames apply to every file, as VVISF does:
//! a 2.0 file using a 1.0 name still runs. `IMG_SIZE`, `TIMEDELTA`, `DATE`, `FRAMEINDEX` and the
//! audio inputs, which 1.0 lacked, need nothing: a 1.0 file does not use them.

use crate::error::{quote, Result};
use crate::json::wrong;
use crate::pass::{Buffers, Decl};
use serde_json::Value;

/// GLSL identifiers of ISF 1.0 and their ISF 2.0 names.
pub const RENAMES: &[(&str, &str)] = &[
    ("vv_FragNormCoord", "isf_FragNormCoord"),
    ("vv_vertShaderInit", "isf_vertShaderInit"),
];

/// Adds the buffers of a `PERSISTENT_BUFFERS` value (after the passes': a pass's own
/// attributes are kept, the 1.0 ones fill the rest). Returns whether there was one.
pub(crate) fn persistent_buffers(v: Option<&Value>, buffers: &mut Buffers) -> Result<bool> {
    let persistent = || Decl {
        persistent: Some(true),
        ..Decl::default()
    };
    match v {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Array(names)) => {
            for (i, n) in names.iter().enumerate() {
                let at = format!("PERSISTENT_BUFFERS[{i}]");
                let name = crate::json::string(n, &at)?;
                buffers.declare(&name, &at, persistent())?;
            }
            Ok(true)
        }
        Some(Value::Object(m)) => {
            for (name, d) in m {
                let at = format!("PERSISTENT_BUFFERS {}", quote(name));
                let decl = match d {
                    Value::Object(o) => Decl {
                        persistent: Some(true),
                        ..Decl::parse(o, &at)?
                    },
                    Value::Null => persistent(),
                    v => return Err(wrong(&at, "an object", v)),
                };
                buffers.declare(name, &at, decl)?;
            }
            Ok(true)
        }
        Some(v) => Err(wrong("PERSISTENT_BUFFERS", "an array or an object", v)),
    }
}
