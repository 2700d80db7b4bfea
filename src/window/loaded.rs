//! The targets whose data the threads of a shared window ([`Window::share`]) move themselves:
//! where the shared-memory transport maps a target's window memory here and completes every
//! operation to it once issued, a thread's put or get of it is a copy it makes itself, its
//! fetch_and_op, compare_and_swap or accumulate of one aligned element a CPU atomic (where the
//! window's atomics are CPU atomics), and its flush a memory fence, with no call to the
//! window's thread and no lock shared with the other threads.
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
use super::{AtomicElem, Extent, Flavor, Window};
use crate::protocol::passive::Access;
use crate::transport::AccOp;
use crate::transport::shm::{Word, rmw_word};
use onesided_shm::SyncMem;
use std::sync::atomic::{AtomicBool, Ordering, fence};

/// The loaded targets of a shared window.
#[derive(Debug)]
pub(super) struct Loaded<'a> {
    /// Per target: its window memory, where the epoch covers it and threads copy its data.
    views: Vec<Option<SyncMem<'a>>>,
    /// Per loaded target: its window memory, where its aligned elements are CPU atomics.
    elements: Vec<Option<SyncMem<'a>>>,
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
        let fence_flush: Vec<bool> = (0..n)
            .map(|t| views[t].is_some() && epochs.flush(t).is_ok())
            .collect();
        Loaded {
            fence_flush_all: fence_flush.iter().all(|&f| f) && epochs.flush_all().is_ok(),
            fence_flush,
            views,
            elements,
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
        let word = match size {
            8 => Word::U64(mem.atomic_u64(off).ok()?),
            _ => Word::U32(mem.atomic_u32(off).ok()?),
        };
        let acc = one_element(op, operand, self.same_op);
        let old = rmw_word(word, acc);
        self.note_moved(true);
        Some(from_bits(old))
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
