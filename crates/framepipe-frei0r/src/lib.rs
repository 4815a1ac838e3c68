//! framepipe's frei0r host: finds frei0r plugins, registers each filter, mixer (mixer2, mixer3)
//! and source plugin as an element named `frei0r-<file stem>`, and runs them on RGBA frames.
//!
//! * [`search_path`] and [`register`] are what the CLI calls.
//! * [`plugin`]: loading a plugin ([`Plugin`]) and its instances ([`Instance`]), over the C API
//!   declared in [`ffi`].
//! * [`element`]: the [`framepipe_core::EffectFactory`] / [`framepipe_core::Effect`],
//!   [`framepipe_core::MixerFactory`] / [`framepipe_core::Mixer`] and
//!   [`framepipe_core::Source`] for frei0r plugins.
//! * [`probe`]: decides by measurement whether a filter or mixer keeps state between frames; the
//!   `frei0r-probe` binary runs it on every installed plugin and writes `data/modes.tsv`, which
//!   [`modes`] compiles in and [`register`] uses for each element's default scheduling mode.
//!
//! Real-time contract: every allocation happens when a plugin is loaded, an element built or an
//! instance made (including the scratch frames for BGRA8888 plugins: one per input). Per frame,
//! the host calls `f0r_update` (`f0r_update2` for mixers) and, for BGRA8888 plugins, swaps R and B
//! in linear passes (each input, then the output); it neither
//! allocates, locks nor blocks, and calls `f0r_set_param_value` only when a property is changed.
//! What the plugin itself does inside `f0r_update` is up to the plugin.

pub mod element;
pub mod error;
pub mod ffi;
pub mod isolate;
pub mod modes;
pub mod plugin;
pub mod probe;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use framepipe_core::{Element, ElementDesc, ElementKind, Error, Mode, Registry};

pub use element::{Frei0rEffect, Frei0rFilter, Frei0rMixer, Frei0rMixerFactory, Frei0rSource};
pub use error::{Frei0rError, Result};
pub use plugin::{ColorModel, Instance, Param, ParamKind, ParamValue, Plugin, PluginKind};

/// Frame size at which a fresh instance is made to read each plugin's parameter defaults.
pub const NOMINAL_SIZE: (u32, u32) = (320, 240);

/// Directories searched for frei0r plugins, in order: `FREI0R_PATH` (colon-separated) if set,
/// else `~/.frei0r-1/lib`, `/usr/local/lib/frei0r-1`, `/usr/lib/frei0r-1` and
/// `/usr/lib/<multiarch>/frei0r-1`. Only directories that exist are returned.
pub fn search_path() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("FREI0R_PATH") {
        dirs.extend(std::env::split_paths(&p).filter(|d| !d.as_os_str().is_empty()));
    } else {
        if let Some(home) = std::env::var_os("HOME") {
            dirs.push(Path::new(&home).join(".frei0r-1/lib"));
        }
        dirs.push("/usr/local/lib/frei0r-1".into());
        dirs.push("/usr/lib/frei0r-1".into());
        if let Ok(rd) = std::fs::read_dir("/usr/lib") {
            let mut multi: Vec<PathBuf> = rd
                .filter_map(|e| e.ok())
                .map(|e| e.path().join("frei0r-1"))
                .filter(|p| p.is_dir())
                .collect();
            multi.sort();
            dirs.extend(multi);
        }
    }
    let mut seen = HashSet::new();
    dirs.retain(|d| d.is_dir() && seen.insert(d.clone()));
    dirs
}

/// Every `.so` file in the search path, sorted by name within each directory. A stem found in an
/// earlier directory hides the same stem in later ones.
pub fn plugin_files(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "so"))
            .collect();
        files.sort();
        for f in files {
            let stem = f
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            if seen.insert(stem) {
                out.push(f);
            }
        }
    }
    out
}

/// Loads every plugin on [`search_path`] once and registers each filter (as an effect), each
/// mixer2 / mixer3 (as a mixer of exactly 2 / 3 inputs) and each source (as a source with extra
/// properties `width`, `height`, `frames`, `rate`) under `frei0r-<file stem>`. Libraries stay
/// loaded for the program's life.
///
/// Returns warnings, one line each: files that are not frei0r plugins (still registered under
/// their name, with a build function that fails with the same message) and plugins that loaded
/// but could not be registered.
pub fn register(registry: &mut Registry) -> Vec<String> {
    register_from(registry, &search_path())
}

/// [`register`] with an explicit list of directories.
pub fn register_from(registry: &mut Registry, dirs: &[PathBuf]) -> Vec<String> {
    register_files(registry, plugin_files(dirs))
}

/// Registers only the plugins whose file stems are given (`glow` for `frei0r-glow`), found on
/// the search path: what `framepipe run` needs, without loading every plugin installed. Stems
/// not found are simply not registered (the caller can fall back to [`register`] to explain).
pub fn register_named(registry: &mut Registry, stems: &[&str]) -> Vec<String> {
    let files = plugin_files(&search_path())
        .into_iter()
        .filter(|p| {
            p.file_stem()
                .is_some_and(|s| stems.iter().any(|want| s.to_string_lossy() == *want))
        })
        .collect();
    register_files(registry, files)
}

fn register_files(registry: &mut Registry, files: Vec<PathBuf>) -> Vec<String> {
    let mut warnings = Vec::new();
    for path in files {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = format!("frei0r-{stem}");
        match Plugin::load(&path) {
            Ok(plugin) => {
                if let Err(e) = register_plugin(registry, &name, plugin) {
                    warnings.push(e.to_string());
                }
            }
            Err(e) => {
                warnings.push(format!("{name}: {e}"));
                let reason = match e {
                    Frei0rError::NotAPlugin { reason, .. } => reason,
                    other => other.to_string(),
                };
                register_broken(registry, &name, &path, reason);
            }
        }
    }
    warnings
}

/// Registers a file that is not a usable frei0r plugin: building it fails with the reason.
fn register_broken(registry: &mut Registry, name: &str, path: &Path, reason: String) {
    let desc = ElementDesc {
        name: name.to_string(),
        kind: ElementKind::Effect,
        description: format!("not a frei0r plugin: {reason}"),
        props: Vec::new(),
        default_mode: Mode::Serial,
        details: vec![
            ("file".into(), path.display().to_string()),
            ("error".into(), reason.clone()),
        ],
    };
    let path = path.to_path_buf();
    let element = name.to_string();
    registry.register(
        desc,
        Box::new(move |_| {
            Err(Error::element(
                &element,
                Frei0rError::NotAPlugin {
                    path: path.clone(),
                    reason: reason.clone(),
                },
            ))
        }),
    );
}

/// Registers one loaded plugin under `name`: a filter as an effect, a mixer2 / mixer3 as a mixer
/// of 2 / 3 inputs, a source as a source.
pub fn register_plugin(
    registry: &mut Registry,
    name: &str,
    plugin: Arc<Plugin>,
) -> framepipe_core::Result<()> {
    let info = plugin.info().clone();
    let row = modes::lookup(plugin.stem());
    // The probe's verdict holds for the build it measured: another file under the same name
    // (another frei0r version or build) gets none, so it runs serial, and says so when built.
    let verdict = row.filter(|v| v.crc32 == plugin.crc32());
    let other_build = row.filter(|v| v.crc32 != plugin.crc32()).map(|v| {
        format!(
            "{name}: {} is not the build the probe measured (crc32 {:08x}, probed {:08x}); \
             running it serial. Re-probe: {}",
            plugin.path().display(),
            plugin.crc32(),
            v.crc32,
            modes::REPROBE
        )
    });
    let inst = Instance::new(&plugin, NOMINAL_SIZE.0, NOMINAL_SIZE.1)
        .map_err(|e| Error::element(name, e))?;
    let defaults: Vec<ParamValue> = (0..plugin.params().len())
        .map(|i| inst.get_param(i))
        .collect();
    drop(inst);
    // A plugin the probe saw crash or hang (in f0r_update) is isolated by default (its crash
    // costs frames, not the show); with `isolate=false` it refuses to be built, so that a
    // pipeline fails with a message instead of a crash or a hang.
    let broken = verdict
        .filter(|v| v.verdict == "crashed" || v.verdict == "timeout")
        .map(|v| (v.verdict.to_string(), v.note.to_string()));
    // Whether a restart loses something: anything the probe did not find stateless.
    let stateful = verdict.is_none_or(|v| v.verdict != "stateless");
    let mut param_specs: Vec<_> = plugin
        .params()
        .iter()
        .zip(&defaults)
        .map(|(p, d)| element::param_spec(p, d))
        .collect();
    // The isolation properties, unless the plugin has a parameter of the same name (it wins).
    let isolation_specs: Vec<_> = isolate::prop_specs(broken.is_some())
        .into_iter()
        .filter(|s| !plugin.params().iter().any(|p| p.prop_name == s.name))
        .collect();

    let (mode, schedule) = match verdict {
        Some(v) => (
            v.mode,
            format!(
                "{} by probe -> {}{}{}",
                v.verdict,
                v.mode,
                if v.time_dependent {
                    "; output depends on time"
                } else {
                    ""
                },
                if v.reads_output {
                    "; reads its output buffer (cleared before each frame)"
                } else {
                    ""
                }
            ),
        ),
        None if other_build.is_some() => (
            Mode::Serial,
            "another build than the probed one (file crc32 differs) -> serial (the safe choice); re-probe to change".to_string(),
        ),
        None => (
            Mode::Serial,
            "not in the probe data -> serial (the safe choice)".to_string(),
        ),
    };
    let clear_output = verdict.is_some_and(|v| v.reads_output);
    let mut details = vec![
        ("file".to_string(), plugin.path().display().to_string()),
        ("plugin name".to_string(), info.name.clone()),
        ("plugin type".to_string(), info.kind.to_string()),
        ("colour model".to_string(), info.color_model.to_string()),
        ("author".to_string(), info.author.clone()),
        (
            "version".to_string(),
            format!("{}.{}", info.major_version, info.minor_version),
        ),
        ("frei0r API".to_string(), info.frei0r_version.to_string()),
        ("file crc32".to_string(), format!("{:08x}", plugin.crc32())),
        ("explanation".to_string(), info.explanation.clone()),
    ];
    let description = if info.explanation.is_empty() {
        info.name.clone()
    } else {
        info.explanation.clone()
    };
    let element = name.to_string();
    let said = std::sync::Once::new();
    let inputs = match info.kind {
        PluginKind::Mixer2 => 2,
        PluginKind::Mixer3 => 3,
        _ => 1,
    };
    if inputs > 1 && !plugin.has_update2() {
        return Err(Error::element(
            name,
            Frei0rError::NotAPlugin {
                path: plugin.path().to_path_buf(),
                reason: format!("a {} plugin without f0r_update2", info.kind),
            },
        ));
    }
    match info.kind {
        PluginKind::Filter | PluginKind::Mixer2 | PluginKind::Mixer3 => {
            details.push(("scheduling".to_string(), schedule));
            let kind = if inputs > 1 {
                details.push(("inputs".to_string(), inputs.to_string()));
                ElementKind::Mixer {
                    min_inputs: inputs,
                    max_inputs: inputs,
                }
            } else {
                ElementKind::Effect
            };
            param_specs.extend(isolation_specs);
            let desc = ElementDesc {
                name: name.to_string(),
                kind,
                description,
                props: param_specs,
                default_mode: mode,
                details,
            };
            registry.register(
                desc,
                Box::new(move |props| {
                    let isolation = isolate::settings(props, stateful);
                    if let (Some((verdict, note)), None) = (&broken, isolation) {
                        return Err(Error::element(
                            &element,
                            Frei0rError::Unusable {
                                verdict: verdict.clone(),
                                note: note.clone(),
                            },
                        ));
                    }
                    if let Some(msg) = &other_build {
                        // Building, not the frame path: once per process.
                        said.call_once(|| eprintln!("{msg}"));
                    }
                    let params =
                        element::params_to_set(&plugin, &defaults, props, |p| p.prop_name.clone())
                            .map_err(|e| Error::element(&element, e))?;
                    if inputs > 1 {
                        return Ok(Element::Mixer(Box::new(Frei0rMixerFactory::new(
                            element.clone(),
                            Arc::clone(&plugin),
                            inputs,
                            mode,
                            clear_output,
                            params,
                            isolation,
                        ))));
                    }
                    Ok(Element::Effect(Box::new(Frei0rFilter::new(
                        element.clone(),
                        Arc::clone(&plugin),
                        mode,
                        clear_output,
                        params,
                        isolation,
                    ))))
                }),
            );
        }
        PluginKind::Source => {
            details.push(("scheduling".to_string(), "source (serial)".to_string()));
            let mut props = element::source_specs();
            for (mut spec, param) in param_specs.into_iter().zip(plugin.params()) {
                spec.name = element::source_prop_name(param);
                props.push(spec);
            }
            for spec in isolation_specs {
                if !props.iter().any(|p| p.name == spec.name) {
                    props.push(spec);
                }
            }
            let desc = ElementDesc {
                name: name.to_string(),
                kind: ElementKind::Source,
                description,
                props,
                default_mode: Mode::Serial,
                details,
            };
            let specs = desc.props.clone();
            registry.register(
                desc,
                Box::new(move |props| {
                    let isolation = isolate::settings(props, stateful);
                    Ok(Element::Source(Box::new(Frei0rSource::build(
                        &element, &plugin, &defaults, &specs, props, isolation,
                    )?)))
                }),
            );
        }
    }
    Ok(())
}
