//! How a waiter pauses before it sleeps: spin, then yield, for how long.

use super::crowd::{CROWDED_YIELDS, contended};
use crossbeam_utils::Backoff;
use std::cell::Cell;
use std::time::{Duration, Instant};

/// What a waiter does before it sleeps: where every rank has a CPU, crossbeam's
/// spin-then-yield [`Backoff`], and for a patient waiter its yields go on until [`YIELD_FOR`]
/// has passed; on a crowded node, only yields (crowded here: its ranks, with their progress
/// threads where one serves this process, outnumber its CPUs, [`contended`]).
pub(super) struct Pause {
    backoff: Backoff,
    /// Spins so far of a brief waiter ([`Pause::brief`]), which never yields; `None` for others.
    spins: Option<Cell<u32>>,
    /// Yields so far, on a crowded node; `None` elsewhere.
    yields: Option<Cell<u32>>,
    /// How long to go on yielding once the backoff has run out, on an uncrowded node.
    yield_for: Duration,
    /// When the backoff ran out (the clock is read only from then on).
    yielding_since: Cell<Option<Instant>>,
}

/// How long a waiter for a word of its own memory on an uncrowded node goes on yielding once
/// its backoff has run out, before it sleeps: waking from a futex costs more than the skew of
/// a barrier over 16 ranks (fence of 16 ranks on 16 cores: 7.4-13.3 us when waiters slept
/// after the backoff, 1.5-2.9 yielding; Open MPI's waiters never sleep, 2.1-2.5). Waiters that
/// retry on another rank's memory (a contended lock) do not: their tries would fight the
/// holder's for the word (lock contention of 16 ranks: 0.3-0.4 us when they sleep, 2.7-2.9
/// when they keep trying).
const YIELD_FOR: Duration = Duration::from_micros(200);
/// The spins of a brief waiter before it sleeps: crossbeam's backoff doubles its spin hints up
/// to 64, 127 in all over the first seven.
const BRIEF_SPINS: u32 = 7;

impl Pause {
    /// A waiter that sleeps once the backoff has run out.
    pub(super) fn new() -> Pause {
        Pause::yielding(Duration::ZERO)
    }

    /// A waiter that yields for [`YIELD_FOR`] more before it sleeps, on an uncrowded node.
    pub(super) fn patient() -> Pause {
        Pause::yielding(YIELD_FOR)
    }

    /// A waiter that spins a little (about a microsecond) and then sleeps, without ever
    /// yielding: a yield hands the CPU to whatever else runs there for the rest of its time
    /// slice (a progress thread serving this process's memory, back to back), and the wake-up
    /// from a sleep takes it back at once.
    /// On a crowded node, or where the progress threads have no CPUs of their own
    /// ([`contended`]), the same as [`Pause::new`]: it yields, since the rank it waits for may
    /// need its CPU, and a progress thread serving there yields it back after every poll.
    pub(super) fn brief() -> Pause {
        Pause {
            spins: (!contended()).then(|| Cell::new(0)),
            ..Pause::new()
        }
    }

    fn yielding(yield_for: Duration) -> Pause {
        Pause {
            spins: None,
            backoff: Backoff::new(),
            yields: contended().then(|| Cell::new(0)),
            yield_for,
            yielding_since: Cell::new(None),
        }
    }

    /// Whether spinning and yielding are used up and the waiter should sleep.
    pub(super) fn is_completed(&self) -> bool {
        if let Some(n) = &self.spins {
            return n.get() >= BRIEF_SPINS;
        }
        match &self.yields {
            Some(n) => n.get() >= CROWDED_YIELDS,
            None if !self.backoff.is_completed() => false,
            None if self.yield_for.is_zero() => true,
            None => {
                let since = self.yielding_since.get().unwrap_or_else(Instant::now);
                self.yielding_since.set(Some(since));
                since.elapsed() >= self.yield_for
            }
        }
    }

    /// Wait a little.
    pub(super) fn snooze(&self) {
        if let Some(n) = &self.spins {
            self.backoff.spin();
            n.set(n.get() + 1);
            return;
        }
        match &self.yields {
            Some(n) => {
                std::thread::yield_now();
                n.set(n.get() + 1);
            }
            None => self.backoff.snooze(),
        }
    }

    /// Start over, as if the wait had just begun.
    pub(super) fn reset(&self) {
        if let Some(n) = &self.spins {
            n.set(0);
            self.backoff.reset();
            return;
        }
        match &self.yields {
            Some(n) => n.set(0),
            None => {
                self.backoff.reset();
                self.yielding_since.set(None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Snooze until the backoff has run out (no world in unit tests: the node is uncrowded).
    fn run_out(p: &Pause) {
        while !p.backoff.is_completed() {
            p.snooze();
        }
    }

    #[test]
    fn a_patient_waiter_goes_on_until_its_time_has_passed() {
        let plain = Pause::new();
        run_out(&plain);
        assert!(plain.is_completed(), "sleeps once its backoff has run out");
        let patient = Pause::patient();
        run_out(&patient);
        assert!(!patient.is_completed(), "goes on after its backoff");
        std::thread::sleep(YIELD_FOR);
        assert!(patient.is_completed(), "sleeps once YIELD_FOR has passed");
        patient.reset();
        run_out(&patient);
        assert!(!patient.is_completed(), "a reset starts its time over");
    }

    #[test]
    fn a_brief_waiter_sleeps_after_its_spins_without_yielding() {
        let brief = Pause::brief();
        for _ in 0..BRIEF_SPINS {
            assert!(!brief.is_completed());
            brief.snooze();
        }
        assert!(brief.is_completed(), "sleeps once its spins are done");
        assert!(!brief.backoff.is_completed(), "never reached the yields");
        brief.reset();
        assert!(!brief.is_completed(), "a reset starts its spins over");
    }
}
