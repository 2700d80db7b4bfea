//! The targets the threads of a shared window ([`Window::share`]) reach over the network
//! through endpoints of their own (lanes, where the target's transport has them: the fabric's,
//! and direct verbs' where the world is MPI_THREAD_MULTIPLE),
//! with no call to the window's thread: a thread's put and get of such a target go through its
//! lane, as do its notified puts (where the write can carry the notification) and gets (the
//! read, then an atomic addition to the target's counter), its fetch_and_op, compare_and_swap
//! and accumulates (fetching or not, of one element or several) where the window runs
//! accumulates of their kind on the NIC (so that the lane's are atomic with the window's), and
//! its flush completes what every lane and the window's thread issued to the target.
//!
//! Like the loaded targets (`loaded.rs`), read once when sharing starts: a target is wired when
//! an epoch covers it (fence, PSCW or passive target), its data and its atomics take the same
//! transport, and the window is not dynamic (attached memory is found through its owner's
//! table, which the window's thread keeps). Where the lanes' flush does not complete what the
//! window's thread issued (direct verbs: its endpoint is that thread's alone), a flush also has
//! the window's thread flush the target, if it ran a call for the threads since it last did
//! (or sharing began). Flushes and request forms go through the lanes only
//! in a passive-target epoch (in the others the window's thread reports MPI_ERR_RMA_SYNC); an
//! active-target epoch is closed by a fence or complete after sharing ends, and its end
//! completes every lane's operations first. A lock_all takes a network target's lock word at
//! the first call to it: the first thread to call such a target has the window's thread take
//! it first (one call to that thread per target), then goes through its lane like the others.
//! A call that fails a check here (range) goes to the window's thread, which reports it as the
//! window does.

use super::atomic::{from_bits, one_element};
use super::{AtomicElem, Extent, Flavor, Op, Window};
use crate::error::Result;
use crate::protocol::layout;
use crate::protocol::passive::Access;
use crate::transport::{AccOp, Accumulate, Lanes};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The wired targets of a shared window.
#[derive(Debug)]
pub(super) struct Wired {
    lanes: Option<Box<dyn Lanes>>,
    extents: Vec<Extent>,
    /// Per target: the epoch covers it now (a lazy lock_all has taken its lock word).
    covered: Vec<AtomicBool>,
    /// Per target: a passive-target epoch covers it (flushes and request forms allowed).
    passive: Vec<bool>,
    /// Some thread made a call through a lane: a fence epoch has RMA calls to complete.
    moved: AtomicBool,
    /// The `same_op` hint of the window's accumulates.
    same_op: bool,
    /// Where the lanes' flush does not complete what the window's thread issued
    /// ([`Lanes::covers_window`]): how many calls the window's thread ran for the threads, from
    /// 1, counted before each replies ([`Wired::ran_one`]).
    ran: AtomicU64,
    /// Per target: [`Wired::ran`] when the window's thread last flushed it for a thread's
    /// flush; 0 before, so that the first flush covers what the window issued before sharing.
    flushed: Vec<AtomicU64>,
}

impl Wired {
    /// The wired targets of `win` in its epoch now.
    pub(super) fn of(win: &Window<'_>) -> Wired {
        let none = || Wired {
            lanes: None,
            extents: Vec::new(),
            covered: Vec::new(),
            passive: Vec::new(),
            moved: AtomicBool::new(false),
            same_op: false,
            ran: AtomicU64::new(1),
            flushed: Vec::new(),
        };
        if win.flavor == Flavor::Dynamic {
            return none();
        }
        let epochs = win.epochs.borrow();
        let n = win.size_of_group();
        let wanted: Vec<bool> = (0..n)
            .map(|t| {
                !win.direct.fenced(t) && win.routes[t] == win.atomics && epochs.access(t).is_ok()
            })
            .collect();
        let Some(first) = (0..n).find(|&t| wanted[t]) else {
            return none();
        };
        // The targets of the first such target's transport (a window's network targets take
        // one).
        let route = win.routes[first];
        let wired: Vec<bool> = (0..n)
            .map(|t| wanted[t] && win.routes[t] == route)
            .collect();
        Wired {
            lanes: win.transports[route].lanes(&wired),
            extents: win.extents.clone(),
            covered: (0..n)
                .map(|t| AtomicBool::new(matches!(epochs.access(t), Ok(Access::Ready))))
                .collect(),
            passive: (0..n).map(|t| epochs.flush(t).is_ok()).collect(),
            moved: AtomicBool::new(false),
            same_op: win.hints.get().same_op,
            ran: AtomicU64::new(1),
            flushed: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Make `call` with the lanes and the offset of the `len` bytes at displacement `disp` of
    /// `target`, if it is wired and they are inside its window; `enter` has the window's thread
    /// take the target's lock word where the epoch does not cover it yet (its failure is the
    /// call's). `None` (nothing done) where the window's thread must make the call, as `call`
    /// may say too.
    #[inline]
    fn place<R>(
        &self,
        target: usize,
        disp: usize,
        len: usize,
        enter: impl FnOnce() -> Result<()>,
        call: impl FnOnce(&dyn Lanes, usize) -> Option<Result<R>>,
    ) -> Option<Result<R>> {
        let lanes = self.lanes.as_deref().filter(|l| l.reaches(target))?;
        let e = self.extents.get(target)?;
        let off = disp.checked_mul(e.disp_unit)?;
        if off.checked_add(len)? > e.size {
            return None;
        }
        let covered = &self.covered[target];
        if !covered.load(Ordering::Acquire) {
            if let Err(e) = enter() {
                return Some(Err(e));
            }
            covered.store(true, Ordering::Release);
        }
        // Stored once, read after: a store by every call would bounce the line between threads.
        if !self.moved.load(Ordering::Relaxed) {
            self.moved.store(true, Ordering::Relaxed);
        }
        call(lanes, off)
    }

    /// Put `bytes` at displacement `disp` of `target` through this thread's lane (`enter` as
    /// in [`Wired::place`]); `None` (nothing moved) where the window's thread must make the
    /// call.
    #[inline]
    pub(super) fn put(
        &self,
        target: usize,
        disp: usize,
        bytes: &[u8],
        enter: impl FnOnce() -> Result<()>,
    ) -> Option<Result<()>> {
        self.place(target, disp, bytes.len(), enter, |lanes, off| {
            lanes.put(target, off, bytes)
        })
    }

    /// Get displacement `disp` of `target` into `bytes` through this thread's lane, as
    /// [`Wired::put`].
    #[inline]
    pub(super) fn get(
        &self,
        target: usize,
        disp: usize,
        bytes: &mut [u8],
        enter: impl FnOnce() -> Result<()>,
    ) -> Option<Result<()>> {
        self.place(target, disp, bytes.len(), enter, |lanes, off| {
            lanes.get(target, off, bytes)
        })
    }

    /// [`Wired::put`] in one write that carries notification `id`; `None` (nothing moved) also
    /// where the lane cannot carry it, and for an id past [`layout::NOTIFY_IDS`] (which the
    /// window's thread refuses).
    pub(super) fn put_notify(
        &self,
        target: usize,
        disp: usize,
        bytes: &[u8],
        id: usize,
        enter: impl FnOnce() -> Result<()>,
    ) -> Option<Result<()>> {
        if id >= layout::NOTIFY_IDS {
            return None;
        }
        self.place(target, disp, bytes.len(), enter, |lanes, off| {
            lanes.put_notify(target, off, bytes, id)
        })
    }

    /// [`Wired::get`], then notification `id` to `target` once the data was read, both through
    /// this thread's lane; `None` as [`Wired::put_notify`].
    pub(super) fn get_notify(
        &self,
        target: usize,
        disp: usize,
        bytes: &mut [u8],
        id: usize,
        enter: impl FnOnce() -> Result<()>,
    ) -> Option<Result<()>> {
        if id >= layout::NOTIFY_IDS {
            return None;
        }
        let slot = layout::notify_slot(id);
        self.place(target, disp, bytes.len(), enter, |lanes, off| {
            lanes.get_notify(target, off, bytes, slot)
        })
    }

    /// One element's read-modify-write `op` with `operand` at displacement `disp` of `target`
    /// through this thread's lane, where the window runs it on the NIC (`enter` as in
    /// [`Wired::place`]); its old value, or `None` (nothing done) where the window's thread
    /// must make the call. The caller has checked `op` against the element type.
    #[inline]
    pub(super) fn rmw<T: AtomicElem>(
        &self,
        target: usize,
        disp: usize,
        op: AccOp,
        operand: T,
        enter: impl FnOnce() -> Result<()>,
    ) -> Option<Result<T>> {
        let acc = one_element(op, operand, self.same_op);
        if !self.on_nic(target, disp, acc) {
            return None;
        }
        self.place(target, disp, T::ELEM.size(), enter, |lanes, off| {
            lanes.rmw(target, off, acc).map(|old| old.map(from_bits))
        })
    }

    /// The accumulate `op` of the elements `operands` at displacement `disp` of `target`
    /// through this thread's lane, where the window runs accumulates of their kind there on
    /// the NIC (`enter` as in [`Wired::place`]), each element atomic on its own; the old values
    /// go to `result`, as long as `operands`, or where it is `None` to a buffer of this call
    /// (a lane's atomics fetch). `None` (nothing done) where the window's thread must make the
    /// call. The caller has checked `op` against the element type.
    pub(super) fn accumulate_many<T: AtomicElem>(
        &self,
        target: usize,
        disp: usize,
        op: Op,
        operands: &[T],
        result: Option<&mut [T]>,
        enter: impl FnOnce() -> Result<()>,
    ) -> Option<Result<()>> {
        // The first element's place decides for all: they follow it, each as aligned.
        let first = one_element(AccOp::Apply(op), *operands.first()?, self.same_op);
        if !self.on_nic(target, disp, first) {
            return None;
        }
        let mut scratch = Vec::new();
        let result = match result {
            Some(r) => r,
            None => {
                scratch.resize(operands.len(), T::zeroed());
                &mut scratch[..]
            }
        };
        let bytes: &[u8] = bytemuck::cast_slice(operands);
        let old: &mut [u8] = bytemuck::cast_slice_mut(result);
        self.place(target, disp, bytes.len(), enter, |lanes, off| {
            lanes.accumulate_many(target, off, T::ELEM, op, bytes, old)
        })
    }

    /// Whether this thread's lane may run `acc` at displacement `disp` of `target`: the
    /// target is wired and the window runs that accumulate there on the NIC. Asked before the
    /// lock word is taken: a call the lane will not make goes to the window's thread whole.
    fn on_nic(&self, target: usize, disp: usize, acc: Accumulate) -> bool {
        let Some(lanes) = self.lanes.as_deref().filter(|l| l.reaches(target)) else {
            return false;
        };
        let Some(e) = self.extents.get(target) else {
            return false;
        };
        disp.checked_mul(e.disp_unit)
            .is_some_and(|off| lanes.runs_on_nic(target, off, acc))
    }

    /// Whether `target` is wired and a passive-target epoch covers it: its flushes and request
    /// forms go through the lanes.
    #[inline]
    pub(super) fn passive(&self, target: usize) -> bool {
        self.passive.get(target).copied().unwrap_or(false)
            && self.lanes.as_deref().is_some_and(|l| l.reaches(target))
    }

    /// Complete every operation this process issued to `target`, if it is wired and a
    /// passive-target epoch covers it: the lanes', and where they do not cover the window's
    /// thread and it ran calls since it last flushed `target`, its own by `window` (which has
    /// it flush and call [`Wired::flushed_here`]). `None` where the window's thread must flush
    /// (or report the flush outside such an epoch).
    pub(super) fn flush(
        &self,
        target: usize,
        window: impl FnOnce() -> Result<()>,
    ) -> Option<Result<()>> {
        let lanes = self.lanes.as_deref().filter(|_| self.passive(target))?;
        let done = lanes.flush(target);
        if lanes.covers_window() {
            return Some(done);
        }
        let ran = self.ran.load(Ordering::Acquire);
        let behind = self.flushed[target].load(Ordering::Acquire) < ran;
        Some(done.and(if behind { window() } else { Ok(()) }))
    }

    /// Whether the window's thread counts the calls it runs for the threads
    /// ([`Wired::ran_one`]): the lanes' flush does not complete them.
    pub(super) fn counts_calls(&self) -> bool {
        self.lanes.as_deref().is_some_and(|l| !l.covers_window())
    }

    /// The window's thread ran a call for a thread (before it replies).
    pub(super) fn ran_one(&self) {
        self.ran.fetch_add(1, Ordering::Release);
    }

    /// The window's thread flushed `target` for a thread: every call it ran before is complete
    /// there.
    pub(super) fn flushed_here(&self, target: usize) {
        if let Some(f) = self.flushed.get(target) {
            f.store(self.ran.load(Ordering::Acquire), Ordering::Release);
        }
    }

    /// Whether a thread made a call through a lane.
    pub(super) fn moved(&self) -> bool {
        self.moved.load(Ordering::Relaxed)
    }

    /// Complete every operation of every lane and close them (sharing ends).
    pub(super) fn drain(&self) -> Result<()> {
        self.lanes.as_deref().map_or(Ok(()), Lanes::drain)
    }
}
