//! Passive-target epochs at one origin: the targets it has locked, whether it holds lock_all,
//! and which targets' lock words it has actually taken. No I/O: the window takes and releases
//! the words ([`crate::protocol::lockword`]) as this state says.
//!
//! Two calls take fewer words than one per target and epoch:
//! - `lock` and `lock_all` asserting MPI_MODE_NOCHECK take none: the program guarantees that
//!   no conflicting lock is held meanwhile.
//! - `lock_all` takes a target's shared lock word at the first RMA call to that target, as
//!   MPICH does: an epoch that touches two targets of a thousand costs two atomics. The memory
//!   that this rank also reaches by loads and stores (its own, and node peers' memory mapped
//!   for `shared_query`), which the library does not see, has its words taken at once by the
//!   window, which then records them with [`Passive::taken`].
//!
//! A shared word taken while this origin holds other words is taken in
//! [`Mode::SharedPast`], which passes standing exclusive claims (see
//! [`crate::protocol::lockword`]); each held word remembers its mode, which its release undoes.
//!
//! # MPI-4.1: 12.5.3 (lock, lock_all; MPI_MODE_NOCHECK)

use crate::error::{Error, ErrorClass, Result};
use crate::protocol::lockword::{LockType, Mode};
use crate::protocol::sync_err;

/// A lock this origin holds on a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub kind: LockType,
    /// How the target's lock word was taken; `None` under NOCHECK.
    pub word: Option<Mode>,
}

/// How a lock_all epoch takes the targets' lock words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllWords {
    /// Each word at the first RMA call to its target (unless taken at once and recorded).
    Lazy,
    /// None (NOCHECK).
    Unchecked,
}

/// What an RMA call in a passive-target epoch needs before it moves anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Nothing: the epoch covers the target.
    Ready,
    /// The target's shared lock word, which a lazy lock_all has not taken yet, in this mode.
    TakeWord(Mode),
}

/// The lock_all epoch.
#[derive(Debug, Clone, Copy)]
struct All {
    /// Whether a target's shared lock word is taken at the first RMA call to it.
    lazy: bool,
}

/// Passive-target epoch state of one window at this origin.
#[derive(Debug, Clone)]
pub struct Passive {
    locks: Vec<Option<Held>>,
    held: usize,
    /// Lock words held, by locks and by lock_all.
    words: usize,
    all: Option<All>,
    /// `taken[t]` once the lock_all epoch holds `t`'s shared lock word, with how; after
    /// [`Passive::unlock_all`], what the epoch held, until the next lock_all. Kept from epoch to
    /// epoch (no allocation per lock_all).
    taken: Vec<Option<Mode>>,
}

impl Passive {
    /// No lock held, in a window of `n` ranks.
    pub fn new(n: usize) -> Passive {
        Passive {
            locks: vec![None; n],
            held: 0,
            words: 0,
            all: None,
            taken: vec![None; n],
        }
    }

    /// Whether a lock or lock_all epoch is open.
    pub fn open(&self) -> bool {
        self.all.is_some() || self.held > 0
    }

    /// Whether lock_all is held.
    pub fn holds_all(&self) -> bool {
        self.all.is_some()
    }

    /// What an RMA call to `target` needs, or `None` when no passive epoch covers it.
    #[inline]
    pub fn access(&self, target: usize) -> Option<Access> {
        match &self.all {
            Some(all) if all.lazy && self.taken.get(target).is_some_and(Option::is_none) => {
                Some(Access::TakeWord(Mode::shared(self.words > 0)))
            }
            Some(_) => Some(Access::Ready),
            None => self
                .locks
                .get(target)
                .is_some_and(|l| l.is_some())
                .then_some(Access::Ready),
        }
    }

    /// The mode in which a lock of `kind` takes its word now: a shared one passes standing
    /// claims while this origin holds other words.
    pub fn mode(&self, kind: LockType) -> Mode {
        match kind {
            LockType::Exclusive => Mode::Exclusive,
            LockType::Shared => Mode::shared(self.words > 0),
        }
    }

    /// The lock_all epoch now holds `target`'s shared lock word, taken in `mode`.
    pub fn taken(&mut self, target: usize, mode: Mode) {
        if let Some(t) = self.taken.get_mut(target).filter(|_| self.all.is_some()) {
            self.words += usize::from(t.is_none());
            *t = Some(mode);
        }
    }

    /// May a lock on `target` begin now? Changes nothing.
    pub fn may_lock(&self, target: usize) -> Result<()> {
        if self.all.is_some() {
            return Err(sync_err("lock while lock_all is held"));
        }
        match self.locks.get(target) {
            Some(None) => Ok(()),
            Some(Some(_)) => Err(sync_err(format!("rank {target} is already locked"))),
            None => Err(Error::new(
                ErrorClass::Rank,
                format!("rank {target} out of range"),
            )),
        }
    }

    /// Record the lock on `target`, which [`Passive::may_lock`] allowed in the same call (a
    /// target it would refuse is left as it is).
    pub fn lock(&mut self, target: usize, held: Held) {
        debug_assert!(
            self.may_lock(target).is_ok(),
            "lock of {target} not allowed"
        );
        if let (None, Some(slot @ None)) = (&self.all, self.locks.get_mut(target)) {
            *slot = Some(held);
            self.held += 1;
            self.words += usize::from(held.word.is_some());
        }
    }

    /// End the lock epoch on `target`; returns what was held.
    pub fn unlock(&mut self, target: usize) -> Result<Held> {
        match self.locks.get_mut(target).and_then(Option::take) {
            Some(held) => {
                self.held -= 1;
                self.words -= usize::from(held.word.is_some());
                Ok(held)
            }
            None => Err(sync_err(format!(
                "unlock of rank {target}, which is not locked"
            ))),
        }
    }

    /// May lock_all begin now? Changes nothing.
    pub fn may_lock_all(&self) -> Result<()> {
        if self.open() {
            return Err(sync_err("lock_all while a lock or lock_all is held"));
        }
        Ok(())
    }

    /// Record lock_all (allowed by [`Passive::may_lock_all`]), holding no word yet.
    pub fn lock_all(&mut self, words: AllWords) -> Result<()> {
        self.may_lock_all()?;
        self.all = Some(All {
            lazy: words == AllWords::Lazy,
        });
        self.taken.fill(None);
        Ok(())
    }

    /// End the lock_all epoch; [`Passive::released`] then names the words it held.
    pub fn unlock_all(&mut self) -> Result<()> {
        self.all
            .take()
            .ok_or_else(|| sync_err("unlock_all without lock_all"))?;
        // No lock is held beside lock_all: its words were all there were.
        self.words = 0;
        Ok(())
    }

    /// The targets whose shared lock words the last lock_all epoch held, with how each was
    /// taken: after [`Passive::unlock_all`], to release them (until the next lock_all).
    pub fn released(&self) -> impl Iterator<Item = (usize, Mode)> + '_ {
        let taken = self.taken.iter().enumerate();
        taken.filter_map(|(t, m)| m.map(|m| (t, m)))
    }

    /// The targets this origin holds a lock on, with what it holds (for cleanup at drop).
    pub fn held_locks(&self) -> impl Iterator<Item = (usize, Held)> + '_ {
        self.locks
            .iter()
            .enumerate()
            .filter_map(|(t, l)| l.map(|h| (t, h)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHARED: Held = Held {
        kind: LockType::Shared,
        word: Some(Mode::Shared),
    };

    #[test]
    fn locks_cover_their_target_only() {
        let mut p = Passive::new(3);
        assert_eq!(p.access(1), None);
        p.lock(1, SHARED);
        assert_eq!(p.access(1), Some(Access::Ready));
        assert_eq!(p.access(2), None);
        assert_eq!(p.may_lock(1).unwrap_err().class(), ErrorClass::RmaSync);
        assert_eq!(p.may_lock(3).unwrap_err().class(), ErrorClass::Rank);
        assert_eq!(p.may_lock_all().unwrap_err().class(), ErrorClass::RmaSync);
        assert_eq!(p.unlock(1).unwrap(), SHARED);
        assert_eq!(p.unlock(1).unwrap_err().class(), ErrorClass::RmaSync);
        assert!(!p.open());
    }

    #[test]
    fn lazy_lock_all_takes_a_word_at_the_first_access_only() {
        let mut p = Passive::new(4);
        p.lock_all(AllWords::Lazy).unwrap();
        assert_eq!(p.access(2), Some(Access::TakeWord(Mode::Shared)));
        p.taken(2, Mode::Shared);
        assert_eq!(p.access(2), Some(Access::Ready));
        assert_eq!(
            p.access(0),
            Some(Access::TakeWord(Mode::SharedPast)),
            "holding a word, the next one passes standing claims"
        );
        p.taken(0, Mode::SharedPast);
        assert_eq!(p.may_lock(0).unwrap_err().class(), ErrorClass::RmaSync);
        p.unlock_all().unwrap();
        assert_eq!(
            p.released().collect::<Vec<_>>(),
            [(0, Mode::SharedPast), (2, Mode::Shared)],
            "only the words taken are released, each as it was taken"
        );
        assert!(p.unlock_all().is_err());
        p.lock_all(AllWords::Lazy).unwrap();
        assert_eq!(p.released().count(), 0, "a new epoch holds no word yet");
        assert_eq!(p.access(0), Some(Access::TakeWord(Mode::Shared)));
        assert_eq!(p.mode(LockType::Shared), Mode::Shared, "nothing held now");
    }

    #[test]
    fn unchecked_lock_all_and_lock_take_no_word() {
        let mut p = Passive::new(3);
        p.lock_all(AllWords::Unchecked).unwrap();
        assert_eq!(p.access(1), Some(Access::Ready));
        p.unlock_all().unwrap();
        assert_eq!(p.released().count(), 0);
        let unchecked = Held {
            kind: LockType::Exclusive,
            word: None,
        };
        p.lock(2, unchecked);
        assert_eq!(p.held_locks().collect::<Vec<_>>(), [(2, unchecked)]);
        assert_eq!(
            p.mode(LockType::Shared),
            Mode::Shared,
            "NOCHECK holds no word"
        );
    }

    #[test]
    fn a_second_lock_passes_claims_while_the_first_word_is_held() {
        let mut p = Passive::new(3);
        assert_eq!(p.mode(LockType::Exclusive), Mode::Exclusive);
        assert_eq!(p.mode(LockType::Shared), Mode::Shared);
        let exclusive = Held {
            kind: LockType::Exclusive,
            word: Some(Mode::Exclusive),
        };
        p.lock(0, exclusive);
        assert_eq!(p.mode(LockType::Shared), Mode::SharedPast);
        p.unlock(0).unwrap();
        assert_eq!(p.mode(LockType::Shared), Mode::Shared);
    }
}
