//! Where things live in a window's node segment: one control block per node-local rank, then the
//! ranks' window memory, contiguous in rank order (MPI_Win_allocate_shared's default) or each on
//! its own pages (`alloc_shared_noncontig`, and MPI_Win_allocate). A rank may ask for a larger
//! alignment (`mpi_minimum_memory_alignment`): its memory then starts on a multiple of it, or,
//! in contiguous memory, the memory of the first rank with a size does.
//!
//! The control block holds the words the synchronization protocols drive with atomics; each word
//! has a cache line to itself.
//!
//! # MPI-4.1: 12.2.2, 12.2.3 (alignment of contiguous and noncontiguous shared memory)

use crate::protocol::barrier::MAX_ROUNDS;

/// Size of a page, the alignment of window memory.
pub const PAGE: usize = 4096;
/// Size of the fixed part of a rank's control block; the post counters follow it
/// ([`ctrl_block`]).
pub const CTRL_BLOCK: usize = PAGE;
const LINE: usize = 64;

/// The lock word ([`crate::protocol::lockword`]).
pub const LOCK: usize = 0;
/// Count of processes asleep until the lock word is released (32-bit), on the lock word's line,
/// so that a release that finds nobody asleep reads no other line.
pub const LOCK_SLEEPERS: usize = LOCK + 8;
/// The lock's doorbell, a 32-bit futex word bumped by a release that finds sleepers.
pub const LOCK_BELL: usize = LOCK + 12;
/// Count of processes asleep on this block's doorbell (32-bit).
pub const SLEEPERS: usize = LINE;
/// The doorbell, a 32-bit futex word bumped to wake sleepers.
pub const DOORBELL: usize = 2 * LINE;
/// The last barrier generation this rank completed: a rank that died after completing the
/// barrier others wait in cannot be what they wait for.
pub const BARRIER_DONE: usize = 3 * LINE;
/// First dissemination-barrier slot; slot `k` is at `BARRIER + k * LINE`.
pub const BARRIER: usize = 4 * LINE;

/// The lock word of emulated accumulates (0 free, 1 held), on the block's last line: the fabric's
/// for element types its NIC does not run, and every transport's for elements not aligned in
/// memory or not mapped (another process's MPI_Win_create memory over shared memory).
pub const ACC_LOCK: usize = CTRL_BLOCK - LINE;

/// The offset of barrier slot `round`.
pub fn barrier_slot(round: usize) -> usize {
    BARRIER + round * LINE
}

/// Set by the rank before this one (in rank order, wrapping) when it frees the window, to the
/// number of fence barriers it completed plus one: a fence barrier beyond that number can
/// never complete, and waiting in it is an error instead of a hang.
pub const FREED_AT: usize = BARRIER + MAX_ROUNDS * LINE;

/// Bumped by each origin of this rank's exposure epoch when it completes its access epoch
/// (MPI_Win_complete); MPI_Win_wait waits for as many as the epoch's group has origins.
pub const COMPLETES: usize = FREED_AT + LINE;

/// The counter of the first notification id ([`notify_slot`]), after the completion counter.
pub const NOTIFY: usize = COMPLETES + LINE;

/// How many notification ids a window has: what the fixed part holds before the accumulate
/// lock.
pub const NOTIFY_IDS: usize = 256;

const _: () = assert!(NOTIFY + 8 * NOTIFY_IDS <= ACC_LOCK);

/// The cache lines the notification counters take, eight counters to a line.
const NOTIFY_LINES: usize = 8 * NOTIFY_IDS / LINE;

/// The counter of notification `id` (below [`NOTIFY_IDS`]): every notified put or get with
/// that id to this rank adds 1 to it once its data is there (or that of the transport that
/// carried it, `transport/notices.rs`), and the rank's waits for notifications read it. The
/// counters share cache lines (a line each would take four more pages per rank per window),
/// but ids are dealt to the lines in turn: ids 0 to 31 sit on lines of their own, so that the
/// threads of a rank notifying with neighbouring ids do not pass one line between their CPUs
/// (id 32 shares id 0's line, and so on).
pub fn notify_slot(id: usize) -> usize {
    NOTIFY + LINE * (id % NOTIFY_LINES) + 8 * (id / NOTIFY_LINES)
}

/// First post counter, after the fixed part: the counter of target `t` ([`posted_slot`])
/// counts the exposure epochs `t` opened to this rank (MPI_Win_post), which its access epochs
/// (MPI_Win_start) wait for.
pub const POSTS: usize = CTRL_BLOCK;

/// The offset of the post counter of target `target`.
pub fn posted_slot(target: usize) -> usize {
    POSTS + 8 * target
}

/// Bytes of `words` words per rank, in whole pages.
fn per_rank(n: usize, words: usize) -> usize {
    (8 * words * n).div_ceil(PAGE) * PAGE
}

/// The sleep notice of target `target`, after the post counters and on their pages, in a
/// window of `n` ranks: nonzero while `target` sleeps on its completion channel in a wait for a
/// signal (direct verbs), which it writes into the control block of every rank of the window
/// before it sleeps and clears when it wakes. An origin that signals `target` follows the
/// signal with a wake only while the notice is set: a load, and no second operation for a
/// target that does not sleep.
#[cfg(any(have_ibverbs, test))]
pub fn asleep_slot(n: usize, target: usize) -> usize {
    POSTS + 8 * n + 8 * target
}

/// The detach notice of target `target`, after the post counters and sleep notices, in a
/// window of `n` ranks: the generation of `target`'s attach table when it last detached
/// memory, which `target` writes into the control block of every origin that reaches it
/// without loads before its detach returns. Such an origin compares it with its copy of the
/// table before each access to `target`'s attached memory: a load, not a round trip
/// ([`crate::protocol::attach`]).
pub fn notice_slot(n: usize, target: usize) -> usize {
    POSTS + per_rank(n, 2) + 8 * target
}

/// Size of a rank's control block in a window of `n` ranks: the fixed part, a post counter and
/// a sleep notice per rank, a detach notice per rank, each of the two arrays in whole pages,
/// and a page for the attach table of dynamic windows ([`crate::protocol::attach`]).
pub fn ctrl_block(n: usize) -> usize {
    CTRL_BLOCK + per_rank(n, 2) + per_rank(n, 1) + PAGE
}

/// Whether an atomic on the control word at `offset` must ring the block's doorbell: only the
/// words a rank sleeps on ([`crate::wait::until`]: the barrier slots) or checks when it wakes
/// ([`FREED_AT`]), the counters of post/start/complete/wait ([`COMPLETES`], [`POSTS`]) and
/// the notification counters ([`notify_slot`]).
/// Lock words are retried by their waiters, never slept on, so a lock or an
/// unlock never wakes a target asleep in the library.
pub fn rings_doorbell(offset: usize) -> bool {
    (BARRIER..NOTIFY + 8 * NOTIFY_IDS).contains(&offset) || offset >= POSTS
}

/// The offset of the `len` bytes at `addr` in the region of `size` bytes at `start`, where
/// they lie inside it (attached memory, alloc_mem blocks, their NIC registrations).
pub fn offset_in(start: u64, size: u64, addr: u64, len: u64) -> Option<u64> {
    let off = addr.checked_sub(start)?;
    (off.checked_add(len)? <= size).then_some(off)
}

/// Round `n` up to a multiple of `align` (a power of two).
pub fn align_up(n: usize, align: usize) -> Option<usize> {
    Some(n.checked_add(align - 1)? & !(align - 1))
}

/// One node-local rank's window memory, as the layout places it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// Size in bytes.
    pub size: usize,
    /// The alignment its first byte needs (a power of two; page alignment is always given).
    pub align: usize,
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
    /// The alignment the segment's mapping needs in every process, so that the offsets above
    /// give aligned addresses.
    pub align: usize,
}

/// Lay out a node segment for local ranks whose window memory is `regions`, in a window of `n`
/// ranks (the size of the control blocks, [`ctrl_block`]). With
/// `data == false` the window memory lives elsewhere (MPI_Win_create) and only control blocks
/// are placed. Contiguous memory starts on the largest alignment asked for by a rank with a size
/// (so the first such rank's does); otherwise each rank with a size starts on its own alignment
/// and on a page. `None` when the total overflows.
pub fn node_layout(
    regions: &[Region],
    n: usize,
    data: bool,
    contiguous: bool,
) -> Option<NodeLayout> {
    let block = ctrl_block(n);
    let ctrl: Vec<usize> = (0..regions.len()).map(|i| i * block).collect();
    let mut at = regions.len().checked_mul(block)?;
    let mut align = PAGE;
    if data {
        align = regions
            .iter()
            .filter(|r| r.size > 0)
            .fold(PAGE, |a, r| a.max(r.align));
        if contiguous {
            at = align_up(at, align)?;
        }
    }
    let mut offsets = Vec::with_capacity(regions.len());
    for r in regions {
        if data && !contiguous && r.size > 0 {
            at = align_up(at, r.align.max(PAGE))?;
        }
        offsets.push(at);
        if data {
            at = at.checked_add(r.size)?;
        }
    }
    Some(NodeLayout {
        ctrl,
        data: offsets,
        total: align_up(at, PAGE)?,
        align,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paged(sizes: &[usize]) -> Vec<Region> {
        sizes
            .iter()
            .map(|&size| Region { size, align: 1 })
            .collect()
    }

    #[test]
    fn contiguous_regions_follow_each_other() {
        let l = node_layout(&paged(&[10, 0, 7]), 3, true, true).unwrap();
        let b = ctrl_block(3);
        assert_eq!(l.ctrl, vec![0, b, 2 * b]);
        assert_eq!(l.data, vec![3 * b, 3 * b + 10, 3 * b + 10]);
        assert_eq!((l.total, l.align), (3 * b + PAGE, PAGE));
    }

    #[test]
    fn noncontiguous_regions_start_on_pages() {
        let l = node_layout(&paged(&[10, 5000, 1]), 3, true, false).unwrap();
        let b = ctrl_block(3);
        assert_eq!(l.data, vec![3 * b, 3 * b + PAGE, 3 * b + 3 * PAGE]);
        assert_eq!(l.total, 3 * b + 4 * PAGE);
        assert!(node_layout(&paged(&[usize::MAX]), 1, true, false).is_none());
    }

    #[test]
    fn control_only() {
        let l = node_layout(&paged(&[1 << 30, 8]), 2, false, false).unwrap();
        assert_eq!((l.total, l.align), (2 * ctrl_block(2), PAGE));
    }

    #[test]
    fn control_blocks_hold_a_post_counter_and_two_notices_per_rank() {
        assert_eq!(ctrl_block(1), 4 * PAGE);
        assert_eq!(ctrl_block(256), 4 * PAGE);
        assert_eq!(ctrl_block(257), 5 * PAGE);
        assert_eq!(ctrl_block(513), 7 * PAGE);
        for n in [1, 2, 256, 257, 512, 513, 4096] {
            assert!(posted_slot(n - 1) + 8 <= asleep_slot(n, 0));
            assert!(asleep_slot(n, n - 1) + 8 <= notice_slot(n, 0));
            assert!(notice_slot(n, n - 1) + 8 + PAGE <= ctrl_block(n));
            assert!(posted_slot(0) >= ACC_LOCK + LINE);
        }
    }

    #[test]
    fn notification_counters_sit_between_the_completions_and_the_accumulate_lock() {
        assert_eq!(NOTIFY % LINE, 0);
        let slots: Vec<usize> = (0..NOTIFY_IDS).map(notify_slot).collect();
        assert!(
            slots
                .iter()
                .all(|&s| s >= COMPLETES + LINE && s + 8 <= ACC_LOCK)
        );
        assert!(slots.iter().all(|&s| s % 8 == 0));
        // Every id has a word of its own, and the first 32 a line of their own.
        let mut sorted = slots.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), NOTIFY_IDS);
        assert_eq!(*sorted.last().unwrap() - sorted[0], 8 * (NOTIFY_IDS - 1));
        let mut lines: Vec<usize> = slots[..32].iter().map(|s| s / LINE).collect();
        lines.dedup();
        assert_eq!(lines.len(), 32);
        assert_eq!(notify_slot(32) / LINE, notify_slot(0) / LINE);
    }

    #[test]
    fn requested_alignment_is_honoured() {
        const K64: usize = 1 << 16;
        let regions = [
            Region {
                size: 0,
                align: 1 << 20,
            },
            Region {
                size: 24,
                align: K64,
            },
            Region {
                size: 100,
                align: 8,
            },
        ];
        // Noncontiguous: each rank with a size on its own alignment; the mapping on the largest
        // of those (a rank without memory asks for nothing).
        let l = node_layout(&regions, 3, true, false).unwrap();
        assert_eq!(l.data, vec![3 * ctrl_block(3), K64, K64 + PAGE]);
        assert_eq!((l.total, l.align), (K64 + 2 * PAGE, K64));
        // Contiguous: the memory starts on the largest alignment, and stays contiguous.
        let l = node_layout(&regions, 3, true, true).unwrap();
        assert_eq!(l.data, vec![K64, K64, K64 + 24]);
        assert_eq!((l.total, l.align), (K64 + PAGE, K64));
        let huge = [
            Region {
                size: 8,
                align: 1 << 63,
            },
            Region {
                size: 8,
                align: 1 << 63,
            },
        ];
        assert!(node_layout(&huge, 2, true, false).is_none());
    }

    #[test]
    fn ranges_inside_a_region() {
        assert_eq!(offset_in(100, 50, 100, 50), Some(0));
        assert_eq!(offset_in(100, 50, 140, 10), Some(40));
        assert_eq!(offset_in(100, 50, 141, 10), None);
        assert_eq!(offset_in(100, 50, 99, 1), None);
        assert_eq!(offset_in(0, u64::MAX, u64::MAX, 2), None);
    }

    #[test]
    fn only_words_slept_on_ring_the_doorbell() {
        for round in 0..MAX_ROUNDS {
            assert!(rings_doorbell(barrier_slot(round)));
        }
        assert!(rings_doorbell(FREED_AT));
        assert!(rings_doorbell(COMPLETES));
        assert!(rings_doorbell(posted_slot(0)) && rings_doorbell(posted_slot(7)));
        assert!(rings_doorbell(notify_slot(0)) && rings_doorbell(notify_slot(NOTIFY_IDS - 1)));
        for quiet in [
            LOCK,
            LOCK_SLEEPERS,
            LOCK_BELL,
            SLEEPERS,
            DOORBELL,
            BARRIER_DONE,
            ACC_LOCK,
        ] {
            assert!(!rings_doorbell(quiet), "offset {quiet}");
        }
    }
}
