//! Windows: memory of every rank of a communicator, open to one-sided access.
//!
//! A [`Window`] is created collectively by [`Window::allocate`], [`Window::allocate_shared`],
//! [`Window::create`] or [`Window::create_dynamic`] (memory attached later by
//! [`Window::attach`]); RMA calls ([`Window::put`], [`Window::get`], the accumulate family of
//! [`Window::accumulate`]), their request-based forms ([`Window::rput`], ... returning a
//! [`Request`]) and synchronization calls
//! (fence, lock, flush, ...) act on it; [`Window::free`] (or drop) ends it collectively.
//!
//! Elements are plain-old-data types ([`bytemuck::Pod`]); displacements count in the target's
//! displacement unit, as in MPI; in a dynamic window they are addresses ([`Address::disp`]).
//!
//! # MPI-4.1: 12.2 (initialization), 12.3 (communication calls), 12.5 (synchronization)

mod arrivals;
mod atomic;
mod attached;
mod direct;
mod dynamic;
mod loaded;
mod local;
mod notify;
mod pscw;
mod request;
mod rma;
mod setup;
mod share;
mod strided;
mod sync;
#[cfg(test)]
mod tests;
mod typed;
mod unreported;
mod wired;

pub use atomic::{AtomicElem, Op};
pub use dynamic::Address;
pub use local::SharedRegion;
pub use request::Request;
pub use share::{HandleRequest, WindowHandle};
pub use strided::Layout;
pub use typed::TypedWindow;

use crate::error::in_call;
use crate::error::{Error, ErrorClass, Result};
use crate::group::Group;
use crate::info::{Info, WinHints};
use crate::peers::Peers;
use crate::protocol::epoch::Epochs;
use crate::transport::{Attach, Space, Transport};
use crate::world::Comm;
use onesided_shm::Mem;
use std::cell::{Cell, RefCell};

/// How a window's memory was provided (MPI_WIN_CREATE_FLAVOR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// MPI_WIN_FLAVOR_CREATE: memory lent by the user.
    Create,
    /// MPI_WIN_FLAVOR_ALLOCATE: memory allocated by the window.
    Allocate,
    /// MPI_WIN_FLAVOR_SHARED: memory allocated by the window, load/store-accessible by the node.
    Shared,
    /// MPI_WIN_FLAVOR_DYNAMIC: memory attached and detached by each rank while the window lives.
    Dynamic,
}

/// The memory model of a window (MPI_WIN_MODEL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Model {
    /// Public and private copies are the same memory (every window of onesided).
    Unified,
    /// Public and private copies are distinct.
    Separate,
}

/// The size and displacement unit of one target's window memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extent {
    pub size: usize,
    pub disp_unit: usize,
}

/// A window over the ranks of a communicator. `'a` is the lifetime of memory lent by the user
/// (`'static` for windows that allocate their own).
#[derive(Debug)]
pub struct Window<'a> {
    comm: Comm,
    flavor: Flavor,
    /// The info hints in effect (the accumulate ones change with `set_info`).
    hints: Cell<WinHints>,
    extents: Vec<Extent>,
    /// The ranks' liveness, for waits on them.
    peers: Peers,
    local: Mem<'a>,
    shared: Vec<Option<Mem<'static>>>,
    /// The ranks whose window memory this rank reaches by loads and stores: its own, and the
    /// node peers' memory mapped for `shared_query` (none in a dynamic window, whose peers'
    /// attached memory is reached by copies only). A lock_all takes their words at once.
    loaded: Vec<usize>,
    /// The window's transports, in order of preference: the node's shared memory first (always
    /// there), then the network where some target is reached through it.
    transports: Vec<Box<dyn Attach<'a> + 'a>>,
    /// This rank's control block (in the node segment): the words its waits watch and its
    /// attach table.
    ctrl: Mem<'static>,
    /// The transport of each target's window memory (put, get), chosen by
    /// `transport::select` from the transports' caps.
    routes: Vec<usize>,
    /// The transport of every atomic (lock words, barrier, data atomics) to every target: one
    /// per window, since CPU atomics and NIC atomics are not atomic with respect to each other.
    atomics: usize,
    /// Whether the atomic route orders an atomic after earlier operations to targets it also
    /// moves data to (its caps' `atomics_order_prior`), read once.
    atomics_ordered: bool,
    /// How many notifications of each id this rank's waits have consumed (grown to the
    /// highest id waited for).
    notified: RefCell<Vec<u64>>,
    /// The targets reached by loads and stores, for puts, gets and lock words.
    direct: direct::Direct<'a>,
    epochs: RefCell<Epochs>,
    /// Attached memory of a dynamic window: this rank's, and what it knows of the others'.
    attached: RefCell<attached::Attached>,
    barriers: Cell<u64>,
    name: RefCell<String>,
    freed: Cell<bool>,
    /// A failure of a thread's operation no flush reported before sharing ended (`wired.rs`).
    unreported: unreported::Unreported,
}

impl<'a> Window<'a> {
    /// Transport `index` of the window: routes are indices `transport::select` chose among
    /// the window's transports, so always one of them.
    #[inline]
    fn by(&self, index: usize) -> &dyn Transport {
        self.transports[index].as_ref()
    }

    /// Shared memory, the first transport: it reaches this rank's own memory by loads and
    /// stores.
    fn node(&self) -> &dyn Transport {
        self.by(0)
    }

    /// The transport that moves data to and from `target` (which must be valid).
    #[inline]
    fn route(&self, target: usize) -> &dyn Transport {
        self.by(self.routes[target])
    }

    /// The transport of every atomic of this window.
    #[inline]
    fn atomic_route(&self) -> &dyn Transport {
        self.by(self.atomics)
    }

    /// Every transport the window uses, for calls that concern all targets (no allocation:
    /// fence and flush_all call it every time).
    fn transports(&self) -> impl Iterator<Item = &dyn Transport> {
        self.transports.iter().map(|t| t.as_ref() as &dyn Transport)
    }

    /// The name of the transport that moves data to `target` ("shm" or "fabric").
    pub fn transport_name(&self, target: usize) -> Result<&'static str> {
        self.extent(target)?;
        Ok(self.route(target).caps().name)
    }

    /// `target`'s extent, or MPI_ERR_RANK.
    #[inline]
    fn extent(&self, target: usize) -> Result<Extent> {
        let ranks = self.extents.len();
        self.extents
            .get(target)
            .copied()
            .ok_or_else(|| not_in_group(target, ranks))
    }

    /// Check an RMA call's `len` bytes at displacement `disp` of `target` (MPI_ERR_RANK,
    /// MPI_ERR_RMA_RANGE) and enter the epoch (MPI_ERR_RMA_SYNC; `passive`: request forms,
    /// which only a passive-target epoch allows); where the bytes are. The range of a window
    /// with memory is checked before the epoch changes; the addresses of a dynamic window are
    /// looked up in the target's attach table once inside the epoch.
    #[inline(always)]
    fn place(
        &self,
        target: usize,
        disp: usize,
        len: usize,
        passive: bool,
    ) -> Result<(Space, usize)> {
        if self.flavor == Flavor::Dynamic {
            self.extent(target)?;
            self.enter(target, passive)?;
            return self.attached_at(target, disp as u64, len);
        }
        let off = self.range(target, disp, len)?;
        self.enter(target, passive)?;
        Ok((Space::Data, off))
    }

    /// The byte offset of `len` bytes at displacement `disp` of `target`, or MPI_ERR_RMA_RANGE.
    #[inline(always)]
    fn range(&self, target: usize, disp: usize, len: usize) -> Result<usize> {
        let e = self.extent(target)?;
        let off = disp.checked_mul(e.disp_unit);
        match off.and_then(|o| o.checked_add(len)) {
            Some(end) if end <= e.size => Ok(end - len),
            _ => Err(outside(target, disp, len, e)),
        }
    }

    /// The communicator rank of this process.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// Number of ranks in the window's group.
    pub fn size_of_group(&self) -> usize {
        self.comm.size()
    }

    /// The group of the window. # MPI-4.1: 12.2.6 (MPI_WIN_GET_GROUP)
    pub fn group(&self) -> Group {
        self.comm.group()
    }

    /// The size of this rank's window memory in bytes (MPI_WIN_SIZE).
    pub fn size(&self) -> usize {
        self.local.len()
    }

    /// This rank's displacement unit (MPI_WIN_DISP_UNIT).
    pub fn disp_unit(&self) -> usize {
        self.extents[self.comm.rank()].disp_unit
    }

    /// The address of this rank's window memory (MPI_WIN_BASE), as an identity: it is never
    /// dereferenced by onesided's API.
    pub fn base_addr(&self) -> usize {
        self.local.addr()
    }

    /// How the memory was provided (MPI_WIN_CREATE_FLAVOR).
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The memory model (MPI_WIN_MODEL): unified, since every transport keeps one copy.
    pub fn model(&self) -> Model {
        Model::Unified
    }

    /// Every supported info key with its value in use. # MPI-4.1: 12.2.7 (MPI_WIN_GET_INFO)
    pub fn info(&self) -> Info {
        self.hints.get().to_info(self.flavor != Flavor::Create)
    }

    /// Change the hints that may change while the window lives: `accumulate_ordering` (with
    /// `none`, or without `raw` and `waw`, an accumulate that fetches nothing returns before
    /// it completes at the target, and the next flush, unlock or fence completes it),
    /// `mpi_accumulate_granularity` (where accumulates are emulated under the target's lock
    /// word, the lock is taken once per that many bytes instead of once per call). The other
    /// keys are fixed at creation, and values given for them here are ignored, as MPI allows:
    /// `accumulate_ops` among them, since it decides which accumulates run as NIC atomics and
    /// which under the target's lock, and switching while others are in flight would break
    /// their atomicity (`protocol::native`); [`Window::info`]
    /// reports what is in effect. MPI_ERR_INFO for a value a key does not take. Asking for
    /// ordered writes again first completes the accumulates left in flight.
    ///
    /// # MPI-4.1: 12.2.7 (MPI_WIN_SET_INFO)
    pub fn set_info(&self, info: &Info) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Win_set_info", || {
            let old = self.hints.get();
            let new = old.update(info)?;
            if old.ordering.writes_may_overtake() && !new.ordering.writes_may_overtake() {
                self.transports().try_for_each(|t| t.flush_all())?;
            }
            self.hints.set(new);
            Ok(())
        })
    }

    /// Set the window's name. # MPI-4.1: 12.2.6 (MPI_WIN_SET_NAME)
    pub fn set_name(&self, name: &str) {
        *self.name.borrow_mut() = name.to_owned();
    }

    /// The window's name (empty until set).
    pub fn name(&self) -> String {
        self.name.borrow().clone()
    }

    /// Free the window: collective; waits until every rank has finished its accesses to this
    /// rank's memory. Held locks are released first. An epoch still open here gives
    /// MPI_ERR_RMA_SYNC, and the window is freed all the same, so that no rank waits forever.
    ///
    /// # MPI-4.1: 12.2.5 (MPI_WIN_FREE)
    pub fn free(self) -> Result<()> {
        let rank = self.rank();
        in_call(Some(rank), "MPI_Win_free", || self.release().result)
    }

    /// Close this rank's epochs and wait until no rank accesses this rank's memory any more: the
    /// ranks meet in a barrier of the communicator, outside the window, so that it cannot be
    /// mistaken for a fence.
    fn release(&self) -> Released {
        if self.freed.replace(true) {
            return Released {
                result: Ok(()),
                quiet: true,
            };
        }
        let open = self.epochs.borrow().free();
        let closed = self.close_epochs();
        if std::thread::panicking() {
            // The process is going down: waiting for the others could block its exit. Memory of
            // the node segment stays mapped by the others; lent memory is guarded by `create`.
            return Released {
                result: open.and(closed),
                quiet: false,
            };
        }
        if let Err(failed) = self.peers.job_alive() {
            // A rank of the job failed: the barrier could never complete.
            return Released {
                result: open.and(closed).and(Err(failed)),
                quiet: false,
            };
        }
        let barrier = self.announce_free().and_then(|()| self.comm.barrier());
        let quiet = barrier.is_ok();
        Released {
            result: open.and(closed).and(barrier),
            quiet,
        }
    }
}

/// The outcome of releasing a window.
struct Released {
    result: Result<()>,
    /// Every rank is known to have finished accessing this rank's memory.
    quiet: bool,
}

impl Drop for Window<'_> {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

/// MPI_ERR_RANK for `target` in a window of `ranks` ranks (out of line: the calls that check
/// inline).
#[cold]
fn not_in_group(target: usize, ranks: usize) -> Error {
    Error::new(
        ErrorClass::Rank,
        format!("rank {target} outside a window of {ranks} ranks"),
    )
}

/// MPI_ERR_RMA_RANGE for `len` bytes at displacement `disp` of `target`'s window `e`.
#[cold]
fn outside(target: usize, disp: usize, len: usize, e: Extent) -> Error {
    Error::new(
        ErrorClass::RmaRange,
        format!(
            "{len} bytes at displacement {disp} (unit {}) outside rank {target}'s window of {} bytes",
            e.disp_unit, e.size
        ),
    )
}
