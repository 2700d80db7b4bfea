//! The lock word of a window target, driven by remote atomics (as in foMPI and Open MPI
//! osc/rdma): one atomic takes an uncontended lock, shared or exclusive.
//!
//! The word holds four fields: a count of shared holders and shared attempts in flight
//! ([`SHARED`] units), a count of shared holders that passed a standing claim ([`PAST`] units),
//! a flag set while an exclusive lock is granted ([`GRANTED`]), and a count of exclusive claims
//! ([`CLAIM`] units).
//!
//! - **Shared** ([`Mode::Shared`]): add [`SHARED`]; back out (subtract it) if any claim stood.
//! - **Exclusive** ([`Mode::Exclusive`]): compare-and-swap the free word to [`EXCLUSIVE`] (a
//!   claim, granted). Else add [`CLAIM`]: if another claim stood, back out; if only readers
//!   held the word, the claim stands, so new shared attempts back out and a stream of readers
//!   cannot starve the writer. A standing claim waits until the readers are gone, then adds
//!   [`GRANTED`] and holds the lock if no [`PAST`] reader came in meanwhile (else it takes the
//!   flag back and waits again).
//! - **Shared past claims** ([`Mode::SharedPast`]): an origin that already holds other lock
//!   words (a lazy lock_all epoch at its next target, a second lock) must not wait behind a
//!   claim: two such epochs and two exclusive claims could wait on each other in a cycle (A
//!   holds B's word and waits behind F's claim on D, F waits for G's share of D, G holds D
//!   and waits behind C's claim on B, C waits for A's share of B). It adds [`PAST`] and backs
//!   out only of a granted lock, whose holder waits for nothing.
//!
//! Releases are fetch-adds, never stores, because attempts in flight change the word at any
//! time. An attempt is the I/O-free state machine [`Taking`]: the window issues the atomic it
//! names and feeds back the old value.
//!
//! # MPI-4.1: 12.5.3

use std::sync::atomic::{AtomicU64, Ordering};

/// One shared holder (or shared attempt in flight).
pub const SHARED: u64 = 1;
/// One shared holder that passed a standing claim ([`Mode::SharedPast`]).
pub const PAST: u64 = 1 << 20;
/// Set while an exclusive claim holds the lock.
pub const GRANTED: u64 = 1 << 40;
/// One exclusive claim (standing, granted or backing out).
pub const CLAIM: u64 = 1 << 41;
/// The word of a target locked exclusively: one claim, granted.
pub const EXCLUSIVE: u64 = CLAIM | GRANTED;
const SHARED_MASK: u64 = PAST - 1;
const PAST_MASK: u64 = (GRANTED - 1) & !SHARED_MASK;
const CLAIMS: u64 = !(CLAIM - 1);

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

impl Amo {
    /// This operation on `word` as a CPU atomic (where the word is mapped here); the old value.
    #[inline]
    pub fn on(self, word: &AtomicU64) -> u64 {
        match self {
            Amo::FetchAdd(v) => word.fetch_add(v, Ordering::SeqCst),
            Amo::CompareSwap { compare, swap } => word
                .compare_exchange(compare, swap, Ordering::SeqCst, Ordering::SeqCst)
                .unwrap_or_else(|old| old),
            Amo::Load => word.load(Ordering::SeqCst),
        }
    }
}

/// How an origin takes a lock word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// An exclusive lock.
    Exclusive,
    /// A shared lock by an origin that holds no other lock word: it waits behind a standing
    /// exclusive claim.
    Shared,
    /// A shared lock by an origin that holds other lock words: it passes standing claims and
    /// waits only for a granted exclusive lock.
    SharedPast,
}

impl Mode {
    /// The shared mode for an origin that holds other lock words (`holding`) or none.
    pub fn shared(holding: bool) -> Mode {
        match holding {
            true => Mode::SharedPast,
            false => Mode::Shared,
        }
    }

    /// What this mode adds to the word while it holds the lock.
    fn unit(self) -> u64 {
        match self {
            Mode::Exclusive => EXCLUSIVE,
            Mode::Shared => SHARED,
            Mode::SharedPast => PAST,
        }
    }

    /// The atomic that releases a lock taken in this mode.
    pub fn release(self) -> Amo {
        Amo::FetchAdd(self.unit().wrapping_neg())
    }
}

/// Where an attempt stands: which atomic it issues next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The first atomic of a try.
    Try,
    /// Exclusive, the word was not free: place a claim.
    Claim,
    /// Undo what the try added, then try again later.
    BackOut(Amo),
    /// A standing claim reads the word until its readers are gone. `readers_gone`: the shared
    /// holders from before the claim have left (later [`SHARED`] adds only back out), so only
    /// [`PAST`] holders are waited for.
    Drain { readers_gone: bool },
    /// The drained claim marks itself granted.
    Grant,
    /// A [`PAST`] holder came in before the mark: take it back.
    Ungrant,
}

/// What the caller does after feeding an old value to [`Taking::advance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// The lock is held.
    Held,
    /// Issue [`Taking::amo`] at once.
    Now,
    /// Back off, then issue [`Taking::amo`].
    Later,
}

/// One origin's attempt to take a lock word in a [`Mode`].
#[derive(Debug, Clone)]
pub struct Taking {
    mode: Mode,
    step: Step,
}

impl Taking {
    /// An attempt that has issued nothing yet.
    pub fn new(mode: Mode) -> Taking {
        Taking {
            mode,
            step: Step::Try,
        }
    }

    /// The atomic to issue on the word now.
    pub fn amo(&self) -> Amo {
        match self.step {
            Step::Try if self.mode == Mode::Exclusive => Amo::CompareSwap {
                compare: 0,
                swap: EXCLUSIVE,
            },
            Step::Try => Amo::FetchAdd(self.mode.unit()),
            Step::Claim => Amo::FetchAdd(CLAIM),
            Step::BackOut(undo) => undo,
            Step::Drain { .. } => Amo::Load,
            Step::Grant => Amo::FetchAdd(GRANTED),
            Step::Ungrant => Amo::FetchAdd(GRANTED.wrapping_neg()),
        }
    }

    /// Feed back the old value that [`Taking::amo`] returned.
    pub fn advance(&mut self, old: u64) -> Next {
        let back_out = |unit: u64| (Step::BackOut(Amo::FetchAdd(unit.wrapping_neg())), Next::Now);
        let (step, next) = match (self.step, self.mode) {
            (Step::Try, Mode::Exclusive) if old == 0 => return Next::Held,
            (Step::Try, Mode::Exclusive) => (Step::Claim, Next::Now),
            (Step::Try, Mode::Shared) if old & CLAIMS != 0 => back_out(SHARED),
            (Step::Try, Mode::SharedPast) if old & GRANTED != 0 => back_out(PAST),
            (Step::Try, _) => return Next::Held,
            (Step::Claim, _) if old & CLAIMS != 0 => back_out(CLAIM),
            (Step::Claim, _) => (
                Step::Drain {
                    readers_gone: false,
                },
                Next::Now,
            ),
            (Step::BackOut(_), _) => (Step::Try, Next::Later),
            (Step::Drain { readers_gone }, _) => {
                let gone = readers_gone || old & SHARED_MASK == 0;
                match gone && old & PAST_MASK == 0 {
                    true => (Step::Grant, Next::Now),
                    false => (Step::Drain { readers_gone: gone }, Next::Later),
                }
            }
            (Step::Grant, _) if old & PAST_MASK == 0 => return Next::Held,
            (Step::Grant, _) => (Step::Ungrant, Next::Now),
            (Step::Ungrant, _) => (Step::Drain { readers_gone: true }, Next::Later),
        };
        self.step = step;
        next
    }

    /// The atomic that withdraws what this attempt left in the word, for an attempt abandoned
    /// (on an error) before it held the lock; `None` when it left nothing.
    pub fn abandon(&self) -> Option<Amo> {
        match self.step {
            Step::Try | Step::Claim => None,
            Step::BackOut(undo) => Some(undo),
            Step::Drain { .. } | Step::Grant => Some(Amo::FetchAdd(CLAIM.wrapping_neg())),
            Step::Ungrant => Some(Mode::Exclusive.release()),
        }
    }
}

#[cfg(test)]
mod tests;
