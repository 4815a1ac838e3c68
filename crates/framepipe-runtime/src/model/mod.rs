//! The show as the user describes it: the graph ([`Graph`], [`Node`], [`NodeKind`]) and its
//! checks, the chain built in code ([`Pipeline`]), an effect stage ([`EffectStage`]), how a
//! show runs ([`Options`], [`Overload`]), and the plan ([`Plan`]: execution order, negotiated
//! shapes, [`Layout`]). Nothing here runs or allocates a frame: `build/` makes a version from a
//! plan.

mod graph;
mod options;
mod pipeline;
mod plan;
mod stage;

pub use graph::{AutoScale, Graph, MixerStage, Node, NodeKind, OnEnd, MAX_INPUTS};
pub use options::{Options, Overload, JOIN_GRACE};
pub use pipeline::Pipeline;
pub use plan::Layout;
pub use stage::{EffectStage, GpuStage};

pub(crate) use plan::{auto_scaler_name, ExecNode, Part, Plan, RunningGraph};
