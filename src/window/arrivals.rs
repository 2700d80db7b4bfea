//! The notifications the threads of a shared window ([`Window::share`]) test and wait for on
//! their own thread, where every notification to this rank is an addition to its control
//! block's counter by a CPU atomic that rings the block's doorbell (the window's atomics are
//! shared memory's, and no transport's writes carry notifications): a thread's `test_notify`
//! reads the counter and consumes with a compare-and-swap, and its `wait_notify` waits as the
//! window's own does (spinning, then asleep on the doorbell), with no call to the window's
//! thread.
//!
//! Consumption is counted per id in atomics the handle's threads share, taken from the window
//! when sharing starts and given back when it ends; while the window is shared nothing else
//! consumes (the window's thread serves only the handle's calls, and they all test here).
//!
//! Elsewhere every test and wait goes to the window's thread, which drives the transport as it
//! tests: over the fabric a notification that a write carried is counted as the endpoint's
//! completions are read, and while the window's thread is away only the progress thread reads
//! them, at its own pace (in a ping-pong of notified puts between threads of 2 ranks on 2 CPUs,
//! waiting for it made a hand-off 10 times as long as through the window's thread).

use super::Window;
use crate::error::Result;
use crate::peers::Peers;
use crate::protocol::layout;
use crate::wait::{self, Pace, Progress};
use crossbeam_utils::CachePadded;
use onesided_shm::SyncMem;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a shared window's threads read to test for notifications.
#[derive(Debug)]
pub(super) struct Arrivals {
    /// This rank's control block, whose counters the origins' atomics add to.
    ctrl: SyncMem<'static>,
    /// Per id: how many this rank's waits and tests consumed, each on a line of its own, so
    /// that threads consuming different ids do not pass a line between their CPUs (32 KiB per
    /// shared window).
    consumed: Box<[CachePadded<AtomicU64>]>,
    peers: Peers,
}

impl Arrivals {
    /// What the threads of `win` read, where every notification comes by a CPU atomic that
    /// rings the doorbell.
    pub(super) fn of(win: &Window<'_>) -> Option<Arrivals> {
        let rung = win.atomic_route().pace() == Pace::Doorbell;
        if !rung || win.transports().any(|t| t.carries_notifications()) {
            return None;
        }
        let seen = win.notified.borrow();
        let consumed = (0..layout::NOTIFY_IDS)
            .map(|id| CachePadded::new(AtomicU64::new(seen.get(id).copied().unwrap_or(0))))
            .collect();
        Some(Arrivals {
            ctrl: SyncMem::new(win.ctrl.clone()),
            consumed,
            peers: win.peers.clone(),
        })
    }

    /// The counter of notification `id` in the control block, with the block's doorbell, and
    /// its consumption, where `id` is one (else the window's thread reports MPI_ERR_ARG).
    fn slot(&self, id: usize) -> Option<(wait::Words<'_>, &AtomicU64)> {
        let consumed = self.consumed.get(id)?;
        let counter = wait::Words::in_block(&self.ctrl, layout::notify_slot(id))?;
        Some((counter, consumed))
    }

    /// Consume `count` notifications of `id` if that many arrived that nobody consumed:
    /// whether it did; `None` where `id` is out of range.
    pub(super) fn test(&self, id: usize, count: usize) -> Option<bool> {
        let (counter, consumed) = self.slot(id)?;
        Some(take(counter.word, consumed, count as u64))
    }

    /// Wait until `count` notifications of `id` arrived that nobody consumed, and consume
    /// them; MPI_ERR_PROC_FAILED once a rank of the job is gone. `None` where `id` is out of
    /// range.
    pub(super) fn wait(&self, id: usize, count: usize) -> Option<Result<()>> {
        let (counter, consumed) = self.slot(id)?;
        let count = count as u64;
        let watch = || self.peers.all_alive();
        Some(loop {
            // Another thread may consume what the wait saw arrive: then wait again.
            let due = consumed.load(Ordering::Acquire) + count;
            if let Err(e) = wait::until_words(counter, |v| v >= due, &Rung, &watch) {
                break Err(e);
            }
            if take(counter.word, consumed, count) {
                break Ok(());
            }
        })
    }

    /// Give the consumption back to `win`, once sharing ends.
    pub(super) fn give_back(&self, win: &Window<'_>) {
        let mut seen = win.notified.borrow_mut();
        for (id, consumed) in self.consumed.iter().enumerate() {
            let consumed = consumed.load(Ordering::Acquire);
            if consumed > 0 && seen.len() <= id {
                seen.resize(id + 1, 0);
            }
            if let Some(seen) = seen.get_mut(id) {
                *seen = consumed;
            }
        }
    }
}

/// Consume `count` of what `counter` counted if as many are not `consumed` yet: whether it did.
fn take(counter: &AtomicU64, consumed: &AtomicU64, count: u64) -> bool {
    let arrived = counter.load(Ordering::Acquire);
    let mut seen = consumed.load(Ordering::Acquire);
    while arrived >= seen + count {
        match consumed.compare_exchange_weak(
            seen,
            seen + count,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return true,
            Err(now) => seen = now,
        }
    }
    false
}

/// A wait of a thread of a shared window: nothing to drive, asleep on the doorbell.
struct Rung;

impl Progress for Rung {
    fn poll(&self) -> Result<()> {
        Ok(())
    }

    fn pace(&self) -> Pace {
        Pace::Doorbell
    }
}
