//! Where in a peer's memory an operation goes ([`Remote`]), and the remote range of one.

use crate::peer::Peer;
use crate::sys;

/// Where in a peer's memory an operation goes.
#[derive(Debug, Clone, Copy)]
pub struct Remote {
    /// The peer.
    pub peer: Peer,
    /// The address in the peer's addressing (virtual address or offset, by MR mode).
    pub addr: u64,
    /// The key of the peer's region.
    pub key: u64,
}

impl Remote {
    /// The place `offset` bytes further in the same region.
    pub(crate) fn at(self, offset: usize) -> Remote {
        Remote {
            addr: self.addr + offset as u64,
            ..self
        }
    }
}

/// The remote range of `len` bytes at `at`.
pub(crate) fn range(at: Remote, len: usize) -> sys::fi_rma_iov {
    sys::fi_rma_iov {
        addr: at.addr,
        len,
        key: at.key,
    }
}
