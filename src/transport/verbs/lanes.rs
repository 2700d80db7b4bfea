//! Lanes of the direct verbs transport for the threads of a shared window (`Window::share`): a
//! thread's put, get and NIC atomics to a target go through a lane of the window's endpoint
//! (`onesided_verbs::Lane`: a completion queue, staging buffers and a queue pair to each peer
//! of its own), not through the window's thread, so that threads issue and wait side by side.
//!
//! Where the lanes come from: an endpoint has them only where a world of the process is
//! MPI_THREAD_MULTIPLE (`resources.rs` says how many). A lane's queue pair to a peer is
//! connected to the queue pair of the peer's lane of the same number, prepared and connected
//! with the endpoints' own when the two ranks share their first window, and its memory is
//! reached with the keys the window's ranks exchanged (one protection domain per endpoint and
//! its lanes). The peer's NIC serves them: the target makes no call.
//!
//! Which lane a thread takes: the lane of its number (threads are numbered as they first call,
//! lanes in turn), or, where another thread has it, the next free one; where every lane is
//! taken, it waits for its own. A lane is held for the whole of a call: a get or an atomic waits
//! for its completion with the lane taken.
//!
//! Completion: a flush by any thread flushes, for its target, every lane, then where the
//! window's thread made calls since it last flushed that target, has it flush
//! ([`Lanes::covers_window`] is false here: the window's endpoint is its thread's alone). A
//! lane's failure (a peer gone, an operation the peer refused) breaks its queue pair to that
//! peer: the next flush of the peer by any thread reports it, as does the flush at the end of
//! sharing ([`Lanes::drain`]).
//!
//! A notified put is one write with immediate data through the lane, as the window's are: the
//! peer's lane takes its receive from the peer endpoint's shared receive queue and reports it
//! on that endpoint's completion queue, which the target polls. A notified get is the read,
//! then the NIC's addition to the target's counter of the id, then, where the target sleeps on
//! its completion channel (its notice in this rank's control block), a wake, as the window's
//! signals go. Not through lanes (the window's thread makes them): notified puts the target
//! cannot take as one write, and accumulates the NIC does not run.

use super::names::{ib_err, nic_op, waiting};
use super::notices;
use super::span::Span;
use crate::error::Result;
use crate::peers::Peers;
use crate::protocol::layout;
use crate::protocol::native::NativeOps;
use crate::protocol::reduce::{Elem, Op};
use crate::transport::{Accumulate, AccumulateMany, Lanes, Path, notice_data, path_at};
use onesided_shm::Mem;
use onesided_verbs as ib;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Numbers the threads as they first take a lane.
static THREADS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's number ([`THREADS`]), once it took a lane.
    static NUMBER: Cell<Option<usize>> = const { Cell::new(None) };
}

/// A target as lanes reach it.
#[derive(Debug, Clone, Copy)]
pub(super) struct LaneTarget {
    /// Its world rank: the lanes' queue pair to it.
    pub(super) peer: u32,
    /// Its window memory.
    pub(super) data: Span,
    /// Its control block (a flush's probe addresses it; notification counters are in it).
    pub(super) ctrl: Span,
    /// It sleeps on its completion channel: a signal to it where its sleep notice is set is
    /// followed by a wake (`VerbsKey::wakes`).
    pub(super) wakes: bool,
    /// How many lanes are connected to it (the first so many).
    pub(super) lanes: usize,
    /// Its window's tag in its notices (`VerbsKey::notify`): 0 where it takes no notification
    /// with a write.
    pub(super) notify: u32,
}

/// The lanes of a window's endpoint, as one sharing of the window uses them.
#[derive(Debug)]
pub(super) struct VerbsLanes {
    lanes: Arc<[ib::Lane]>,
    /// Per target: how lanes reach it, `None` where they do not (not wired, or no lane of
    /// either rank connected).
    targets: Vec<Option<LaneTarget>>,
    /// What the window runs on the NIC.
    native: NativeOps,
    peers: Peers,
    /// This rank's control block, where the targets' sleep notices are (a `Mem` is not `Sync`:
    /// read under a lock, at a notified get).
    notices: Mutex<Mem<'static>>,
}

impl VerbsLanes {
    /// The lanes `lanes` to `targets`, or `None` where they reach none.
    pub(super) fn new(
        lanes: Arc<[ib::Lane]>,
        targets: Vec<Option<LaneTarget>>,
        native: NativeOps,
        peers: Peers,
        notices: Mem<'static>,
    ) -> Option<VerbsLanes> {
        targets.iter().any(Option::is_some).then_some(VerbsLanes {
            lanes,
            targets,
            native,
            peers,
            notices: Mutex::new(notices),
        })
    }

    /// Whether `target`'s sleep notice in this rank's control block is set.
    fn asleep(&self, target: usize) -> bool {
        let ctrl = self.notices.lock().unwrap_or_else(PoisonError::into_inner);
        notices::asleep(&ctrl, self.targets.len(), target)
    }

    /// How a wait on `target` goes on.
    fn alive(&self, target: usize) -> ib::Waiting {
        waiting(&self.peers, target)
    }

    /// `op` on a lane to `target` taken by this thread, with the remote address of `len` bytes at
    /// `offset` of its window memory; `None` where no lane reaches it.
    fn on_lane<R>(
        &self,
        target: usize,
        offset: usize,
        len: usize,
        op: impl FnOnce(&ib::LaneGuard<'_>, u32, ib::Remote, &dyn Fn() -> ib::Waiting) -> Result<R>,
    ) -> Option<Result<R>> {
        let t = self.targets.get(target).copied().flatten()?;
        if offset.checked_add(len)? > t.data.len {
            return None;
        }
        let at = t.data.at(offset);
        let lane = self.take(t.lanes)?;
        Some(op(&lane, t.peer, at, &|| self.alive(target)))
    }

    /// A lane among the first `n` for this thread: its own, or the next free one, or its own
    /// once free.
    fn take(&self, n: usize) -> Option<ib::LaneGuard<'_>> {
        let lanes = self.lanes.get(..n).filter(|l| !l.is_empty())?;
        let number = NUMBER.with(|c| {
            let n = c
                .get()
                .unwrap_or_else(|| THREADS.fetch_add(1, Ordering::Relaxed));
            c.set(Some(n));
            n
        });
        let home = number % n;
        (0..n)
            .find_map(|i| lanes[(home + i) % n].try_lock())
            .or_else(|| Some(lanes[home].lock()))
    }

    /// Flush every lane connected to `target`; the first failure, after all were flushed.
    fn flush_lanes(&self, target: usize) -> Result<()> {
        let Some(t) = self.targets.get(target).copied().flatten() else {
            return Ok(());
        };
        let mut first = Ok(());
        for lane in &self.lanes[..t.lanes] {
            let lane = lane.lock();
            if lane.idle(t.peer) {
                continue;
            }
            let done = lane.flush(t.peer, t.ctrl.at(0), &|| self.alive(target));
            if first.is_ok() {
                first = done.map_err(ib_err);
            }
        }
        first
    }
}

impl Lanes for VerbsLanes {
    fn reaches(&self, target: usize) -> bool {
        self.targets.get(target).is_some_and(Option::is_some)
    }

    fn put(&self, target: usize, offset: usize, src: &[u8]) -> Option<Result<()>> {
        self.on_lane(
            target,
            offset,
            src.len(),
            |lane, peer, to, live| match src.is_empty() {
                true => Ok(()),
                false => lane.write(peer, src, to, live).map_err(ib_err),
            },
        )
    }

    fn get(&self, target: usize, offset: usize, dst: &mut [u8]) -> Option<Result<()>> {
        self.on_lane(
            target,
            offset,
            dst.len(),
            |lane, peer, from, live| match dst.is_empty() {
                true => Ok(()),
                false => lane.read(peer, dst, from, live).map_err(ib_err),
            },
        )
    }

    /// One write with immediate data, where the target takes notifications with writes and
    /// the bytes fit one work request.
    fn put_notify(
        &self,
        target: usize,
        offset: usize,
        src: &[u8],
        id: usize,
    ) -> Option<Result<()>> {
        let tag = self.targets.get(target).copied().flatten()?.notify;
        let imm = u32::try_from(notice_data(tag, id))
            .ok()
            .filter(|_| tag != 0)?;
        self.on_lane(target, offset, src.len(), |lane, peer, to, live| {
            if src.len() > lane.max_message() {
                return Ok(None);
            }
            let done = lane.write_notify(peer, src, to, imm, live);
            done.map(Some).map_err(ib_err)
        })
        .and_then(Result::transpose)
    }

    fn get_notify(
        &self,
        target: usize,
        offset: usize,
        dst: &mut [u8],
        slot: usize,
    ) -> Option<Result<()>> {
        let t = self.targets.get(target).copied().flatten()?;
        if slot.checked_add(8)? > t.ctrl.len {
            return None;
        }
        let counter = t.ctrl.at(slot);
        let wake = t.wakes && layout::rings_doorbell(slot);
        self.on_lane(target, offset, dst.len(), |lane, peer, from, live| {
            if !dst.is_empty() {
                lane.read(peer, dst, from, live).map_err(ib_err)?;
            }
            let add = ib::Atomic::FetchAdd(1);
            lane.atomic(peer, add, counter, live).map_err(ib_err)?;
            if wake && self.asleep(target) {
                lane.wake(peer, t.ctrl.at(0), live).map_err(ib_err)?;
            }
            Ok(())
        })
    }

    fn runs_on_nic(&self, target: usize, offset: usize, acc: Accumulate) -> bool {
        let Some(Some(t)) = self.targets.get(target) else {
            return false;
        };
        let at = t.data.addr.wrapping_add(offset as u64);
        path_at(self.native, at, acc.elem, acc.op.kind(), acc.same_op) == Path::Native
    }

    fn rmw(&self, target: usize, offset: usize, acc: Accumulate) -> Option<Result<u64>> {
        if !self.runs_on_nic(target, offset, acc) {
            return None;
        }
        self.on_lane(target, offset, acc.elem.size(), |lane, peer, at, live| {
            lane.atomic(peer, nic_op(&acc), at, live).map_err(ib_err)
        })
    }

    fn accumulate_many(
        &self,
        target: usize,
        offset: usize,
        elem: Elem,
        op: Op,
        operands: &[u8],
        result: &mut [u8],
    ) -> Option<Result<()>> {
        // The caller found the first element's accumulate on the NIC (with the window's
        // `same_op`, which decides nothing else here).
        let acc = AccumulateMany {
            elem,
            op,
            operands,
            granularity: 0,
            same_op: false,
        };
        let (count, size) = (acc.count(), elem.size());
        if count == 0 || result.len() != operands.len() {
            return None;
        }
        self.on_lane(target, offset, operands.len(), |lane, peer, at, live| {
            let ops: Vec<(ib::Atomic, ib::Remote)> = (0..count)
                .map(|i| (nic_op(&acc.element(i)), at.shifted(i * size)))
                .collect();
            lane.atomics(peer, &ops, result, live).map_err(ib_err)
        })
    }

    fn flush(&self, target: usize) -> Result<()> {
        self.flush_lanes(target)
    }

    /// The window's thread makes its own calls on the endpoint, which only it drives.
    fn covers_window(&self) -> bool {
        false
    }

    fn drain(&self) -> Result<()> {
        let mut first = Ok(());
        for target in 0..self.targets.len() {
            let done = self.flush_lanes(target);
            if first.is_ok() {
                first = done;
            }
        }
        first
    }
}
