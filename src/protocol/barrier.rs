//! Dissemination barrier over one-sided signals (Hensgen, Finkel and Manber).
//!
//! In round `k` of barrier number `g`, rank `i` adds 1 to slot `k` of rank `(i + 2^k) mod n` and
//! waits until its own slot `k` has reached `g`. Slots only grow, so nothing is reset between
//! barriers: each slot has one sender, which signals in barrier order, so a count of at least `g`
//! means the signal of barrier `g` has arrived. `ceil(log2 n)` rounds, each one remote atomic and
//! one local wait: the pattern works the same over shared memory and over a NIC.

/// Most rounds supported: 2^MAX_ROUNDS ranks.
pub const MAX_ROUNDS: usize = 24;

/// Number of rounds for `n` ranks.
pub fn rounds(n: usize) -> usize {
    let mut r = 0;
    while (1usize << r) < n {
        r += 1;
    }
    r
}

/// The rank that `rank` signals in `round`.
pub fn partner(rank: usize, n: usize, round: usize) -> usize {
    (rank + (1 << round)) % n
}

/// What a rank does next in a barrier ([`Barrier::step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Add 1 to slot `round` of rank `to`.
    Signal { to: usize, round: usize },
    /// Wait until this rank's slot `round` has reached `until`, then report it
    /// ([`Barrier::arrived`]).
    Wait { round: usize, until: u64 },
    /// The barrier is complete for this rank.
    Done,
}

/// One rank's way through barrier number `generation` (counted from 1) of `n` ranks: which
/// signal to send and which slot to wait for, round by round. Free of I/O: the window sends
/// the signals and waits on its control block.
#[derive(Debug, Clone)]
pub struct Barrier {
    me: usize,
    n: usize,
    generation: u64,
    /// [`rounds`] of `n`, counted once.
    rounds: usize,
    round: usize,
    signalled: bool,
}

impl Barrier {
    /// Rank `me` of `n` entering barrier `generation`.
    pub fn new(me: usize, n: usize, generation: u64) -> Barrier {
        Barrier {
            me,
            n,
            generation,
            rounds: rounds(n),
            round: 0,
            signalled: false,
        }
    }

    /// What to do next: signal this round's partner, then wait for this round's slot; after
    /// the last round, done.
    #[inline]
    pub fn step(&mut self) -> Step {
        if self.round == self.rounds {
            return Step::Done;
        }
        if !self.signalled {
            self.signalled = true;
            return Step::Signal {
                to: partner(self.me, self.n, self.round),
                round: self.round,
            };
        }
        Step::Wait {
            round: self.round,
            until: self.generation,
        }
    }

    /// This rank's slot of the round it waits for holds `value`: the next round begins when
    /// the signal of this barrier has arrived. Returns whether it had.
    #[inline]
    pub fn arrived(&mut self, value: u64) -> bool {
        let arrived = self.signalled && value >= self.generation;
        if arrived {
            self.round += 1;
            self.signalled = false;
        }
        arrived
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rank of `ranks` takes every step it can, slots in memory, except rank `skip`,
    /// which has not entered; returns when nobody can move.
    fn run(ranks: &mut [Barrier], slots: &mut [Vec<u64>], skip: Option<usize>) -> Vec<bool> {
        let mut done = vec![false; ranks.len()];
        let mut moved = true;
        while moved {
            moved = false;
            for (i, b) in ranks.iter_mut().enumerate() {
                if Some(i) == skip || done[i] {
                    continue;
                }
                match b.step() {
                    Step::Signal { to, round } => {
                        slots[to][round] += 1;
                        moved = true;
                    }
                    Step::Wait { round, until } => {
                        let value = slots[i][round];
                        assert_eq!(b.arrived(value), value >= until);
                        moved |= value >= until;
                    }
                    Step::Done => {
                        done[i] = true;
                        moved = true;
                    }
                }
            }
        }
        done
    }

    /// Drives every rank as far as it can go while one rank has not yet entered: nobody may
    /// leave; once it enters, everybody leaves. Barriers in a row check slot reuse.
    #[test]
    fn nobody_leaves_before_everyone_arrived() {
        for n in 2..=9 {
            for late in 0..n {
                let mut slots = vec![vec![0u64; rounds(n)]; n];
                for g in 1..=3 {
                    let mut ranks: Vec<Barrier> = (0..n).map(|i| Barrier::new(i, n, g)).collect();
                    let skip = (late + g as usize) % n;
                    let done = run(&mut ranks, &mut slots, Some(skip));
                    assert!(done.iter().all(|d| !d), "n={n} left early");
                    let done = run(&mut ranks, &mut slots, None);
                    assert!(done.iter().all(|&d| d), "n={n} deadlocked");
                }
            }
        }
    }

    #[test]
    fn a_barrier_signals_then_waits_each_round() {
        let mut b = Barrier::new(1, 5, 2);
        assert!(
            !b.clone().arrived(7),
            "nothing arrives before this rank has signalled"
        );
        assert_eq!(b.step(), Step::Signal { to: 2, round: 0 });
        assert_eq!(b.step(), Step::Wait { round: 0, until: 2 });
        assert!(!b.arrived(1), "the signal of the barrier before");
        assert!(b.arrived(2));
        assert_eq!(b.step(), Step::Signal { to: 3, round: 1 });
        assert_eq!(b.step(), Step::Wait { round: 1, until: 2 });
        assert!(b.arrived(3));
        assert_eq!(b.step(), Step::Signal { to: 0, round: 2 });
        assert_eq!(b.step(), Step::Wait { round: 2, until: 2 });
        assert!(b.arrived(2));
        assert_eq!(b.step(), Step::Done);
        assert_eq!(
            Barrier::new(0, 1, 1).step(),
            Step::Done,
            "one rank: no round"
        );
    }

    #[test]
    fn every_slot_has_exactly_one_sender() {
        for n in 1..40 {
            for k in 0..rounds(n) {
                let mut senders = vec![0; n];
                for i in 0..n {
                    senders[partner(i, n, k)] += 1;
                }
                assert!(senders.iter().all(|&s| s == 1), "n={n} round {k}");
            }
        }
        assert_eq!(rounds(1), 0);
        assert_eq!(rounds(2), 1);
        assert_eq!(rounds(8), 3);
        assert_eq!(rounds(9), 4);
    }
}
