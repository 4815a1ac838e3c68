//! Live edits of the running graph (#9): the commands `add`, `remove`, `replace`, `link` and
//! `load`. The engine does not build elements itself: it hands the edit to its
//! [`Editor`](../framepipe_runtime/trait.Editor.html) (the CLI's, which knows the registry and
//! the graph description), which builds the next version of the graph off the frame path.

/// Where `add` puts the new node relative to its anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Between the anchor and the node(s) it feeds.
    After,
    /// Between the anchor's first input and the anchor.
    Before,
}

/// One live edit of the graph.
#[derive(Debug, Clone, PartialEq)]
pub enum GraphEdit {
    /// `add ELEMENT [key=value ...] after|before NODE`: insert a one-input node (`name=` among
    /// the properties names it, as in a pipeline).
    Add {
        /// The element (`frei0r-glow`).
        element: String,
        /// Its properties as written, node properties (`name=`, `mode=`) included.
        props: Vec<(String, String)>,
        /// After or before the anchor.
        place: Place,
        /// The node it goes after or before.
        anchor: String,
    },
    /// `remove NODE`: take a one-input node out, relinking its consumers to its input.
    Remove {
        /// The node.
        node: String,
    },
    /// `replace NODE ELEMENT [key=value ...]`: a new node of that name in its place (same
    /// inputs and consumers); its state starts afresh.
    Replace {
        /// The node.
        node: String,
        /// The new element.
        element: String,
        /// Its properties as written.
        props: Vec<(String, String)>,
    },
    /// `link NODE.sink_K FROM` (or `link NODE FROM` for input 0): input K of NODE now comes
    /// from FROM.
    Link {
        /// The node whose input changes.
        node: String,
        /// Which input (0-based).
        input: usize,
        /// The node it now comes from.
        from: String,
    },
    /// `load FILE [fade=DURATION]`: switch to another project (its sinks must be the running
    /// ones), cutting or crossfading over the duration.
    Load {
        /// The project file.
        path: String,
        /// The crossfade, ns (`None`: a cut).
        fade_ns: Option<u64>,
    },
}
