//! A remote region as the fabric's operations address it.

use crate::error::Result;
use crate::transport::outside;
use onesided_fabric as fi;

/// A region of a target's memory: its base address, its key (mapped) and its length.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    pub(super) base: u64,
    pub(super) key: u64,
    pub(super) len: usize,
}

impl Span {
    /// Where `len` bytes at `offset` of this region of `target` are, as `peer` addresses them;
    /// MPI_ERR_RMA_RANGE where they are not inside it.
    pub(super) fn remote(
        &self,
        peer: fi::Peer,
        target: usize,
        offset: usize,
        len: usize,
    ) -> Result<fi::Remote> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(fi::Remote {
                peer,
                addr: self.base + offset as u64,
                key: self.key,
            }),
            _ => Err(outside(target, offset, len, self.len)),
        }
    }
}
