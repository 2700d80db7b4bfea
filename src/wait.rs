//! Waiting for other processes: spin, then yield, then sleep, and never forever.
//!
//! Eight ranks on two cores must all make progress, so a waiter spins only briefly before it
//! yields the core, and then sleeps: on its own doorbell (a futex that the shared-memory
//! transport rings after changing a control word), or in short naps where no doorbell exists.
//! Where every rank has a CPU, a waiter for its own memory yields for a while before it sleeps,
//! since waking costs more than the skew of a barrier.
//! Whenever it sleeps it checks that the processes it waits for are alive, so a dead peer gives
//! MPI_ERR_PROC_FAILED within a bounded time instead of a hang.

use crate::error::{Error, ErrorClass, Result};
use crate::liveness::Liveness;
use crate::protocol::layout;
use crate::transport::Transport;
use crossbeam_utils::Backoff;
use onesided_shm::process::Watch;
use onesided_shm::{Mem, futex};
use std::cell::Cell;
use std::sync::Arc;
#[cfg(any(have_libfabric, test))]
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Polls of a fabric between two yields of a waiter.
const YIELD_EVERY: u32 = 16;
/// How long one sleep lasts at most before the waiter looks again and checks its peers.
const NAP: Duration = Duration::from_millis(10);

/// Yields of a waiter on a crowded node before it sleeps.
const CROWDED_YIELDS: u32 = 64;

/// Whether this node runs more ranks than it has CPUs ([`set_crowded`]).
static CROWDED: AtomicBool = AtomicBool::new(false);

/// Records how many ranks of the job run on this node. When they outnumber its CPUs, waiters
/// yield at once instead of spinning first: the rank they wait for may need the very CPU they
/// would spin on (8 ranks on 2 cores fence three times faster that way).
pub(crate) fn set_crowded(ranks_on_node: usize) {
    let crowded = ranks_on_node > online_cpus();
    tracing::debug!(
        ranks_on_node,
        crowded,
        "waiters spin only on an uncrowded node"
    );
    CROWDED.store(crowded, Ordering::Relaxed);
}

/// Whether this node runs more ranks than it has CPUs (see [`set_crowded`]).
pub(crate) fn crowded() -> bool {
    CROWDED.load(Ordering::Relaxed)
}

/// The CPUs online on this machine (not only those this process may use: ranks bound to one
/// CPU each are not crowded).
fn online_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|list| count_cpu_list(list.trim()))
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1)
}

/// The number of CPUs in a kernel CPU list such as `0-3,8,10-11`.
fn count_cpu_list(list: &str) -> Option<usize> {
    list.split(',').try_fold(0, |n, part| {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
        Some(n + b.checked_sub(a)? + 1)
    })
}

/// What a waiter does before it sleeps: where every rank has a CPU, crossbeam's
/// spin-then-yield [`Backoff`], and for a patient waiter its yields go on until [`YIELD_FOR`]
/// has passed; on a crowded node, only yields.
struct Pause {
    backoff: Backoff,
    /// Yields so far, on a crowded node; `None` elsewhere.
    yields: Option<Cell<u32>>,
    /// How long to go on yielding once the backoff has run out, on an uncrowded node.
    yield_for: Duration,
    /// When the backoff ran out (the clock is read only from then on).
    yielding_since: Cell<Option<Instant>>,
}

/// How long a waiter for a word of its own memory on an uncrowded node goes on yielding once
/// its backoff has run out, before it sleeps: waking from a futex costs more than the skew of
/// a barrier over 16 ranks (fence of 16 ranks on 16 cores: 7.4-13.3 us when waiters slept
/// after the backoff, 1.5-2.9 yielding; Open MPI's waiters never sleep, 2.1-2.5). Waiters that
/// retry on another rank's memory (a contended lock) do not: their tries would fight the
/// holder's for the word (lock contention of 16 ranks: 0.3-0.4 us when they sleep, 2.7-2.9
/// when they keep trying).
const YIELD_FOR: Duration = Duration::from_micros(200);

impl Pause {
    /// A waiter that sleeps once the backoff has run out.
    fn new() -> Pause {
        Pause::yielding(Duration::ZERO)
    }

    /// A waiter that yields for [`YIELD_FOR`] more before it sleeps, on an uncrowded node.
    fn patient() -> Pause {
        Pause::yielding(YIELD_FOR)
    }

    fn yielding(yield_for: Duration) -> Pause {
        Pause {
            backoff: Backoff::new(),
            yields: CROWDED.load(Ordering::Relaxed).then(|| Cell::new(0)),
            yield_for,
            yielding_since: Cell::new(None),
        }
    }

    /// Whether spinning and yielding are used up and the waiter should sleep.
    fn is_completed(&self) -> bool {
        match &self.yields {
            Some(n) => n.get() >= CROWDED_YIELDS,
            None if !self.backoff.is_completed() => false,
            None if self.yield_for.is_zero() => true,
            None => {
                let since = self.yielding_since.get().unwrap_or_else(Instant::now);
                self.yielding_since.set(Some(since));
                since.elapsed() >= self.yield_for
            }
        }
    }

    /// Wait a little.
    fn snooze(&self) {
        match &self.yields {
            Some(n) => {
                std::thread::yield_now();
                n.set(n.get() + 1);
            }
            None => self.backoff.snooze(),
        }
    }

    /// Start over, as if the wait had just begun.
    fn reset(&self) {
        match &self.yields {
            Some(n) => n.set(0),
            None => {
                self.backoff.reset();
                self.yielding_since.set(None);
            }
        }
    }
}

/// Whether the process `pid` is stopped (SIGSTOP, or a debugger's): alive, but making no
/// progress until someone resumes it.
#[cfg(any(have_libfabric, test))]
pub(crate) fn pid_stopped(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state is the first field after the command name, which ends at the last ')'.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state == "T" || state == "t")
}

/// The ranks a wait may depend on: their process ids where this node can watch them (0 for
/// ranks on other nodes) and the job's failures, which cover every rank.
#[derive(Debug, Clone)]
pub(crate) struct Peers {
    pids: Vec<u32>,
    /// A watch on each other process of this node (`None` for this process and other nodes').
    watches: Arc<[Option<Watch>]>,
    liveness: Arc<Liveness>,
    /// Whether a watched process was stopped when last looked at, and when that was (in
    /// milliseconds since `since`, plus 1; 0: never).
    #[cfg(any(have_libfabric, test))]
    stopped: Arc<(AtomicBool, AtomicU64)>,
    #[cfg(any(have_libfabric, test))]
    since: Instant,
}

impl Peers {
    /// Watches the processes `pids` (0: on another node). Make it right after a collective
    /// call that all of them took part in: then every pid still names the rank's process, and
    /// the watches stay on those processes even if a pid is reused later.
    pub(crate) fn new(pids: Vec<u32>, liveness: Arc<Liveness>) -> Peers {
        let me = std::process::id();
        let watches = pids
            .iter()
            .map(|&pid| match pid {
                0 => None,
                pid if pid == me => None,
                pid => Watch::new(pid).ok(),
            })
            .collect();
        Peers {
            pids,
            watches,
            liveness,
            #[cfg(any(have_libfabric, test))]
            stopped: Arc::default(),
            #[cfg(any(have_libfabric, test))]
            since: Instant::now(),
        }
    }

    /// Whether a watched process is stopped, looked at no more often than every [`NAP`]: a
    /// wait that depends on it had better sleep until traffic arrives than poll.
    #[cfg(any(have_libfabric, test))]
    pub(crate) fn any_stopped(&self) -> bool {
        let (stopped, looked) = &*self.stopped;
        let now = self.since.elapsed().as_millis() as u64 + 1;
        let last = looked.load(Ordering::Relaxed);
        if last == 0 || now >= last + NAP.as_millis() as u64 {
            looked.store(now, Ordering::Relaxed);
            let any = self.pids.iter().any(|&pid| pid != 0 && pid_stopped(pid));
            stopped.store(any, Ordering::Relaxed);
        }
        stopped.load(Ordering::Relaxed)
    }

    /// Whether rank `r`'s process is known to be gone from this node.
    pub(crate) fn gone(&self, r: usize) -> bool {
        self.watches
            .get(r)
            .is_some_and(|w| w.as_ref().is_some_and(|w| !w.running()))
    }

    /// The ranks whose process is gone from this node.
    pub(crate) fn all_gone(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.pids.len()).filter(|&r| self.gone(r))
    }

    /// MPI_ERR_PROC_FAILED once the job has a failure.
    pub(crate) fn job_alive(&self) -> Result<()> {
        self.liveness.check()
    }

    /// MPI_ERR_PROC_FAILED once the job has a failure or a watched process is gone.
    pub(crate) fn all_alive(&self) -> Result<()> {
        self.job_alive()?;
        match self.all_gone().next() {
            Some(r) => Err(self.failed(r)),
            None => Ok(()),
        }
    }

    /// The process of rank `r` where it runs on this node, in a process other than this one.
    #[cfg(have_libfabric)]
    pub(crate) fn process_of(&self, r: usize) -> Option<u32> {
        let pid = self.pids.get(r).copied()?;
        (pid != 0 && pid != std::process::id()).then_some(pid)
    }

    /// MPI_ERR_PROC_FAILED naming `rank`.
    pub(crate) fn failed(&self, rank: usize) -> Error {
        let pid = self.pids.get(rank).copied().unwrap_or(0);
        Error::new(
            ErrorClass::ProcFailed,
            format!("rank {rank} (pid {pid}) is gone"),
        )
    }
}

/// Wait until the 64-bit word at `offset` of this rank's control block `ctrl` satisfies `done`;
/// returns its value. `watch` is called whenever the waiter has slept and the word is still not
/// there: it returns an error when what the wait depends on can no longer happen.
pub(crate) fn until(
    ctrl: &Mem<'static>,
    offset: usize,
    done: impl Fn(u64) -> bool,
    transport: &dyn Transport,
    watch: &dyn Fn() -> Result<()>,
) -> Result<u64> {
    let range = |_| Error::new(ErrorClass::Intern, "control word outside the control block");
    let word = ctrl.atomic_u64(offset).map_err(range)?;
    let sleepers = ctrl.atomic_u32(layout::SLEEPERS).map_err(range)?;
    let bell = ctrl.atomic_u32(layout::DOORBELL).map_err(range)?;
    let backoff = Pause::patient();
    let mut serving = Serving::new();
    let mut nap = Duration::from_micros(50);
    loop {
        let v = word.load(Ordering::Acquire);
        if done(v) {
            return Ok(v);
        }
        transport.progress()?;
        if transport.caps().needs_target_progress {
            serving.pace(watch)?;
            continue;
        }
        if !backoff.is_completed() {
            backoff.snooze();
            continue;
        }
        if transport.caps().wakes_sleepers {
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
        watch()?;
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

    /// After one poll of the transport: yield where the node is crowded, watch the peers
    /// every [`NAP`].
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
/// it waits (for waits on another rank's memory, such as a contended lock). The tries go
/// through `transport`: where it needs target progress, the waiter serves its peers between
/// tries instead of sleeping, since the rank it waits for may be waiting on this one's memory
/// (a lock holder's get, put and release at a rank that contends for the lock itself).
pub(crate) fn retry<T>(
    transport: &dyn Transport,
    watch: &dyn Fn() -> Result<()>,
    mut attempt: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let backoff = Pause::new();
    let mut nap = Duration::from_micros(20);
    // Read the clock only once sleeping starts: an uncontended lock is one attempt.
    let mut checked = None;
    let mut serving = None;
    loop {
        if let Some(v) = attempt()? {
            return Ok(v);
        }
        if !backoff.is_completed() {
            backoff.snooze();
            continue;
        }
        if transport.caps().needs_target_progress {
            let serving = serving.get_or_insert_with(Serving::new);
            let end = Instant::now() + nap;
            while Instant::now() < end {
                transport.progress()?;
                serving.pace(watch)?;
            }
        } else {
            std::thread::sleep(nap);
            let since = *checked.get_or_insert_with(Instant::now);
            if since.elapsed() >= NAP {
                watch()?;
                checked = Some(Instant::now());
            }
        }
        nap = (nap * 2).min(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(count_cpu_list("0-1"), Some(2));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("0-3,8,10-11"), Some(7));
        assert_eq!(count_cpu_list("3-1"), None);
        assert_eq!(count_cpu_list(""), None);
        assert!(online_cpus() >= 1);
    }

    /// Snooze until the backoff has run out (no world in unit tests: the node is uncrowded).
    fn run_out(p: &Pause) {
        while !p.backoff.is_completed() {
            p.snooze();
        }
    }

    #[test]
    fn a_patient_waiter_goes_on_until_its_time_has_passed() {
        let plain = Pause::new();
        run_out(&plain);
        assert!(plain.is_completed(), "sleeps once its backoff has run out");
        let patient = Pause::patient();
        run_out(&patient);
        assert!(!patient.is_completed(), "goes on after its backoff");
        std::thread::sleep(YIELD_FOR);
        assert!(patient.is_completed(), "sleeps once YIELD_FOR has passed");
        patient.reset();
        run_out(&patient);
        assert!(!patient.is_completed(), "a reset starts its time over");
    }

    #[test]
    fn dead_pid_is_reported_with_its_rank() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let liveness = Arc::new(Liveness::new());
        let peers = Peers::new(vec![std::process::id(), dead, 0], liveness.clone());
        assert_eq!(peers.all_gone().collect::<Vec<_>>(), vec![1]);
        let e = peers.all_alive().unwrap_err();
        assert_eq!(e.class(), ErrorClass::ProcFailed);
        assert!(e.message().contains("rank 1"), "{e}");
        let remote = Peers::new(vec![std::process::id(), 0], liveness.clone());
        assert!(remote.all_alive().is_ok());
        liveness.fail(Some(1), "lost its connection");
        let e = remote.all_alive().unwrap_err();
        assert_eq!(e.message(), "rank 1 failed: lost its connection");
    }

    #[test]
    fn stopped_process_is_seen() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(!pid_stopped(pid));
        onesided_shm::process::kill(pid, libc::SIGSTOP).unwrap();
        let deadline = Instant::now() + Duration::from_secs(2);
        while !pid_stopped(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let peers = Peers::new(vec![std::process::id(), pid], Arc::new(Liveness::new()));
        assert!(pid_stopped(pid));
        assert!(peers.any_stopped());
        onesided_shm::process::kill(pid, libc::SIGKILL).unwrap();
        child.wait().unwrap();
        assert!(!pid_stopped(pid));
        assert!(!pid_stopped(std::process::id()));
    }
}
