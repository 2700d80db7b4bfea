//! The lock word of a window target, driven by remote atomics (as in foMPI and Open MPI
//! osc/rdma): one fetch-add takes a shared lock, one compare-and-swap an exclusive one.
//!
//! The low 32 bits count shared holders (and shared attempts in flight); `EXCLUSIVE` marks an
//! exclusive holder. A shared attempt that sees `EXCLUSIVE` backs out with a fetch-add of -1. The
//! exclusive holder releases with a fetch-add of -`EXCLUSIVE`, not a store of 0, because shared
//! attempts may have bumped the count in the meantime.
//!
//! # MPI-4.1: 12.5.3

/// The bit of an exclusive holder.
pub const EXCLUSIVE: u64 = 1 << 32;

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
        LockType::Exclusive => Amo::CompareSwap {
            compare: 0,
            swap: EXCLUSIVE,
        },
    }
}

/// Whether the attempt whose atomic returned `old` got the lock.
pub fn acquired(kind: LockType, old: u64) -> bool {
    match kind {
        LockType::Shared => old & !(EXCLUSIVE - 1) == 0,
        LockType::Exclusive => old == 0,
    }
}

/// The atomic that undoes a failed attempt, if one is needed.
pub fn back_out(kind: LockType) -> Option<Amo> {
    match kind {
        LockType::Shared => Some(Amo::FetchAdd(u64::MAX)),
        LockType::Exclusive => None,
    }
}

/// The atomic that releases a held lock.
pub fn release(kind: LockType) -> Amo {
    match kind {
        LockType::Shared => Amo::FetchAdd(u64::MAX),
        LockType::Exclusive => Amo::FetchAdd(EXCLUSIVE.wrapping_neg()),
    }
}

/// Apply `amo` to `word` the way a NIC or CPU atomic would: returns (old, new).
pub fn apply(word: u64, amo: Amo) -> (u64, u64) {
    match amo {
        Amo::FetchAdd(v) => (word, word.wrapping_add(v)),
        Amo::CompareSwap { compare, swap } if word == compare => (word, swap),
        Amo::CompareSwap { .. } | Amo::Load => (word, word),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(word: &mut u64, kind: LockType) -> bool {
        let (old, new) = apply(*word, acquire(kind));
        *word = new;
        if acquired(kind, old) {
            return true;
        }
        if let Some(b) = back_out(kind) {
            *word = apply(*word, b).1;
        }
        false
    }

    #[test]
    fn shared_holders_coexist_and_block_exclusive() {
        let mut w = 0;
        assert!(attempt(&mut w, LockType::Shared));
        assert!(attempt(&mut w, LockType::Shared));
        assert!(!attempt(&mut w, LockType::Exclusive));
        assert_eq!(w, 2);
        w = apply(w, release(LockType::Shared)).1;
        w = apply(w, release(LockType::Shared)).1;
        assert!(attempt(&mut w, LockType::Exclusive));
        assert_eq!(w, EXCLUSIVE);
    }

    #[test]
    fn exclusive_blocks_everyone_and_release_keeps_inflight_shared_counts() {
        let mut w = 0;
        assert!(attempt(&mut w, LockType::Exclusive));
        assert!(!attempt(&mut w, LockType::Shared));
        assert!(!attempt(&mut w, LockType::Exclusive));
        assert_eq!(w, EXCLUSIVE);
        // A shared attempt in flight (incremented, not yet backed out) during the release.
        w = apply(w, acquire(LockType::Shared)).1;
        w = apply(w, release(LockType::Exclusive)).1;
        assert_eq!(w, 1);
        w = apply(w, back_out(LockType::Shared).unwrap()).1;
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
    fn many_shared_holders_never_look_exclusive() {
        let mut w = 0;
        for _ in 0..1000 {
            assert!(attempt(&mut w, LockType::Shared));
        }
        assert_eq!(w & EXCLUSIVE, 0);
        assert!(!attempt(&mut w, LockType::Exclusive));
    }
}
