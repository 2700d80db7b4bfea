//! The targets whose data the threads of a shared window ([`Window::share`]) move themselves:
//! where the shared-memory transport maps a target's window memory here and completes every
//! operation to it once issued, a thread's put or get of it is a copy it makes itself, its
//! fetch_and_op, compare_and_swap, accumulate or get_accumulate of aligned elements a CPU
//! atomic per element (where the window's atomics are CPU atomics), its notified put or get the
//! copy and then a CPU addition to the target's counter of the id (the same place), and its
//! flush a memory fence, with no call to the window's thread and no lock shared with the other
//! threads (but the notification counters, eight to a cache line: threads notifying one target
//! with ids that differ by a multiple of 32 share one, `layout::notify_slot`).
//!
//! Only while the window is shared: the epoch cannot change then (a handle makes no epoch
//! calls, and the calls the window's thread serves only take the lock words of targets not
//! loaded here), so whether the epoch covers a target is read once, when sharing starts.
//!
//! The copies are made of atomic words ([`SyncMem`]), so threads that copy into the same bytes
//! at once leave unspecified values there, as MPI says of conflicting accesses, and race as
//! atomics do. Only memory the window allocated (`allocate`, `allocate_shared`) is loaded:
//! memory lent to `create` is accumulated into under the target's lock word by plain copies,
//! which the window's thread makes. (So are accumulates of elements not aligned to their size,
//! at any flavor: one of those racing with a thread's put to the same bytes is a conflicting
//! access, erroneous in MPI, whose copies are not atomic.) A call that fails any check (rank,
//! range, epoch) goes to the window's thread instead, which reports it as the window does.

use super::atomic::{from_bits, one_element};
use super::{AtomicElem, Extent, Flavor, Op, Window};
use crate::protocol::layout;
use crate::protocol::passive::Access;
use crate::transport::AccOp;
use crate::transport::shm::{Word, Words, rmw_run, rmw_word};
use crate::wait;
use onesided_shm::SyncMem;
use std::sync::atomic::{AtomicBool, Ordering, fence};

/// The loaded targets of a shared window.
#[derive(Debug)]
pub(super) struct Loaded<'a> {
    /// Per target: its window memory, where the epoch covers it and threads copy its data.
    views: Vec<Option<SyncMem<'a>>>,
    /// Per loaded target: its window memory, where its aligned elements are CPU atomics.
    elements: Vec<Option<SyncMem<'a>>>,
    /// Per loaded target: its control block, where the window's atomics are CPU atomics
    /// (notifications are additions to its counters).
    blocks: Vec<Option<SyncMem<'static>>>,
    /// The `same_op` hint of the window's accumulates.
    same_op: bool,
    extents: Vec<Extent>,
    /// Per target: loaded, and a passive-target epoch covers it, so a flush of it is a fence.
    fence_flush: Vec<bool>,
    /// Every target is loaded and a passive-target epoch covers them: flush_all is a fence.
    fence_flush_all: bool,
    /// Some thread moved data: a fence epoch has RMA calls to complete.
    moved: AtomicBool,
}

impl<'a> Loaded<'a> {
    /// The loaded targets of `win` in its epoch now.
    pub(super) fn of(win: &Window<'a>) -> Loaded<'a> {
        let epochs = win.epochs.borrow();
        let n = win.size_of_group();
        let views: Vec<Option<SyncMem<'a>>> = (0..n)
            .map(|t| {
                let covered = matches!(epochs.access(t), Ok(Access::Ready));
                let own = matches!(win.flavor, Flavor::Allocate | Flavor::Shared);
                let copied = own && win.direct.fenced(t) && covered;
                win.direct
                    .data(t)
                    .filter(|_| copied)
                    .map(|mem| SyncMem::new(mem.clone()))
            })
            .collect();
        let elements = (0..n)
            .map(|t| {
                let mem = win.direct.elements(t).filter(|_| views[t].is_some());
                mem.map(|mem| SyncMem::new(mem.clone()))
            })
            .collect();
        let blocks = (0..n)
            .map(|t| {
                let block = win.direct.block(t).filter(|_| views[t].is_some());
                block.map(|block| SyncMem::new(block.clone()))
            })
            .collect();
        let fence_flush: Vec<bool> = (0..n)
            .map(|t| views[t].is_some() && epochs.flush(t).is_ok())
            .collect();
        Loaded {
            fence_flush_all: fence_flush.iter().all(|&f| f) && epochs.flush_all().is_ok(),
            fence_flush,
            views,
            elements,
            blocks,
            same_op: win.hints.get().same_op,
            extents: win.extents.clone(),
            moved: AtomicBool::new(false),
        }
    }

    /// Where `len` bytes at displacement `disp` of `target` are, if it is loaded and they are
    /// inside its window.
    #[inline]
    fn place(&self, target: usize, disp: usize, len: usize) -> Option<(&SyncMem<'a>, usize)> {
        let view = self.views.get(target)?.as_ref()?;
        let e = self.extents[target];
        let off = disp.checked_mul(e.disp_unit)?;
        (off.checked_add(len)? <= e.size).then_some((view, off))
    }

    /// Copy `bytes` to displacement `disp` of `target`; `false` (nothing moved) where the
    /// window's thread must make the call.
    #[inline]
    pub(super) fn put(&self, target: usize, disp: usize, bytes: &[u8]) -> bool {
        let Some((view, off)) = self.place(target, disp, bytes.len()) else {
            return false;
        };
        let copied = view.write(off, bytes).is_ok();
        self.note_moved(copied);
        copied
    }

    /// Copy displacement `disp` of `target` into `bytes`; `false` (nothing moved) where the
    /// window's thread must make the call.
    #[inline]
    pub(super) fn get(&self, target: usize, disp: usize, bytes: &mut [u8]) -> bool {
        let Some((view, off)) = self.place(target, disp, bytes.len()) else {
            return false;
        };
        let copied = view.read(off, bytes).is_ok();
        self.note_moved(copied);
        copied
    }

    /// One element's read-modify-write `op` with `operand` at displacement `disp` of `target`
    /// by CPU atomics; its old value, or `None` (nothing done) where the window's thread must
    /// make the call. The caller has checked `op` against the element type.
    #[inline]
    pub(super) fn rmw<T: AtomicElem>(
        &self,
        target: usize,
        disp: usize,
        op: AccOp,
        operand: T,
    ) -> Option<T> {
        let size = T::ELEM.size();
        let (_, off) = self.place(target, disp, size)?;
        let mem = self.elements.get(target)?.as_ref()?;
        if !mem.addr().wrapping_add(off).is_multiple_of(size) {
            return None;
        }
        let word = element(mem, off, size)?;
        let acc = one_element(op, operand, self.same_op);
        let old = rmw_word(word, acc);
        self.note_moved(true);
        Some(from_bits(old))
    }

    /// The accumulate `op` of the elements `operands` at displacement `disp` of `target` by
    /// CPU atomics, each element atomic on its own as the window's are; the old values go to
    /// `result` where given (as long as `operands`). `false` (nothing done) where the window's
    /// thread must make the call. The caller has checked `op` against the element type.
    pub(super) fn accumulate_many<T: AtomicElem>(
        &self,
        target: usize,
        disp: usize,
        op: Op,
        operands: &[T],
        result: Option<&mut [T]>,
    ) -> bool {
        let size = T::ELEM.size();
        let Some(len) = operands.len().checked_mul(size) else {
            return false;
        };
        let Some((_, off)) = self.place(target, disp, len) else {
            return false;
        };
        let Some(mem) = self.elements.get(target).and_then(Option::as_ref) else {
            return false;
        };
        // Every element aligned and inside, checked before the first is changed.
        let n = operands.len();
        let words = match size {
            8 => mem.atomic_u64s(off, n).map(Words::U64),
            _ => mem.atomic_u32s(off, n).map(Words::U32),
        };
        let Ok(words) = words else {
            return false;
        };
        let fetched = result.map(bytemuck::cast_slice_mut);
        rmw_run(words, T::ELEM, op, bytemuck::cast_slice(operands), fetched);
        self.note_moved(true);
        true
    }

    /// [`Loaded::put`], then notification `id` to `target`: an addition to its counter of
    /// `id` behind the copy, which rings the doorbell a waiter may sleep on, as the window's
    /// `put_notify` does over shared memory. `false` (nothing moved) where the window's thread
    /// must make the call.
    pub(super) fn put_notify(&self, target: usize, disp: usize, bytes: &[u8], id: usize) -> bool {
        let Some(counter) = self.counter(target, id) else {
            return false;
        };
        let moved = self.put(target, disp, bytes);
        if moved {
            counter.add(1);
        }
        moved
    }

    /// [`Loaded::get`], then notification `id` to `target`, as [`Loaded::put_notify`].
    pub(super) fn get_notify(
        &self,
        target: usize,
        disp: usize,
        bytes: &mut [u8],
        id: usize,
    ) -> bool {
        let Some(counter) = self.counter(target, id) else {
            return false;
        };
        let moved = self.get(target, disp, bytes);
        if moved {
            counter.add(1);
        }
        moved
    }

    /// `target`'s counter of notification `id` and its doorbell, if a thread adds to it
    /// itself.
    fn counter(&self, target: usize, id: usize) -> Option<wait::Words<'_>> {
        if id >= layout::NOTIFY_IDS {
            return None;
        }
        wait::Words::in_block(self.blocks.get(target)?.as_ref()?, layout::notify_slot(id))
    }

    /// Note that data moved, if `copied`: stored once, read after (a store by every call would
    /// bounce the flag's cache line between the threads' CPUs).
    #[inline]
    fn note_moved(&self, copied: bool) {
        if copied && !self.moved.load(Ordering::Relaxed) {
            self.moved.store(true, Ordering::Relaxed);
        }
    }

    /// Whether `target` is loaded and a passive-target epoch covers it (where request forms
    /// may be called).
    #[inline]
    pub(super) fn passive(&self, target: usize) -> bool {
        self.fence_flush.get(target).copied().unwrap_or(false)
    }

    /// Complete every operation to `target` by a fence, if that is what its flush is; `false`
    /// where the window's thread must flush.
    #[inline]
    pub(super) fn flush(&self, target: usize) -> bool {
        let fenced = self.passive(target);
        if fenced {
            fence(Ordering::SeqCst);
        }
        fenced
    }

    /// Complete every operation by a fence, if that is what flush_all is; `false` where the
    /// window's thread must flush.
    #[inline]
    pub(super) fn flush_all(&self) -> bool {
        if self.fence_flush_all {
            fence(Ordering::SeqCst);
        }
        self.fence_flush_all
    }

    /// Whether some thread moved data.
    pub(super) fn moved(&self) -> bool {
        self.moved.load(Ordering::Relaxed)
    }
}

/// The element of `size` bytes (8 or 4) at `offset` of `mem` as an atomic word, where it is
/// aligned and inside.
#[inline]
fn element<'m>(mem: &'m SyncMem<'_>, offset: usize, size: usize) -> Option<Word<'m>> {
    match size {
        8 => mem.atomic_u64(offset).map(Word::U64).ok(),
        _ => mem.atomic_u32(offset).map(Word::U32).ok(),
    }
}
