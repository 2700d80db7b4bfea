//! PMIx for onesided: generated bindings to the system's libpmix and a small safe layer.
//!
//! Everything that touches PMIx's C API lives here, each `unsafe` block with the reason it is
//! sound. [`Client`] is this process's connection to its PMIx server (Slurm's `srun
//! --mpi=pmix`, Open MPI's `mpirun`, PRRTE's `prterun`): rank and namespace, the job size, and
//! the key-value exchange of wire-up (put, commit, fence with data collection, get), plus
//! notification of failed processes.
//!
//! Built only when libpmix was found (cfg `have_pmix`); see `build.rs`.

#[cfg(have_pmix)]
mod client;
#[cfg(have_pmix)]
mod error;
#[cfg(have_pmix)]
mod event;
#[cfg(have_pmix)]
mod sys;

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
