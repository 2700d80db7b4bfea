//! A remote region as the direct verbs transport's operations address it.

use onesided_verbs as ib;

/// A region of a peer's memory: its address, its remote key and its length.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    pub(super) addr: u64,
    pub(super) rkey: u32,
    pub(super) len: usize,
}

impl Span {
    /// The region `k` addresses, `len` bytes long.
    pub(super) fn of(k: ib::RegionKey, len: usize) -> Span {
        Span {
            addr: k.addr,
            rkey: k.rkey,
            len,
        }
    }

    /// Where `offset` of it is, as an operation addresses it (the caller checked the range).
    pub(super) fn at(self, offset: usize) -> ib::Remote {
        let start = ib::Remote {
            addr: self.addr,
            rkey: self.rkey,
        };
        start.shifted(offset)
    }
}
