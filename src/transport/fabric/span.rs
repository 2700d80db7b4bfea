//! A remote region as the fabric's operations address it.

/// A region of a target's memory: its base address, its key (mapped) and its length.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    pub(super) base: u64,
    pub(super) key: u64,
    pub(super) len: usize,
}
