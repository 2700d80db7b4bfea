//! The epoch state of one window at one origin: which synchronization is open, and whether an
//! RMA call or a synchronization call is allowed now. No I/O: the window asks, then acts, and
//! records the call only once it succeeded ([`Epochs::issued`], [`Epochs::lock`] after
//! [`Epochs::may_lock`]), so a refused call leaves the state as it was.
//!
//! # MPI-4.1: 12.5 (synchronization calls), 12.5.1 (fence), 12.5.2 (post/start/complete/wait),
//! 12.5.3 (lock)

use crate::error::Result;
use crate::protocol::lockword::{LockType, Mode};
use crate::protocol::passive::{Access, AllWords, Held, Passive};
use crate::protocol::pscw::{PostWait, Pscw};
use crate::protocol::sync_err;

/// The fence epoch: opened by a fence without NOSUCCEED, closed by one with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fence {
    /// No fence epoch.
    Closed,
    /// A fence epoch is open; `used` once an RMA call was issued in it.
    Open { used: bool },
}

/// What a fence call has to do, as decided by [`Epochs::fence`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FencePlan {
    /// Whether RMA calls of the closing epoch must be completed first.
    pub complete_ops: bool,
}

/// Epoch state of one window at this origin.
#[derive(Debug, Clone)]
pub struct Epochs {
    fence: Fence,
    passive: Passive,
    pscw: Pscw,
}

impl Epochs {
    /// A window over `n` ranks, with no epoch open.
    pub fn new(n: usize) -> Epochs {
        Epochs {
            fence: Fence::Closed,
            passive: Passive::new(n),
            pscw: Pscw::new(n),
        }
    }

    fn passive(&self) -> bool {
        self.passive.open()
    }

    /// May an RMA call target `target` now, and what must it do first? Changes nothing:
    /// [`Epochs::issued`] records the call once it succeeded.
    #[inline]
    pub fn access(&self, target: usize) -> Result<Access> {
        if let Some(access) = self.passive.access(target) {
            return Ok(access);
        }
        if matches!(self.fence, Fence::Open { .. }) || self.pscw.covers(target) {
            return Ok(Access::Ready);
        }
        Err(sync_err(format!(
            "RMA call to rank {target} outside an access epoch (no fence, start, lock or lock_all covers it)"
        )))
    }

    /// An RMA call allowed by [`Epochs::access`] succeeded (or moved data before it failed):
    /// a fence epoch open now has RMA calls to complete.
    #[inline]
    pub fn issued(&mut self) {
        if let Fence::Open { used } = &mut self.fence {
            *used = true;
        }
    }

    /// Whether a request-based call (rput, rget, ...) may target `target` (passive target
    /// only), and what it must do first.
    pub fn passive_access(&self, target: usize) -> Result<Access> {
        self.passive.access(target).ok_or_else(|| {
            sync_err(format!(
                "request-based RMA call to rank {target} outside a passive-target epoch"
            ))
        })
    }

    /// The lock_all epoch now holds `target`'s shared lock word, taken in `mode`.
    pub fn taken(&mut self, target: usize, mode: Mode) {
        self.passive.taken(target, mode);
    }

    /// The mode in which a lock of `kind` takes its word now.
    pub fn lock_mode(&self, kind: LockType) -> Mode {
        self.passive.mode(kind)
    }

    /// A fence with `nosucceed` / `noprecede` asserts (already validated for the call).
    pub fn fence(&mut self, noprecede: bool, nosucceed: bool) -> Result<FencePlan> {
        if self.passive() {
            return Err(sync_err("fence inside a passive-target (lock) epoch"));
        }
        if self.pscw.accessing() || self.pscw.exposing() {
            return Err(sync_err(
                "fence inside an epoch of post/start/complete/wait",
            ));
        }
        let used = matches!(self.fence, Fence::Open { used: true });
        if noprecede && used {
            return Err(sync_err(
                "fence asserts NOPRECEDE but RMA calls were issued since the last fence",
            ));
        }
        self.fence = if nosucceed {
            Fence::Closed
        } else {
            Fence::Open { used: false }
        };
        Ok(FencePlan { complete_ops: used })
    }

    /// MPI_ERR_RMA_SYNC for `call` inside a fence epoch with RMA calls to complete: another
    /// epoch may begin only where the fence epoch is closed or unused.
    fn no_fence_calls(&self, call: &str) -> Result<()> {
        match self.fence {
            Fence::Open { used: true } => Err(sync_err(format!(
                "{call} inside a fence epoch with RMA calls"
            ))),
            _ => Ok(()),
        }
    }

    /// MPI_ERR_RMA_SYNC for `call` inside an access epoch of start.
    fn no_start_epoch(&self, call: &str) -> Result<()> {
        match self.pscw.accessing() {
            true => Err(sync_err(format!("{call} inside an access epoch of start"))),
            false => Ok(()),
        }
    }

    /// May a lock epoch on `target` begin now? Changes nothing: [`Epochs::lock`] records it
    /// once the lock is held.
    pub fn may_lock(&self, target: usize) -> Result<()> {
        if self.passive.holds_all() {
            return Err(sync_err("lock while lock_all is held"));
        }
        self.no_start_epoch("lock")?;
        self.no_fence_calls("lock")?;
        self.passive.may_lock(target)
    }

    /// Begin a lock epoch on `target` (which closes a fence epoch without RMA calls); `word`:
    /// how the target's lock word was taken (`None` under NOCHECK). Allowed by [`Epochs::may_lock`]
    /// earlier in the same call.
    pub fn lock(&mut self, kind: LockType, target: usize, word: Option<Mode>) {
        self.passive.lock(target, Held { kind, word });
        self.fence = Fence::Closed;
    }

    /// End the lock epoch on `target`; returns what was held.
    pub fn unlock(&mut self, target: usize) -> Result<Held> {
        self.passive.unlock(target)
    }

    /// May a lock_all epoch begin now? Changes nothing: [`Epochs::lock_all`] records it once
    /// every lock is held.
    pub fn may_lock_all(&self) -> Result<()> {
        self.passive.may_lock_all()?;
        self.no_start_epoch("lock_all")?;
        self.no_fence_calls("lock_all")?;
        Ok(())
    }

    /// Begin a lock_all epoch taking the lock words as `words` says (which closes a fence
    /// epoch without RMA calls). Allowed by [`Epochs::may_lock_all`] earlier in the same call:
    /// only the passive-target state is checked again.
    pub fn lock_all(&mut self, words: AllWords) -> Result<()> {
        self.passive.lock_all(words)?;
        self.fence = Fence::Closed;
        Ok(())
    }

    /// End the lock_all epoch; [`Epochs::released`] then names the words it held.
    pub fn unlock_all(&mut self) -> Result<()> {
        self.passive.unlock_all()
    }

    /// The targets whose shared lock words the last lock_all epoch held, with how each was
    /// taken (after [`Epochs::unlock_all`], until the next lock_all).
    pub fn released(&self) -> impl Iterator<Item = (usize, Mode)> + '_ {
        self.passive.released()
    }

    /// Begin an access epoch to `targets` (MPI_Win_start), which closes a fence epoch without
    /// RMA calls; returns the posts to wait for. A refused call changes nothing.
    pub fn start(&mut self, targets: &[usize], nocheck: bool) -> Result<Vec<PostWait>> {
        if self.passive() {
            return Err(sync_err("start inside a passive-target (lock) epoch"));
        }
        self.no_fence_calls("start")?;
        let waits = self.pscw.start(targets, nocheck)?;
        self.fence = Fence::Closed;
        Ok(waits)
    }

    /// Whether an access epoch of start is open.
    pub fn accessing(&self) -> bool {
        self.pscw.accessing()
    }

    /// End the access epoch (MPI_Win_complete); returns its targets.
    pub fn complete(&mut self) -> Result<Vec<usize>> {
        self.pscw.complete()
    }

    /// Begin an exposure epoch to `origins` ranks (MPI_Win_post), which closes a fence epoch
    /// without RMA calls.
    pub fn post(&mut self, origins: usize) -> Result<()> {
        self.no_fence_calls("post")?;
        self.pscw.post(origins)?;
        self.fence = Fence::Closed;
        Ok(())
    }

    /// The value the completion counter must reach to end the exposure epoch.
    pub fn completions_due(&self) -> Result<u64> {
        self.pscw.completions_due()
    }

    /// End the exposure epoch if the completion counter, read `count`, says every origin
    /// completed (MPI_Win_wait, MPI_Win_test).
    pub fn try_end_exposure(&mut self, count: u64) -> Result<bool> {
        self.pscw.try_end_exposure(count)
    }

    /// May flush / flush_local target `target`?
    pub fn flush(&self, target: usize) -> Result<()> {
        match self.passive.access(target) {
            Some(_) => Ok(()),
            None => Err(sync_err(format!(
                "flush of rank {target} outside a passive-target epoch"
            ))),
        }
    }

    /// May flush_all / flush_local_all / sync be called?
    pub fn flush_all(&self) -> Result<()> {
        if self.passive() {
            return Ok(());
        }
        Err(sync_err("flush_all outside a passive-target epoch"))
    }

    /// The targets this origin holds a lock on, with what it holds (for cleanup at drop).
    pub fn held_locks(&self) -> impl Iterator<Item = (usize, Held)> + '_ {
        self.passive.held_locks()
    }

    /// Whether lock_all is held.
    pub fn holds_lock_all(&self) -> bool {
        self.passive.holds_all()
    }

    /// May the window be freed? Every epoch must be closed (a fence epoch without RMA calls
    /// counts as closed: `fence; free` is the usual end).
    pub fn free(&self) -> Result<()> {
        if self.passive() {
            return Err(sync_err(
                "window freed while a lock or lock_all epoch is open",
            ));
        }
        if matches!(self.fence, Fence::Open { used: true }) {
            return Err(sync_err(
                "window freed with RMA calls not closed by a fence",
            ));
        }
        if self.pscw.accessing() || self.pscw.exposing() {
            return Err(sync_err(
                "window freed while an epoch of post/start/complete/wait is open",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    #[test]
    fn rma_needs_an_epoch() {
        let mut e = Epochs::new(2);
        assert_eq!(e.access(1).unwrap_err().class(), ErrorClass::RmaSync);
        e.fence(false, false).unwrap();
        e.access(1).unwrap();
        e.issued();
        assert_eq!(
            e.fence(true, false).unwrap_err().class(),
            ErrorClass::RmaSync
        );
        assert_eq!(
            e.fence(false, true).unwrap(),
            FencePlan { complete_ops: true }
        );
        assert_eq!(e.access(0).unwrap_err().class(), ErrorClass::RmaSync);
    }

    #[test]
    fn lock_covers_only_its_target() {
        let mut e = Epochs::new(3);
        e.lock(LockType::Shared, 1, Some(Mode::Shared));
        e.access(1).unwrap();
        assert!(e.access(2).is_err());
        assert!(e.passive_access(1).is_ok());
        assert_eq!(e.may_lock(1).unwrap_err().class(), ErrorClass::RmaSync);
        assert_eq!(
            e.fence(false, false).unwrap_err().class(),
            ErrorClass::RmaSync
        );
        assert_eq!(
            e.lock_all(AllWords::Lazy).unwrap_err().class(),
            ErrorClass::RmaSync
        );
        assert_eq!(e.free().unwrap_err().class(), ErrorClass::RmaSync);
        assert_eq!(e.unlock(1).unwrap().kind, LockType::Shared);
        assert_eq!(e.unlock(1).unwrap_err().class(), ErrorClass::RmaSync);
        assert_eq!(e.may_lock(3).unwrap_err().class(), ErrorClass::Rank);
        e.free().unwrap();
    }

    #[test]
    fn lock_all_and_flush() {
        let mut e = Epochs::new(2);
        assert!(e.flush(0).is_err());
        assert!(e.flush_all().is_err());
        assert!(e.unlock_all().is_err());
        e.lock_all(AllWords::Lazy).unwrap();
        e.access(0).unwrap();
        e.flush(1).unwrap();
        e.flush_all().unwrap();
        assert!(e.may_lock(0).is_err());
        e.unlock_all().unwrap();
        assert!(e.flush_all().is_err());
    }

    #[test]
    fn unused_fence_epoch_gives_way_to_lock() {
        let mut e = Epochs::new(2);
        e.fence(true, false).unwrap();
        e.may_lock(0).unwrap();
        e.lock(LockType::Exclusive, 0, Some(Mode::Exclusive));
        e.unlock(0).unwrap();
        assert!(
            e.access(0).is_err(),
            "the lock closed the unused fence epoch"
        );
        e.fence(false, false).unwrap();
        e.access(0).unwrap();
        e.issued();
        assert!(e.may_lock(0).is_err(), "RMA calls since the fence");
        assert!(e.free().is_err());
        e.fence(false, false).unwrap();
        e.free().unwrap();
    }

    #[test]
    fn refused_calls_leave_the_fence_epoch_unused() {
        let mut e = Epochs::new(2);
        e.fence(true, false).unwrap();
        // An RMA call that was allowed but then refused (by a later check or the transport)
        // never reaches `issued`: the epoch may still be closed with NOPRECEDE, and may give
        // way to a lock.
        e.access(1).unwrap();
        e.fence(true, false).unwrap();
        e.access(1).unwrap();
        e.may_lock(1).unwrap();
        e.may_lock_all().unwrap();
        e.access(0).unwrap();
        assert_eq!(
            e.fence(true, false).unwrap(),
            FencePlan {
                complete_ops: false
            }
        );
        // A lock that could not be taken is never recorded: the fence epoch is still open.
        e.may_lock(0).unwrap();
        e.access(1).unwrap();
        e.issued();
        assert_eq!(
            e.fence(true, false).unwrap_err().class(),
            ErrorClass::RmaSync,
            "a call that succeeded is remembered"
        );
        assert_eq!(e.may_lock(0).unwrap_err().class(), ErrorClass::RmaSync);
        assert_eq!(e.may_lock_all().unwrap_err().class(), ErrorClass::RmaSync);
        assert_eq!(e.may_lock(2).unwrap_err().class(), ErrorClass::RmaSync);
        assert_eq!(
            e.fence(false, true).unwrap(),
            FencePlan { complete_ops: true }
        );
        assert_eq!(e.may_lock(2).unwrap_err().class(), ErrorClass::Rank);
    }

    #[test]
    fn issued_outside_a_fence_epoch_changes_nothing() {
        let mut e = Epochs::new(2);
        e.lock(LockType::Shared, 1, Some(Mode::Shared));
        e.access(1).unwrap();
        e.issued();
        e.unlock(1).unwrap();
        assert_eq!(e.access(1).unwrap_err().class(), ErrorClass::RmaSync);
        assert_eq!(
            e.fence(true, false).unwrap(),
            FencePlan {
                complete_ops: false
            }
        );
        e.free().unwrap();
    }

    #[test]
    fn start_covers_its_group_and_excludes_other_epochs() {
        let mut e = Epochs::new(4);
        e.fence(false, false).unwrap();
        e.post(2).unwrap();
        let waits = e.start(&[2, 3], false).unwrap();
        assert_eq!(waits.len(), 2);
        e.access(2).unwrap();
        e.access(3).unwrap();
        assert_eq!(e.access(1).unwrap_err().class(), ErrorClass::RmaSync);
        assert!(
            e.passive_access(2).is_err(),
            "requests are for passive target"
        );
        assert!(e.flush(2).is_err());
        for refused in [
            e.may_lock(1),
            e.may_lock_all(),
            e.fence(false, false).map(drop),
        ] {
            assert_eq!(refused.unwrap_err().class(), ErrorClass::RmaSync);
        }
        assert_eq!(e.free().unwrap_err().class(), ErrorClass::RmaSync);
        assert_eq!(e.complete().unwrap(), [2, 3]);
        assert_eq!(e.access(2).unwrap_err().class(), ErrorClass::RmaSync);
        assert_eq!(
            e.fence(false, false).unwrap_err().class(),
            ErrorClass::RmaSync,
            "the exposure epoch is still open"
        );
        assert!(e.try_end_exposure(2).unwrap());
        e.free().unwrap();
    }

    #[test]
    fn start_and_post_refuse_other_open_epochs() {
        let mut e = Epochs::new(2);
        e.lock(LockType::Shared, 1, Some(Mode::Shared));
        assert_eq!(
            e.start(&[1], false).unwrap_err().class(),
            ErrorClass::RmaSync
        );
        e.unlock(1).unwrap();
        e.fence(false, false).unwrap();
        e.access(1).unwrap();
        e.issued();
        assert_eq!(
            e.start(&[1], false).unwrap_err().class(),
            ErrorClass::RmaSync
        );
        assert_eq!(e.post(1).unwrap_err().class(), ErrorClass::RmaSync);
        e.fence(false, true).unwrap();
        e.start(&[1], false).unwrap();
    }
}
