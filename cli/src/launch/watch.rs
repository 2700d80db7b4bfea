//! Watching a started job until every rank has exited: the ranks' statuses, the failure that
//! came first, stopping the job, and the start-up timeout.
//!
//! Ranks are looked at without being reaped ([`process::peek_exit`]) until the job is over, so
//! that a rank's pid, which is also its process group id, cannot be reused while the launcher
//! may still signal the group.

use std::io::{self, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::thread;
use std::time::{Duration, Instant};

use onesided_shm::process::{self, SIGKILL, SIGTERM, TerminationSignals};

use super::job::{ENV_START_TIMEOUT, StartTimeout};
use onesided::boot::Hub;

/// How often the launcher looks at its ranks and at caught signals.
const POLL: Duration = Duration::from_millis(10);
/// How long stopped ranks get between `SIGTERM` and `SIGKILL`.
const GRACE: Duration = Duration::from_secs(1);
/// How long the ranks' processes get to finish exiting once the job is over ([`wait_gone`]).
const TEARDOWN: Duration = Duration::from_secs(5);
/// How long after finding a failed rank the launcher waits for the hub to name the rank that
/// failed first, if it names none.
const SETTLE: Duration = Duration::from_millis(100);

/// One started rank, the leader of its own process group.
pub(super) struct Rank {
    pub(super) child: Child,
    status: Option<ExitStatus>,
}

impl Rank {
    pub(super) fn new(child: Child) -> Rank {
        Rank {
            child,
            status: None,
        }
    }
}

/// A job being watched.
struct Watch<'a> {
    ranks: &'a mut [Rank],
    hub: &'a Hub,
    /// The launcher's exit code so far.
    code: i32,
    /// Failed ranks found before the job was stopped, in the order found; in one sweep those
    /// killed by a signal come first, as the likelier cause of the others' errors.
    found: Vec<usize>,
    /// When the first of them was found.
    found_at: Option<Instant>,
    /// Whether the job's first failure has been reported.
    reported: bool,
    /// When the ranks were told to stop, and whether they were killed.
    stopping: Option<Instant>,
    killed: bool,
}

/// Watches the ranks until all have exited, stopping them after a failure, a signal or a rank
/// that does not join within `start`; then kills what is left of their process groups, reaps
/// them and returns the launcher's exit code.
pub(super) fn wait_all(
    ranks: &mut [Rank],
    hub: &Hub,
    signals: &TerminationSignals,
    start: StartTimeout,
) -> i32 {
    let mut watch = Watch {
        ranks,
        hub,
        code: 0,
        found: Vec::new(),
        found_at: None,
        reported: false,
        stopping: None,
        killed: false,
    };
    loop {
        watch.sweep();
        let over = watch.ranks.iter().all(|r| r.status.is_some());
        watch.report_first_failure(over);
        if over {
            break;
        }
        watch.check_start(start);
        if let Some(sig) = signals.take() {
            watch.forward(sig);
        }
        watch.escalate();
        thread::sleep(POLL);
    }
    signal_groups(watch.ranks, SIGKILL);
    for rank in watch.ranks.iter_mut() {
        let _ = rank.child.wait();
    }
    watch.code
}

/// Waits (at most [`TEARDOWN`]) until none of the processes `pids` runs any more: a rank
/// started through a wrapper, killed with its process group, may still be exiting when the
/// wrapper has been reaped, and what it leaves in `/dev/shm` is only removable once it is gone.
pub(super) fn wait_gone(pids: &[u32]) {
    let start = Instant::now();
    while pids.iter().any(|&pid| process::pid_running(pid)) && start.elapsed() < TEARDOWN {
        thread::sleep(POLL);
    }
}

/// Sends `sig` to the process group of every rank: ranks that exited are still unreaped, so
/// their groups' ids are theirs, and what they left running is reached too.
pub(super) fn signal_groups(ranks: &[Rank], sig: i32) {
    for rank in ranks {
        let _ = process::kill_group(rank.child.id(), sig);
    }
}

impl Watch<'_> {
    /// Records the ranks that exited since the last sweep.
    fn sweep(&mut self) {
        let mut failed = Vec::new();
        for (r, rank) in self.ranks.iter_mut().enumerate() {
            if rank.status.is_some() {
                continue;
            }
            let status = match process::peek_exit(rank.child.id()) {
                Ok(Some(status)) => status,
                Ok(None) => continue,
                Err(e) => {
                    // The rank cannot be waited for (reaped elsewhere): count it as exit status 1.
                    say(&format!("waiting for rank {r}: {e}"));
                    ExitStatus::from_raw(1 << 8)
                }
            };
            rank.status = Some(status);
            if status.success() {
                self.hub.rank_exited(r);
            } else if self.stopping.is_none() {
                failed.push(r);
            }
        }
        failed.sort_by_key(|&r| self.ranks[r].status.and_then(|s| s.signal()).is_none());
        if !failed.is_empty() {
            self.found_at.get_or_insert_with(Instant::now);
            self.found.extend(failed);
        }
    }

    /// Reports the job's first failure once it is known (see [`first_failure`]). `over`: every
    /// rank has exited, so nothing more is to be learnt.
    fn report_first_failure(&mut self, over: bool) {
        let Some(found_at) = self.found_at.filter(|_| !self.reported) else {
            return;
        };
        let hub = self.hub.failure().filter(|(f, _)| *f < self.ranks.len());
        let seen = hub
            .as_ref()
            .map(|(f, _)| (*f, self.ranks[*f].status.is_some()));
        let now = over || self.stopping.is_some();
        if let Some(f) = first_failure(seen, self.found[0], found_at.elapsed(), now) {
            let why = hub.and_then(|(h, why)| (h == f).then_some(why));
            self.report(f, why);
        }
    }

    /// Reports rank `f` as the job's first failure (`why`: as the hub saw it), then the other
    /// failed ranks found so far, and tells the hub.
    fn report(&mut self, f: usize, why: Option<String>) {
        self.reported = true;
        let pid = self.ranks[f].child.id();
        let failed = self.ranks[f].status.filter(|s| !s.success());
        let (reason, code) = match (failed, why) {
            (Some(status), _) => describe(status),
            (None, why) => {
                let why = why.unwrap_or_else(|| "failed".to_string());
                let code = self.ranks[self.found[0]]
                    .status
                    .map_or(1, |s| describe(s).1);
                (format!("failed first: {why}"), code)
            }
        };
        say(&format!("rank {f} (pid {pid}) {reason}"));
        self.hub.fail_rank(f, &reason);
        if self.code == 0 {
            self.code = code;
        }
        for &r in self.found.iter().filter(|&&r| r != f) {
            if let Some(status) = self.ranks[r].status {
                let pid = self.ranks[r].child.id();
                say(&format!("then rank {r} (pid {pid}) {}", describe(status).0));
            }
        }
    }

    /// Fails the job if ranks have not joined within `start` of the first rank that did.
    fn check_start(&mut self, start: StartTimeout) {
        let Some(limit) = start.0 else {
            return;
        };
        if self.reported || self.stopping.is_some() {
            return;
        }
        let Some((since, absent)) = self.hub.absent_since() else {
            return;
        };
        let missing: Vec<usize> = absent
            .into_iter()
            .filter(|&r| self.ranks[r].status.is_none())
            .collect();
        if missing.is_empty() || since.elapsed() < limit {
            return;
        }
        let names: Vec<String> = missing
            .iter()
            .map(|&r| format!("{r} (pid {})", self.ranks[r].child.id()))
            .collect();
        let which = if missing.len() == 1 { "rank" } else { "ranks" };
        say(&format!(
            "{which} {} did not join the job within {limit:?} of the first rank \
             (--start-timeout, {})",
            names.join(", "),
            ENV_START_TIMEOUT
        ));
        let why = format!("did not join the job within {limit:?}");
        self.hub.fail_rank(missing[0], &why);
        self.reported = true;
        self.code = 1;
    }

    /// Passes signal `sig`, which the launcher received, on to the ranks (`SIGKILL` if they are
    /// being stopped already).
    fn forward(&mut self, sig: i32) {
        let name = process::signal_name(sig).unwrap_or("signal");
        say(&format!("received {name}, stopping the ranks"));
        if self.code == 0 {
            self.code = 128 + sig;
        }
        let forward = if self.stopping.is_some() {
            SIGKILL
        } else {
            sig
        };
        signal_groups(self.ranks, forward);
        self.stopping.get_or_insert_with(Instant::now);
    }

    /// Stops the job once it failed: `SIGTERM`, then `SIGKILL` after [`GRACE`].
    fn escalate(&mut self) {
        match self.stopping {
            None if self.code != 0 => {
                signal_groups(self.ranks, SIGTERM);
                self.stopping = Some(Instant::now());
            }
            Some(since) if !self.killed && since.elapsed() >= GRACE => {
                signal_groups(self.ranks, SIGKILL);
                self.killed = true;
            }
            _ => {}
        }
    }
}

/// The rank to report as the job's first failure, or `None` to wait until more is known.
/// `hub`: the rank the hub saw fail first (it sees a connection close as the process dies, before
/// the launcher can collect its status) and whether it has exited; it is chosen once its status
/// is in, or after [`GRACE`]. Otherwise `found`, the first failed rank the launcher found, once
/// the hub had [`SETTLE`] to see a failure. `waited`: since `found` was found; `now`: decide at
/// once (every rank exited, or the job is being stopped).
fn first_failure(
    hub: Option<(usize, bool)>,
    found: usize,
    waited: Duration,
    now: bool,
) -> Option<usize> {
    match hub {
        Some((f, exited)) if exited || now || waited >= GRACE => Some(f),
        Some(_) => None,
        None if now || waited >= SETTLE => Some(found),
        None => None,
    }
}

/// Writes `onesided run: <line>` to stderr in one call, so that it does not mix with what the
/// ranks write there.
fn say(line: &str) {
    let _ = io::stderr().write_all(format!("onesided run: {line}\n").as_bytes());
}

/// Why a rank failed and the exit code that failure gives the launcher.
fn describe(status: ExitStatus) -> (String, i32) {
    match (status.code(), status.signal()) {
        (_, Some(sig)) => {
            let reason = match process::signal_name(sig) {
                Some(name) => format!("killed by signal {sig} ({name})"),
                None => format!("killed by signal {sig}"),
            };
            (reason, 128 + sig)
        }
        (Some(c), None) => (format!("exited with status {c}"), c),
        (None, None) => (format!("ended with {status}"), 1),
    }
}

#[cfg(test)]
mod tests {
    use super::{GRACE, SETTLE, first_failure};
    use std::time::Duration;

    #[test]
    fn the_hub_names_the_first_failure_once_its_status_is_in() {
        let soon = Duration::from_millis(1);
        assert_eq!(first_failure(Some((1, true)), 0, soon, false), Some(1));
        assert_eq!(first_failure(Some((1, false)), 0, soon, false), None);
        assert_eq!(first_failure(Some((1, false)), 0, GRACE, false), Some(1));
        assert_eq!(first_failure(Some((1, false)), 0, soon, true), Some(1));
    }

    #[test]
    fn without_the_hub_the_first_rank_found_is_named_after_a_moment() {
        let soon = Duration::from_millis(1);
        assert_eq!(first_failure(None, 2, soon, false), None);
        assert_eq!(first_failure(None, 2, SETTLE, false), Some(2));
        assert_eq!(first_failure(None, 2, soon, true), Some(2));
    }
}
