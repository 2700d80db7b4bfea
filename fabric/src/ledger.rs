//! The completion bookkeeping of an endpoint ([`Track`]) as the threads share it: under a
//! [`Latch`], with two facts any thread may read without taking it: whether every flush would
//! return at once ([`Ledger::quiet`]), and a count that moves whenever completions are settled
//! ([`Ledger::changed`]), so that a wait whose poll found nothing need not look again.

use crate::latch::{Guard, Latch};
use crate::stage::Staged;
use crate::track::Track;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub(crate) struct Ledger {
    track: Latch<Track<Staged>>,
    /// [`Track::quiet`] as of the last time the lock was given back.
    quiet: AtomicBool,
    /// Moved, under the lock, after each batch of completions is settled.
    settles: AtomicU64,
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger {
            track: Latch::new(Track::default()),
            quiet: AtomicBool::new(true),
            settles: AtomicU64::new(0),
        }
    }
}

impl Ledger {
    /// The bookkeeping, locked until the returned value is dropped.
    pub(crate) fn lock(&self) -> Tracked<'_> {
        Tracked {
            guard: self.track.lock(),
            ledger: self,
        }
    }

    /// Whether nothing is in flight and no failure waits for a flush. Only the thread that
    /// issues operations can rely on a `true`: no other thread adds to what is in flight.
    #[inline]
    pub(crate) fn quiet(&self) -> bool {
        self.quiet.load(Ordering::Acquire)
    }

    /// Whether completions were settled since this wait last looked (`seen`: what it saw then;
    /// `None` before its first look), noting what it sees now. A settle after this call moves
    /// the count again, so a `false` only defers the look to the next round.
    pub(crate) fn changed(&self, seen: &mut Option<u64>) -> bool {
        let now = self.settles.load(Ordering::Acquire);
        let moved = *seen != Some(now);
        *seen = Some(now);
        moved
    }
}

/// The locked bookkeeping. When it goes, [`Ledger::quiet`] is brought up to date, then the lock
/// is given back.
pub(crate) struct Tracked<'a> {
    guard: Guard<'a, Track<Staged>>,
    ledger: &'a Ledger,
}

impl Tracked<'_> {
    /// Completions were just settled: move the count of [`Ledger::changed`]. A load and a store
    /// suffice, as only the holder of the lock moves it.
    pub(crate) fn moved(&self) {
        let n = self.ledger.settles.load(Ordering::Relaxed);
        self.ledger
            .settles
            .store(n.wrapping_add(1), Ordering::Release);
    }
}

impl Deref for Tracked<'_> {
    type Target = Track<Staged>;
    fn deref(&self) -> &Track<Staged> {
        &self.guard
    }
}

impl DerefMut for Tracked<'_> {
    fn deref_mut(&mut self) -> &mut Track<Staged> {
        &mut self.guard
    }
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        self.ledger
            .quiet
            .store(self.guard.quiet(), Ordering::Release);
    }
}
