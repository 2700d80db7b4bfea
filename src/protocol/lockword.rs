//! The lock word of a window target, driven by remote fetch-adds (as in foMPI and Open MPI
//! osc/rdma): one atomic takes an uncontended lock, shared or exclusive.
//!
//! The low 32 bits count shared holders (and shared attempts in flight); the high 32 bits count
//! exclusive claims. A shared attempt adds 1 and backs out (adds -1) if it saw a claim. An
//! exclusive attempt adds `EXCLUSIVE`: if it saw nothing it holds the lock; if it saw another
//! claim it backs out; if it saw only shared holders, its claim stands (new shared attempts now
//! back out) and it waits for the shared count to drain to 0. Writers therefore cannot be
//! starved by a stream of readers. Releases are fetch-adds, never stores, because attempts in
//! flight change the word at any time.
//!
//! # MPI-4.1: 12.5.3

/// One exclusive claim.
pub const EXCLUSIVE: u64 = 1 << 32;
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

/// The outcome of an attempt of `kind` whose atomic returned `old`.
pub fn outcome(kind: LockType, old: u64) -> Outcome {
    let claimed = old & !SHARED_MASK != 0;
    match kind {
        LockType::Shared if claimed => Outcome::BackOut(Amo::FetchAdd(u64::MAX)),
        LockType::Shared => Outcome::Acquired,
        LockType::Exclusive if claimed => Outcome::BackOut(release(LockType::Exclusive)),
        LockType::Exclusive if old == 0 => Outcome::Acquired,
        LockType::Exclusive => Outcome::Drain,
    }
}

/// Whether no shared holder is left, so that a standing exclusive claim holds the lock.
pub fn drained(word: u64) -> bool {
    word & SHARED_MASK == 0
}

/// The atomic that releases a held lock (or withdraws a standing exclusive claim).
pub fn release(kind: LockType) -> Amo {
    match kind {
        LockType::Shared => Amo::FetchAdd(u64::MAX),
        LockType::Exclusive => Amo::FetchAdd(EXCLUSIVE.wrapping_neg()),
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
    fn attempt(word: &mut u64, kind: LockType) -> Outcome {
        let (old, new) = apply(*word, acquire(kind));
        *word = new;
        let out = outcome(kind, old);
        if let Outcome::BackOut(undo) = out {
            *word = apply(*word, undo).1;
        }
        out
    }

    fn backs_out(word: &mut u64, kind: LockType) -> bool {
        matches!(attempt(word, kind), Outcome::BackOut(_))
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
        w = apply(w, release(LockType::Exclusive)).1;
        assert_eq!(w, 0);
    }

    #[test]
    fn exclusive_blocks_everyone_and_release_keeps_inflight_shared_counts() {
        let mut w = 0;
        assert_eq!(attempt(&mut w, LockType::Exclusive), Outcome::Acquired);
        assert!(backs_out(&mut w, LockType::Shared));
        assert!(backs_out(&mut w, LockType::Exclusive));
        assert_eq!(w, EXCLUSIVE);
        // A shared attempt in flight (incremented, not yet backed out) during the release.
        w = apply(w, acquire(LockType::Shared)).1;
        w = apply(w, release(LockType::Exclusive)).1;
        assert_eq!(w, 1);
        w = apply(w, Amo::FetchAdd(u64::MAX)).1;
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
