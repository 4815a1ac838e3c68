//! The element traits and the registry through which elements are found by name.
//!
//! Every element, native or frei0r, registers the same way: a [`RegistryEntry`] holds its
//! [`ElementDesc`] (name, kind, properties) and a constructor from resolved [`Props`].

use std::fmt;

use crate::error::{Error, Result};
use crate::frame::{Frame, FrameMut};
use crate::info::{FrameCtx, VideoInfo};
use crate::props::{PropSpec, PropValue, Props};

/// How the scheduler may run an effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// One instance, frames strictly in order: for effects that keep state between frames.
    Serial,
    /// Several instances (one per worker running it), several frames at once: for stateless
    /// effects. Output order is restored by the scheduler.
    Parallel,
}

impl Mode {
    /// `serial` or `parallel`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Serial => "serial",
            Mode::Parallel => "parallel",
        }
    }

    /// Parses `serial` or `parallel`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "serial" => Some(Mode::Serial),
            "parallel" => Some(Mode::Parallel),
            _ => None,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an element does in a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElementKind {
    /// Produces frames.
    Source,
    /// Turns one frame into another.
    Effect,
    /// Combines several frames (one per input, all of one frame time) into one.
    Mixer {
        /// Fewest inputs it accepts (at least 2).
        min_inputs: usize,
        /// Most inputs it accepts.
        max_inputs: usize,
    },
    /// Consumes frames.
    Sink,
}

impl ElementKind {
    /// The inputs an element of this kind takes: `(fewest, most)`.
    pub fn inputs(self) -> (usize, usize) {
        match self {
            ElementKind::Source => (0, 0),
            ElementKind::Effect | ElementKind::Sink => (1, 1),
            ElementKind::Mixer {
                min_inputs,
                max_inputs,
            } => (min_inputs, max_inputs),
        }
    }
}

impl fmt::Display for ElementKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ElementKind::Source => "source",
            ElementKind::Effect => "effect",
            ElementKind::Mixer { .. } => "mixer",
            ElementKind::Sink => "sink",
        })
    }
}

/// A registered element's description, for the parser, `framepipe plugins` and `inspect`.
#[derive(Debug, Clone)]
pub struct ElementDesc {
    /// Name used in pipelines, e.g. `frei0r-glow`, `scale`.
    pub name: String,
    /// Source, effect or sink.
    pub kind: ElementKind,
    /// One line.
    pub description: String,
    /// Its properties.
    pub props: Vec<PropSpec>,
    /// For effects: how the scheduler runs it unless the user says `mode=`.
    pub default_mode: Mode,
    /// Further facts shown by `inspect` (plugin file, colour model, author...).
    pub details: Vec<(String, String)>,
}

/// Runs the parts of one frame's work on the engine's worker pool (fork-join), so that a native
/// effect can split a frame into slices without a thread pool of its own.
///
/// A runner is deliberately **not** `Sync`: a slice job must be `Sync` (it runs on several
/// workers at once), so it cannot capture the runner, and a slice can never start slices of its
/// own. (Nested fork-join on one pool can deadlock or, with a borrowed job, outlive the job it
/// runs; the type system rules it out instead of a check at run time.) Ordinary slicing:
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use framepipe_core::{InlineSlices, SliceRunner};
///
/// fn sum_of_squares(slices: &dyn SliceRunner) -> usize {
///     let total = AtomicUsize::new(0);
///     slices.run(4, &|i| {
///         total.fetch_add(i * i, Ordering::Relaxed);
///     });
///     total.into_inner()
/// }
/// assert_eq!(sum_of_squares(&InlineSlices), 14);
/// ```
///
/// A slice that starts slices does not compile (`dyn SliceRunner` cannot be shared between
/// threads, so the closure is not `Sync`):
///
/// ```compile_fail,E0277
/// use framepipe_core::SliceRunner;
///
/// fn nested(slices: &dyn SliceRunner) {
///     slices.run(4, &|_| slices.run(2, &|_| {}));
/// }
/// ```
pub trait SliceRunner {
    /// How many workers could take part (a good number of slices is a small multiple of this).
    fn workers(&self) -> usize;
    /// Calls `job(i)` for every `i` in `0..n`, possibly on several workers at once, and returns
    /// when all calls have returned.
    fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync));
}

/// A [`SliceRunner`] that runs every slice on the calling thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct InlineSlices;

impl SliceRunner for InlineSlices {
    fn workers(&self) -> usize {
        1
    }
    fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
        (0..n).for_each(job);
    }
}

/// Produces frames. Runs as the pipeline's first, serial stage.
pub trait Source: Send {
    /// The stream's shape. Known once the source is built (headers are read at build time).
    fn info(&self) -> VideoInfo;
    /// Number of frames the source will produce, when known (for progress display). The runtime
    /// never puts more frames in flight than this, so an estimate must not be too low (that
    /// would only slow the run down, never lose a frame).
    fn len_hint(&self) -> Option<u64> {
        None
    }
    /// Writes the next frame into `frame`. `Ok(false)` at the end of the stream (and `frame` is
    /// then discarded). An error ends the stream too; frames already produced still reach the sink.
    fn fill(&mut self, ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool>;
    /// Goes back to the first frame, for `on-end=loop`: `Ok(true)` when done (the next
    /// [`fill`](Self::fill) gives the first frame again), `Ok(false)` when this source cannot
    /// (a live stream, a pipe). Called on the frame path at the loop point only.
    fn rewind(&mut self) -> Result<bool> {
        Ok(false)
    }
    /// Whether [`fill`](Self::fill) may wait on the world outside the process for an unbounded
    /// time (a socket, a pipe, a device, another process): such a source runs on its show's
    /// IO thread, never on a compute worker, so that a peer that stalls holds no core's
    /// worth of work back. A source computing its frames (a test pattern) or reading a
    /// regular file says `false`, the default.
    fn blocks(&self) -> bool {
        false
    }
    /// Waits until the first [`fill`](Self::fill) can give a frame without a start-up wait (a
    /// decoder process started and its first frame decoded). Called once, when the show is
    /// prepared (or a live edit adds the source), before the frame clock starts: the start-up
    /// is not counted against the first frames' deadlines. The default: ready at once.
    fn ready(&mut self) -> Result<()> {
        Ok(())
    }
    /// The properties `set NODE.PROP` and oscillators reach on a running source, with their
    /// values at build (a generator's parameters; those marked not live, [`PropSpec::fixed`],
    /// are listed and refused). Empty, the default: the source cannot be controlled.
    fn live_props(&self) -> Vec<(PropSpec, PropValue)> {
        Vec::new()
    }
    /// Changes a property of [`live_props`](Self::live_props) while running (applied by the
    /// runtime before the frame that takes it).
    fn set_property(&mut self, name: &str, value: &PropValue) -> Result<()> {
        let _ = value;
        Err(not_live(name))
    }
    /// Host memory the source keeps besides the frames it fills (pictures decoded ahead,
    /// caches, a deck's clip heads), in bytes. Asked once, when the runtime takes the built
    /// source into a graph version (after [`ready`](Self::ready)); it must not change while
    /// the source lives. The runtime counts it in the show's memory book against
    /// `--max-memory` for as long as the source lives (`--stats` `memory.held`; a live edit
    /// adding the source is admitted with it). Count what is allocated for the source's
    /// lifetime and sized by its input or settings, not a few bytes of bookkeeping. Default 0.
    fn own_bytes(&self) -> u64 {
        0
    }
}

/// The refusal of an element that cannot change `name` while running.
fn not_live(name: &str) -> Error {
    Error::Pipeline(format!("property '{name}' cannot be changed while running"))
}

/// One instance of an effect. Parallel effects have several, each used by one worker at a time.
pub trait Effect: Send {
    /// Computes `output` from `input`. Must not keep `input` beyond the call for parallel effects.
    fn process(
        &mut self,
        ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        slices: &dyn SliceRunner,
    ) -> Result<()>;

    /// Changes a property while running (applied by the runtime between frames).
    fn set_property(&mut self, name: &str, value: &PropValue) -> Result<()> {
        let _ = value;
        Err(not_live(name))
    }
}

/// A configured effect, from which the runtime makes instances.
pub trait EffectFactory: Send + Sync {
    /// Element name, for messages and stats.
    fn name(&self) -> &str;
    /// How to schedule it unless overridden.
    fn default_mode(&self) -> Mode;
    /// Given the input shape, the output shape; an error if the effect cannot take it.
    /// Called once, before any [`instantiate`](Self::instantiate).
    fn negotiate(&mut self, input: VideoInfo) -> Result<VideoInfo>;
    /// A new instance, configured with the element's properties.
    fn instantiate(&self) -> Result<Box<dyn Effect>>;
    /// Whether a node of this effect is leaky unless the user says otherwise: a tap (`monitor`)
    /// that must never hold back the master output, skipping frames when it is behind.
    fn leaky_by_default(&self) -> bool {
        false
    }
}

/// One instance of a mixer: several inputs of one frame time, one output. Parallel mixers have
/// several instances, each used by one worker at a time.
pub trait Mixer: Send {
    /// Computes `output` from `inputs` (in the order of the node's inputs; as many as it was
    /// negotiated with, each of the size negotiated for it). Must not keep the inputs beyond
    /// the call for parallel mixers.
    fn process(
        &mut self,
        ctx: &FrameCtx,
        inputs: &[&Frame],
        output: &mut FrameMut,
        slices: &dyn SliceRunner,
    ) -> Result<()>;

    /// Changes a property while running (applied by the runtime between frames).
    fn set_property(&mut self, name: &str, value: &PropValue) -> Result<()> {
        let _ = value;
        Err(not_live(name))
    }
}

/// A configured mixer, from which the runtime makes instances.
pub trait MixerFactory: Send + Sync {
    /// Element name, for messages and stats.
    fn name(&self) -> &str;
    /// How to schedule it unless overridden.
    fn default_mode(&self) -> Mode;
    /// Given the shape of each input (as many as the node has, within the element's range),
    /// the output shape; an error naming the input if the mixer cannot take them (a mixer
    /// that needs equal sizes says so, and the graph puts a `scale` in front of it).
    /// Called once, before any [`instantiate`](Self::instantiate).
    fn negotiate(&mut self, inputs: &[VideoInfo]) -> Result<VideoInfo>;
    /// Whether every input must have the first input's size (the graph then scales the
    /// others to it). True unless the mixer handles sizes itself.
    fn needs_equal_sizes(&self) -> bool {
        true
    }
    /// A new instance, configured with the element's properties.
    fn instantiate(&self) -> Result<Box<dyn Mixer>>;
}

/// Consumes frames. Runs as the pipeline's last, serial stage, frames in order.
pub trait Sink: Send {
    /// Called once before the first frame with the stream's shape.
    fn start(&mut self, info: VideoInfo) -> Result<()>;
    /// Takes one frame. It may keep a clone of `frame` (it then holds a pool buffer).
    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()>;
    /// Called once after the last frame (also after an upstream error): flush and close.
    fn finish(&mut self) -> Result<()>;
    /// Whether [`consume`](Self::consume) may wait on the world outside the process for an
    /// unbounded time (a pipe's reader, a socket's peer, an encoder's back-pressure): in a
    /// host of many shows, such a show keeps an output thread of its own instead of being
    /// served by the clock thread every show shares. The default, `false`, suits a sink that
    /// writes a regular file, drops frames or hands them to a thread of its own.
    fn blocks(&self) -> bool {
        false
    }
    /// Waits, after [`start`](Self::start), until the sink can take its first frame without
    /// a start-up wait (an encoder process loaded and reading its input, a connection made):
    /// the runtime calls it before the frame clock starts, so that the first frames are not
    /// late because a sink was still starting. An error (the encoder quit at once) fails the
    /// run before its first frame. The default: ready at once.
    fn ready(&mut self) -> Result<()> {
        Ok(())
    }
    /// Whether the sink takes the show's GPU frames as textures
    /// ([`consume_texture`](Self::consume_texture)) instead of downloaded CPU frames (a window
    /// that draws them). Asked while the plan is made (before [`start`](Self::start)), and only
    /// for a sink fed by a GPU node; a sink that says yes is given textures from then on, and
    /// the plan puts no download in front of it. The default: no.
    fn takes_textures(&mut self) -> bool {
        false
    }
    /// Takes one GPU frame, in place of [`consume`](Self::consume), when
    /// [`takes_textures`](Self::takes_textures) said yes: on the sink's output thread, at the
    /// frame clock's deadline, like `consume` (and under the same rules: it must not block or
    /// allocate on the frame path; a paced show may hand the same frame again as a repeat).
    /// The texture is complete when handed over: the GPU has passed every command that wrote
    /// it. It is a texture of the show's GPU context: only a context in that context's share
    /// group may read it. The sink may keep one clone of `frame` (its texture stays out of its
    /// pool while held: the pools count one frame per sink) until its next `consume_texture`
    /// or [`finish`](Self::finish), and must not write the texture.
    fn consume_texture(&mut self, ctx: &FrameCtx, frame: &crate::gpu::TextureFrame) -> Result<()> {
        let _ = (ctx, frame);
        Err(Error::Pipeline(
            "this sink takes no textures (takes_textures is false)".into(),
        ))
    }
}

/// A built element, ready to be put in a pipeline.
pub enum Element {
    /// A source.
    Source(Box<dyn Source>),
    /// An effect (a factory of instances).
    Effect(Box<dyn EffectFactory>),
    /// A mixer (a factory of instances).
    Mixer(Box<dyn MixerFactory>),
    /// A sink.
    Sink(Box<dyn Sink>),
    /// A GPU source, effect or mixer (a shader): see [`crate::gpu`].
    Gpu(Box<dyn crate::gpu::GpuFactory>),
}

impl fmt::Debug for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Element::Source(_) => "Element::Source",
            Element::Effect(_) => "Element::Effect",
            Element::Mixer(_) => "Element::Mixer",
            Element::Sink(_) => "Element::Sink",
            Element::Gpu(_) => "Element::Gpu",
        })
    }
}

/// Builds an element from its resolved properties.
pub type BuildFn = Box<dyn Fn(&Props) -> Result<Element> + Send + Sync>;

/// One element type known to the registry.
pub struct RegistryEntry {
    /// What it is.
    pub desc: ElementDesc,
    /// How to build it.
    pub build: BuildFn,
}

impl fmt::Debug for RegistryEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryEntry")
            .field("desc", &self.desc)
            .finish()
    }
}

/// All element types by name. Native and frei0r elements register the same way.
#[derive(Debug, Default)]
pub struct Registry {
    entries: Vec<RegistryEntry>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an element type. A later registration of the same name replaces the earlier one.
    pub fn register(&mut self, desc: ElementDesc, build: BuildFn) {
        self.entries.retain(|e| e.desc.name != desc.name);
        self.entries.push(RegistryEntry { desc, build });
    }

    /// The entry called `name`.
    pub fn find(&self, name: &str) -> Option<&RegistryEntry> {
        self.entries.iter().find(|e| e.desc.name == name)
    }

    /// The entry called `name`, or an [`Error::UnknownElement`] suggesting the closest name.
    pub fn lookup(&self, name: &str) -> Result<&RegistryEntry> {
        self.find(name).ok_or_else(|| {
            let best = self
                .entries
                .iter()
                .map(|e| (edit_distance(name, &e.desc.name), &e.desc.name))
                .min();
            let hint = match best {
                Some((d, n)) if d <= 3.max(name.len() / 3) => format!(" (did you mean '{n}'?)"),
                _ => " (see 'framepipe plugins' for the list)".to_string(),
            };
            Error::UnknownElement {
                name: name.to_string(),
                hint,
            }
        })
    }

    /// Resolves `given` properties and builds element `name`.
    pub fn create(&self, name: &str, given: &[(String, String)]) -> Result<Element> {
        let entry = self.lookup(name)?;
        let props = Props::resolve(name, &entry.desc.props, given)?;
        (entry.build)(&props)
    }

    /// Every entry, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &RegistryEntry> {
        self.entries.iter()
    }
}

/// The Levenshtein distance between `a` and `b` (in chars): how close a misspelt name is to
/// a known one, for the "did you mean" of errors.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_element_suggests_a_close_name() {
        let mut r = Registry::new();
        r.register(
            ElementDesc {
                name: "frei0r-glow".into(),
                kind: ElementKind::Effect,
                description: String::new(),
                props: vec![],
                default_mode: Mode::Parallel,
                details: vec![],
            },
            Box::new(|_| Err(Error::Pipeline("not built in this test".into()))),
        );
        let e = r.lookup("frei0r-glwo").unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown element 'frei0r-glwo' (did you mean 'frei0r-glow'?)"
        );
    }
}
