//! Where things live in a window's node segment: one control block per node-local rank, then the
//! ranks' window memory, contiguous in rank order (MPI_Win_allocate_shared's default) or each on
//! its own pages (`alloc_shared_noncontig`, and MPI_Win_allocate).
//!
//! The control block holds the words the synchronization protocols drive with atomics; each word
//! has a cache line to itself.
//!
//! # MPI-4.1: 12.2.3

use crate::protocol::barrier::MAX_ROUNDS;

/// Size of a page, the alignment of window memory.
pub const PAGE: usize = 4096;
/// Size of one rank's control block.
pub const CTRL_BLOCK: usize = PAGE;
const LINE: usize = 64;

/// The lock word ([`crate::protocol::lockword`]).
pub const LOCK: usize = 0;
/// Count of processes asleep on this block's doorbell (32-bit).
pub const SLEEPERS: usize = LINE;
/// The doorbell, a 32-bit futex word bumped to wake sleepers.
pub const DOORBELL: usize = 2 * LINE;
/// The last barrier generation this rank completed: a rank that died after completing the
/// barrier others wait in cannot be what they wait for.
pub const BARRIER_DONE: usize = 3 * LINE;
/// First dissemination-barrier slot; slot `k` is at `BARRIER + k * LINE`.
pub const BARRIER: usize = 4 * LINE;

/// The lock word of the fabric's emulated accumulates (0 free, 1 held), on the block's last line.
pub const ACC_LOCK: usize = CTRL_BLOCK - LINE;

/// The offset of barrier slot `round`.
pub fn barrier_slot(round: usize) -> usize {
    BARRIER + round * LINE
}

const _: () = assert!(BARRIER + MAX_ROUNDS * LINE <= ACC_LOCK);

/// Round `n` up to a multiple of `align` (a power of two).
pub fn align_up(n: usize, align: usize) -> Option<usize> {
    Some(n.checked_add(align - 1)? & !(align - 1))
}

/// Offsets of every node-local rank's control block and window memory in the node segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLayout {
    /// Offset of each local rank's control block.
    pub ctrl: Vec<usize>,
    /// Offset of each local rank's window memory (meaningful where its size is not 0).
    pub data: Vec<usize>,
    /// Total segment length.
    pub total: usize,
}

/// Lay out a node segment for local ranks with window sizes `sizes` (bytes). With `data == false`
/// the window memory lives elsewhere (MPI_Win_create) and only control blocks are placed.
/// `None` when the total overflows.
pub fn node_layout(sizes: &[usize], data: bool, contiguous: bool) -> Option<NodeLayout> {
    let ctrl: Vec<usize> = (0..sizes.len()).map(|i| i * CTRL_BLOCK).collect();
    let mut at = sizes.len() * CTRL_BLOCK;
    let mut offsets = Vec::with_capacity(sizes.len());
    for &size in sizes {
        offsets.push(at);
        if data {
            at = if contiguous {
                at.checked_add(size)?
            } else {
                at.checked_add(align_up(size, PAGE)?)?
            };
        }
    }
    Some(NodeLayout {
        ctrl,
        data: offsets,
        total: align_up(at, PAGE)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_regions_follow_each_other() {
        let l = node_layout(&[10, 0, 7], true, true).unwrap();
        assert_eq!(l.ctrl, vec![0, CTRL_BLOCK, 2 * CTRL_BLOCK]);
        assert_eq!(
            l.data,
            vec![3 * CTRL_BLOCK, 3 * CTRL_BLOCK + 10, 3 * CTRL_BLOCK + 10]
        );
        assert_eq!(l.total, 4 * PAGE);
    }

    #[test]
    fn noncontiguous_regions_start_on_pages() {
        let l = node_layout(&[10, 5000, 1], true, false).unwrap();
        assert_eq!(l.data, vec![3 * PAGE, 4 * PAGE, 6 * PAGE]);
        assert_eq!(l.total, 7 * PAGE);
        assert!(node_layout(&[usize::MAX], true, false).is_none());
    }

    #[test]
    fn control_only() {
        let l = node_layout(&[1 << 30, 8], false, false).unwrap();
        assert_eq!(l.total, 2 * CTRL_BLOCK);
    }
}
