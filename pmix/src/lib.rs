//! PMIx for onesided: generated bindings to the system's libpmix and a small safe layer.
//!
//! Everything that touches PMIx's C API lives here, each `unsafe` block with the reason it is
//! sound. [`Client`] is this process's connection to its PMIx server (Slurm's `srun
//! --mpi=pmix`, Open MPI's `mpirun`, PRRTE's `prterun`):
//!
//! - who we are: [`Client::namespace`], [`Client::rank`], [`Client::job_size`] and the ranks
//!   on this node, [`Client::local_peers`];
//! - the key-value exchange of wire-up: [`Client::put`] (global scope, byte objects),
//!   [`Client::commit`], [`Client::fence`] (optionally collecting the data, so later gets are
//!   local) and [`Client::get`];
//! - [`Client::abort`] of the whole namespace, and [`Client::on_failure`], a callback for the
//!   failure events of other processes ([`Failure`]).
//!
//! Errors are [`PmixError`]s: the call, its status and PMIx's name for the status.
//!
//! Built only when libpmix was found (cfg `have_pmix`); see `build.rs`. [`BUILT_WITH`] says
//! which version, if any. On docs.rs, which has no libpmix, the files checked in under `docsrs/`
//! stand in, so this documentation is the full API (`ONESIDED_WRITE_DOCSRS_BINDINGS=1 cargo
//! build -p onesided-pmix` regenerates them).

#[cfg(have_pmix)]
mod client;
#[cfg(have_pmix)]
mod error;
#[cfg(have_pmix)]
mod event;
#[cfg(have_pmix)]
mod lifecycle;
#[cfg(have_pmix)]
mod sys;
#[cfg(have_pmix)]
mod value;

#[cfg(have_pmix)]
pub use client::Client;
#[cfg(have_pmix)]
pub use error::PmixError;
#[cfg(have_pmix)]
pub use event::Failure;

/// The libpmix version this crate was built against, or `None` when it was built without.
#[cfg(have_pmix)]
pub const BUILT_WITH: Option<&str> = Some(env!("ONESIDED_PMIX_VERSION"));
/// The libpmix version this crate was built against, or `None` when it was built without.
#[cfg(not(have_pmix))]
pub const BUILT_WITH: Option<&str> = None;
