//! Endpoints of their own for the threads of a shared window (`Window::share`): the first put,
//! get, notified put or get, or NIC atomic a thread makes to a target over the fabric opens an
//! endpoint for that thread (a lane) on the window's domain, with the window's targets
//! inserted, and every later one of that thread goes through it. So threads issue and complete
//! their operations side by side, each on its own queues and completion bookkeeping, none
//! queued behind another or behind the window's thread.
//!
//! A lane reaches the targets' window memory with the keys the window's endpoint learnt (one
//! domain: mapped keys hold for every endpoint of it). It serves nothing: the targets' own
//! endpoints and progress threads serve its operations, as they serve the window's.
//!
//! A flush by any thread completes what every lane and the window's endpoint had issued to its
//! target when it began ([`fi::Flusher`]), as MPI-4.1 12.5.4 says of a process; a failure of an
//! operation of another thread's lane is reported by that thread's next flush, and what no
//! thread flushed by the time sharing ends is completed then (`Lanes::drain`).
//!
//! What it costs: per thread that calls, up to one per CPU this process may use (threads beyond
//! share them in turn), one libfabric endpoint (its queues and a 64 KiB bounce buffer, and what
//! the provider allocates per endpoint: tens of megabytes over verbs;ofi_rxm; no progress
//! thread: nothing addresses a lane, and its threads drive it in their calls) and a connection
//! to each target it reaches, opened at its first operation. When sharing ends the lanes are
//! kept, idle, for the window's next sharing ([`Kept`]), and closed when the window is freed:
//! a window shared again and again pays for its lanes once. The idle lanes of all windows of
//! the process together are at most one per CPU: where more come back, those of the windows
//! shared least recently are closed ([`park`]), so a program that shares many windows holds
//! no more endpoints between its times of sharing than one window would. (With a progress
//! thread per lane looking every millisecond, 16 threads in each of 4 ranks on 2 CPUs took
//! several times as long.)

use super::names::{atomic_op, datatype, fi_err};
use super::span::Span;
use super::waits::waiting;
use crate::error::Result;
use crate::peers::Peers;
use crate::protocol::native::NativeOps;
use crate::protocol::reduce::{Elem, Op};
use crate::transport::Lanes;
use crate::transport::{AccOp, Accumulate, Path, notice_data, path_at};
use onesided_fabric as fi;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, Weak};

/// Numbers the sets of lanes, so that a thread's cache never mistakes one for another.
static SETS: AtomicU64 = AtomicU64::new(1);

/// The windows with kept lanes, the one whose lanes came back least recently first.
static PARKED: Mutex<Vec<Weak<Kept>>> = Mutex::new(Vec::new());

thread_local! {
    /// This thread's lanes, by the number of their set.
    static MINE: RefCell<Vec<(u64, Weak<Lane>)>> = const { RefCell::new(Vec::new()) };
}

/// A target as lanes reach it.
#[derive(Debug, Clone)]
pub(super) struct LaneTarget {
    /// Its window memory.
    pub(super) data: Span,
    /// It as the window's endpoint addresses it.
    pub(super) peer: fi::Peer,
    /// Its window memory's address modulo 8 (`FabricKey::lead`).
    pub(super) lead: u64,
    /// Its control block (notification counters).
    pub(super) ctrl: Span,
    /// The tag its endpoint counts notifications carried by writes under (0: it does not).
    pub(super) notify: u32,
}

/// The lanes of a window between its times of sharing, and the ranks they address: a lane
/// is kept, with its connections, for the next sharing rather than closed when one ends (over
/// verbs;ofi_rxm in the software RoCE guest, opening a lane and connecting it took about 0.8 s,
/// against 0.2 ms for a put and flush through it).
#[derive(Debug)]
pub(super) struct Kept {
    /// Per rank of the window: its endpoint's address, as the window's endpoint inserted it,
    /// and its process where it runs on this node.
    addresses: Vec<(Vec<u8>, Option<u32>)>,
    /// Lanes no thread uses now, each with nothing in flight.
    idle: Mutex<Vec<Lane>>,
}

impl Kept {
    /// No lane yet, to the ranks at `addresses`.
    pub(super) fn new(addresses: Vec<(Vec<u8>, Option<u32>)>) -> Kept {
        Kept {
            addresses,
            idle: Mutex::default(),
        }
    }

    /// The idle lanes.
    fn idle(&self) -> MutexGuard<'_, Vec<Lane>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An idle lane, else a new endpoint on `domain` with every rank inserted.
    fn take(&self, domain: &Arc<fi::Domain>) -> Result<Lane> {
        let idle = self.idle().pop();
        if let Some(lane) = idle {
            lane.flusher.set_crowded(false);
            return Ok(lane);
        }
        let ep = fi::Lane::open(domain).map_err(fi_err)?;
        let peers = self
            .addresses
            .iter()
            .map(|(name, pid)| {
                let peer = ep.insert(name).map_err(fi_err)?;
                if let Some(pid) = pid {
                    ep.set_pid(peer, *pid);
                }
                Ok(peer)
            })
            .collect::<Result<Vec<_>>>()?;
        tracing::debug!(targets = peers.len(), "opened an endpoint for threads");
        Ok(Lane {
            flusher: ep.flusher(),
            ep: Mutex::new(ep),
            peers,
        })
    }
}

/// An endpoint of one thread, or of several in turn (beyond [`FabricLanes::most`]), with every
/// rank of the window inserted.
#[derive(Debug)]
struct Lane {
    /// Used by its threads one at a time, and closed by the window's (which holds the last
    /// reference).
    ep: Mutex<fi::Lane>,
    flusher: fi::Flusher,
    /// Per rank of the window: as this endpoint addresses it.
    peers: Vec<fi::Peer>,
}

/// The lanes of one shared window.
#[derive(Debug)]
pub(crate) struct FabricLanes {
    set: u64,
    domain: Arc<fi::Domain>,
    /// Per rank of the window: where lanes reach it, if they do.
    targets: Vec<Option<LaneTarget>>,
    /// Where lanes come from and go back to.
    kept: Arc<Kept>,
    /// The window's endpoint, for flushes of what the window's thread issued.
    window: fi::Flusher,
    /// The accumulates the window runs on the NIC, unless the targets serve them all.
    native: NativeOps,
    served: bool,
    peers: Peers,
    /// Every lane opened so far. Read (by flushes, side by side) far more often than written
    /// (once per thread).
    lanes: RwLock<Vec<Arc<Lane>>>,
    /// A lane could not be opened: the threads' calls go to the window's thread instead.
    refused: AtomicBool,
    /// The most lanes: one per CPU this process may use. Threads beyond share them, each
    /// taking one in turn (a lane's mutex then orders their calls): an endpoint of the verbs
    /// provider takes tens of megabytes, and 16 per rank exhausted the 2 GiB of the software
    /// RoCE guest.
    most: usize,
    /// The threads that took a lane so far.
    threads: AtomicUsize,
}

impl FabricLanes {
    /// Lanes on `domain` to `targets`, taken from `kept`; `window` flushes the window's
    /// endpoint, `native` and `served` say how the window's accumulates go.
    pub(super) fn new(
        domain: Arc<fi::Domain>,
        (targets, kept): (Vec<Option<LaneTarget>>, Arc<Kept>),
        window: fi::Flusher,
        (native, served): (NativeOps, bool),
        peers: Peers,
    ) -> FabricLanes {
        FabricLanes {
            set: SETS.fetch_add(1, Ordering::Relaxed),
            domain,
            targets,
            kept,
            window,
            native,
            served,
            peers,
            lanes: RwLock::default(),
            refused: AtomicBool::new(false),
            most: std::thread::available_parallelism().map_or(1, usize::from),
            threads: AtomicUsize::new(0),
        }
    }

    /// How a wait on `target` goes on (as the window's own waits).
    fn alive(&self, target: usize) -> fi::Waiting {
        waiting(&self.peers, target)
    }

    /// The calling thread's lane: at its first call, a new one while there are fewer than
    /// [`FabricLanes::most`], else one of those in turn; `None` where none can be opened, and
    /// once the job has a failure: the window's thread then makes the calls and reports it
    /// (over verbs;ofi_rxm, a lane's first operation to a rank that had died, which connects
    /// anew, was not seen to fail before the launcher stopped the job).
    fn mine(&self) -> Option<Arc<Lane>> {
        if self.peers.job_alive().is_err() {
            return None;
        }
        let found = self.cached();
        if found.is_some() || self.refused.load(Ordering::Relaxed) {
            return found;
        }
        let lane = {
            let mut lanes = self.lanes.write().unwrap_or_else(PoisonError::into_inner);
            let threads = self.threads.fetch_add(1, Ordering::Relaxed) + 1;
            let lane = match lanes.len() < self.most {
                true => match self.kept.take(&self.domain) {
                    Ok(lane) => {
                        let lane = Arc::new(lane);
                        lanes.push(Arc::clone(&lane));
                        lane
                    }
                    Err(e) => {
                        tracing::debug!(
                            %e,
                            "no endpoint for a thread: the threads' calls go to the window's"
                        );
                        self.refused.store(true, Ordering::Relaxed);
                        return None;
                    }
                },
                false => Arc::clone(&lanes[(threads - 1) % lanes.len()]),
            };
            // Threads that outnumber the CPUs poll their lanes without spinning first: a
            // spinning waiter holds the CPU the progress it waits for needs (over tcp on 2 CPUs,
            // put_rate -t 4 made 17-20 k/s spinning, 32-36 k/s not).
            if crate::wait::crowded() || crate::wait::crowded_with(threads) {
                lanes.iter().for_each(|l| l.flusher.set_crowded(true));
            }
            lane
        };
        MINE.with(|mine| {
            let mut mine = mine.borrow_mut();
            mine.retain(|(_, lane)| lane.strong_count() > 0);
            mine.push((self.set, Arc::downgrade(&lane)));
        });
        Some(lane)
    }

    /// The lane the calling thread took already, if it did.
    fn cached(&self) -> Option<Arc<Lane>> {
        MINE.with(|mine| {
            let mine = mine.borrow();
            let (_, lane) = mine.iter().find(|(set, _)| *set == self.set)?;
            lane.upgrade()
        })
    }

    /// Run `op` on the calling thread's lane with `target` as lanes reach it and the lane's
    /// address of it; `None` where there is no lane or lanes do not reach `target`.
    fn on_target<R>(
        &self,
        target: usize,
        op: impl FnOnce(&fi::Lane, &LaneTarget, fi::Peer, &dyn Fn() -> fi::Waiting) -> Result<R>,
    ) -> Option<Result<R>> {
        let lane = self.mine()?;
        let t = self.targets.get(target)?.as_ref()?;
        let peer = *lane.peers.get(target)?;
        let ep = lane.ep.lock().unwrap_or_else(PoisonError::into_inner);
        Some(op(&ep, t, peer, &|| self.alive(target)))
    }

    /// Run `op` on the calling thread's lane with where `len` bytes at `offset` of `target`'s
    /// window memory are; `None` as [`FabricLanes::on_target`].
    fn on_lane<R>(
        &self,
        target: usize,
        offset: usize,
        len: usize,
        op: impl FnOnce(
            &fi::Lane,
            fi::Remote,
            &dyn Fn() -> fi::Waiting,
        ) -> std::result::Result<R, fi::FiError>,
    ) -> Option<Result<R>> {
        self.on_target(target, |ep, t, peer, live| {
            let at = t.data.remote(peer, target, offset, len)?;
            op(ep, at, live).map_err(fi_err)
        })
    }

    /// Complete every operation any thread's lane issued to `target` (one lanes reach: the
    /// caller checked) before this call (the window's endpoint is the caller's).
    fn flush_lanes(&self, target: usize) -> Result<()> {
        let live = || self.alive(target);
        let lanes = self.lanes.read().unwrap_or_else(PoisonError::into_inner);
        let mine = self.cached();
        for lane in lanes.iter() {
            let Some(peer) = lane.peers.get(target) else {
                continue;
            };
            let own = mine.as_ref().is_some_and(|m| Arc::ptr_eq(m, lane));
            if own {
                let ep = lane.ep.lock().unwrap_or_else(PoisonError::into_inner);
                ep.flush(*peer, &live).map_err(fi_err)?;
            } else {
                lane.flusher.flush(*peer, &live).map_err(fi_err)?;
            }
        }
        Ok(())
    }
}

impl Lanes for FabricLanes {
    fn put(&self, target: usize, offset: usize, src: &[u8]) -> Option<Result<()>> {
        self.on_lane(target, offset, src.len(), |ep, to, live| {
            match src.is_empty() {
                true => Ok(()),
                false => ep.write(src, to, live),
            }
        })
    }

    fn get(&self, target: usize, offset: usize, dst: &mut [u8]) -> Option<Result<()>> {
        self.on_lane(target, offset, dst.len(), |ep, from, live| {
            match dst.is_empty() {
                true => Ok(()),
                false => ep.read(dst, from, live),
            }
        })
    }

    /// One write with `FI_REMOTE_CQ_DATA`, as `FabricTransport::put_notify` makes it, where
    /// the target's endpoint counts such notifications and the bytes fit one operation.
    fn put_notify(
        &self,
        target: usize,
        offset: usize,
        src: &[u8],
        id: usize,
    ) -> Option<Result<()>> {
        let tag = self.targets.get(target)?.as_ref()?.notify;
        if tag == 0 || src.is_empty() {
            return None;
        }
        let carried = self.on_target(target, |ep, t, peer, live| {
            if !ep.carries(src.len()) {
                return Ok(false);
            }
            let to = t.data.remote(peer, target, offset, src.len())?;
            let data = notice_data(tag, id);
            ep.write_notify(src, to, data, live).map_err(fi_err)?;
            Ok(true)
        })?;
        match carried {
            Ok(false) => None,
            done => Some(done.map(drop)),
        }
    }

    /// The read, then a fetch-add of the counter, as `FabricTransport::amo` makes the window's
    /// signals where the provider's atomics do not leave them in flight (the lane waits for
    /// both).
    fn get_notify(
        &self,
        target: usize,
        offset: usize,
        dst: &mut [u8],
        slot: usize,
    ) -> Option<Result<()>> {
        self.on_target(target, |ep, t, peer, live| {
            let from = t.data.remote(peer, target, offset, dst.len())?;
            let counter = t.ctrl.remote(peer, target, slot, 8)?;
            if !dst.is_empty() {
                ep.read(dst, from, live).map_err(fi_err)?;
            }
            let (one, mut old) = (1u64.to_le_bytes(), [0u8; 8]);
            let (t, op) = (fi::Datatype::U64, fi::AtomicOp::Sum);
            ep.fetch_atomic(t, op, &one, &mut old, counter, live)
                .map_err(fi_err)
        })
    }

    /// As `FabricTransport::path` decides for the window's own accumulate; where it is not on
    /// the NIC, the window's thread makes it, under the target's lock or as a call the target
    /// serves.
    fn runs_on_nic(&self, target: usize, offset: usize, acc: Accumulate) -> bool {
        let Some(Some(t)) = self.targets.get(target) else {
            return false;
        };
        let at = t.lead.wrapping_add(offset as u64);
        let path = path_at(self.native, at, acc.elem, acc.op.kind(), acc.same_op);
        !self.served && path == Path::Native
    }

    fn rmw(&self, target: usize, offset: usize, acc: Accumulate) -> Option<Result<u64>> {
        if !self.runs_on_nic(target, offset, acc) {
            return None;
        }
        let dt = datatype(acc.elem);
        let operand = acc.operand.to_le_bytes();
        let mut old = [0u8; 8];
        self.on_lane(target, offset, acc.elem.size(), |ep, to, live| {
            match acc.op {
                AccOp::CompareSwap { compare } => {
                    let compare = compare.to_le_bytes();
                    ep.compare_swap(dt, &compare, &operand, &mut old, to, live)
                }
                AccOp::Apply(op) => {
                    ep.fetch_atomic(dt, atomic_op(op), &operand, &mut old, to, live)
                }
            }
            .map(|()| u64::from_le_bytes(old))
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
        let (dt, fop) = (datatype(elem), atomic_op(op));
        self.on_lane(
            target,
            offset,
            operands.len(),
            |ep, to, live| match operands.is_empty() {
                true => Ok(()),
                false => ep.fetch_atomic_many(dt, fop, operands, result, to, live),
            },
        )
    }

    fn reaches(&self, target: usize) -> bool {
        self.targets.get(target).is_some_and(Option::is_some)
    }

    fn flush(&self, target: usize) -> Result<()> {
        let Some(Some(t)) = self.targets.get(target) else {
            return Ok(());
        };
        self.flush_lanes(target)?;
        self.window
            .flush(t.peer, &|| self.alive(target))
            .map_err(fi_err)
    }

    /// Every lane's operations to every target, each lane flushed as its own thread would
    /// (the threads are gone): the first failure returns, after every lane was flushed. The
    /// lanes that completed everything go back to be kept; one with a failure is closed.
    fn drain(&self) -> Result<()> {
        let lanes =
            std::mem::take(&mut *self.lanes.write().unwrap_or_else(PoisonError::into_inner));
        let mut first = Ok(());
        for lane in lanes {
            let flushed = {
                let ep = lane.ep.lock().unwrap_or_else(PoisonError::into_inner);
                (0..lane.peers.len())
                    .filter(|&target| self.reaches(target))
                    .map(|target| {
                        let live = || self.alive(target);
                        ep.flush(lane.peers[target], &live).map_err(fi_err)
                    })
                    .find(Result::is_err)
                    .unwrap_or(Ok(()))
            };
            // The threads' caches hold the lane only weakly: this is its last holder.
            match (flushed, Arc::try_unwrap(lane)) {
                (Ok(()), Ok(lane)) => self.kept.idle().push(lane),
                (Err(e), _) => {
                    if first.is_ok() {
                        first = Err(e);
                    }
                }
                (Ok(()), Err(_)) => {}
            }
        }
        park(&self.kept, self.most);
        first
    }
}

/// `kept`'s lanes came back: it goes last in [`PARKED`], and where the idle lanes of all
/// windows are more than `most`, those of the windows first in it are closed (after the
/// process-wide lock is released: closing an endpoint takes a while).
fn park(kept: &Arc<Kept>, most: usize) {
    let (closing, windows): (Vec<Lane>, Vec<Arc<Kept>>) = {
        let mut order = PARKED.lock().unwrap_or_else(PoisonError::into_inner);
        order.retain(|w| w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), Arc::as_ptr(kept)));
        order.push(Arc::downgrade(kept));
        let windows: Vec<Arc<Kept>> = order.iter().filter_map(Weak::upgrade).collect();
        let counts: Vec<usize> = windows.iter().map(|k| k.idle().len()).collect();
        let closing = windows
            .iter()
            .zip(beyond(&counts, most))
            .flat_map(|(k, n)| {
                let mut lanes = k.idle();
                let keep = lanes.len().saturating_sub(n);
                lanes.split_off(keep)
            })
            .collect();
        (closing, windows)
    };
    if !closing.is_empty() {
        tracing::debug!(
            closed = closing.len(),
            "closed idle endpoints of windows shared less recently"
        );
    }
    // The lanes close here, and a window freed meanwhile (whose last holder is `windows`).
    drop((closing, windows));
}

/// How many idle lanes to close of each window, given how many each keeps (`idle`, the window
/// shared least recently first) and the most all may keep: the earliest windows' first, until
/// no more than `most` are left.
fn beyond(idle: &[usize], most: usize) -> Vec<usize> {
    let mut over = idle.iter().sum::<usize>().saturating_sub(most);
    idle.iter()
        .map(|&n| {
            let close = n.min(over);
            over -= close;
            close
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::beyond;

    #[test]
    fn idle_lanes_within_the_most_stay() {
        assert_eq!(beyond(&[], 4), Vec::<usize>::new());
        assert_eq!(beyond(&[2, 2], 4), vec![0, 0]);
        assert_eq!(beyond(&[0, 3, 1], 4), vec![0, 0, 0]);
    }

    #[test]
    fn the_least_recently_shared_windows_lose_theirs_first() {
        assert_eq!(beyond(&[2, 2, 2], 4), vec![2, 0, 0]);
        assert_eq!(beyond(&[1, 2, 4], 4), vec![1, 2, 0]);
        assert_eq!(beyond(&[3, 0, 2, 2], 2), vec![3, 0, 2, 0]);
    }

    #[test]
    fn a_window_beyond_the_most_alone_keeps_the_most() {
        assert_eq!(beyond(&[6], 4), vec![2]);
        assert_eq!(beyond(&[1, 6], 4), vec![1, 2]);
    }
}
