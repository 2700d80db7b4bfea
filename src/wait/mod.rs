//! Waiting for other processes: spin, then yield, then sleep, and never forever.
//!
//! Eight ranks on two cores must all make progress, so a waiter spins only briefly before it
//! yields the core, and then sleeps: on its own doorbell (a futex that the shared-memory
//! transport rings after changing a control word), on the completion channel of a transport
//! whose senders wake their target through it (direct verbs), or in short naps where nothing
//! wakes the waiter.
//! Where every rank has a CPU, a waiter for its own memory yields for a while before it sleeps,
//! since waking costs more than the skew of a barrier.
//! Whenever it sleeps it checks that the processes it waits for are alive, so a dead peer gives
//! MPI_ERR_PROC_FAILED within a bounded time instead of a hang.

use crate::error::{Error, ErrorClass, Result};
use crate::protocol::layout;
use onesided_shm::{Mem, SyncMem, futex};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod crowd;
mod pause;

use crowd::CROWDED_YIELDS;
pub(crate) use crowd::{crowded, progress_thread, set_crowded, spare_cpu, unbound_cpus};
#[cfg(have_libfabric)]
pub(crate) use crowd::{crowded_with, progress_shares_cpus, set_progress_thread};
use pause::Pause;

/// Polls of a fabric between two yields of a waiter.
const YIELD_EVERY: u32 = 16;
/// How long one sleep lasts at most before the waiter looks again and checks its peers.
pub(crate) const NAP: Duration = Duration::from_millis(10);

/// What a wait needs of the transport it depends on: a way to drive its progress, and how to
/// pace the waiter between looks.
pub(crate) trait Progress {
    /// Drives the transport's progress: this rank's operations and those it serves.
    fn poll(&self) -> Result<()>;
    /// How a waiter paces itself between looks.
    fn pace(&self) -> Pace;
    /// Whether a waiter that will sleep on a doorbell spins and yields first (for a while
    /// where every rank has a CPU: the waits of fence and PSCW, whose partners arrive soon),
    /// rather than spinning briefly and sleeping without a yield ([`Pause::brief`]).
    fn patient(&self) -> bool {
        true
    }
    /// Sleep until the transport's endpoint completes something or `timeout` passes, unless
    /// `ready` holds once it is armed ([`Pace::Completion`]); whether something arrived.
    fn sleep(&self, ready: &dyn Fn() -> bool, timeout: Duration) -> Result<bool> {
        if !ready() {
            std::thread::sleep(timeout);
        }
        Ok(false)
    }
}

/// How a waiter paces itself between looks at what it waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pace {
    /// Poll back to back: the transport needs target progress, so this waiter serves its
    /// peers' operations while it waits (the rank it waits for may wait on this one).
    Serve,
    /// Spin, yield, then sleep on the control block's doorbell, which the writer rings.
    Doorbell,
    /// Spin, yield, then sleep on the transport's completion channel ([`Progress::sleep`]):
    /// the writer's NIC wakes it (direct verbs, a write with immediate data after the word).
    Completion,
    /// Spin, yield, then nap: nothing rings (a NIC writes the word).
    Nap,
}

/// Wait until the 64-bit word at `offset` of this rank's control block `ctrl` satisfies `done`;
/// returns its value. `watch` is called whenever the waiter has slept and the word is still not
/// there: it returns an error when what the wait depends on can no longer happen, which ends
/// the wait unless the word is there when looked at once more ([`unless_over`]).
pub(crate) fn until(
    ctrl: &Mem<'static>,
    offset: usize,
    done: impl Fn(u64) -> bool,
    progress: &(impl Progress + ?Sized),
    watch: &dyn Fn() -> Result<()>,
) -> Result<u64> {
    let range = |_| Error::new(ErrorClass::Intern, "control word outside the control block");
    let words = Words {
        word: ctrl.atomic_u64(offset).map_err(range)?,
        sleepers: ctrl.atomic_u32(layout::SLEEPERS).map_err(range)?,
        bell: ctrl.atomic_u32(layout::DOORBELL).map_err(range)?,
    };
    until_words(words, done, progress, watch)
}

/// The words of a control block a wait watches: the word waited for, and the sleeper count and
/// doorbell of the block ([`ring`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Words<'c> {
    pub(crate) word: &'c AtomicU64,
    pub(crate) sleepers: &'c AtomicU32,
    pub(crate) bell: &'c AtomicU32,
}

impl<'c> Words<'c> {
    /// The word at `offset` of the control block `block`, which threads share, with the
    /// block's sleeper count and doorbell; `None` where it is not inside the block.
    pub(crate) fn in_block(block: &'c SyncMem<'_>, offset: usize) -> Option<Words<'c>> {
        Some(Words {
            word: block.atomic_u64(offset).ok()?,
            sleepers: block.atomic_u32(layout::SLEEPERS).ok()?,
            bell: block.atomic_u32(layout::DOORBELL).ok()?,
        })
    }

    /// Add `add` to the word, after every store before it (SeqCst), and wake whoever sleeps on
    /// the block's doorbell ([`ring`]).
    pub(crate) fn add(&self, add: u64) {
        self.word.fetch_add(add, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            wake(self.bell);
        }
    }
}

/// [`until`] on the words found already (of a block the calling thread shares with others).
pub(crate) fn until_words(
    words: Words<'_>,
    done: impl Fn(u64) -> bool,
    progress: &(impl Progress + ?Sized),
    watch: &dyn Fn() -> Result<()>,
) -> Result<u64> {
    let Words {
        word,
        sleepers,
        bell,
    } = words;
    let backoff = match progress.patient() {
        true => Pause::patient(),
        false => Pause::brief(),
    };
    let mut serving = Serving::new();
    let mut nap = Duration::from_micros(50);
    loop {
        let v = word.load(Ordering::Acquire);
        if done(v) {
            return Ok(v);
        }
        progress.poll()?;
        let pace = progress.pace();
        if pace == Pace::Serve {
            if let Err(failed) = serving.pace(watch) {
                return unless_over(failed, || look(word, &done));
            }
            continue;
        }
        if !backoff.is_completed() {
            backoff.snooze();
            continue;
        }
        if pace == Pace::Doorbell {
            sleepers.fetch_add(1, Ordering::SeqCst);
            let ring = bell.load(Ordering::SeqCst);
            if !done(word.load(Ordering::SeqCst)) {
                futex::wait(bell, ring, NAP);
            }
            sleepers.fetch_sub(1, Ordering::SeqCst);
            // Rung for another word (a later barrier round's slot): its signal may be next, so
            // spin and yield again before sleeping, or every ring would pay for waking this
            // rank.
            if bell.load(Ordering::SeqCst) != ring {
                backoff.reset();
            }
        } else if pace == Pace::Completion {
            // Armed before the last look at the word, so the wake that follows its change
            // ends the sleep.
            progress.sleep(&|| done(word.load(Ordering::Acquire)), NAP)?;
        } else {
            // Nothing wakes this waiter (a NIC writes the word): naps that grow to a
            // millisecond, so a long wait (a stopped or computing peer) costs no CPU to speak of.
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(1));
        }
        let v = word.load(Ordering::Acquire);
        if done(v) {
            return Ok(v);
        }
        if let Err(failed) = watch() {
            return unless_over(failed, || look(word, &done));
        }
    }
}

/// The word, where it satisfies `done`.
fn look(word: &AtomicU64, done: impl Fn(u64) -> bool) -> Result<Option<u64>> {
    let v = word.load(Ordering::Acquire);
    Ok(done(v).then_some(v))
}

/// The end of a wait whose watch found `failed` right after a look that did not find what
/// the wait waits for: what one more look (`again`) finds, else the failure. A waiter
/// descheduled or stopped between its look and the watch may find a peer gone that left after
/// ending the wait (a rank that released a barrier, or a lock, and exited); a rank that
/// finished and left is not a failed rank, so a failure counts only where the wait is still
/// not over once it was seen. Cold: out of the waits' common path.
#[cold]
fn unless_over<T>(failed: Error, again: impl FnOnce() -> Result<Option<T>>) -> Result<T> {
    again()?.ok_or(failed)
}

/// Wake whoever sleeps on the doorbell of `ctrl` (a control block, or a page laid out like one
/// at [`layout::SLEEPERS`] and [`layout::DOORBELL`]) in [`until`]; only a load when nobody does.
pub(crate) fn ring(ctrl: &Mem<'_>) -> Result<()> {
    ring_at(ctrl, layout::SLEEPERS, layout::DOORBELL)
}

/// Wake whoever sleeps until the lock word of the control block `ctrl` is released
/// ([`retry_rung`]); only a load, on the lock word's own line, when nobody does.
#[inline(always)]
pub(crate) fn ring_lock(ctrl: &Mem<'_>) -> Result<()> {
    ring_at(ctrl, layout::LOCK_SLEEPERS, layout::LOCK_BELL)
}

/// Wake whoever sleeps on the doorbell at `bell` of `ctrl`, counted at `sleepers`.
#[inline(always)]
fn ring_at(ctrl: &Mem<'_>, sleepers: usize, bell: usize) -> Result<()> {
    let sleepers = ctrl.atomic_u32(sleepers).map_err(Error::from)?;
    if sleepers.load(Ordering::SeqCst) > 0 {
        wake(ctrl.atomic_u32(bell).map_err(Error::from)?);
    }
    Ok(())
}

#[cold]
fn wake(bell: &AtomicU32) {
    bell.fetch_add(1, Ordering::SeqCst);
    futex::wake_all(bell);
}

/// Try `attempt`, spinning and yielding between tries while `backoff` lasts: `Some` once a try
/// succeeds, `None` when the backoff is used up after a failed try (the waiter sleeps next).
fn tries<T>(backoff: &Pause, attempt: &mut impl FnMut() -> Result<Option<T>>) -> Result<Option<T>> {
    loop {
        if let Some(v) = attempt()? {
            return Ok(Some(v));
        }
        if backoff.is_completed() {
            return Ok(None);
        }
        backoff.snooze();
    }
}

/// [`retry`] for a lock word this rank reaches by CPU atomics, in the mapped control block
/// `ctrl` of its target: after spinning (and yielding on a crowded node) the waiter sleeps on
/// the lock's doorbell, which a release that finds sleepers rings ([`ring_lock`]), so it tries
/// again as soon as the word is released rather than after a nap. It sleeps at most [`NAP`]
/// at a time, calling `watch` after each sleep that was not ended by a ring.
pub(crate) fn retry_rung<T>(
    ctrl: &Mem<'_>,
    watch: &dyn Fn() -> Result<()>,
    mut attempt: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let range = |_| {
        Error::new(
            ErrorClass::Intern,
            "lock doorbell outside the control block",
        )
    };
    let sleepers = ctrl.atomic_u32(layout::LOCK_SLEEPERS).map_err(range)?;
    let bell = ctrl.atomic_u32(layout::LOCK_BELL).map_err(range)?;
    let backoff = Pause::new();
    loop {
        if let Some(v) = tries(&backoff, &mut attempt)? {
            return Ok(v);
        }
        // Counted before the last try: a release after that try finds this sleeper and rings,
        // whether before the sleep (the bell has moved, and the sleep returns at once) or
        // during it.
        sleepers.fetch_add(1, Ordering::SeqCst);
        let ring = bell.load(Ordering::SeqCst);
        let tried = attempt();
        if matches!(tried, Ok(None)) {
            futex::wait(bell, ring, NAP);
        }
        sleepers.fetch_sub(1, Ordering::SeqCst);
        if let Some(v) = tried? {
            return Ok(v);
        }
        if bell.load(Ordering::SeqCst) == ring
            && let Err(failed) = watch()
        {
            return unless_over(failed, &mut attempt);
        }
    }
}

/// The pace of a waiter that serves the target side of a transport needing target progress,
/// as MPI libraries do in blocking calls: polling back to back (no backoff) keeps the
/// turnaround of other origins' operations at polling speed; on a crowded node a yield after
/// each of the first polls, then after every few, lets the other ranks run (the one waited for
/// may need this very CPU). `watch` is called every [`NAP`].
struct Serving {
    polls: u32,
    checked: Instant,
}

impl Serving {
    fn new() -> Serving {
        Serving {
            polls: 0,
            checked: Instant::now(),
        }
    }

    /// After one poll of the transport: yield where the node is crowded (more ranks than CPUs;
    /// not where only the progress threads lack CPUs: they stand aside while this thread polls,
    /// and yields there made an 8-byte put over the shm provider and a fence over tcp about a
    /// quarter slower, 2 ranks on 2 cores), watch the peers every [`NAP`].
    fn pace(&mut self, watch: &dyn Fn() -> Result<()>) -> Result<()> {
        self.polls = self.polls.wrapping_add(1);
        let every = self.polls.is_multiple_of(YIELD_EVERY);
        if crowded() && (self.polls <= CROWDED_YIELDS || every) {
            std::thread::yield_now();
        }
        if every && self.checked.elapsed() >= NAP {
            watch()?;
            self.checked = Instant::now();
        }
        Ok(())
    }
}

/// Retry `attempt` until it returns `Some`, backing off between tries and calling `watch` while
/// it waits (for waits on another rank's memory, such as a contended lock); a failure `watch`
/// reports ends the wait unless one more try succeeds ([`unless_over`]). Where `progress`
/// needs target progress, the waiter serves its peers between
/// tries instead of sleeping, since the rank it waits for may be waiting on this one's memory
/// (a lock holder's get, put and release at a rank that contends for the lock itself).
pub(crate) fn retry<T>(
    progress: &(impl Progress + ?Sized),
    watch: &dyn Fn() -> Result<()>,
    mut attempt: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let backoff = Pause::new();
    let mut nap = Duration::from_micros(20);
    // Read the clock only once sleeping starts: an uncontended lock is one attempt.
    let mut checked = None;
    let mut serving = None;
    loop {
        if let Some(v) = tries(&backoff, &mut attempt)? {
            return Ok(v);
        }
        if progress.pace() == Pace::Serve {
            let serving = serving.get_or_insert_with(Serving::new);
            let end = Instant::now() + nap;
            while Instant::now() < end {
                progress.poll()?;
                if let Err(failed) = serving.pace(watch) {
                    return unless_over(failed, &mut attempt);
                }
            }
        } else {
            std::thread::sleep(nap);
            let since = *checked.get_or_insert_with(Instant::now);
            if since.elapsed() >= NAP {
                if let Err(failed) = watch() {
                    return unless_over(failed, &mut attempt);
                }
                checked = Some(Instant::now());
            }
        }
        nap = (nap * 2).min(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Nothing rings: the waiter naps between looks.
    struct Napping;

    impl Progress for Napping {
        fn poll(&self) -> Result<()> {
            Ok(())
        }
        fn pace(&self) -> Pace {
            Pace::Nap
        }
    }

    fn gone() -> Result<()> {
        Err(Error::new(ErrorClass::ProcFailed, "rank 3 is gone"))
    }

    /// The waiter is stopped between its look and the watch; meanwhile a rank stores the word
    /// and another, seeing it, exits: the watch finds that one gone, and the wait still ends
    /// with the word.
    #[test]
    fn a_peer_that_left_after_the_word_came_is_no_failure() {
        let (word, sleepers, bell) = (AtomicU64::new(0), AtomicU32::new(0), AtomicU32::new(0));
        let words = Words {
            word: &word,
            sleepers: &sleepers,
            bell: &bell,
        };
        let watch = || {
            word.store(7, Ordering::Release);
            gone()
        };
        assert_eq!(until_words(words, |v| v == 7, &Napping, &watch).unwrap(), 7);
        // A word that is still not there: the failure ends the wait.
        let e = until_words(words, |v| v == 8, &Napping, &gone).unwrap_err();
        assert_eq!(e.class(), ErrorClass::ProcFailed);
    }

    /// The same for a retried attempt (a lock whose holder released it and exited).
    #[test]
    fn a_retry_tries_once_more_after_a_failure() {
        let free = Cell::new(false);
        let attempt = || Ok(free.get().then_some("taken"));
        let watch = || {
            free.set(true);
            gone()
        };
        assert_eq!(retry(&Napping, &watch, attempt).unwrap(), "taken");
        let e = retry(&Napping, &gone, || Ok(None::<()>)).unwrap_err();
        assert_eq!(e.class(), ErrorClass::ProcFailed);
    }
}
