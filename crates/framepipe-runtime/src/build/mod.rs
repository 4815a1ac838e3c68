//! Building a graph version: [`Graph::prepare`](crate::Graph::prepare) (a show's first
//! version, negotiated, and the state its threads share) and [`build_version`] (any version
//! from its plan: pools, live parameters, every instance, the scheduler's shape of it), with
//! what a version would hold ([`Need`]) checked against the memory budget before anything of
//! it is made. Everything that allocates for a version happens here, never on the frame path.

mod need;
mod prepare;
mod running;
mod version;

pub(crate) use need::{need_of, Need};
pub(crate) use running::RunningVersion;
pub(crate) use version::{build_version, Admit, Built, VersionCtx};
