//! ibverbs for onesided: generated bindings and a safe layer over them, for the direct verbs
//! transport (RDMA on InfiniBand, RoCE and software RoCE without libfabric in between).
//!
//! Everything that touches libibverbs lives here, each `unsafe` block with the reason it is
//! sound. The safe layer owns every verbs object and frees it on drop, in dependency order
//! (queue pairs before their completion queue and the memory they use; regions and queue
//! pairs before their protection domain; everything before the device context):
//!
//! - [`devices`]: what each device and port offers ([`DeviceInfo`], as `ibv_devinfo -v`), for
//!   `onesided info` and for choosing; [`choose_gid`] picks the GID a RoCE port is addressed by.
//! - [`Endpoint`]: one port of one device, a completion queue, a reliable-connected queue pair
//!   per peer ([`Endpoint::prepare`], [`Endpoint::connect`]), a shared receive queue for the
//!   peers' writes with immediate data, staging buffers, and the
//!   operations: RDMA write (inline where it fits), read, the NIC's 8-byte fetch-and-add and
//!   compare-and-swap, their request forms ([`Ticket`]) and per-peer flush; and a sleep on the
//!   completion channel until a completion arrives, which a peer's [`Endpoint::wake`] brings.
//! - [`Lane`]: an endpoint of an endpoint's own ([`Endpoint::lane`]), on its protection domain
//!   with a completion queue, staging buffers and queue pairs of its own, `Send` and `Sync`:
//!   any thread takes it in turn ([`Lane::lock`], [`Lane::try_lock`]) and makes blocking
//!   writes, reads, atomics and flushes through it, beside the endpoint's own thread.
//! - [`Region`]: registered memory, with the [`RegionKey`] peers address it by.
//!
//! No thread runs behind the caller's back: the NIC serves peers' operations on registered
//! memory, and a caller's own work completes when it waits (or calls [`Endpoint::progress`]).
//!
//! The library is loaded at run time when a call first needs it ([`load`]); it is not linked,
//! so programs run where rdma-core is not installed. Built only where the libibverbs headers
//! were found (cfg `have_ibverbs`; see `build.rs`).

#[cfg(have_ibverbs)]
mod sys;

#[cfg(have_ibverbs)]
mod device;
#[cfg(have_ibverbs)]
mod endpoint;
#[cfg(have_ibverbs)]
mod error;
#[cfg(have_ibverbs)]
mod inventory;
#[cfg(have_ibverbs)]
mod lane;
#[cfg(have_ibverbs)]
mod library;
#[cfg(have_ibverbs)]
mod queue;
#[cfg(have_ibverbs)]
mod region;
#[cfg(have_ibverbs)]
mod stage;
#[cfg(have_ibverbs)]
mod track;

#[cfg(have_ibverbs)]
pub use device::{DeviceInfo, GidEntry, LinkLayer, PortInfo, choose_gid};
#[cfg(have_ibverbs)]
pub use endpoint::{Atomic, Endpoint, Remote, Request, Ticket, Waiting};
#[cfg(have_ibverbs)]
pub use error::VerbsError;
#[cfg(have_ibverbs)]
pub use inventory::devices;
#[cfg(have_ibverbs)]
pub use lane::{Lane, LaneGuard};
#[cfg(have_ibverbs)]
pub use library::load;
#[cfg(have_ibverbs)]
pub use queue::PortAddress;
#[cfg(have_ibverbs)]
pub use region::{Region, RegionKey};

/// The name of the first verbs device with an active port, where libibverbs loads and lists
/// one (`None` also in a build without the verbs headers).
pub fn active_device() -> Option<String> {
    #[cfg(have_ibverbs)]
    {
        let devices = devices().ok()?;
        devices
            .into_iter()
            .find(|d| d.active_port().is_some())
            .map(|d| d.name)
    }
    #[cfg(not(have_ibverbs))]
    None
}

/// The rdma-core (libibverbs) version this crate was built against, or `None` when it was
/// built without.
#[cfg(have_ibverbs)]
pub const BUILT_WITH: Option<&str> = Some(env!("ONESIDED_VERBS_VERSION"));
/// The rdma-core (libibverbs) version this crate was built against, or `None` when it was
/// built without.
#[cfg(not(have_ibverbs))]
pub const BUILT_WITH: Option<&str> = None;

/// The fewest completion-queue entries any verbs device with an active port allows (`max_cqe`),
/// without probing anything else: `None` where there is no such device (or no verbs build).
pub fn completion_limit() -> Option<u32> {
    #[cfg(have_ibverbs)]
    {
        device::completion_limit()
    }
    #[cfg(not(have_ibverbs))]
    None
}
