//! Memory allocated for RMA (MPI_Alloc_mem): an anonymous shared segment that the owning
//! process uses as ordinary memory, and that the other processes of its node map too while a
//! window of the owner lends it to them ([`crate::Segment::open_fd_of`]).
//!
//! The owner reaches the bytes through slices; another process maps them only while the owner
//! has lent the whole slice to a window (a mutable borrow the window holds until it is freed
//! collectively), so no slice handed out here is alive while another process writes.

use crate::mem::Mem;
use crate::segment::{FileId, Segment};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

/// One block of RMA memory: a mapped memory file, kept open so that node peers can map it.
#[derive(Debug)]
pub struct Block {
    seg: Arc<Segment>,
    file: File,
    id: FileId,
}

impl Block {
    /// `len` zero-filled bytes at a multiple of `align` (a power of two up to
    /// [`crate::segment::MAX_ALIGN`]).
    pub fn new(len: usize, align: usize) -> io::Result<Block> {
        let (seg, file) = Segment::anonymous(len, align)?;
        let id = FileId::of(&file)?;
        Ok(Block {
            seg: Arc::new(seg),
            file,
            id,
        })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.seg.len()
    }

    /// Whether the block has no bytes.
    pub fn is_empty(&self) -> bool {
        self.seg.is_empty()
    }

    /// The descriptor that node peers open through `/proc/<pid>/fd/`.
    pub fn fd(&self) -> i32 {
        self.file.as_raw_fd()
    }

    /// The identity of the block's file, which peers check after opening it.
    pub fn id(&self) -> FileId {
        self.id
    }

    /// A view of the whole block (for registration with a NIC).
    pub fn mem(&self) -> Mem<'static> {
        Mem::from_segment(self.seg.clone())
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        let (ptr, len) = (self.seg.ptr(), self.seg.len());
        // SAFETY: the mapping is `len` bytes, readable, and lives as long as `self.seg`, which
        // `&self` keeps; other processes map it only while the owner has lent the bytes to a
        // window through `as_mut_slice` (module docs), which excludes this shared borrow.
        unsafe { std::slice::from_raw_parts(ptr.as_ptr(), len) }
    }

    /// The bytes, to change or to lend to a window.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let (ptr, len) = (self.seg.ptr(), self.seg.len());
        // SAFETY: as in `as_slice`; `&mut self` makes this the only borrow of the bytes in this
        // process (views from `mem` copy through raw pointers and hold no reference).
        unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "memfd_create and mmap are beyond Miri")]
    fn a_peer_mapping_sees_the_owners_stores() {
        let mut b = Block::new(10_000, 4096).unwrap();
        assert_eq!(b.len(), 10_000);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[9_999] = 42;
        let peer = Segment::open_fd_of(std::process::id(), b.fd(), b.len(), 1, b.id()).unwrap();
        let mut out = [0u8];
        Mem::from_segment(Arc::new(peer))
            .read(9_999, &mut out)
            .unwrap();
        assert_eq!(out, [42]);
        assert_eq!(b.as_slice().as_ptr() as usize % 4096, 0);
    }
}
