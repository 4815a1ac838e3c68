//! OSCQuery for framepipe (the Vidvox proposal,
//! <https://github.com/Vidvox/OSCQueryProposal>): the show's OSC address space as JSON over
//! HTTP, the values of listened paths streamed as OSC packets over a WebSocket on the same
//! port, and an mDNS advert (`_oscjson._tcp`), so that OSC controllers can discover and follow
//! every parameter.
//!
//! * [`model`]: what is described ([`ShowModel`], versioned; [`Values`]) and where it comes
//!   from ([`ShowSource`], polled ~30 times a second).
//! * [`tree`]: paths, types, ranges, values and access as OSCQuery attributes.
//! * [`server`]: the [`axum::Router`] ([`OscQuery::router`], to mount beside other pages), its
//!   [`Poller`], and the standalone [`serve`] (thread `fp-oscquery`).
//! * [`live`]: the running show ([`framepipe_runtime::ShowView`]) as a [`ShowSource`].
//! * [`mdns`]: the advert.
//!
//! # Real-time contract
//! Nothing here runs on the engine's threads. The service reads the show through its
//! [`ShowSource`] (lock-free or try-lock reads, from one task ~30 times a second) and acts on
//! it only by posting commands to the engine's bounded queue (OSC packets received over the
//! WebSocket; a full queue drops and counts them). Every client is bounded: see [`server`].
#![forbid(unsafe_code)]

pub mod live;
pub mod mdns;
pub mod model;
pub mod server;
pub mod tree;

pub use live::LiveShow;
pub use model::{norm_ranges, AudioValues, FixedShow, NodeModel, ShowModel, ShowSource, Values};
pub use server::{
    answer, serve, serve_shows, Answer, Counters, HostInfo, OscQuery, Poller, ServeOptions, Server,
    ShowEntry,
};

/// Errors of the OSCQuery service.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The address could not be bound.
    #[error("cannot listen on TCP {addr}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Another I/O failure while starting.
    #[error("{0}")]
    Io(&'static str, #[source] std::io::Error),
}

/// Result with the OSCQuery [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
