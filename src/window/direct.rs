//! The targets this rank reaches by loads and stores, for the calls that need nothing else:
//! a put or get of a target whose window memory the shared-memory transport maps here is a
//! copy, and where the window's atomics are CPU atomics a lock or unlock is one atomic
//! instruction on the target's control word and an atomic of one aligned element
//! (fetch_and_op, compare_and_swap, an accumulate of one element) one on the element. The
//! window holds these mappings itself (taken from the shared-memory transport when it is
//! created), so the common intra-node call is a straight path: no dynamic dispatch, no lookup
//! of where the memory is.
//!
//! Everything else (other transports, memory of another process, attached memory, accumulates
//! of several elements or on memory lent to MPI_Win_create) goes through the window's routes.

use crate::protocol::layout;
use crate::transport::Space;
use crate::transport::shm::cpu_aligned;
use onesided_shm::Mem;
use std::sync::atomic::AtomicU64;

/// Per target: its window memory mapped here, and where the window's atomics are CPU atomics,
/// its control block and the window memory its element atomics reach.
#[derive(Debug)]
pub(super) struct Direct<'a> {
    data: Vec<Option<Mem<'a>>>,
    words: Vec<Option<Mem<'static>>>,
    elements: Vec<Option<Mem<'a>>>,
    /// `fenced[t]`: every operation to `t` is complete once issued (the shared-memory
    /// transport moves its data and its atomics), so completing them is a memory fence. (Kept
    /// rather than derived from the window's routes at each flush: the derived test cost put +
    /// flush 5 more instructions.)
    fenced: Vec<bool>,
    /// Every entry of `fenced` is true.
    all_fenced: bool,
}

impl<'a> Direct<'a> {
    /// `data[t]`: target `t`'s window memory where its data moves by copies into a mapping;
    /// `words[t]`: its control block where its atomics are CPU atomics on a mapping;
    /// `elements[t]`: its window memory where its accumulates of aligned elements are;
    /// `fenced[t]`: whether its operations complete when issued.
    pub(super) fn new(
        data: Vec<Option<Mem<'a>>>,
        words: Vec<Option<Mem<'static>>>,
        elements: Vec<Option<Mem<'a>>>,
        fenced: Vec<bool>,
    ) -> Direct<'a> {
        Direct {
            data,
            words,
            elements,
            all_fenced: fenced.iter().all(|&f| f),
            fenced,
        }
    }

    /// Whether every operation to `target` is complete once issued: a flush of it is a memory
    /// fence.
    #[inline]
    pub(super) fn fenced(&self, target: usize) -> bool {
        self.fenced.get(target).copied().unwrap_or(false)
    }

    /// Whether every operation to every target is complete once issued.
    #[inline]
    pub(super) fn all_fenced(&self) -> bool {
        self.all_fenced
    }

    /// Target `target`'s window memory, where a put or get of it is a copy.
    #[inline]
    pub(super) fn data(&self, target: usize) -> Option<&Mem<'a>> {
        self.data.get(target).and_then(Option::as_ref)
    }

    /// `target`'s control block, where the window's atomics reach its words as CPU atomics.
    #[inline]
    pub(super) fn block(&self, target: usize) -> Option<&Mem<'static>> {
        self.words.get(target)?.as_ref()
    }

    /// `target`'s lock word and its control block, where the window's atomics reach them as
    /// CPU atomics (one lookup for a release, which rings the block's lock doorbell too).
    #[inline]
    pub(super) fn lock(&self, target: usize) -> Option<(&AtomicU64, &Mem<'static>)> {
        let block = self.block(target)?;
        Some((block.atomic_u64(layout::LOCK).ok()?, block))
    }

    /// The 8-byte control word at `offset` of `target`'s control block, where the window's
    /// atomics reach it as a CPU atomic; `None` where they do not (the caller takes the
    /// window's atomic route).
    #[inline]
    pub(super) fn word(&self, target: usize, offset: usize) -> Option<&AtomicU64> {
        self.words.get(target)?.as_ref()?.atomic_u64(offset).ok()
    }

    /// `target`'s window memory where its accumulates of aligned elements are CPU atomics
    /// (mapped, not lent), whatever the element.
    #[inline]
    pub(super) fn elements(&self, target: usize) -> Option<&Mem<'a>> {
        self.elements.get(target)?.as_ref()
    }

    /// The window memory of `target` where an element of `size` bytes at byte `offset` of
    /// `space` is reached as a CPU atomic (mapped, not lent, aligned to its size); `None` where
    /// it is not.
    #[inline]
    pub(super) fn element(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        size: usize,
    ) -> Option<&Mem<'a>> {
        let mem = self.elements.get(target)?.as_ref()?;
        let aligned = cpu_aligned(mem, offset, size);
        (space == Space::Data && aligned).then_some(mem)
    }
}
