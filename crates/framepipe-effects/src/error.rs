//! The effects' error type.

/// Errors of the native effects. Converted into [`framepipe_core::Error`] with
/// `Error::element(name, e)` at the trait boundary.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EffectsError {
    /// A frame size the effect cannot produce or take.
    #[error("bad frame size {width}x{height}: {reason}")]
    BadSize {
        /// Width asked for or offered.
        width: u32,
        /// Height asked for or offered.
        height: u32,
        /// Why it was rejected.
        reason: String,
    },
    /// A mixer given a number of inputs it does not take.
    #[error("{count} inputs; expected {min} to {max}")]
    Inputs {
        /// Inputs given.
        count: usize,
        /// Fewest accepted.
        min: usize,
        /// Most accepted.
        max: usize,
    },
    /// The scaling library refused the job.
    #[error("resizing {from_w}x{from_h} to {to_w}x{to_h} failed: {reason}")]
    Resize {
        /// Input width.
        from_w: u32,
        /// Input height.
        from_h: u32,
        /// Output width.
        to_w: u32,
        /// Output height.
        to_h: u32,
        /// The library's message.
        reason: String,
    },
    /// A property that cannot change while running, or does not exist.
    #[error("property '{prop}' cannot be changed while running; live properties: {live}")]
    NotLive {
        /// The property asked for.
        prop: String,
        /// Comma-separated list of properties that can change.
        live: &'static str,
    },
    /// A live property change with a value of the wrong type.
    #[error("bad value '{value}' for live property '{prop}': {reason}")]
    BadLiveValue {
        /// Property name.
        prop: String,
        /// The offending value, as text.
        value: String,
        /// What was expected.
        reason: &'static str,
    },
}

/// Result with [`EffectsError`].
pub type Result<T> = std::result::Result<T, EffectsError>;
