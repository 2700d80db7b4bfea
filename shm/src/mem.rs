//! `Mem`: a bounds-checked view of bytes that other processes may read and write concurrently.
//!
//! A `Mem` behaves like `&[UnsafeCell<u8>]` shared with other processes: it hands out no
//! references to its bytes, only copies in and out and atomic words. Every access checks its
//! range first, so an out-of-range access never touches memory.

use crate::segment::Segment;
use std::alloc::Layout;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};

/// An access outside a `Mem`'s bounds (or misaligned for an atomic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfRange {
    /// Requested byte offset.
    pub offset: usize,
    /// Requested length in bytes.
    pub len: usize,
    /// Length of the view.
    pub limit: usize,
}

#[derive(Debug)]
struct HeapBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: `HeapBuf` only owns the block and frees it on drop; its bytes are accessed through
// `Mem`, which never lends references to them.
unsafe impl Send for HeapBuf {}
// SAFETY: as above; `&HeapBuf` gives no access to the bytes at all.
unsafe impl Sync for HeapBuf {}

impl Drop for HeapBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` was returned by `alloc_zeroed(layout)` and is freed exactly once here.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

#[derive(Debug, Clone)]
enum Owner {
    Segment { _keep: Arc<Segment> },
    Heap { _keep: Arc<HeapBuf> },
    Borrowed,
}

/// A view of `len` bytes: a shared-memory segment, a heap block, or a slice lent by the user.
#[derive(Debug, Clone)]
pub struct Mem<'a> {
    ptr: NonNull<u8>,
    len: usize,
    _owner: Owner,
    _life: PhantomData<&'a mut [u8]>,
}

// SAFETY: the bytes are owned by the segment/heap block kept alive by `_owner`, or lent for 'a;
// moving the view to another thread moves no aliasing `&mut`. `Mem` is deliberately not `Sync`.
unsafe impl Send for Mem<'_> {}

impl Mem<'static> {
    /// The whole mapped segment.
    pub fn from_segment(seg: Arc<Segment>) -> Mem<'static> {
        Mem {
            ptr: seg.ptr(),
            len: seg.len(),
            _owner: Owner::Segment { _keep: seg },
            _life: PhantomData,
        }
    }

    /// A zero-filled heap block of `len` bytes aligned to `align` (a power of two).
    pub fn alloc(len: usize, align: usize) -> Option<Mem<'static>> {
        let layout = Layout::from_size_align(len.max(1), align).ok()?;
        // SAFETY: `layout` has a non-zero size.
        let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })?;
        Some(Mem {
            ptr,
            len,
            _owner: Owner::Heap {
                _keep: Arc::new(HeapBuf { ptr, layout }),
            },
            _life: PhantomData,
        })
    }
}

impl<'a> Mem<'a> {
    /// Lend a slice of the caller's memory for `'a`.
    pub fn from_slice(s: &'a mut [u8]) -> Mem<'a> {
        Mem {
            // A slice's pointer is never null (dangling but aligned when empty).
            ptr: NonNull::from(&mut *s).cast(),
            len: s.len(),
            _owner: Owner::Borrowed,
            _life: PhantomData,
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of the first byte in this process (an identity for keys and CMA, not a pointer
    /// to dereference).
    pub fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    fn check(&self, offset: usize, len: usize) -> Result<(), OutOfRange> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(OutOfRange {
                offset,
                len,
                limit: self.len,
            }),
        }
    }

    /// The sub-view `[offset, offset + len)`.
    pub fn sub(&self, offset: usize, len: usize) -> Result<Mem<'a>, OutOfRange> {
        self.check(offset, len)?;
        Ok(Mem {
            // SAFETY: `offset <= self.len` was checked, so the pointer stays inside the block.
            ptr: unsafe { NonNull::new_unchecked(self.ptr.as_ptr().add(offset)) },
            len,
            _owner: self._owner.clone(),
            _life: PhantomData,
        })
    }

    /// Copy `src` into the view at `offset`.
    #[inline]
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), OutOfRange> {
        self.check(offset, src.len())?;
        // SAFETY: the range is inside the view; `src` is a Rust slice and cannot overlap shared
        // window memory except through another `Mem`, which never lends references.
        unsafe { copy(src.as_ptr(), self.ptr.as_ptr().add(offset), src.len()) };
        Ok(())
    }

    /// Copy bytes at `offset` into `dst`.
    #[inline]
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), OutOfRange> {
        self.check(offset, dst.len())?;
        // SAFETY: the range is inside the view and `dst` is an exclusive Rust slice.
        unsafe { copy(self.ptr.as_ptr().add(offset), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// The `len` bytes at `offset`, copied into a new vector, which is not zero-filled first
    /// (a 32 KiB request served at a target paid a `memset` before its copy).
    pub fn to_vec(&self, offset: usize, len: usize) -> Result<Vec<u8>, OutOfRange> {
        self.check(offset, len)?;
        let mut v = Vec::with_capacity(len);
        // SAFETY: the range is inside the view; `v` has room for `len` bytes, every one of them
        // written before its length is set.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(offset), v.as_mut_ptr(), len);
            v.set_len(len);
        }
        Ok(v)
    }

    /// Copy `len` bytes from `self[src_off..]` to `dst[dst_off..]` (the two may be the same view).
    pub fn copy_to(
        &self,
        src_off: usize,
        dst: &Mem<'_>,
        dst_off: usize,
        len: usize,
    ) -> Result<(), OutOfRange> {
        self.check(src_off, len)?;
        dst.check(dst_off, len)?;
        // SAFETY: both ranges were checked; `copy` allows overlap.
        unsafe {
            std::ptr::copy(
                self.ptr.as_ptr().add(src_off),
                dst.ptr.as_ptr().add(dst_off),
                len,
            )
        };
        Ok(())
    }

    /// The 8-byte atomic word at `offset` (which must be 8-aligned in memory).
    #[inline]
    pub fn atomic_u64(&self, offset: usize) -> Result<&AtomicU64, OutOfRange> {
        let p = self.words(offset, 1, 8)?;
        // SAFETY: in range and aligned (checked by `words`), and the memory lives as long as
        // `self`; all concurrent accessors of these words use atomics.
        Ok(unsafe { AtomicU64::from_ptr(p.cast()) })
    }

    /// The 4-byte atomic word at `offset` (4-aligned), e.g. for futex waits.
    #[inline]
    pub fn atomic_u32(&self, offset: usize) -> Result<&AtomicU32, OutOfRange> {
        let p = self.words(offset, 1, 4)?;
        // SAFETY: in range and aligned (checked by `words`); lives as long as `self`.
        Ok(unsafe { AtomicU32::from_ptr(p.cast()) })
    }

    /// The address of `count` consecutive `size`-byte words from `offset`, which must all be
    /// in range and the first aligned to `size` (so every one is).
    #[inline]
    fn words(&self, offset: usize, count: usize, size: usize) -> Result<*mut u8, OutOfRange> {
        let len = count.checked_mul(size).ok_or(OutOfRange {
            offset,
            len: usize::MAX,
            limit: self.len,
        })?;
        self.check(offset, len)?;
        // SAFETY: `offset + len <= self.len` was checked (`offset <= self.len` even for
        // `len` 0), so the pointer stays inside the block or one past its end.
        let p = unsafe { self.ptr.as_ptr().add(offset) };
        if !(p as usize).is_multiple_of(size) {
            return Err(OutOfRange {
                offset,
                len,
                limit: self.len,
            });
        }
        Ok(p)
    }

    /// The `count` 8-byte atomic words from `offset` (8-aligned in memory), as one slice: a run
    /// of elements checked once.
    #[inline]
    pub fn atomic_u64s(&self, offset: usize, count: usize) -> Result<&[AtomicU64], OutOfRange> {
        let p = self.words(offset, count, 8)?;
        // SAFETY: `count` words in range and aligned (checked by `words`), living as long as
        // `self`; all concurrent accessors of these words use atomics, and `AtomicU64` has the
        // size and alignment of the 8 bytes it covers.
        Ok(unsafe { std::slice::from_raw_parts(p.cast::<AtomicU64>(), count) })
    }

    /// The `count` 4-byte atomic words from `offset` (4-aligned in memory), as one slice.
    #[inline]
    pub fn atomic_u32s(&self, offset: usize, count: usize) -> Result<&[AtomicU32], OutOfRange> {
        let p = self.words(offset, count, 4)?;
        // SAFETY: as in `atomic_u64s`, with 4-byte words.
        Ok(unsafe { std::slice::from_raw_parts(p.cast::<AtomicU32>(), count) })
    }
}

/// A [`Mem`] that threads share: `Sync`, with copies in and out made of atomic accesses
/// (8-byte words where aligned, single bytes at the ends), so that threads copying into and out
/// of the same bytes at once race as atomics do, with unspecified values (MPI's conflicting
/// accesses), never as a data race. The atomics are relaxed: ordering comes from the fences
/// and atomics of whoever completes the copies.
#[derive(Debug, Clone)]
pub struct SyncMem<'a>(Mem<'a>);

// SAFETY: every access through a `SyncMem` is atomic (see `write` and `read`, and the atomic
// words of `atomic_u64`), and it lends no reference to its bytes, so threads may share one.
unsafe impl Sync for SyncMem<'_> {}

impl<'a> SyncMem<'a> {
    /// A view of the bytes of `mem` for threads.
    pub fn new(mem: Mem<'a>) -> SyncMem<'a> {
        SyncMem(mem)
    }

    /// Where `len` bytes at `offset` are: their first byte's address, how many bytes come
    /// before the first 8-aligned one (at most `len`), and how many whole 8-byte words follow.
    fn spans(&self, offset: usize, len: usize) -> Result<(*mut u8, usize, usize), OutOfRange> {
        self.0.check(offset, len)?;
        // SAFETY: the range is inside the view (checked), so is its first byte.
        let base = unsafe { self.0.ptr.as_ptr().add(offset) };
        let head = base.align_offset(8).min(len);
        Ok((base, head, (len - head) / 8))
    }

    /// The byte at address `p` as an atomic.
    ///
    /// # Safety
    /// `p` is inside the view.
    unsafe fn byte(p: *mut u8) -> &'a AtomicU8 {
        // SAFETY: inside the view (the caller's promise), which lives for 'a; a byte is always
        // aligned, and every accessor through a `SyncMem` uses atomics.
        unsafe { AtomicU8::from_ptr(p) }
    }

    /// Copy `src` into the view at `offset`, atomically word by word.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), OutOfRange> {
        // Every address below is inside the range `spans` checked.
        let (base, head, words) = self.spans(offset, src.len())?;
        for (i, &b) in src[..head].iter().enumerate() {
            // SAFETY: `i < head <= src.len()`: inside the range.
            unsafe { Self::byte(base.add(i)) }.store(b, Ordering::Relaxed);
        }
        for w in 0..words {
            let at = head + 8 * w;
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&src[at..at + 8]);
            // SAFETY: `at + 8 <= src.len()`: inside the range, and 8-aligned since `base + head`
            // is; every accessor of these bytes through a `SyncMem` uses atomics.
            let word = unsafe { AtomicU64::from_ptr(base.add(at).cast()) };
            word.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
        }
        for (i, &b) in src.iter().enumerate().skip(head + 8 * words) {
            // SAFETY: `i < src.len()`: inside the range.
            unsafe { Self::byte(base.add(i)) }.store(b, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Copy bytes at `offset` into `dst`, atomically word by word.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), OutOfRange> {
        // Every address below is inside the range `spans` checked.
        let (base, head, words) = self.spans(offset, dst.len())?;
        for (i, b) in dst[..head].iter_mut().enumerate() {
            // SAFETY: `i < head <= dst.len()`: inside the range.
            *b = unsafe { Self::byte(base.add(i)) }.load(Ordering::Relaxed);
        }
        for w in 0..words {
            let at = head + 8 * w;
            // SAFETY: as in `write`.
            let word = unsafe { AtomicU64::from_ptr(base.add(at).cast()) };
            dst[at..at + 8].copy_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
        }
        for (i, b) in dst.iter_mut().enumerate().skip(head + 8 * words) {
            // SAFETY: `i < dst.len()`: inside the range.
            *b = unsafe { Self::byte(base.add(i)) }.load(Ordering::Relaxed);
        }
        Ok(())
    }

    /// The address of the first byte in this process (an identity, as [`Mem::addr`]).
    pub fn addr(&self) -> usize {
        self.0.addr()
    }

    /// The 8-byte atomic word at `offset` (which must be 8-aligned in memory).
    #[inline]
    pub fn atomic_u64(&self, offset: usize) -> Result<&AtomicU64, OutOfRange> {
        self.0.atomic_u64(offset)
    }

    /// The 4-byte atomic word at `offset` (which must be 4-aligned in memory).
    #[inline]
    pub fn atomic_u32(&self, offset: usize) -> Result<&AtomicU32, OutOfRange> {
        self.0.atomic_u32(offset)
    }

    /// The `count` 8-byte atomic words from `offset` (8-aligned in memory).
    #[inline]
    pub fn atomic_u64s(&self, offset: usize, count: usize) -> Result<&[AtomicU64], OutOfRange> {
        self.0.atomic_u64s(offset, count)
    }

    /// The `count` 4-byte atomic words from `offset` (4-aligned in memory).
    #[inline]
    pub fn atomic_u32s(&self, offset: usize, count: usize) -> Result<&[AtomicU32], OutOfRange> {
        self.0.atomic_u32s(offset, count)
    }
}

/// Copy `len` bytes from `src` to `dst`: 8 bytes, the commonest RMA payload, as one load and
/// one store inline, any other length through `memcpy` (whose call cost a get or put of 8
/// bytes 12 of its instructions).
///
/// # Safety
///
/// As [`std::ptr::copy_nonoverlapping`]: `src` readable and `dst` writable for `len` bytes, the
/// two not overlapping.
#[inline(always)]
unsafe fn copy(src: *const u8, dst: *mut u8, len: usize) {
    if len == 8 {
        // SAFETY: the caller's promise, for these 8 bytes.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, 8) }
    } else {
        // SAFETY: the caller's promise.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn out_of_range_touches_nothing() {
        let mut buf = [7u8; 16];
        let m = Mem::from_slice(&mut buf);
        assert!(m.write(12, &[1, 2, 3, 4, 5]).is_err());
        assert!(m.write(usize::MAX, &[1]).is_err());
        m.write(12, &[1, 2, 3, 4]).unwrap();
        let mut out = [0u8; 4];
        assert!(m.read(13, &mut out).is_err());
        m.read(12, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4]);
        assert!(m.to_vec(13, 4).is_err());
        assert!(m.to_vec(usize::MAX, 1).is_err());
        assert_eq!(m.to_vec(10, 6).unwrap(), [7, 7, 1, 2, 3, 4]);
        assert!(m.to_vec(16, 0).unwrap().is_empty());
        drop(m);
        assert_eq!(&buf[..12], &[7u8; 12]);
    }

    #[test]
    fn eight_byte_copies_land_at_any_offset_and_nowhere_else() {
        for offset in 0..=8 {
            let mut buf = [0xeeu8; 16];
            let m = Mem::from_slice(&mut buf);
            m.write(offset, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
            let mut out = [0u8; 8];
            m.read(offset, &mut out).unwrap();
            assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8], "offset {offset}");
            assert!(m.write(offset + 9, &[0; 8]).is_err());
            assert!(m.read(offset + 9, &mut out).is_err());
            drop(m);
            assert!(
                buf[..offset]
                    .iter()
                    .chain(&buf[offset + 8..])
                    .all(|&b| b == 0xee)
            );
        }
    }

    #[test]
    fn heap_atomics_are_aligned() {
        let m = Mem::alloc(64, 64).unwrap();
        m.atomic_u64(8).unwrap().store(5, Ordering::Relaxed);
        assert!(m.atomic_u64(4).is_err());
        assert!(m.atomic_u64(60).is_err());
        let mut out = [0u8; 8];
        m.read(8, &mut out).unwrap();
        assert_eq!(u64::from_ne_bytes(out), 5);
    }

    #[test]
    fn runs_of_atomic_words_are_checked_once_and_whole() {
        let m = Mem::alloc(64, 64).unwrap();
        let run = m.atomic_u64s(8, 7).unwrap();
        assert_eq!(run.len(), 7);
        run[6].store(9, Ordering::Relaxed);
        let mut out = [0u8; 8];
        m.read(56, &mut out).unwrap();
        assert_eq!(u64::from_ne_bytes(out), 9);
        assert!(m.atomic_u64s(8, 8).is_err(), "one word past the end");
        assert!(m.atomic_u64s(4, 2).is_err(), "misaligned");
        assert!(
            m.atomic_u64s(8, usize::MAX).is_err(),
            "a count whose bytes overflow"
        );
        assert!(m.atomic_u64s(64, 0).unwrap().is_empty());
        let words = m.atomic_u32s(4, 15).unwrap();
        words[0].store(3, Ordering::Relaxed);
        assert_eq!(m.atomic_u32(4).unwrap().load(Ordering::Relaxed), 3);
        assert!(m.atomic_u32s(2, 1).is_err());
        assert!(m.atomic_u32s(4, 16).is_err());
        let shared = SyncMem::new(m.clone());
        assert_eq!(
            shared.atomic_u64s(0, 8).unwrap()[7].load(Ordering::Relaxed),
            9
        );
        assert!(shared.atomic_u32s(0, 17).is_err());
    }

    #[test]
    fn copies_between_and_within_views() {
        let a = Mem::alloc(32, 8).unwrap();
        a.write(0, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        a.copy_to(0, &a, 4, 8).unwrap();
        let mut out = [0u8; 12];
        a.read(0, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8]);
        let tail = a.sub(16, 16).unwrap();
        assert_eq!(tail.addr(), a.addr() + 16);
        a.copy_to(4, &tail, 8, 8).unwrap();
        let mut moved = [0u8; 8];
        a.read(24, &mut moved).unwrap();
        assert_eq!(moved, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(a.sub(16, 17).is_err());
        assert!(a.copy_to(30, &tail, 0, 4).is_err());
        assert!(a.copy_to(0, &tail, 14, 4).is_err());
        assert!(tail.atomic_u32(14).is_err());
    }

    #[test]
    fn clones_on_other_threads_share_the_bytes() {
        let m = Mem::alloc(64, 8).unwrap();
        let workers: Vec<_> = (0..2)
            .map(|t| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for i in 0..10u64 {
                        m.atomic_u64(0).unwrap().fetch_add(1, Ordering::Relaxed);
                        m.write(8 + 8 * t, &i.to_ne_bytes()).unwrap();
                    }
                    m.atomic_u32(32 + 4 * t)
                        .unwrap()
                        .store(7, Ordering::Release);
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(m.atomic_u64(0).unwrap().load(Ordering::Relaxed), 20);
        let mut out = [0u8; 16];
        m.read(8, &mut out).unwrap();
        assert_eq!(out, [[9, 0, 0, 0, 0, 0, 0, 0]; 2].concat()[..]);
        for t in 0..2 {
            assert_eq!(m.atomic_u32(32 + 4 * t).unwrap().load(Ordering::Acquire), 7);
        }
    }

    #[test]
    fn sync_mem_copies_any_range_and_refuses_outside() {
        let m = SyncMem::new(Mem::alloc(64, 8).unwrap());
        let src: Vec<u8> = (1..=40).collect();
        for offset in [0, 1, 3, 8, 13] {
            for len in [0, 1, 7, 8, 9, 17, 40] {
                m.write(offset, &src[..len]).unwrap();
                let mut back = vec![0u8; len];
                m.read(offset, &mut back).unwrap();
                assert_eq!(back, src[..len], "offset {offset}, len {len}");
            }
        }
        assert!(m.write(60, &[0; 5]).is_err());
        assert!(m.read(64, &mut [0; 1]).is_err());
        let mut all = [0u8; 64];
        m.read(0, &mut all).unwrap();
        assert_eq!(all[13..53], src[..40]);
    }

    #[test]
    fn sync_mem_is_shared_by_threads() {
        let m = SyncMem::new(Mem::alloc(8 * 16, 8).unwrap());
        std::thread::scope(|s| {
            for t in 0..16usize {
                let m = &m;
                s.spawn(move || {
                    m.write(8 * t, &(t as u64 + 1).to_ne_bytes()).unwrap();
                    m.atomic_u64(0).unwrap().fetch_add(0, Ordering::Relaxed);
                });
            }
        });
        for t in 0..16usize {
            let mut word = [0u8; 8];
            m.read(8 * t, &mut word).unwrap();
            assert_eq!(u64::from_ne_bytes(word), t as u64 + 1);
        }
    }
}
