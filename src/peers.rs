//! The ranks a wait depends on: whether their processes are alive, gone or stopped.

use crate::error::{Error, ErrorClass, Result};
use crate::liveness::Liveness;
#[cfg(any(have_libfabric, test))]
use crate::wait::NAP;
use onesided_shm::process::Watch;
#[cfg(any(have_libfabric, test))]
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
#[cfg(any(have_libfabric, test))]
use std::time::Instant;

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

/// The watches alive in this process, by process id: one per process, shared by every window
/// that waits on it. A window of n ranks on a node would otherwise hold n - 1 descriptors
/// (pidfds), and 10,000 windows of 4 ranks ran out of them.
static WATCHES: Mutex<Vec<(u32, Weak<Watch>)>> = Mutex::new(Vec::new());

/// The watch on process `pid`: the one some window holds already, else a new one. A watch
/// made when the process was alive stays on it even if its pid is reused later, so a reused
/// pid means a rank that is gone, which the job's liveness reports anyway.
fn watch(pid: u32) -> Option<Arc<Watch>> {
    let mut all = WATCHES.lock().unwrap_or_else(PoisonError::into_inner);
    all.retain(|(_, w)| w.strong_count() > 0);
    if let Some(w) = all
        .iter()
        .find(|(p, _)| *p == pid)
        .and_then(|(_, w)| w.upgrade())
    {
        return Some(w);
    }
    let w = Arc::new(Watch::new(pid).ok()?);
    all.push((pid, Arc::downgrade(&w)));
    Some(w)
}

/// The ranks a wait may depend on: their process ids where this node can watch them (0 for
/// ranks on other nodes) and the job's failures, which cover every rank.
#[derive(Debug, Clone)]
pub(crate) struct Peers {
    pids: Vec<u32>,
    /// A watch on each other process of this node (`None` for this process and other nodes'),
    /// shared with every other window watching it ([`watch`]).
    watches: Arc<[Option<Arc<Watch>>]>,
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
                pid => watch(pid),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
    fn windows_share_one_watch_per_process() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        let liveness = Arc::new(Liveness::new());
        let pids = vec![std::process::id(), child.id()];
        let first = Peers::new(pids.clone(), liveness.clone());
        let before = fds();
        let more: Vec<Peers> = (0..100)
            .map(|_| Peers::new(pids.clone(), liveness.clone()))
            .collect();
        assert_eq!(
            fds(),
            before,
            "100 more windows watch the process with no descriptor"
        );
        let (a, b) = (&first.watches[1], &more[99].watches[1]);
        assert!(
            a.as_ref()
                .zip(b.as_ref())
                .is_some_and(|(a, b)| Arc::ptr_eq(a, b))
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            more[0].gone(1) && first.gone(1),
            "every window sees it gone"
        );
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
