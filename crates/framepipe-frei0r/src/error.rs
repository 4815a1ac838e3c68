//! The crate's error type.

use std::path::PathBuf;

/// Errors of the frei0r host. Converted into [`framepipe_core::Error`] at the element boundary
/// with [`framepipe_core::Error::element`], which prefixes the element name.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Frei0rError {
    /// The file could not be loaded or lacks the frei0r entry points.
    #[error("{} is not a frei0r plugin: {reason}", path.display())]
    NotAPlugin {
        /// The shared object.
        path: PathBuf,
        /// Why, e.g. "no symbol f0r_init".
        reason: String,
    },
    /// `f0r_construct` returned NULL.
    #[error("{} could not make an instance of {width}x{height}", path.display())]
    ConstructFailed {
        /// The plugin file.
        path: PathBuf,
        /// Requested width.
        width: u32,
        /// Requested height.
        height: u32,
    },
    /// A frame size frei0r cannot take.
    #[error("{width}x{height}: frei0r needs width and height multiples of 8")]
    BadSize {
        /// Offered width.
        width: u32,
        /// Offered height.
        height: u32,
    },
    /// A value of the wrong type for a parameter.
    #[error("parameter '{param}' takes {expected}, not '{value}'")]
    BadParam {
        /// Property name.
        param: String,
        /// What the parameter takes.
        expected: &'static str,
        /// The offending value.
        value: String,
    },
    /// No parameter of that name.
    #[error("no parameter '{param}'; expected one of: {expected}")]
    UnknownParam {
        /// The name asked for.
        param: String,
        /// The plugin's parameter names.
        expected: String,
    },
    /// The probe saw the plugin crash or hang; it is listed but not run.
    #[error("the probe found this plugin unusable ({verdict}: {note}); see crates/framepipe-frei0r/data/modes.tsv")]
    Unusable {
        /// `crashed` or `timeout`.
        verdict: String,
        /// What the probe saw.
        note: String,
    },
}

/// Result with [`Frei0rError`].
pub type Result<T> = std::result::Result<T, Frei0rError>;
