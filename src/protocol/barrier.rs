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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy)]
    struct Rank {
        round: usize,
        signalled: bool,
        done: bool,
    }

    /// One step of rank `i` in barrier `g`; returns whether it moved.
    fn step(i: usize, ranks: &mut [Rank], slots: &mut [Vec<u64>], g: u64) -> bool {
        let n = ranks.len();
        let me = &mut ranks[i];
        if me.done {
            return false;
        }
        if me.round == rounds(n) {
            me.done = true;
            return true;
        }
        if !me.signalled {
            slots[partner(i, n, me.round)][me.round] += 1;
            me.signalled = true;
            return true;
        }
        if slots[i][me.round] >= g {
            me.round += 1;
            me.signalled = false;
            return true;
        }
        false
    }

    fn run(ranks: &mut [Rank], slots: &mut [Vec<u64>], g: u64, skip: Option<usize>) {
        let mut moved = true;
        while moved {
            moved = false;
            for i in 0..ranks.len() {
                if Some(i) != skip {
                    moved |= step(i, ranks, slots, g);
                }
            }
        }
    }

    /// Drives every rank as far as it can go while one rank has not yet entered: nobody may
    /// leave; once it enters, everybody leaves. Two barriers in a row check slot reuse.
    #[test]
    fn nobody_leaves_before_everyone_arrived() {
        for n in 2..=9 {
            for late in 0..n {
                let mut slots = vec![vec![0u64; rounds(n)]; n];
                for g in 1..=2 {
                    let fresh = Rank {
                        round: 0,
                        signalled: false,
                        done: false,
                    };
                    let mut ranks = vec![fresh; n];
                    run(&mut ranks, &mut slots, g, Some((late + g as usize) % n));
                    assert!(ranks.iter().all(|r| !r.done), "n={n} left early");
                    run(&mut ranks, &mut slots, g, None);
                    assert!(ranks.iter().all(|r| r.done), "n={n} deadlocked");
                }
            }
        }
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
