//! Synchronization calls: fence, lock/unlock, lock_all/unlock_all, flush, sync (post, start,
//! complete and wait are in `pscw`).
//!
//! The decisions (is this call allowed now?) come from [`crate::protocol::epoch`]; the lock
//! words and the barrier are driven with the transport's atomics on the targets' control blocks,
//! so the same code runs over shared memory and over a NIC.
//!
//! # MPI-4.1: 12.5

use super::Window;
use crate::error::in_call;
use crate::error::{Error, ErrorClass, Result};
use crate::protocol::assert::{self, Assert};
use crate::protocol::barrier::{Barrier, Step};
use crate::protocol::layout;
use crate::protocol::lockword::{Amo, LockType, Mode, Next, Taking};
use crate::protocol::passive::{Access, AllWords};
use crate::transport::Space;
use crate::wait;

impl Window<'_> {
    /// Dissemination barrier over the window's control blocks.
    pub(super) fn barrier(&self) -> Result<()> {
        let n = self.comm.size();
        let me = self.comm.rank();
        let generation = self.barriers.get() + 1;
        self.barriers.set(generation);
        let ctrl = &self.ctrl;
        // Every rank is watched, not just the one signalling this round (a live rank may be
        // stuck behind a dead one), but a rank that completed this barrier before it died owes
        // nobody a signal.
        // Ranks whose process can be watched are on this node, so their completion marks are
        // read from the node segment, which outlives them.
        let freed_at = ctrl.atomic_u64(layout::FREED_AT)?;
        let watch = || {
            self.peers.job_alive()?;
            let freed = freed_at.load(std::sync::atomic::Ordering::Acquire);
            if freed != 0 && generation >= freed {
                return Err(Error::new(
                    ErrorClass::RmaSync,
                    format!(
                        "rank {} freed the window after {} fences, and this rank waits in fence \
                         {generation}",
                        (me + n - 1) % n,
                        freed - 1
                    ),
                ));
            }
            for r in self.peers.all_gone() {
                let done = self
                    .node()
                    .amo(r, Space::Control, layout::BARRIER_DONE, Amo::Load);
                if done.map_or(true, |d| d < generation) {
                    return Err(self.peers.failed(r));
                }
            }
            Ok(())
        };
        let mut rounds = Barrier::new(me, n, generation);
        loop {
            match rounds.step() {
                Step::Signal { to, round } => {
                    self.atomic_route()
                        .signal(to, layout::barrier_slot(round), 1)?;
                }
                Step::Wait { round, until } => {
                    let slot = layout::barrier_slot(round);
                    let value =
                        wait::until(ctrl, slot, |v| v >= until, self.atomic_route(), &watch)
                            .map_err(|e| {
                                Error::new(
                                    e.class(),
                                    format!("fence/free barrier: {}", e.message()),
                                )
                            })?;
                    rounds.arrived(value);
                }
                Step::Done => break,
            }
        }
        ctrl.atomic_u64(layout::BARRIER_DONE)?
            .store(generation, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Complete every operation this rank issued, then tell the next rank (in rank order) that
    /// this one frees the window after the fences it completed: a rank still waiting in a later
    /// fence learns that it never completes ([`layout::FREED_AT`]) and fails with
    /// MPI_ERR_RMA_SYNC, frees in turn and tells the next, so that a rank that leaves early
    /// (returning an error) ends the others' fences instead of hanging them.
    pub(super) fn announce_free(&self) -> Result<()> {
        self.transports().try_for_each(|t| t.flush_all())?;
        let (me, n) = (self.comm.rank(), self.comm.size());
        if n == 1 {
            return Ok(());
        }
        let done = self
            .ctrl
            .atomic_u64(layout::BARRIER_DONE)?
            .load(std::sync::atomic::Ordering::Acquire);
        self.atomic_route()
            .amo(
                (me + 1) % n,
                Space::Control,
                layout::FREED_AT,
                Amo::FetchAdd(done + 1),
            )
            .map(drop)
    }

    /// Fails once any rank of the window is gone (for waits on locks, which any rank may hold).
    pub(super) fn watch_all(&self) -> Result<()> {
        self.peers.all_alive()
    }

    /// Collective fence: completes every RMA call of the epoch it closes, at origin and target,
    /// and opens the next one unless `NOSUCCEED` is asserted. Accepts NOSTORE, NOPUT, NOPRECEDE,
    /// NOSUCCEED (others: MPI_ERR_ASSERT).
    ///
    /// # MPI-4.1: 12.5.1 (MPI_WIN_FENCE)
    pub fn fence(&self, assert: Assert) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Win_fence", || {
            assert.check(assert::FENCE, "fence")?;
            let plan = self.epochs.borrow_mut().fence(
                assert.contains(Assert::NOPRECEDE),
                assert.contains(Assert::NOSUCCEED),
            )?;
            if plan.complete_ops {
                self.transports().try_for_each(|t| t.flush_all())?;
            }
            self.barrier()
        })
    }

    fn check_target(&self, target: usize) -> Result<()> {
        self.extent(target).map(drop)
    }

    /// `e`, or MPI_ERR_RANK where `target` is not a rank of the window: a refused call whose
    /// common path leaves the rank to the epoch's checks (which refuse a rank out of range too)
    /// still reports the rank first.
    #[cold]
    fn rank_first(&self, target: usize, e: Error) -> Error {
        self.check_target(target).err().unwrap_or(e)
    }

    /// Take `target`'s lock word in `mode`, backing off while it is held in conflict; an
    /// attempt that fails (a rank died) withdraws what it left in the word. Always inlined:
    /// left to the compiler, lock called it out of line once more callers took it (+30
    /// instructions on lock+put+unlock, `compare/instructions.sh`).
    #[inline(always)]
    fn acquire(&self, mode: Mode, target: usize) -> Result<()> {
        let mut taking = Taking::new(mode);
        // An uncontended lock is one atomic: taken before any waiting is set up.
        match taking.advance(self.lock_word(target, taking.amo())?) {
            Next::Held => Ok(()),
            _ => self.acquire_contended(taking, target),
        }
    }

    /// Go on taking `target`'s lock word where the first atomic of `taking` did not take it.
    #[inline(never)]
    fn acquire_contended(&self, mut taking: Taking, target: usize) -> Result<()> {
        let word = |op| self.lock_word(target, op);
        let attempt = || loop {
            match taking.advance(word(taking.amo())?) {
                Next::Held => return Ok(Some(())),
                Next::Now => continue,
                Next::Later => return Ok(None),
            }
        };
        let watch = || self.watch_all();
        let held = match self.direct.block(target) {
            Some(ctrl) => wait::retry_rung(ctrl, &watch, attempt),
            None => wait::retry(self.atomic_route(), &watch, attempt),
        };
        if let (Err(_), Some(undo)) = (&held, taking.abandon()) {
            let _ = word(undo);
        }
        held
    }

    /// Complete at `target` what this rank issued to it, where an atomic that signals the end
    /// of an epoch to it would not otherwise come after (the atomic route orders atomics after
    /// earlier operations only for the targets it also moves data to, and where its caps say so).
    pub(super) fn settle_before_signal(&self, target: usize) -> Result<()> {
        if self.routes[target] != self.atomics || !self.atomics_ordered {
            self.complete_at(target)?;
        }
        Ok(())
    }

    #[inline]
    fn release_lock(&self, mode: Mode, target: usize) -> Result<()> {
        self.settle_before_signal(target)?;
        self.release_word(mode, target)
    }

    /// Give back `target`'s lock word held in `mode`, waking the ranks asleep until it is
    /// released where it is a CPU atomic ([`wait::retry_rung`]).
    #[inline(always)]
    fn release_word(&self, mode: Mode, target: usize) -> Result<()> {
        match self.direct.lock(target) {
            Some((word, ctrl)) => {
                mode.release().on(word);
                wait::ring_lock(ctrl)
            }
            None => self.lock_word(target, mode.release()).map(drop),
        }
    }

    /// `op` on `target`'s lock word: a CPU atomic where the window reaches it so, through the
    /// atomic route otherwise.
    #[inline]
    fn lock_word(&self, target: usize, op: Amo) -> Result<u64> {
        match self.direct.word(target, layout::LOCK) {
            Some(word) => Ok(op.on(word)),
            None => self
                .atomic_route()
                .amo(target, Space::Control, layout::LOCK, op),
        }
    }

    fn lockable(&self, assert: Assert, call: &str) -> Result<()> {
        assert.check(assert::LOCK, call)?;
        if self.hints.get().no_locks {
            return Err(Error::new(
                ErrorClass::RmaSync,
                format!("{call} on a window created with info no_locks=true"),
            ));
        }
        Ok(())
    }

    /// Begin a passive-target epoch on `target` with a shared or exclusive lock. Accepts NOCHECK
    /// (no conflicting lock is held meanwhile: the lock word is not touched). A lock that cannot
    /// be taken changes no epoch state.
    ///
    /// # MPI-4.1: 12.5.3 (MPI_WIN_LOCK)
    pub fn lock(&self, kind: LockType, target: usize, assert: Assert) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Win_lock", || {
            let lock = || {
                self.lockable(assert, "lock")?;
                let word = {
                    let epochs = self.epochs.borrow();
                    epochs.may_lock(target)?;
                    (!assert.contains(Assert::NOCHECK)).then(|| epochs.lock_mode(kind))
                };
                if let Some(mode) = word {
                    self.acquire(mode, target)?;
                }
                self.epochs.borrow_mut().lock(kind, target, word);
                Ok(())
            };
            lock().map_err(|e| self.rank_first(target, e))
        })
    }

    /// End the epoch on `target`: its RMA calls complete at origin and target, then the lock is
    /// released.
    ///
    /// # MPI-4.1: 12.5.3 (MPI_WIN_UNLOCK)
    pub fn unlock(&self, target: usize) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Win_unlock", || {
            let unlocked = self.epochs.borrow_mut().unlock(target);
            let held = unlocked.map_err(|e| self.rank_first(target, e))?;
            match held.word {
                Some(mode) => self.release_lock(mode, target),
                None => self.complete_at(target),
            }
        })
    }

    /// Begin a shared-lock epoch on every rank of the window. Accepts NOCHECK (no lock word is
    /// touched). A target's shared lock word is taken at the first RMA call to it, except for
    /// memory this rank reaches by loads and stores too (its own, and node peers' memory that
    /// `shared_query` maps), whose words are taken now, in rank order and each behind standing
    /// exclusive claims (the order rules out a cycle among them, and a stream of lock_all
    /// epochs cannot starve a writer); if one cannot be, those taken are released and no
    /// epoch state changes.
    ///
    /// # MPI-4.1: 12.5.3 (MPI_WIN_LOCK_ALL)
    pub fn lock_all(&self, assert: Assert) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Win_lock_all", || {
            self.lockable(assert, "lock_all")?;
            self.epochs.borrow().may_lock_all()?;
            let eager = !assert.contains(Assert::NOCHECK);
            let (words, now) = match eager {
                true => (AllWords::Lazy, &self.loaded[..]),
                false => (AllWords::Unchecked, &[][..]),
            };
            for (i, &target) in now.iter().enumerate() {
                if let Err(e) = self.acquire(Mode::Shared, target) {
                    for &held in &now[..i] {
                        let _ = self.release_lock(Mode::Shared, held);
                    }
                    return Err(e);
                }
            }
            let mut epochs = self.epochs.borrow_mut();
            epochs.lock_all(words)?;
            now.iter().for_each(|&t| epochs.taken(t, Mode::Shared));
            Ok(())
        })
    }

    /// The checks of an RMA call to `target`, and the shared lock word a lazy lock_all takes
    /// at the first call to it; `passive`: only a passive-target epoch covers request-based
    /// calls.
    #[inline(always)]
    pub(super) fn enter(&self, target: usize, passive: bool) -> Result<()> {
        let epochs = self.epochs.borrow();
        let access = match passive {
            true => epochs.passive_access(target)?,
            false => epochs.access(target)?,
        };
        drop(epochs);
        if let Access::TakeWord(mode) = access {
            self.acquire(mode, target)?;
            self.epochs.borrow_mut().taken(target, mode);
        }
        Ok(())
    }

    /// End the lock_all epoch: every RMA call completes, then every shared lock word taken is
    /// released.
    ///
    /// # MPI-4.1: 12.5.3 (MPI_WIN_UNLOCK_ALL)
    pub fn unlock_all(&self) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Win_unlock_all", || {
            self.epochs.borrow_mut().unlock_all()?;
            self.complete_all()?;
            // Every operation is complete at every target now: each word is released as it
            // was taken, with nothing to settle first. (Releasing a word reads no epoch state
            // and changes none.)
            let epochs = self.epochs.borrow();
            let mut released = epochs.released();
            released.try_for_each(|(t, mode)| self.release_word(mode, t))
        })
    }

    /// Complete every RMA call to `target` at origin and target; the epoch stays open.
    ///
    /// # MPI-4.1: 12.5.4 (MPI_WIN_FLUSH)
    #[inline]
    pub fn flush(&self, target: usize) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Win_flush", || {
            self.check_target(target)?;
            self.epochs.borrow().flush(target)?;
            self.complete_at(target)
        })
    }

    /// Complete at `target` every operation to it: data moves and, where they take another
    /// transport, atomics.
    #[inline]
    pub(super) fn complete_at(&self, target: usize) -> Result<()> {
        if self.direct.fenced(target) {
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            return Ok(());
        }
        self.unreported.take()?;
        self.route(target).flush(target)?;
        if self.routes[target] != self.atomics {
            self.atomic_route().flush(target)?;
        }
        Ok(())
    }

    /// Complete every operation this rank issued, at every target: a memory fence where every
    /// target's operations complete when issued.
    fn complete_all(&self) -> Result<()> {
        if self.direct.all_fenced() {
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            return Ok(());
        }
        self.unreported.take()?;
        self.transports().try_for_each(|t| t.flush_all())
    }

    /// Complete every RMA call at origin and targets. # MPI-4.1: 12.5.4 (MPI_WIN_FLUSH_ALL)
    pub fn flush_all(&self) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Win_flush_all", || {
            self.epochs.borrow().flush_all()?;
            self.complete_all()
        })
    }

    /// Complete every RMA call to `target` at the origin: its buffers may be reused.
    ///
    /// # MPI-4.1: 12.5.4 (MPI_WIN_FLUSH_LOCAL)
    #[inline]
    pub fn flush_local(&self, target: usize) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Win_flush_local", || {
            self.check_target(target)?;
            self.epochs.borrow().flush(target)?;
            self.route(target).flush_local(target)
        })
    }

    /// Complete every RMA call at the origin. # MPI-4.1: 12.5.4 (MPI_WIN_FLUSH_LOCAL_ALL)
    pub fn flush_local_all(&self) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Win_flush_local_all", || {
            self.epochs.borrow().flush_all()?;
            self.transports().try_for_each(|t| t.flush_local_all())
        })
    }

    /// Synchronize the private and public copies of this rank's window memory (a full memory
    /// barrier between local loads/stores and RMA), and let the transports move what arrived:
    /// a rank that polls its memory for a flag between calls of `sync` (MPI-4.1's idiom) sees
    /// writes that need the target's progress (libfabric's tcp;ofi_rxm) as soon as they land.
    /// Valid inside a passive-target epoch.
    ///
    /// # MPI-4.1: 12.5.4 (MPI_WIN_SYNC)
    pub fn sync(&self) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Win_sync", || {
            self.epochs.borrow().flush_all()?;
            self.transports().try_for_each(|t| t.progress())?;
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            Ok(())
        })
    }

    /// Release whatever this rank still holds (at free or drop), so that other ranks are not
    /// blocked by an epoch this rank forgot to close.
    pub(super) fn close_epochs(&self) -> Result<()> {
        let held: Vec<usize> = self.epochs.borrow().held_locks().map(|(t, _)| t).collect();
        let mut result = Ok(());
        for target in held {
            result = result.and(self.unlock(target));
        }
        if self.epochs.borrow().holds_lock_all() {
            result = result.and(self.unlock_all());
        }
        if self.epochs.borrow().accessing() {
            result = result.and(self.complete());
        }
        result
    }
}
