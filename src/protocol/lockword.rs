//! The lock word of a window target, driven by remote fetch-adds (as in foMPI and Open MPI
//! osc/rdma): one atomic takes an uncontended lock, shared or exclusive.
//!
//! The low 32 bits count shared holders (and shared attempts in flight); the high 32 bits count
//! exclusive claims. A shared attempt adds 1 and backs out (adds -1) if it saw a claim. An
//! exclusive attempt adds `EXCLUSIVE`: if it saw nothing it holds the lock; if it saw another
//! claim it backs out; if it saw only shared holders, its claim stands (new shared attempts now
//! back out) and it waits for the shared count to drain to 0, then marks the lock [`GRANTED`]
//! and holds it if no shared holder slipped in meanwhile (else it unmarks and drains again).
//! Writers therefore cannot be starved by a stream of readers. Releases are fetch-adds, never
//! stores, because attempts in flight change the word at any time.
//!
//! A shared attempt by an origin that already holds other lock words (a lazy lock_all epoch)
//! pushes past standing claims and backs out only of a granted one: waiting behind a claim
//! while holding words let two lock_all epochs and two exclusive claims wait on each other in
//! a cycle (found by the fuzz test at 4 ranks).
//!
//! # MPI-4.1: 12.5.3

/// One exclusive claim.
pub const EXCLUSIVE: u64 = 1 << 32;
/// Set while an exclusive claim holds the lock.
pub const GRANTED: u64 = 1 << 63;
/// The shared-holder count.
const SHARED_MASK: u64 = EXCLUSIVE - 1;

/// The kind of lock. # MPI-4.1: 12.5.3 (MPI_LOCK_SHARED, MPI_LOCK_EXCLUSIVE)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockType {
    /// Several origins may hold it together.
    Shared,
    /// One origin holds it alone.
    Exclusive,
}

impl LockType {
    /// MPI_LOCK_EXCLUSIVE as an integer (MPICH's value), for callers that carry lock types as
    /// integers, e.g. across a C interface.
    pub const MPI_LOCK_EXCLUSIVE: i32 = 234;
    /// MPI_LOCK_SHARED as an integer (MPICH's value).
    pub const MPI_LOCK_SHARED: i32 = 235;
}

impl TryFrom<i32> for LockType {
    type Error = crate::error::Error;

    /// The lock type named by `raw`, or MPI_ERR_LOCKTYPE.
    fn try_from(raw: i32) -> Result<LockType, Self::Error> {
        match raw {
            LockType::MPI_LOCK_EXCLUSIVE => Ok(LockType::Exclusive),
            LockType::MPI_LOCK_SHARED => Ok(LockType::Shared),
            _ => Err(crate::error::Error::new(
                crate::error::ErrorClass::LockType,
                format!("{raw} is neither MPI_LOCK_SHARED nor MPI_LOCK_EXCLUSIVE"),
            )),
        }
    }
}

/// A remote 64-bit atomic operation on a control word; every variant returns the old value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amo {
    /// Wrapping add.
    FetchAdd(u64),
    /// Store `swap` if the word equals `compare`.
    CompareSwap {
        /// Expected old value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// Atomic read.
    Load,
}

/// The atomic that tries to take the lock.
pub fn acquire(kind: LockType) -> Amo {
    match kind {
        LockType::Shared => Amo::FetchAdd(1),
        LockType::Exclusive => Amo::FetchAdd(EXCLUSIVE),
    }
}

/// What an attempt has to do next, given the old value its atomic returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The lock is held.
    Acquired,
    /// The attempt lost: undo it with this atomic, then retry later.
    BackOut(Amo),
    /// The exclusive claim stands: wait until [`drained`] holds for the word, then the lock is held.
    Drain,
}

/// The outcome of an attempt of `kind` whose atomic returned `old`; `past_claims`: a shared
/// attempt by an origin holding other lock words, which waits only for a granted claim.
pub fn outcome(kind: LockType, past_claims: bool, old: u64) -> Outcome {
    let claimed = old & !SHARED_MASK != 0;
    match kind {
        LockType::Shared if old & GRANTED != 0 || (claimed && !past_claims) => {
            Outcome::BackOut(Amo::FetchAdd(u64::MAX))
        }
        LockType::Shared => Outcome::Acquired,
        LockType::Exclusive if claimed => Outcome::BackOut(withdraw()),
        LockType::Exclusive => Outcome::Drain,
    }
}

/// Whether no shared holder is left, so that a standing exclusive claim may mark itself
/// granted.
pub fn drained(word: u64) -> bool {
    word & SHARED_MASK == 0
}

/// The atomic that marks a drained claim granted.
pub fn grant() -> Amo {
    Amo::FetchAdd(GRANTED)
}

/// Whether the claim holds the lock, given the old value [`grant`] returned: no shared holder
/// slipped in before the mark (else undo it with [`ungrant`] and drain again).
pub fn granted(old: u64) -> bool {
    drained(old)
}

/// Undo [`grant`].
pub fn ungrant() -> Amo {
    Amo::FetchAdd(GRANTED.wrapping_neg())
}

/// The atomic that withdraws a standing exclusive claim that does not hold the lock.
pub fn withdraw() -> Amo {
    Amo::FetchAdd(EXCLUSIVE.wrapping_neg())
}

/// The atomic that releases a held lock.
pub fn release(kind: LockType) -> Amo {
    match kind {
        LockType::Shared => Amo::FetchAdd(u64::MAX),
        LockType::Exclusive => Amo::FetchAdd((EXCLUSIVE | GRANTED).wrapping_neg()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Apply `amo` to `word` the way a NIC or CPU atomic would: returns (old, new).
    fn apply(word: u64, amo: Amo) -> (u64, u64) {
        match amo {
            Amo::FetchAdd(v) => (word, word.wrapping_add(v)),
            Amo::CompareSwap { compare, swap } if word == compare => (word, swap),
            Amo::CompareSwap { .. } | Amo::Load => (word, word),
        }
    }

    /// One attempt on a simulated word; a draining claim stays in the word.
    fn attempt_past(word: &mut u64, kind: LockType, past_claims: bool) -> Outcome {
        let (old, new) = apply(*word, acquire(kind));
        *word = new;
        let out = outcome(kind, past_claims, old);
        if let Outcome::BackOut(undo) = out {
            *word = apply(*word, undo).1;
        }
        out
    }

    fn attempt(word: &mut u64, kind: LockType) -> Outcome {
        attempt_past(word, kind, false)
    }

    fn backs_out(word: &mut u64, kind: LockType) -> bool {
        matches!(attempt(word, kind), Outcome::BackOut(_))
    }

    /// A drained claim marks itself granted; whether it holds the lock.
    fn try_grant(word: &mut u64) -> bool {
        let (old, new) = apply(*word, grant());
        *word = new;
        if !granted(old) {
            *word = apply(*word, ungrant()).1;
        }
        granted(old)
    }

    #[test]
    fn shared_holders_coexist_and_exclusive_waits_for_them() {
        let mut w = 0;
        assert_eq!(attempt(&mut w, LockType::Shared), Outcome::Acquired);
        assert_eq!(attempt(&mut w, LockType::Shared), Outcome::Acquired);
        assert_eq!(attempt(&mut w, LockType::Exclusive), Outcome::Drain);
        assert!(!drained(w));
        // The claim now turns new readers and writers away.
        assert!(backs_out(&mut w, LockType::Shared));
        assert!(backs_out(&mut w, LockType::Exclusive));
        w = apply(w, release(LockType::Shared)).1;
        assert!(!drained(w));
        w = apply(w, release(LockType::Shared)).1;
        assert!(drained(w));
        assert_eq!(w, EXCLUSIVE);
        assert!(try_grant(&mut w));
        assert_eq!(w, EXCLUSIVE | GRANTED);
        w = apply(w, release(LockType::Exclusive)).1;
        assert_eq!(w, 0);
    }

    #[test]
    fn exclusive_blocks_everyone_and_release_keeps_inflight_shared_counts() {
        let mut w = 0;
        assert_eq!(attempt(&mut w, LockType::Exclusive), Outcome::Drain);
        assert!(drained(w) && try_grant(&mut w));
        assert!(backs_out(&mut w, LockType::Shared));
        assert!(backs_out(&mut w, LockType::Exclusive));
        assert_eq!(
            attempt_past(&mut w, LockType::Shared, true),
            Outcome::BackOut(Amo::FetchAdd(u64::MAX)),
            "nobody passes a granted claim"
        );
        assert_eq!(w, EXCLUSIVE | GRANTED);
        // A shared attempt in flight (incremented, not yet backed out) during the release.
        w = apply(w, acquire(LockType::Shared)).1;
        w = apply(w, release(LockType::Exclusive)).1;
        assert_eq!(w, 1);
        w = apply(w, Amo::FetchAdd(u64::MAX)).1;
        assert_eq!(w, 0);
    }

    #[test]
    fn holders_of_other_words_pass_standing_claims_and_the_claim_waits_for_them() {
        let mut w = 0;
        assert_eq!(attempt(&mut w, LockType::Exclusive), Outcome::Drain);
        assert!(backs_out(&mut w, LockType::Shared), "a fresh reader waits");
        assert_eq!(
            attempt_past(&mut w, LockType::Shared, true),
            Outcome::Acquired,
            "a lock_all epoch holding other words does not wait behind the claim"
        );
        assert!(!drained(w));
        w = apply(w, release(LockType::Shared)).1;
        // A reader slips in between the claim's look and its mark: the mark is taken back.
        assert!(drained(w));
        assert_eq!(
            attempt_past(&mut w, LockType::Shared, true),
            Outcome::Acquired
        );
        assert!(!try_grant(&mut w));
        assert_eq!(w, EXCLUSIVE | 1);
        w = apply(w, release(LockType::Shared)).1;
        assert!(try_grant(&mut w));
        w = apply(w, release(LockType::Exclusive)).1;
        assert_eq!(w, 0);
        // A claim withdrawn (lost to another) leaves nothing behind.
        assert_eq!(attempt(&mut w, LockType::Exclusive), Outcome::Drain);
        w = apply(w, withdraw()).1;
        assert_eq!(w, 0);
    }

    #[test]
    fn raw_lock_types() {
        assert_eq!(
            LockType::try_from(LockType::MPI_LOCK_SHARED).unwrap(),
            LockType::Shared
        );
        let e = LockType::try_from(7).unwrap_err();
        assert_eq!(e.class(), crate::error::ErrorClass::LockType);
    }

    #[test]
    fn many_shared_holders_never_look_claimed() {
        let mut w = 0;
        for _ in 0..1000 {
            assert_eq!(attempt(&mut w, LockType::Shared), Outcome::Acquired);
        }
        assert_eq!(w & !SHARED_MASK, 0);
        assert_eq!(attempt(&mut w, LockType::Exclusive), Outcome::Drain);
    }
}
