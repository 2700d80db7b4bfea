//! Benchmark buffers as OSU allocates them: starting on a page (`posix_memalign` with
//! `getpagesize()`) and filled before the clock starts (`memset`), so that every page is
//! touched and none reads as the kernel's shared zero page.
//!
//! The alignment is part of what is measured: a transfer between a page-aligned window and a
//! buffer 16 bytes off a page (where the allocator puts a large `Vec`) copies across
//! misaligned cache lines. Over libfabric's shm provider, whose large transfers are one
//! `process_vm_readv`, that took `get_bw` at 1 MiB from 4.6–5.6 GB/s to 3.0–4.0 on this
//! project's 2-core machine.

use std::ops::{Deref, DerefMut};

/// `len` elements starting on a page, all set to one value. Dereferences to the slice.
pub(super) struct Pages<T> {
    storage: Vec<T>,
    start: usize,
    len: usize,
}

impl<T: Copy> Pages<T> {
    /// `len` copies of `value`, the first on a page boundary.
    pub(super) fn filled(len: usize, value: T) -> Pages<T> {
        let page = rustix::param::page_size();
        let spare = page.div_ceil(size_of::<T>().max(1));
        let storage = vec![value; len + spare];
        // In elements; usize::MAX where no offset reaches a page (an element size that does
        // not divide it), and then the buffer starts where the allocator put it.
        let start = match storage.as_ptr().align_offset(page) {
            s if s <= spare => s,
            _ => 0,
        };
        Pages {
            storage,
            start,
            len,
        }
    }
}

impl<T> Deref for Pages<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.storage[self.start..self.start + self.len]
    }
}

impl<T> DerefMut for Pages<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_on_a_page_and_holds_the_value() {
        let page = rustix::param::page_size();
        for len in [0, 1, 4095, 1 << 20] {
            let bytes = Pages::filled(len, 0x5au8);
            assert_eq!(bytes.len(), len);
            assert_eq!(bytes.as_ptr() as usize % page, 0, "{len} bytes");
            assert!(bytes.iter().all(|&b| b == 0x5a));
        }
        let mut words = Pages::filled(3, 7u64);
        assert_eq!(words.as_ptr() as usize % page, 0);
        words[2] = 9;
        assert_eq!(&words[..], &[7, 7, 9]);
    }
}
