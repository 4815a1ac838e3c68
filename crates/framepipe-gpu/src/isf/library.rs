//! The registry side of ISF: the `isf` element, whose properties come from the file its
//! `location` names ([`file_entry`]), and an `isf-NAME` element for every `.fs` file found
//! in the ISF folders ([`folders`]): `$FRAMEPIPE_ISF_PATH` (a colon-separated list), then
//! `~/.local/share/isf`, then `/usr/share/isf`. A name found twice is the first folder's.
//! `NAME` is the file's name without `.fs`, in lower case, with every run of characters other
//! than letters, digits, `-` and `_` made one `-` (`Bad TV.fs` is `isf-bad-tv`).
//!
//! Registration reads only the headers (a file that does not parse is still listed, with
//! why, and refused when used); the GLSL is assembled, images decoded and the program
//! compiled when a show uses the element.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use framepipe_core::{
    Element, ElementDesc, ElementKind, Error, Mode, PropKind, PropSpec, PropValue, Props, Registry,
    RegistryEntry, Result,
};
use framepipe_isf::{Shader, MAX_FILE_BYTES};

use super::factory::{self, IsfFactory};
use super::loaded::Loaded;

/// The ISF folders, in the order they are searched.
pub fn folders() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::env::var_os("FRAMEPIPE_ISF_PATH")
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        out.push(Path::new(&home).join(".local/share/isf"));
    }
    out.push(PathBuf::from("/usr/share/isf"));
    out
}

/// The element name of the shader file `path`: `isf-` and its cleaned stem.
pub fn element_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let mut name = String::from("isf-");
    let mut dash = false;
    for c in stem.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            name.push(c);
            dash = false;
        } else if !dash {
            name.push('-');
            dash = true;
        }
    }
    name.trim_end_matches('-').to_string()
}

/// The `.fs` files of the ISF folders, with their element names (the first of a name wins).
pub fn shader_files() -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    for dir in folders() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "fs") && p.is_file())
            .collect();
        files.sort();
        for f in files {
            let name = element_name(&f);
            if name.len() > 4 && !out.iter().any(|(n, _)| *n == name) {
                out.push((name, f));
            }
        }
    }
    out
}

/// The static description of `isf` (before a file is named).
fn isf_static_desc() -> ElementDesc {
    ElementDesc {
        name: "isf".into(),
        kind: ElementKind::Effect,
        description: "An ISF shader file: a source, effect or mixer on the GPU, by its inputs"
            .into(),
        props: vec![PropSpec::new(
            "location",
            PropKind::Str,
            PropValue::Str(String::new()),
            "the ISF file (.fs); its inputs become this node's properties",
        )
        .path(framepipe_core::PathUse::File)
        .fixed()],
        default_mode: Mode::Parallel,
        details: vec![(
            "properties".into(),
            "the file's INPUTS, shown by 'framepipe inspect' of its isf-NAME, or of isf with \
             location= in a show"
                .into(),
        )],
    }
}

/// Adds `isf` and an `isf-NAME` for every shader of the ISF folders.
pub fn register(registry: &mut Registry) {
    registry.register(
        isf_static_desc(),
        Box::new(|props: &Props| {
            let location = props.str("location");
            if location.is_empty() {
                return Err(Error::Pipeline(
                    "isf needs location=FILE.fs, the ISF shader to run".into(),
                ));
            }
            let loaded = Arc::new(Loaded::read(Path::new(location)).map_err(fail("isf"))?);
            let f = IsfFactory::new("isf", loaded, props, true)?;
            Ok(Element::Gpu(Box::new(f)))
        }),
    );
    for (name, path) in shader_files() {
        let shown = path.display().to_string();
        let header = framepipe_isf::read_text(&path, MAX_FILE_BYTES as u64)
            .map_err(|e| e.to_string())
            .and_then(|t| Shader::parse(&t).map_err(|e| e.to_string()));
        match header {
            Ok(shader) => {
                let desc = factory::desc(&name, &shader, &shown, false);
                let element = name.clone();
                registry.register(
                    desc,
                    Box::new(move |props: &Props| {
                        let loaded = Arc::new(Loaded::read(&path).map_err(fail(&element))?);
                        let f = IsfFactory::new(&element, loaded, props, false)?;
                        Ok(Element::Gpu(Box::new(f)))
                    }),
                );
            }
            Err(why) => {
                let reason = format!("{shown}: {why}");
                let desc = ElementDesc {
                    name: name.clone(),
                    kind: ElementKind::Effect,
                    description: format!("cannot be used: {reason}"),
                    props: Vec::new(),
                    default_mode: Mode::Parallel,
                    details: vec![("file".into(), shown)],
                };
                registry.register(
                    desc,
                    Box::new(move |_: &Props| Err(Error::element(name.clone(), reason.clone()))),
                );
            }
        }
    }
}

fn fail(element: &str) -> impl Fn(String) -> Error + '_ {
    move |why| Error::element(element.to_string(), why)
}

/// The description of `isf location=PATH`: its kind and properties from the file.
pub fn isf_desc(path: &Path) -> Result<ElementDesc> {
    let loaded = Loaded::read(path).map_err(fail("isf"))?;
    Ok(factory::desc(
        "isf",
        &loaded.shader,
        &path.display().to_string(),
        true,
    ))
}

/// For a node of element `element` with properties `given` (as written): when it is `isf`,
/// the registry entry of the file its `location` names (the file's kind and properties, and
/// a build that runs it), which the builder uses instead of the registry's own `isf`; `None`
/// for every other element.
pub fn file_entry(element: &str, given: &[(String, String)]) -> Result<Option<RegistryEntry>> {
    if element != "isf" {
        return Ok(None);
    }
    let Some((_, location)) = given.iter().find(|(k, _)| k == "location") else {
        return Err(Error::Pipeline(
            "isf needs location=FILE.fs, the ISF shader to run".into(),
        ));
    };
    let path = PathBuf::from(location);
    let loaded = Arc::new(Loaded::read(&path).map_err(fail("isf"))?);
    let desc = factory::desc("isf", &loaded.shader, location, true);
    Ok(Some(RegistryEntry {
        desc,
        build: Box::new(move |props: &Props| {
            let f = IsfFactory::new("isf", loaded.clone(), props, true)?;
            Ok(Element::Gpu(Box::new(f)))
        }),
    }))
}
