//! The contract between windows and transports.
//!
//! A window talks to every target through one [`Transport`], chosen per target at window
//! creation (shared memory inside a node; the NIC for other nodes). The contract is shaped for
//! both kinds: shared memory, where a put is a copy and complete when it returns, and an RDMA NIC
//! whose operations complete later and whose target may need [`Transport::progress`] calls
//! (libfabric's tcp;ofi_rxm). The four completion points are the whole contract the
//! synchronization layer relies on:
//!
//! - an operation call returns when its origin buffer may be reused (local completion of put;
//!   for get, the data is in the buffer), so that safe code can never free a buffer in use;
//! - [`Transport::flush_local`] / [`Transport::flush_local_all`]: every operation to the target is
//!   locally complete;
//! - [`Transport::flush`] / [`Transport::flush_all`]: every operation to the target is complete at
//!   the target, visible to its loads and to other origins;
//! - [`Transport::amo`] on the control space is atomic with respect to every other origin's `amo`
//!   on the same word, and returns the old value (remote completion by construction).
//!
//! Completion is per target: a flush of one target waits for that target's operations only, and
//! a get or an atomic waits for its own completion, not for unrelated puts. The request forms
//! ([`Transport::start_put`], [`Transport::start_get`], [`Transport::start_accumulate`]) return
//! a [`Pending`] at once; [`Transport::finish`] is their local completion (the origin buffer may
//! be reused; for a get, the data is in the buffer). A transport that completes everything when
//! it returns (shared memory) keeps the default forms, which complete at the start.
//!
//! Memory is exposed with a serializable [`RemoteKey`]: each rank describes its window memory and
//! control block, the keys are exchanged through the world, and each rank connects the keys of
//! the targets it reaches.

#[cfg(have_nic)]
mod checks;
#[cfg(test)]
pub(crate) mod deferred;
mod emulated;
#[cfg(have_libfabric)]
pub mod fabric;
pub(crate) mod net;
#[cfg(all(have_libfabric, feature = "hwloc"))]
mod nic;
#[cfg(have_nic)]
mod notices;
#[cfg(feature = "launcher")]
pub mod report;
mod select;
pub mod shm;
#[cfg(have_ibverbs)]
pub mod verbs;
pub(crate) mod which;

use crate::error::{Error, ErrorClass, Result};
pub use crate::protocol::attach::Entry;
pub use crate::protocol::lockword::Amo;
pub use crate::protocol::native::{AccOp, NativeOps};
#[cfg(have_nic)]
pub use crate::protocol::native::{Kind, Path};
use crate::protocol::reduce::{Elem, Op, combine};
#[cfg(have_nic)]
pub(crate) use checks::{foreign, outside, path_at, unserved};
#[cfg(have_nic)]
pub(crate) use emulated::under_acc_lock;
pub(crate) use emulated::{locked_accumulate, locked_accumulate_many};
#[cfg(have_nic)]
pub(crate) use notices::{Notices, Window as NotifiedWindow, data as notice_data};
use onesided_shm::Mem;
pub(crate) use select::{Selection, select};
use std::task::Waker;

/// An atomic read-modify-write of one element of window memory: the accumulate family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accumulate {
    /// Element type.
    pub elem: Elem,
    /// What to do.
    pub op: AccOp,
    /// The origin value's bits, in the low bytes.
    pub operand: u64,
    /// The window's `accumulate_ops` is `same_op`: no MPI_NO_OP meets other operations on an
    /// element ([`NativeOps::path`]).
    pub same_op: bool,
}

impl Accumulate {
    /// The value an element holding `old` takes (the software path of every transport).
    pub fn next(&self, old: u64) -> u64 {
        match self.op {
            AccOp::Apply(op) => combine(self.elem, op, old, self.operand),
            AccOp::CompareSwap { compare } if old == compare => self.operand,
            AccOp::CompareSwap { .. } => old,
        }
    }
}

/// Atomic read-modify-writes of consecutive elements with one operation: MPI_ACCUMULATE and
/// MPI_GET_ACCUMULATE of many elements. Each element is atomic on its own, not the whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccumulateMany<'a> {
    /// Element type.
    pub elem: Elem,
    /// How each element combines with its operand.
    pub op: Op,
    /// The origin elements' bytes (little-endian, `elem.size()` each).
    pub operands: &'a [u8],
    /// Bytes the emulated path updates per hold of the target's accumulate lock, rounded up
    /// to whole elements (the window's `mpi_accumulate_granularity`; 0: the whole call).
    pub granularity: usize,
    /// As [`Accumulate::same_op`].
    pub same_op: bool,
}

impl AccumulateMany<'_> {
    /// How many elements.
    pub fn count(&self) -> usize {
        self.operands.len() / self.elem.size()
    }

    /// Bytes of operands to apply per hold of the target's lock: the granularity rounded up to
    /// whole elements (`max` where it is 0), at most `max` rounded down to whole elements, at
    /// least one element.
    pub fn piece(&self, max: usize) -> usize {
        let size = self.elem.size();
        let p = match self.granularity {
            0 => max,
            g => (g.div_ceil(size) * size).min(max),
        };
        (p / size * size).max(size)
    }

    /// Whether the operands are whole elements and `fetched`, when given, is as long as them
    /// (MPI_ERR_COUNT otherwise): transports check before anything moves.
    pub fn check(&self, fetched: Option<&[u8]>) -> Result<()> {
        let len = self.operands.len();
        if !len.is_multiple_of(self.elem.size()) || fetched.is_some_and(|f| f.len() != len) {
            return Err(Error::new(
                ErrorClass::Count,
                format!(
                    "{len} operand bytes of {:?} elements, room for {:?} fetched bytes",
                    self.elem,
                    fetched.map(<[u8]>::len)
                ),
            ));
        }
        Ok(())
    }

    /// The read-modify-write of element `i` alone (the direct verbs transport's NIC atomics).
    #[cfg(have_ibverbs)]
    pub fn element(&self, i: usize) -> Accumulate {
        let size = self.elem.size();
        Accumulate {
            elem: self.elem,
            op: AccOp::Apply(self.op),
            operand: bits(&self.operands[i * size..(i + 1) * size]),
            same_op: self.same_op,
        }
    }
}

/// The bits of one element's little-endian bytes (at most 8), in the low bytes.
pub(crate) fn bits(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(b)
}

/// Which memory of a target an operation addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    /// The target's window memory.
    Data,
    /// The target's control block (lock word, barrier slots, ...).
    Control,
    /// Memory the target attached to a dynamic window, as its attach table describes it.
    Attached(Entry),
}

/// One transfer of a batch ([`Transport::put_many`], [`Transport::get_many`]): the origin's
/// `bytes` (read from for a put, written into for a get) and where they go in `target`'s `space`.
#[derive(Debug)]
pub struct Part<B> {
    /// The target rank.
    pub target: usize,
    /// Which of its memory.
    pub space: Space,
    /// Bytes into that memory.
    pub offset: usize,
    /// The origin's bytes.
    pub bytes: B,
}

/// Which ranks a transport can reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Ranks on this rank's node.
    Node,
    /// Every rank.
    #[cfg(any(have_nic, test))]
    Any,
}

/// What a transport can do and its limits, read from the provider where there is one, so that
/// [`select`] picks routes and windows and tests choose paths by capability (UCX's interface
/// attributes and MPICH's per-window attribute bits are the models).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caps {
    /// Transport name, e.g. "shm".
    pub name: &'static str,
    /// Which ranks it reaches.
    pub reach: Reach,
    /// Target memory is directly addressable by loads and stores (MPI_Win_shared_query works).
    pub load_store: bool,
    /// The target must call [`Transport::progress`] for operations to complete.
    pub needs_target_progress: bool,
    /// Control-space atomics wake a target asleep on its doorbell, so waiters may sleep.
    pub wakes_sleepers: bool,
    /// Control-space atomics that ring a doorbell ([`crate::protocol::layout::rings_doorbell`])
    /// also wake the target through its completion channel, where its waiters sleep
    /// ([`Transport::sleep`]): direct verbs, whose NIC writes control words without the CPU.
    pub wakes_by_completion: bool,
    /// A control-space atomic is ordered after every earlier operation of this origin to the
    /// same target, complete there (CPU atomics after plain stores): releasing a lock needs no
    /// flush before it.
    pub atomics_order_prior: bool,
    /// The largest put handed to the transport at once, its buffer free when the call returns
    /// without waiting for the target (`usize::MAX`: every put completes when it returns).
    pub inject: usize,
    /// The largest transfer one operation moves; larger ones are split.
    pub max_msg: usize,
    /// Local buffers must be registered (`FI_MR_LOCAL`): small transfers are copied through a
    /// registered buffer, large ones register the caller's memory.
    pub local_mr: bool,
    /// The (element type, operation) pairs whose accumulates run natively, as CPU or NIC
    /// atomics, on every rank, wherever the element allows it (aligned; in memory the transport
    /// maps, for shared memory); the others are emulated under the target's accumulate lock,
    /// as the window's `accumulate_ops` decides ([`NativeOps::path`]).
    pub native_atomics: NativeOps,
    /// Its atomics are CPU atomics, atomic with respect to loads, stores and atomics of
    /// processes on the node.
    pub cpu_atomics: bool,
}

/// An operation started by a request form, until [`Transport::finish`] completes it. Dropped
/// unfinished, the operation completes on its own (its buffers are the transport's until then).
#[derive(Debug)]
pub enum Pending {
    /// Complete already (the transport completed it when it started).
    Done,
    /// In flight to the target named: what the transport that started it needs to complete it
    /// (its own type; another transport refuses it).
    #[cfg(have_nic)]
    Started(usize, Box<dyn std::any::Any>),
}

/// A serialized description of one rank's exposed memory, meaningful to one transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteKey(pub Vec<u8>);

/// Moves bytes and atomics between this origin and the targets it serves. Offsets are bytes into
/// the target's space; the window has checked ranges already, and the transport checks again
/// (an out-of-range access fails with RMA_RANGE and touches nothing).
pub trait Transport: std::fmt::Debug {
    /// What the transport can do.
    fn caps(&self) -> &Caps;
    /// Write `src` at `offset` of `target`'s `space`; returns when `src` may be reused.
    fn put(&self, target: usize, space: Space, offset: usize, src: &[u8]) -> Result<()>;
    /// Read `dst.len()` bytes at `offset` of `target`'s `space`; returns with the data in `dst`.
    fn get(&self, target: usize, space: Space, offset: usize, dst: &mut [u8]) -> Result<()>;
    /// A 64-bit atomic on the 8-aligned word at `offset`; returns the old value.
    fn amo(&self, target: usize, space: Space, offset: usize, op: Amo) -> Result<u64>;
    /// An atomic read-modify-write of the element at `offset` of `target`'s `space` (window or
    /// attached memory, at any offset), atomic with respect to every other `accumulate` of the
    /// window on the same element; returns the old bits.
    fn accumulate(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: Accumulate,
    ) -> Result<u64>;
    /// The elements of `acc` at `offset` of `target`'s `space`, each atomic as in
    /// [`Transport::accumulate`] (the call as a whole is not); the old bytes land in `fetched`
    /// when given (as long as the operands). On failure some elements may have been updated.
    fn accumulate_many(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: AccumulateMany<'_>,
        fetched: Option<&mut [u8]>,
    ) -> Result<()>;
    /// Complete every operation to `target` at the target.
    fn flush(&self, target: usize) -> Result<()>;
    /// Complete every operation at every target.
    fn flush_all(&self) -> Result<()>;
    /// Complete every operation to `target` at this origin.
    fn flush_local(&self, target: usize) -> Result<()>;
    /// Complete every operation at this origin.
    fn flush_local_all(&self) -> Result<()>;
    /// Let the transport move pending work (for transports whose target must make progress).
    fn progress(&self) -> Result<()>;

    /// Sleep until this rank's endpoint completes something or `timeout` passes, unless
    /// `ready` holds once the endpoint is armed to report the next completion; whether
    /// something arrived (a peer's wake among it). Transports that
    /// [`Caps::wakes_by_completion`] sleep on their completion channel; the others nap.
    fn sleep(&self, ready: &dyn Fn() -> bool, timeout: std::time::Duration) -> Result<bool> {
        if !ready() {
            std::thread::sleep(timeout);
        }
        Ok(false)
    }

    /// Add `add` to the 64-bit word at `offset` of `target`'s control block without waiting
    /// for the old value: the signals of post, complete and the barrier, whose receivers wait
    /// on their own word. The addition is complete at the target by the next flush of `target`;
    /// the default completes it before returning.
    fn signal(&self, target: usize, offset: usize, add: u64) -> Result<()> {
        signal_and_wait(self, target, offset, add)
    }

    /// Write `src` at `offset` of `target`'s `space` and deliver notification `id` to
    /// `target` with it, in one operation that completes there only once the bytes are there
    /// (counted by the target's [`Transport::notified`]): `Ok(false)`, and nothing moved, where
    /// this transport cannot (the default; the window then puts, completes and signals).
    fn put_notify(
        &self,
        _target: usize,
        _space: Space,
        _offset: usize,
        _src: &[u8],
        _id: usize,
    ) -> Result<bool> {
        Ok(false)
    }

    /// How many notifications of `id` reached this rank's window through
    /// [`Transport::put_notify`] (those signalled with an atomic are counted in its control
    /// block).
    fn notified(&self, _id: usize) -> u64 {
        0
    }

    /// Whether notifications reach this rank with this transport's writes
    /// ([`Transport::notified`] counts them); not by default.
    fn carries_notifications(&self) -> bool {
        false
    }

    /// Start writing `src` at `offset` of `target`'s `space`; `src` may be reused when this
    /// returns. Complete at the start by default.
    fn start_put(&self, target: usize, space: Space, offset: usize, src: &[u8]) -> Result<Pending> {
        self.put(target, space, offset, src)?;
        Ok(Pending::Done)
    }

    /// Start reading `dst.len()` bytes at `offset` of `target`'s `space`: into `dst` when
    /// complete at the start (the default), else handed over by [`Transport::finish`].
    fn start_get(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<Pending> {
        self.get(target, space, offset, dst)?;
        Ok(Pending::Done)
    }

    /// Start the accumulates of [`Transport::accumulate_many`]; the old bytes land in `fetched`
    /// when complete at the start (the default), else are handed over by
    /// [`Transport::finish`].
    fn start_accumulate(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: AccumulateMany<'_>,
        fetched: Option<&mut [u8]>,
    ) -> Result<Pending> {
        self.accumulate_many(target, space, offset, acc, fetched)?;
        Ok(Pending::Done)
    }

    /// Write each `(offset, bytes)` of `pieces` at that offset of `target`'s `space` (the
    /// runs of a noncontiguous target layout); returns when every piece may be reused. One
    /// [`Transport::put`] per piece by default; a transport whose operations reach several
    /// remote ranges at once overrides it.
    fn put_runs(&self, target: usize, space: Space, pieces: &[(usize, &[u8])]) -> Result<()> {
        pieces
            .iter()
            .try_for_each(|&(offset, src)| self.put(target, space, offset, src))
    }

    /// Read each `(offset, dst)` of `runs` from that offset of `target`'s `space` into `dst`;
    /// returns with the data in place. By default one request-form get per run, all in
    /// flight together, then completed in turn; overridden as [`Transport::put_runs`].
    fn get_runs(&self, target: usize, space: Space, runs: &mut [(usize, &mut [u8])]) -> Result<()> {
        let gets = runs
            .iter_mut()
            .map(|(offset, dst)| (target, space, *offset, &mut **dst));
        gets_in_flight(self, gets)
    }

    /// The puts of `parts`; returns when every origin buffer may be reused. One
    /// [`Transport::put`] after the other by default; a transport that can keep them in flight
    /// together overrides it.
    fn put_many(&self, parts: &[Part<&[u8]>]) -> Result<()> {
        parts
            .iter()
            .try_for_each(|p| self.put(p.target, p.space, p.offset, p.bytes))
    }

    /// The gets of `parts`; returns with the data in every origin buffer. One
    /// [`Transport::get`] after the other by default, overridden as [`Transport::put_many`].
    fn get_many(&self, parts: &mut [Part<&mut [u8]>]) -> Result<()> {
        parts
            .iter_mut()
            .try_for_each(|p| self.get(p.target, p.space, p.offset, p.bytes))
    }

    /// Whether `pending` is complete (progressing the transport once).
    fn test(&self, pending: &Pending) -> Result<bool> {
        Ok(matches!(pending, Pending::Done))
    }

    /// For a future: whether `pending` is complete (progressing the transport once), and if
    /// not, have `waker` woken when it may be. A future that has polled for a while asks
    /// `to_sleep`: where the transport progresses by itself (the fabric's progress thread) it
    /// wakes the task when operations settle, so the task's thread may sleep meanwhile. By
    /// default, and while not `to_sleep`, the task is woken at once to poll again: where
    /// progress is the owner's own polls (shared memory, direct verbs), the next poll is the
    /// progress.
    fn watch(&self, pending: &Pending, waker: &Waker, to_sleep: bool) -> Result<bool> {
        let _ = to_sleep;
        let done = self.test(pending)?;
        if !done {
            waker.wake_by_ref();
        }
        Ok(done)
    }

    /// Wait for `pending`; the bytes it read or fetched go to `out`.
    fn finish(&self, pending: Pending, out: Option<&mut [u8]>) -> Result<()> {
        let _ = (pending, out);
        Ok(())
    }
}

/// Endpoints of their own for the threads of a shared window (`Window::share`), where a
/// transport has them (the fabric's: `transport/fabric/lanes.rs`): each thread that calls puts
/// and gets its targets' window memory through its own, side by side with the other threads.
pub(crate) trait Lanes: Send + Sync + std::fmt::Debug {
    /// Whether lanes reach `target`.
    fn reaches(&self, target: usize) -> bool;
    /// Put `src` at `offset` of `target`'s window memory from the calling thread's lane; `None`
    /// (nothing done) where lanes do not reach `target` or this thread has none (it could not
    /// open one), and the window's thread must make the call.
    fn put(&self, target: usize, offset: usize, src: &[u8]) -> Option<Result<()>>;
    /// Get `dst` from `offset` of `target`'s window memory, as [`Lanes::put`].
    fn get(&self, target: usize, offset: usize, dst: &mut [u8]) -> Option<Result<()>>;
    /// [`Lanes::put`] in one write that carries notification `id` to `target`, as
    /// [`Transport::put_notify`] does; `None` (nothing moved) also where the lane cannot carry
    /// it, and the window's thread then puts and signals.
    fn put_notify(&self, target: usize, offset: usize, src: &[u8], id: usize)
    -> Option<Result<()>>;
    /// [`Lanes::get`], then an addition of 1 to the word at `slot` of `target`'s control block
    /// (a notification counter) by the window's atomics, complete when the call returns: the
    /// notification of a get, which arrives once its data was read. `None` as [`Lanes::put`].
    fn get_notify(
        &self,
        target: usize,
        offset: usize,
        dst: &mut [u8],
        slot: usize,
    ) -> Option<Result<()>>;
    /// Whether the window runs `acc` at `offset` of `target` on the NIC, as a lane then may (so
    /// that the lane's is atomic with the window's).
    fn runs_on_nic(&self, target: usize, offset: usize, acc: Accumulate) -> bool;
    /// One element's read-modify-write at `offset` of `target`'s window memory, where
    /// [`Lanes::runs_on_nic`]; its old value, or `None` as [`Lanes::put`].
    fn rmw(&self, target: usize, offset: usize, acc: Accumulate) -> Option<Result<u64>>;
    /// `op` on the consecutive `elem` elements at `offset` of `target`'s window memory with
    /// `operands` (their bytes), each element atomic on its own, where [`Lanes::runs_on_nic`]
    /// for the first (an accumulate of one element's kind); the old values go to `result`, as
    /// long as `operands`. `None` as [`Lanes::put`].
    fn accumulate_many(
        &self,
        target: usize,
        offset: usize,
        elem: Elem,
        op: Op,
        operands: &[u8],
        result: &mut [u8],
    ) -> Option<Result<()>>;
    /// Complete at `target` every operation this process had issued to it when the call began
    /// by any thread's lane, and by the window's thread where [`Lanes::covers_window`].
    fn flush(&self, target: usize) -> Result<()>;
    /// Whether [`Lanes::flush`] completes what the window's thread issued too (the fabric's
    /// can: its domain is thread-safe); where not, the window's thread flushes that itself.
    fn covers_window(&self) -> bool {
        true
    }
    /// Complete every operation of every lane and close them: sharing ends.
    fn drain(&self) -> Result<()>;
}

/// A transport that reaches memory attached to dynamic windows (MPI_Win_attach): it learns of
/// this rank's attached memory, which stays borrowed for `'a`, so that origins can reach it.
pub trait Attach<'a>: Transport {
    /// Make `mem` reachable to origins; the base and key they address it with (0 and 0 where
    /// the transport needs none).
    fn attach(&self, mem: Mem<'a>) -> Result<(u64, u64)>;
    /// Make the memory attached at `addr` unreachable again (it stays borrowed).
    fn detach(&self, addr: u64);
    /// Connect the pairs this window is the first to use, while every rank is inside window
    /// creation (a connected provider connects a pair at its first operation, which the peer's
    /// progress must answer). Called on every rank when any rank's [`Opened::fresh`] said so;
    /// nothing to do by default.
    fn warm_up(&self) -> Result<()> {
        Ok(())
    }
    /// Lanes for the threads of a shared window to the targets `wired` names (routed to this
    /// transport, covered by the epoch), where the transport has them.
    fn lanes(&self, _wired: &[bool]) -> Option<Box<dyn Lanes>> {
        None
    }
}

/// A network transport opened on this rank, its memory registered, before the ranks' keys are
/// exchanged: the first half of a window's wire-up (`window/setup.rs`). The window gathers every
/// rank's [`Opened::key`] in one exchange, with the keys of its other transports, calls
/// [`Opened::connect`] with them on every rank, agrees on the outcome, then takes the transport.
/// Dropped before [`Opened::into_transport`], it undoes what it prepared.
pub(crate) trait Opened<'a> {
    /// This rank's key: what every rank needs to reach it.
    fn key(&self) -> Vec<u8>;
    /// Whether this rank meets a rank of the window for the first time, so that pairs want
    /// connecting before the window is used ([`Attach::warm_up`]).
    fn fresh(&self) -> bool;
    /// Connect to every rank by its key (`keys` in rank order): local work, no collective.
    fn connect(&mut self, keys: &[Vec<u8>]) -> Result<()>;
    /// The transport, connected.
    fn into_transport(self: Box<Self>) -> Box<dyn Attach<'a> + 'a>;
}

/// A wait on a transport drives its progress and paces itself by its caps.
impl crate::wait::Progress for dyn Transport + '_ {
    #[inline]
    fn poll(&self) -> Result<()> {
        self.progress()
    }

    #[inline]
    fn pace(&self) -> crate::wait::Pace {
        let caps = self.caps();
        match (caps.needs_target_progress, caps.wakes_sleepers) {
            (true, _) => crate::wait::Pace::Serve,
            (false, true) => crate::wait::Pace::Doorbell,
            (false, false) if caps.wakes_by_completion => crate::wait::Pace::Completion,
            (false, false) => crate::wait::Pace::Nap,
        }
    }

    fn sleep(&self, ready: &dyn Fn() -> bool, timeout: std::time::Duration) -> Result<bool> {
        Transport::sleep(self, ready, timeout)
    }
}

/// Each `(target, space, offset, dst)` of `gets` started as a request-form get, all in flight
/// together, then completed in turn, the data in each `dst`. Every started get is completed, also
/// after a failure; the first failure returns.
pub(crate) fn gets_in_flight<'b, T: Transport + ?Sized>(
    t: &T,
    gets: impl IntoIterator<Item = (usize, Space, usize, &'b mut [u8])>,
) -> Result<()> {
    let mut started = Vec::new();
    let mut first = Ok(());
    for (target, space, offset, dst) in gets {
        match t.start_get(target, space, offset, dst) {
            Ok(pending) => started.push((pending, dst)),
            Err(e) => {
                first = Err(e);
                break;
            }
        }
    }
    for (pending, dst) in started {
        let done = t.finish(pending, Some(dst));
        first = first.and(done);
    }
    first
}

/// [`Transport::signal`] completed before it returns: a fetch-add whose old value is dropped.
pub(crate) fn signal_and_wait<T: Transport + ?Sized>(
    t: &T,
    target: usize,
    offset: usize,
    add: u64,
) -> Result<()> {
    t.amo(target, Space::Control, offset, Amo::FetchAdd(add))
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_whole_elements_within_the_granularity_and_the_limit() {
        let acc = |granularity| AccumulateMany {
            elem: Elem::F64,
            op: Op::Sum,
            operands: &[],
            granularity,
            same_op: false,
        };
        assert_eq!(acc(0).piece(100), 96, "the limit, in whole elements");
        assert_eq!(acc(20).piece(100), 24, "the granularity, rounded up");
        assert_eq!(acc(1000).piece(100), 96);
        assert_eq!(acc(0).piece(3), 8, "at least one element");
    }
}
