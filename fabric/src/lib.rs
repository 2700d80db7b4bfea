//! libfabric for onesided: generated bindings and a safe layer over them.
//!
//! Everything that touches libfabric's C API lives here, each `unsafe` block with the reason it
//! is sound. The safe layer owns every libfabric object and closes it on drop, in dependency
//! order (endpoint before its completion queue and address vector; memory regions
//! before their domain; domain before fabric):
//!
//! - [`Provider`]: one `fi_info` chosen by `fi_getinfo` for RDM endpoints with RMA and atomics
//!   (or each one offered, with the [`PciAddress`] of its NIC where the provider reports it);
//!   [`list`] describes every provider for `onesided info`.
//! - [`Domain`]: fabric and domain of a provider; memory registration and atomic queries.
//! - [`Region`]: registered memory, with the remote key and base address its peers use.
//! - [`Endpoint`]: an RDM endpoint with its address vector and completion queue, and a progress
//!   thread for providers whose target side must be driven (tcp;ofi_rxm, shm).
//!
//! Blocking operations return when their local buffers may be reused: a write copies small
//! payloads into the provider (`FI_INJECT`), a read returns with the data; a batch of them
//! ([`Endpoint::read_all`], [`Endpoint::write_all`]) is in flight together, zero-copy. Request
//! forms return a [`Ticket`] at once and move data through buffers the endpoint owns; small
//! request reads to a peer with operations in flight are gathered into one read at the
//! endpoint's next call.
//! Where the provider demands registered local buffers (`FI_MR_LOCAL`), a caller's buffer keeps
//! its registration for later transfers until a memory monitor reports its memory gone
//! ([`Endpoint::registration_cache`]).
//! Completion is tracked per peer and per operation: every operation carries
//! `FI_DELIVERY_COMPLETE` where the provider offers it, [`Endpoint::flush`] waits for one peer's
//! operations, and a read or an atomic waits for its own completion only.
//!
//! Calls: an endpoint that serves them ([`Endpoint::serve_calls`]) answers a peer's
//! [`Endpoint::call`] through its [`Serve`], which reaches the memory registered for peers
//! ([`Memory`]): work the target does on its own memory in one message each way.
//!
//! The library is loaded at run time, when a call first needs it ([`load`]): a program that
//! uses onesided over shared memory only never loads it.
//!
//! Built only when libfabric was found (cfg `have_libfabric`); see `build.rs`. On docs.rs, which
//! has no libfabric, the bindings checked in under `docsrs/` stand in, so this documentation is
//! the full API (`ONESIDED_WRITE_DOCSRS_BINDINGS=1 cargo build -p onesided-fabric` regenerates
//! them).

// bindgen gives each `#define` constant the narrowest type of its value, and the values differ
// between libfabric versions; explicit casts keep one source for all of them.
#![allow(clippy::unnecessary_cast)]

#[cfg(have_libfabric)]
mod sys;

#[cfg(have_libfabric)]
mod batch;
#[cfg(have_libfabric)]
mod cache;
#[cfg(have_libfabric)]
mod calls;
#[cfg(have_libfabric)]
mod core;
#[cfg(have_libfabric)]
mod domain;
#[cfg(have_libfabric)]
mod doorbell;
#[cfg(have_libfabric)]
mod endpoint;
#[cfg(have_libfabric)]
mod error;
#[cfg(have_libfabric)]
mod gather;
#[cfg(have_libfabric)]
mod info;
#[cfg(have_libfabric)]
mod inherit;
#[cfg(have_libfabric)]
mod joint;
#[cfg(have_libfabric)]
mod lane;
#[cfg(have_libfabric)]
mod latch;
#[cfg(have_libfabric)]
mod ledger;
#[cfg(have_libfabric)]
mod lent;
#[cfg(have_libfabric)]
mod library;
#[cfg(have_libfabric)]
mod mail;
#[cfg(have_libfabric)]
mod monitor;
#[cfg(have_libfabric)]
mod mr;
#[cfg(have_libfabric)]
mod ops;
#[cfg(have_libfabric)]
mod patience;
#[cfg(have_libfabric)]
mod peer;
#[cfg(have_libfabric)]
mod port;
#[cfg(have_libfabric)]
mod region;
#[cfg(have_libfabric)]
mod registered;
#[cfg(have_libfabric)]
mod remote;
#[cfg(have_libfabric)]
mod request;
#[cfg(have_libfabric)]
mod runs;
#[cfg(have_libfabric)]
mod stage;
#[cfg(have_libfabric)]
mod stamp;
#[cfg(have_libfabric)]
mod track;
#[cfg(have_libfabric)]
mod watch;

#[cfg(have_libfabric)]
pub use cache::CacheReport;
#[cfg(have_libfabric)]
pub use domain::{AtomicKind, AtomicOp, Datatype, Domain};
#[cfg(have_libfabric)]
pub use endpoint::{Endpoint, Flusher, Idle};
#[cfg(have_libfabric)]
pub use error::FiError;
#[cfg(have_libfabric)]
pub use info::{MrMode, PciAddress, Provider, ProviderSummary, Request, list, load, version};
#[cfg(have_libfabric)]
pub use lane::Lane;
#[cfg(have_libfabric)]
pub use library::preset;
#[cfg(have_libfabric)]
pub use mail::{BODY_MAX as CALL_MAX, Memory, Serve};
#[cfg(have_libfabric)]
pub use monitor::memory_monitor;
#[cfg(have_libfabric)]
pub use mr::Access;
#[cfg(have_libfabric)]
pub use patience::Waiting;
#[cfg(have_libfabric)]
pub use peer::Peer;
#[cfg(have_libfabric)]
pub use region::{Region, RegionKey};
#[cfg(have_libfabric)]
pub use remote::Remote;
#[cfg(have_libfabric)]
pub use request::Ticket;

/// The libfabric version this crate was built against, or `None` when it was built without.
#[cfg(have_libfabric)]
pub const BUILT_WITH: Option<&str> = Some(env!("ONESIDED_FABRIC_VERSION"));
/// The libfabric version this crate was built against, or `None` when it was built without.
#[cfg(not(have_libfabric))]
pub const BUILT_WITH: Option<&str> = None;
