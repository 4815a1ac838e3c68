//! The subcommands that print and exit: `graph` (the layout a run would have), `plugins`,
//! `inspect ELEMENT`, `displays`.

use std::io::Write;

use anyhow::{bail, Result};
use framepipe_core::ElementKind;

use crate::args::GraphArgs;
use crate::build::{self, build, Purpose};
use crate::load::{load_desc, registry, registry_for};

/// `framepipe graph`: builds the graph as `run` would (sinks checked, not built), negotiates
/// every node's shape, prints the layout.
pub(crate) fn graph(args: GraphArgs) -> Result<()> {
    if let Some(text) = &args.max_memory {
        let max_memory = framepipe_core::limits::parse_bytes(text)
            .map_err(|e| anyhow::anyhow!("bad --max-memory: {e}"))?;
        framepipe_core::Limits { max_memory }.set();
    }
    let desc = load_desc(&args.pipeline)?;
    let registry = registry_for(&desc, None);
    let layout = build(&desc, &registry, Purpose::Layout)?.layout()?;
    let text = if args.dot {
        layout.dot()
    } else {
        layout.text()
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// `framepipe displays`: every display a `windowsink` can go to.
pub(crate) fn displays() -> Result<()> {
    let list = framepipe_window::displays()?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<6} {:<16} {:<12} {:<12} primary",
        "index", "name", "size", "position"
    )?;
    for d in &list {
        writeln!(
            out,
            "{:<6} {:<16} {:<12} {:<12} {}",
            d.index,
            d.name,
            format!("{}x{}", d.width, d.height),
            format!("{:+}{:+}", d.x, d.y),
            if d.primary { "yes" } else { "no" }
        )?;
    }
    Ok(())
}

fn detail<'a>(d: &'a framepipe_core::ElementDesc, key: &str) -> &'a str {
    d.details
        .iter()
        .find(|(k, _)| k == key)
        .map_or("", |(_, v)| v.as_str())
}

pub(crate) fn plugins(verbose: bool) -> Result<()> {
    let (registry, warnings) = registry(None);
    let mut out = std::io::stdout().lock();
    let (frei0r, native): (Vec<_>, Vec<_>) = registry
        .iter()
        .partition(|e| e.desc.name.starts_with("frei0r-"));
    writeln!(out, "native elements:")?;
    for e in &native {
        let d = &e.desc;
        let props: Vec<&str> = d.props.iter().map(|p| p.name.as_str()).collect();
        writeln!(
            out,
            "  {:<16} {:<10} {}  [{}]",
            d.name,
            kind_label(d.kind),
            d.description,
            props.join(", ")
        )?;
    }
    for (name, description) in build::STRUCTURAL {
        writeln!(out, "  {name:<16} {:<7} {description}", "graph")?;
    }
    writeln!(out, "\nfrei0r plugins ({}):", frei0r.len())?;
    writeln!(
        out,
        "  {:<28} {:<10} {:<9} {:<9} parameters",
        "name", "type", "colour", "mode"
    )?;
    for e in &frei0r {
        let d = &e.desc;
        let props: Vec<String> = d
            .props
            .iter()
            .map(|p| format!("{}:{}", p.name, short_kind(&p.kind)))
            .collect();
        let colour = detail(d, "colour model");
        let colour = if colour.is_empty() {
            detail(d, "color model")
        } else {
            colour
        };
        writeln!(
            out,
            "  {:<28} {:<10} {:<9} {:<9} {}",
            d.name,
            kind_label(d.kind),
            colour,
            if scheduled(d.kind) {
                d.default_mode.as_str()
            } else {
                "-"
            },
            props.join(" ")
        )?;
    }
    if !warnings.is_empty() {
        if verbose {
            writeln!(out, "\nnot loaded:")?;
            for w in &warnings {
                writeln!(out, "  {w}")?;
            }
        } else {
            writeln!(
                out,
                "\n({} plugin files not loaded; --verbose shows why)",
                warnings.len()
            )?;
        }
    }
    Ok(())
}

/// `source`, `effect`, `sink`, or `mixer N` / `mixer N..M` with the inputs a mixer takes.
fn kind_label(kind: ElementKind) -> String {
    match kind {
        ElementKind::Mixer {
            min_inputs,
            max_inputs,
        } if min_inputs == max_inputs => format!("{kind} {min_inputs}"),
        ElementKind::Mixer {
            min_inputs,
            max_inputs,
        } => format!("{kind} {min_inputs}..{max_inputs}"),
        _ => kind.to_string(),
    }
}

/// Whether the scheduler runs elements of this kind serial or parallel (effects and mixers).
fn scheduled(kind: ElementKind) -> bool {
    matches!(kind, ElementKind::Effect | ElementKind::Mixer { .. })
}

fn short_kind(k: &framepipe_core::PropKind) -> &'static str {
    use framepipe_core::PropKind::*;
    match k {
        Bool => "bool",
        Int { .. } => "int",
        Float { .. } => "float",
        Str => "string",
        Enum(_) => "enum",
        Color => "color",
        Position => "position",
    }
}

pub(crate) fn inspect(name: &str, props: &[String]) -> Result<()> {
    if let Some((_, description)) = build::STRUCTURAL.iter().find(|(n, _)| *n == name) {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{name}  (graph node, made by framepipe itself)")?;
        writeln!(out, "  {description}")?;
        writeln!(out, "properties:")?;
        if name == "feedback" {
            for (p, kind, default, what) in build::FEEDBACK_PROPS {
                writeln!(out, "  {p:<20} {kind:<28} default {default}")?;
                writeln!(out, "  {:<20} {what}", "")?;
            }
        } else {
            writeln!(out, "  (none)")?;
        }
        return Ok(());
    }
    let (registry, _) = registry(None);
    // `framepipe inspect FILE.fs`: an ISF file as `isf location=FILE.fs`;
    // `framepipe inspect mix transition=NAME`: that gl-transition mix.
    let mut given = Vec::with_capacity(props.len() + 1);
    for p in props {
        let Some((k, v)) = p.split_once('=') else {
            bail!("expected key=value after the element, e.g. mix transition=fade; got '{p}'");
        };
        given.push((k.to_string(), v.to_string()));
    }
    if name == framepipe_gpu::transitions::mix::MIX
        && given.iter().any(|(k, _)| k == "transition")
        && !given.iter().any(|(k, _)| k == "mode")
    {
        given.push(("mode".into(), "transition".into()));
    }
    let file_entry = match name.ends_with(".fs") {
        true => framepipe_gpu::isf::file_entry("isf", &[("location".into(), name.into())])?,
        false => build::node_entry(name, &given)?,
    };
    if file_entry.is_none() {
        if let Some((k, _)) = given.first() {
            bail!("{name} takes no {k}= here: only 'framepipe inspect mix transition=NAME' does");
        }
    }
    let entry = match &file_entry {
        Some(e) => e,
        None => registry.lookup(name)?,
    };
    let d = &entry.desc;
    let mut out = std::io::stdout().lock();
    match d.kind {
        ElementKind::Mixer {
            min_inputs,
            max_inputs,
        } if min_inputs == max_inputs => {
            writeln!(out, "{}  ({}, {min_inputs} inputs)", d.name, d.kind)?
        }
        ElementKind::Mixer {
            min_inputs,
            max_inputs,
        } => writeln!(
            out,
            "{}  ({}, {min_inputs} to {max_inputs} inputs)",
            d.name, d.kind
        )?,
        _ => writeln!(out, "{}  ({})", d.name, d.kind)?,
    }
    if !d.description.is_empty() {
        writeln!(out, "  {}", d.description)?;
    }
    if scheduled(d.kind) {
        writeln!(
            out,
            "  scheduling: {} (override with mode=serial|parallel)",
            d.default_mode
        )?;
    }
    for (k, v) in &d.details {
        writeln!(out, "  {k}: {v}")?;
    }
    writeln!(out, "properties:")?;
    if d.props.is_empty() {
        writeln!(out, "  (none)")?;
    }
    for p in &d.props {
        writeln!(
            out,
            "  {:<20} {:<28} default {}",
            p.name,
            p.kind.to_string(),
            p.default
        )?;
        if !p.description.is_empty() {
            writeln!(out, "  {:<20} {}", "", p.description)?;
        }
    }
    Ok(())
}
