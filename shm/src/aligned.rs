//! Shared mappings that start at an alignment above the page size.
//!
//! A mapping that the kernel places starts on a page, and no safe mapping API places one at a
//! chosen address. A larger alignment (up to [`crate::segment::MAX_ALIGN`]) is had by reserving
//! address space for the mapping plus the alignment, mapping the file over the aligned part of
//! the reservation (`MAP_FIXED`) and returning the rest.

use std::fs::File;
use std::io;
use std::ptr::NonNull;

use rustix::mm::{MapFlags, ProtFlags};

/// `len` bytes of a file mapped shared and read-write (populated where asked), at an address
/// that is a multiple of the alignment asked for. Unmapped on drop.
#[derive(Debug)]
pub(crate) struct AlignedMap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory owned by this handle, which gives no access to the
// bytes; they are reached through `Mem`, whose methods use raw-pointer copies and atomics.
unsafe impl Send for AlignedMap {}
// SAFETY: as above; `&AlignedMap` only yields the address.
unsafe impl Sync for AlignedMap {}

impl AlignedMap {
    /// Maps the first `len` (non-zero) bytes of `file` at a multiple of `align`, a power of two
    /// above the page size; every page at once where `populate`.
    pub(crate) fn new(
        file: &File,
        len: usize,
        align: usize,
        populate: bool,
    ) -> io::Result<AlignedMap> {
        let page = rustix::param::page_size();
        let span = len
            .checked_next_multiple_of(page)
            .and_then(|l| l.checked_add(align))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "segment too large"))?;
        // SAFETY: a fresh private reservation of `span` bytes, inaccessible and backed by
        // nothing; the kernel picks the address, so no existing mapping is affected.
        let reserved = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                span,
                ProtFlags::empty(),
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )
        }?;
        let start = reserved as usize;
        let at = start.next_multiple_of(align);
        let end = at + len.next_multiple_of(page);
        let flags = match populate {
            true => MapFlags::SHARED | MapFlags::FIXED | MapFlags::POPULATE,
            false => MapFlags::SHARED | MapFlags::FIXED,
        };
        // SAFETY: `[at, at + len)` lies inside the reservation made above, which nothing else
        // uses, so MAP_FIXED replaces only address space this function owns.
        let mapped = unsafe {
            rustix::mm::mmap(
                reserved.wrapping_byte_add(at - start),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                flags,
                file,
                0,
            )
        };
        let (head, tail) = match mapped {
            Err(_) => ((start, start + span), (0, 0)),
            Ok(_) => ((start, at), (end, start + span)),
        };
        for (from, to) in [head, tail] {
            if to > from {
                // SAFETY: `[from, to)` is a part of the reservation that holds no mapping of the
                // file: all of it when the file could not be mapped, else the parts before and
                // after it (both on page boundaries).
                let _ = unsafe {
                    rustix::mm::munmap(reserved.wrapping_byte_add(from - start), to - from)
                };
            }
        }
        let ptr =
            NonNull::new(mapped?.cast()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(AlignedMap { ptr, len })
    }

    /// The address of the first mapped byte.
    pub(crate) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }
}

impl Drop for AlignedMap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` is exactly the mapping made in `new` (the rest of the reservation
        // was returned there), and this handle is its only owner; no `Mem` outlives it because
        // every `Mem` over a segment holds an `Arc` of the segment that owns this map.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
