//! The published state of a running show, for control surfaces (the web page, OSCQuery, MIDI
//! learn): the graph as it runs (nodes, links, shapes, every property's spec) and the latest
//! value of every live property, readable **without the scheduler's lock** and without ever
//! making the engine wait.
//!
//! Two parts, written differently:
//! - the graph ([`GraphView`]) changes only when the graph does (a new version, made off the
//!   frame path); it is an `Arc` replaced whole, and readers clone the `Arc`;
//! - the values ([`ValuesView`]) are written by a worker starting a node's frame (the node
//!   samples its values then, see `crate::live`), at most every
//!   [`PUBLISH_EVERY_NS`], with a `try_lock`: if a reader is copying them at that moment the
//!   engine skips this publication instead of waiting (the next frame publishes). Readers copy
//!   into their own [`ValuesView`] (no allocation once it has the graph's shape).
//!
//! Run statistics (fps, lateness, per-node times, pause state, tempo) are read from
//! [`Counters`](crate::Counters), lock-free as before.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, TryLockError};

use framepipe_control::Oscillator;
use framepipe_core::{PropSpec, PropValue};

use crate::live::{assign, Live};

/// The values are published at most this often (ns): surfaces poll at 15–30 Hz.
pub const PUBLISH_EVERY_NS: i64 = 20_000_000;

/// One node of the running graph.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    /// Its name, unique in the graph (stable across live edits).
    pub name: String,
    /// Its element (`frei0r-glow`, `testsrc`, ...).
    pub element: String,
    /// `source`, `effect`, `mixer`, `feedback` or `sink`.
    pub kind: &'static str,
    /// The names of the nodes feeding its inputs, in input order.
    pub inputs: Vec<String>,
    /// The shape of its output (a sink: its input's).
    pub width: u32,
    /// See `width`.
    pub height: u32,
    /// Its live properties (effects and mixers; empty for the others), in the order of
    /// [`ValuesView::values`].
    pub props: Vec<PropSpec>,
    /// Whether `bypass` is allowed (an effect or mixer whose output shape is its input's).
    pub bypassable: bool,
    /// On a leaky branch (a monitor tap, a preview): never holds back the master output.
    pub leaky: bool,
    /// The master sink (the one paced by the clock).
    pub master: bool,
    /// Put in by the graph (an automatic scaler), not written by the user.
    pub auto: bool,
}

/// The running graph, as a surface shows it. Replaced whole when the graph changes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GraphView {
    /// Increases by one with every live edit (0: the graph the run started with).
    pub version: u64,
    /// Every node, in execution order (inputs before the nodes they feed).
    pub nodes: Vec<NodeView>,
}

impl GraphView {
    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<(usize, &NodeView)> {
        self.nodes.iter().enumerate().find(|(_, n)| n.name == name)
    }
}

/// The latest published value of every live property.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValuesView {
    /// The graph version these values belong to (index them with that [`GraphView`]).
    pub version: u64,
    /// The frame they were sampled for (its sequence number): the latest frame the node that
    /// published them started. Each node samples its values when it starts a frame, so every
    /// node's values are those of the latest frame *it* started (a node further down the
    /// graph may be a frame or so behind).
    pub frame: u64,
    /// Per node, per property (as in [`NodeView::props`]): the value the node used for the
    /// latest frame it started.
    pub values: Vec<Vec<PropValue>>,
    /// Per node, per property: the oscillator driving it, if any.
    pub oscillators: Vec<Vec<Option<Oscillator>>>,
    /// Per node: bypassed?
    pub bypass: Vec<bool>,
    /// Publications so far (a reader can tell whether anything changed since its last copy).
    pub serial: u64,
}

impl ValuesView {
    /// Copies `src` into `self`, reusing its buffers when the shapes agree.
    fn copy_from(&mut self, src: &ValuesView) {
        self.version = src.version;
        self.frame = src.frame;
        self.serial = src.serial;
        if self.values.len() != src.values.len()
            || self
                .values
                .iter()
                .zip(&src.values)
                .any(|(a, b)| a.len() != b.len())
        {
            self.values = src.values.clone();
        } else {
            for (d, s) in self.values.iter_mut().zip(&src.values) {
                for (dv, sv) in d.iter_mut().zip(s) {
                    assign(dv, sv);
                }
            }
        }
        self.oscillators.clone_from(&src.oscillators);
        self.bypass.clone_from(&src.bypass);
    }
}

struct Inner {
    graph: Mutex<Arc<GraphView>>,
    values: Mutex<ValuesView>,
    /// When the values were last published (monotonic ns).
    last_ns: AtomicI64,
}

/// A handle on the published state of a show. Cheap to clone; send it to any surface thread.
#[derive(Clone)]
pub struct ShowView {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ShowView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShowView")
            .field("version", &self.graph().version)
            .finish()
    }
}

impl ShowView {
    /// A view of `graph`, with the values `live` starts with.
    pub(crate) fn new(graph: GraphView, live: &Live) -> Self {
        let mut values = ValuesView {
            version: graph.version,
            ..ValuesView::default()
        };
        live.publish(&mut values);
        ShowView {
            inner: Arc::new(Inner {
                graph: Mutex::new(Arc::new(graph)),
                values: Mutex::new(values),
                last_ns: AtomicI64::new(i64::MIN),
            }),
        }
    }

    /// The graph as it runs now.
    pub fn graph(&self) -> Arc<GraphView> {
        Arc::clone(&self.inner.graph.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Copies the latest values into `out`. Returns whether they changed since `out` was last
    /// filled (a new publication).
    pub fn read(&self, out: &mut ValuesView) -> bool {
        let v = self.inner.values.lock().unwrap_or_else(|p| p.into_inner());
        if v.serial == out.serial && v.version == out.version && !out.values.is_empty() {
            return false;
        }
        out.copy_from(&v);
        true
    }

    /// Publishes `live`'s values for frame `frame`, if it is time to and no reader holds them
    /// (never waits). Called by a worker starting a node's frame, under the live lock.
    pub(crate) fn publish(&self, live: &Live, frame: u64, now_ns: i64) {
        let last = self.inner.last_ns.load(Ordering::Relaxed);
        if now_ns.saturating_sub(last) < PUBLISH_EVERY_NS {
            return;
        }
        let mut v = match self.inner.values.try_lock() {
            Ok(v) => v,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        if v.version != live.version() {
            // A live edit switched versions and its graph is not published yet: the values
            // would be read with the old graph (and reshaping them here would allocate on
            // the frame path). `set_graph` publishes them with the new graph.
            return;
        }
        self.inner.last_ns.store(now_ns, Ordering::Relaxed);
        if live.publish(&mut v) {
            v.frame = frame;
            v.serial += 1;
        }
    }

    /// Replaces the graph (a live edit switched versions), with the values `live` starts with.
    /// Called off the frame path.
    pub(crate) fn set_graph(&self, graph: GraphView, live: &Live) {
        let mut values = ValuesView {
            version: graph.version,
            ..ValuesView::default()
        };
        live.publish(&mut values);
        {
            let mut v = self.inner.values.lock().unwrap_or_else(|p| p.into_inner());
            values.serial = v.serial + 1;
            *v = values;
        }
        *self.inner.graph.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(graph);
    }
}
