//! Whether this node is crowded: more ranks than CPUs, or, where progress threads serve the
//! ranks, more ranks and progress threads than CPUs. A waiter on a crowded node yields at once
//! instead of spinning, since the rank or progress thread it waits for may need the very CPU it
//! would spin on.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Yields of a waiter on a crowded node before it sleeps.
pub(super) const CROWDED_YIELDS: u32 = 64;

/// Whether this node runs more ranks than it has CPUs ([`set_crowded`]).
static CROWDED: AtomicBool = AtomicBool::new(false);
/// Whether this node has fewer CPUs than twice the ranks it runs ([`set_crowded`]): too few
/// for a progress thread beside each rank, which then shares the ranks' CPUs.
static PROGRESS_SHARES_CPUS: AtomicBool = AtomicBool::new(false);
/// How many ranks of the job run on this node ([`set_crowded`]; 1 until told).
static RANKS_ON_NODE: AtomicUsize = AtomicUsize::new(1);
/// Whether a progress thread serves this process's memory (set by the fabric transport).
static PROGRESS_THREAD: AtomicBool = AtomicBool::new(false);
/// [`contended`], kept up to date by [`set_crowded`] and [`set_progress_thread`]: a waiter
/// reads one word, as before progress threads counted.
static CONTENDED: AtomicBool = AtomicBool::new(false);

/// Records that a progress thread now serves this process's memory (a libfabric endpoint's):
/// a waiter that yields its CPU may hand it to that thread for the rest of a time slice.
#[cfg(have_libfabric)]
pub(crate) fn set_progress_thread() {
    PROGRESS_THREAD.store(true, Ordering::Relaxed);
    update_contended();
}

/// Whether a progress thread serves this process's memory (only a libfabric endpoint starts one).
pub(crate) fn progress_thread() -> bool {
    PROGRESS_THREAD.load(Ordering::Relaxed)
}

/// Records how many ranks of the job run on this node. When they outnumber its CPUs, waiters
/// yield at once instead of spinning first: the rank they wait for may need the very CPU they
/// would spin on (8 ranks on 2 cores fence three times faster that way). Where there are not
/// also CPUs for a progress thread beside each rank, waiters of a process that has one yield
/// too ([`contended`]).
pub(crate) fn set_crowded(ranks_on_node: usize) {
    let Lacks {
        crowded,
        progress_shares_cpus,
    } = Lacks::of(ranks_on_node, online_cpus());
    tracing::debug!(
        ranks_on_node,
        crowded,
        progress_shares_cpus,
        "waiters spin only on an uncrowded node"
    );
    CROWDED.store(crowded, Ordering::Relaxed);
    PROGRESS_SHARES_CPUS.store(progress_shares_cpus, Ordering::Relaxed);
    RANKS_ON_NODE.store(ranks_on_node.max(1), Ordering::Relaxed);
    update_contended();
}

/// Recompute [`CONTENDED`] from what is recorded.
fn update_contended() {
    let contended =
        crowded() || (progress_thread() && PROGRESS_SHARES_CPUS.load(Ordering::Relaxed));
    CONTENDED.store(contended, Ordering::Relaxed);
}

/// What a node lacks for the ranks it runs.
#[derive(Debug, Clone, Copy)]
struct Lacks {
    /// A CPU for each rank.
    crowded: bool,
    /// A CPU for each rank and one more for its progress thread: the progress threads share
    /// the ranks' CPUs.
    progress_shares_cpus: bool,
}

impl Lacks {
    /// What a node of `cpus` CPUs running `ranks` ranks lacks.
    fn of(ranks: usize, cpus: usize) -> Lacks {
        Lacks {
            crowded: ranks > cpus,
            progress_shares_cpus: ranks.saturating_mul(2) > cpus,
        }
    }
}

/// Whether this node is crowded while `threads` threads of this rank make calls in place of
/// its own (the threads of a shared window, its own thread asleep meanwhile): the other ranks
/// of the node and those threads outnumber its CPUs.
#[cfg(have_libfabric)]
pub(crate) fn crowded_with(threads: usize) -> bool {
    RANKS_ON_NODE.load(Ordering::Relaxed) - 1 + threads > online_cpus()
}

/// Whether this node has a CPU more than it runs ranks ([`set_crowded`]): one a thread of a
/// rank may take beside the rank's own without taking another rank's.
pub(crate) fn spare_cpu() -> bool {
    RANKS_ON_NODE.load(Ordering::Relaxed) < online_cpus()
}

/// Whether this node runs more ranks than it has CPUs (see [`set_crowded`]).
pub(crate) fn crowded() -> bool {
    CROWDED.load(Ordering::Relaxed)
}

/// Whether the threads that may want a CPU at once outnumber this node's CPUs: its ranks
/// ([`crowded`]), or, where a progress thread serves this process, its ranks and their
/// progress threads, each woken by a peer's operation and then serving back to back while the
/// rank's own thread waits. Waits that do not poll the fabric (a barrier, a lock's retries)
/// then yield as on a crowded node: IMB's Truly_passive_put, 2 ranks on 2 cores, took 55-75 us
/// a put, flush and barrier over libfabric's tcp provider and 33-48 us over its shm provider
/// with spinning waiters, 15-21 us and 3.3-4.8 us with yielding ones (and the progress thread
/// yielding too: `Endpoint::set_progress_shares_cpu`).
pub(crate) fn contended() -> bool {
    CONTENDED.load(Ordering::Relaxed)
}

/// Whether this node lacks a CPU for a progress thread beside each rank, which then shares the
/// ranks' CPUs (see [`set_crowded`]).
#[cfg(have_libfabric)]
pub(crate) fn progress_shares_cpus() -> bool {
    PROGRESS_SHARES_CPUS.load(Ordering::Relaxed)
}

/// The CPUs online on this machine (not only those this process may use: ranks bound to one
/// CPU each are not crowded).
fn online_cpus() -> usize {
    online_cpu_list()
        .map(|cpus| cpus.len())
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1)
}

/// The CPUs online on this machine, where the kernel says.
fn online_cpu_list() -> Option<Vec<usize>> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|list| crate::cpu_list::parse(&list))
}

/// The CPUs of this machine that none of its ranks is bound to, given the CPUs this rank may
/// run on (`own`) and those of each rank of the machine, this one included (`bound`); `None`
/// where this rank is not bound or every CPU has a rank. A thread starts on the CPUs of the
/// thread that makes it: a progress thread placed nowhere else shares its bound rank's CPU,
/// and serves a computing rank only when the rank's time slice ends, however many CPUs idle.
pub(crate) fn unbound_cpus(own: &[usize], bound: &[Vec<usize>]) -> Option<Vec<usize>> {
    unbound_of(own, bound, &online_cpu_list()?)
}

/// [`unbound_cpus`] on a machine whose online CPUs are `online`.
fn unbound_of(own: &[usize], bound: &[Vec<usize>], online: &[usize]) -> Option<Vec<usize>> {
    if online.iter().all(|cpu| own.contains(cpu)) {
        return None;
    }
    let spare: Vec<usize> = online
        .iter()
        .copied()
        .filter(|cpu| bound.iter().all(|set| !set.contains(cpu)))
        .collect();
    (!spare.is_empty()).then_some(spare)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_thread_beside_each_rank_needs_twice_the_cpus() {
        let lacks = |ranks, cpus| {
            let l = Lacks::of(ranks, cpus);
            (l.crowded, l.progress_shares_cpus)
        };
        assert_eq!(lacks(1, 2), (false, false));
        assert_eq!(lacks(2, 2), (false, true));
        assert_eq!(lacks(3, 2), (true, true));
        assert_eq!(lacks(8, 16), (false, false));
        assert_eq!(lacks(9, 16), (false, true));
        assert_eq!(lacks(17, 16), (true, true));
        assert_eq!(lacks(1, 1), (false, true));
    }

    #[test]
    fn progress_threads_get_the_cpus_no_rank_is_bound_to() {
        let online: Vec<usize> = (0..8).collect();
        let ranks = [vec![0], vec![1]];
        assert_eq!(unbound_of(&[0], &ranks, &online), Some((2..8).collect()));
        // A rank on every CPU, or one rank not bound: the progress threads stay.
        let all: Vec<Vec<usize>> = online.iter().map(|&c| vec![c]).collect();
        assert_eq!(unbound_of(&[0], &all, &online), None);
        assert_eq!(unbound_of(&[0], &[vec![0], online.clone()], &online), None);
        // This rank not bound: its threads go wherever the scheduler puts them already.
        assert_eq!(
            unbound_of(&online, std::slice::from_ref(&online), &online),
            None
        );
        // Ranks bound to whole sockets leave the others' CPUs.
        let sockets = [vec![0, 1, 2, 3]];
        assert_eq!(
            unbound_of(&[0, 1, 2, 3], &sockets, &online),
            Some(vec![4, 5, 6, 7])
        );
    }

    #[test]
    fn this_machine_has_a_cpu_online() {
        assert!(online_cpus() >= 1);
    }
}
