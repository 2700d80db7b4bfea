//! A peer of an endpoint, as its operations and calls address it.

use crate::sys;

/// A peer of this endpoint: its address in the address vector, and its number in the
/// endpoint's completion bookkeeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub(crate) addr: sys::fi_addr_t,
    pub(crate) index: u32,
}
