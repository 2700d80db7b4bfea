//! Operating-system process helpers of the launcher and the ranks: liveness checks, signals to
//! processes and process groups, exit statuses read without reaping, parent-death signals for
//! children, termination-signal capture and ptrace permission.
//!
//! Everything exported here is safe to call; the system calls go through `rustix` where it
//! offers them safely, and the remaining `unsafe` FFI stays inside this module.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, Signal, WaitId, WaitIdOptions};
use rustix::thread::CpuSet;

/// `SIGINT`: interrupt from the terminal.
pub const SIGINT: i32 = libc::SIGINT;
/// `SIGTERM`: polite termination request.
pub const SIGTERM: i32 = libc::SIGTERM;
/// `SIGKILL`: uncatchable kill.
pub const SIGKILL: i32 = libc::SIGKILL;
/// `SIGHUP`: the controlling terminal went away.
pub const SIGHUP: i32 = libc::SIGHUP;

/// Converts a pid to the kernel type, refusing 0 and values that would address process groups.
fn to_pid(pid: u32) -> Option<Pid> {
    Pid::from_raw(i32::try_from(pid).ok()?)
}

/// [`to_pid`], or `InvalidInput`.
fn checked_pid(pid: u32) -> io::Result<Pid> {
    to_pid(pid).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))
}

/// The signal numbered `sig`, or `InvalidInput` for a number that names no signal.
fn signal(sig: i32) -> io::Result<Signal> {
    Signal::from_named_raw(sig).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))
}

/// Whether a process with this pid exists (it may be a zombie). `kill(pid, 0)` succeeds, or fails
/// with `EPERM` (exists but belongs to another user). Pid 0 and out-of-range pids are not alive.
///
/// A pid says nothing about which process it names: once a process is gone its pid may be given
/// to a new one. To watch a given process, hold a [`Watch`] opened while it surely runs.
#[must_use]
pub fn pid_alive(pid: u32) -> bool {
    let Some(pid) = to_pid(pid) else {
        return false;
    };
    matches!(
        rustix::process::test_kill_process(pid),
        Ok(()) | Err(Errno::PERM)
    )
}

/// Whether process `pid` exists and has not exited: [`pid_alive`], and not a zombie (a process
/// that exited but whose parent has not collected it yet runs no more).
#[must_use]
pub fn pid_running(pid: u32) -> bool {
    if !pid_alive(pid) {
        return false;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name, which is in parentheses and may contain anything.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X'))
}

/// A process watched for its end. A pid alone cannot tell whether the process it named still
/// runs: once that one is gone the pid may be given to a new process. A watch holds a pidfd,
/// which stays tied to the process it was opened for, so make it while that process is known to
/// run (such as right after it reported its pid); from then on a reused pid cannot fool it.
///
/// Where no pidfd can be had (`pidfd_open` missing (`ENOSYS`), refused, or no descriptor left)
/// the watch falls back to [`pid_running`].
#[derive(Debug)]
pub struct Watch {
    pid: u32,
    how: Watching,
}

/// How a [`Watch`] looks at its process.
#[derive(Debug)]
enum Watching {
    /// Through a pidfd, which turns readable when the process exits.
    Pidfd(OwnedFd),
    /// The process was gone when the watch was made.
    Gone,
    /// By pid, with [`pid_running`].
    Pid,
}

impl Watch {
    /// Starts watching process `pid`. Pid 0 and out-of-range pids are refused with
    /// `InvalidInput`; a pid that names no process gives a watch that reports it ended.
    pub fn new(pid: u32) -> io::Result<Watch> {
        let how = match rustix::process::pidfd_open(checked_pid(pid)?, PidfdFlags::empty()) {
            Ok(fd) => Watching::Pidfd(fd),
            Err(Errno::SRCH) => Watching::Gone,
            Err(_) => Watching::Pid,
        };
        Ok(Watch { pid, how })
    }

    /// The pid of the watched process.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the watched process has not exited yet (a zombie has exited).
    #[must_use]
    pub fn running(&self) -> bool {
        match &self.how {
            Watching::Pidfd(fd) => {
                let mut fds = [PollFd::new(fd, PollFlags::IN)];
                loop {
                    match rustix::event::poll(&mut fds, Some(&Timespec::default())) {
                        Ok(_) => return fds[0].revents().is_empty(),
                        Err(Errno::INTR) => continue,
                        Err(_) => return pid_running(self.pid),
                    }
                }
            }
            Watching::Gone => false,
            Watching::Pid => pid_running(self.pid),
        }
    }
}

/// Sends signal `sig` to process `pid`. Pid 0 and out-of-range pids are refused with
/// `InvalidInput` (they would address process groups), as are numbers that name no signal (0,
/// real-time signals).
pub fn kill(pid: u32, sig: i32) -> io::Result<()> {
    Ok(rustix::process::kill_process(
        checked_pid(pid)?,
        signal(sig)?,
    )?)
}

/// Sends signal `sig` to every process of process group `pgid` (`killpg`). Pgid 0 and
/// out-of-range values are refused with `InvalidInput` (0 would address the caller's group), as
/// are numbers that name no signal.
pub fn kill_group(pgid: u32, sig: i32) -> io::Result<()> {
    Ok(rustix::process::kill_process_group(
        checked_pid(pgid)?,
        signal(sig)?,
    )?)
}

/// The exit status of child `pid` if it has ended, without reaping it (`waitid` with
/// `WNOWAIT`): the child stays a zombie, so its pid and process group id cannot be reused until
/// it is waited for. `Ok(None)` while it runs. Fails for a pid that is not a child of this
/// process, or was reaped already.
pub fn peek_exit(pid: u32) -> io::Result<Option<ExitStatus>> {
    let id = checked_pid(pid)?;
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    let info = loop {
        match rustix::process::waitid(WaitId::Pid(id), options) {
            Err(Errno::INTR) => continue,
            result => break result?,
        }
    };
    let Some(info) = info else {
        return Ok(None);
    };
    let raw = match (info.exit_status(), info.terminating_signal()) {
        (Some(code), _) => (code & 0xff) << 8,
        (None, Some(sig)) if info.dumped() => (sig & 0x7f) | 0x80,
        (None, Some(sig)) => sig & 0x7f,
        (None, None) => return Ok(None),
    };
    Ok(Some(ExitStatus::from_raw(raw)))
}

/// The name of a signal, e.g. `Some("SIGKILL")` for 9, or `None` for numbers without a name.
#[must_use]
pub fn signal_name(sig: i32) -> Option<&'static str> {
    const NAMES: &[(i32, &str)] = &[
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGTRAP, "SIGTRAP"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGCHLD, "SIGCHLD"),
        (libc::SIGCONT, "SIGCONT"),
        (libc::SIGSTOP, "SIGSTOP"),
        (libc::SIGTSTP, "SIGTSTP"),
        (libc::SIGTTIN, "SIGTTIN"),
        (libc::SIGTTOU, "SIGTTOU"),
        (libc::SIGURG, "SIGURG"),
        (libc::SIGXCPU, "SIGXCPU"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGVTALRM, "SIGVTALRM"),
        (libc::SIGPROF, "SIGPROF"),
        (libc::SIGWINCH, "SIGWINCH"),
        (libc::SIGIO, "SIGIO"),
        (libc::SIGSYS, "SIGSYS"),
    ];
    NAMES
        .iter()
        .find(|&&(n, _)| n == sig)
        .map(|&(_, name)| name)
}

/// Makes the child that `cmd` will start receive `SIGKILL` when the thread that spawned it
/// exits (in practice: when the launcher dies, even by `SIGKILL`). If the parent is already gone
/// when the child sets this up, the child fails to start instead of running orphaned.
pub fn kill_on_parent_death(cmd: &mut Command) {
    let parent = std::process::id();
    // SAFETY: the hook runs in the forked child before exec; it only makes the async-signal-safe
    // system calls prctl and getppid and allocates nothing.
    unsafe {
        cmd.pre_exec(move || set_death_signal(parent));
    }
}

/// Pre-exec body of [`kill_on_parent_death`]: async-signal-safe, no allocation.
fn set_death_signal(parent: u32) -> io::Result<()> {
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
    let ppid = Pid::as_raw(rustix::process::getppid());
    if u32::try_from(ppid).ok() != Some(parent) {
        return Err(Errno::SRCH.into());
    }
    Ok(())
}

/// The CPUs this process may run on, ascending.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = rustix::thread::sched_getaffinity(None)?;
    Ok((0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect())
}

/// A set of CPUs a process can be bound to, checked when it is made.
#[derive(Clone, Copy)]
pub struct Cpus(CpuSet);

impl Cpus {
    /// The set of `cpus`; a CPU number the kernel's CPU set cannot hold is an `InvalidInput`
    /// error.
    pub fn new(cpus: &[usize]) -> io::Result<Cpus> {
        let mut set = CpuSet::new();
        for &cpu in cpus {
            if cpu >= CpuSet::MAX_CPU {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "CPU {cpu} is beyond the {} a CPU set holds",
                        CpuSet::MAX_CPU
                    ),
                ));
            }
            set.set(cpu);
        }
        Ok(Cpus(set))
    }
}

/// Makes the child that `cmd` will start run only on the CPUs `cpus`.
pub fn bind_to_cpus(cmd: &mut Command, cpus: Cpus) {
    let Cpus(set) = cpus;
    // SAFETY: the hook runs in the forked child before exec; it makes one async-signal-safe
    // system call on a set it owns by value and allocates nothing.
    unsafe {
        cmd.pre_exec(move || Ok(rustix::thread::sched_setaffinity(None, &set)?));
    }
}

/// Allows any process of the same user to ptrace this one (Yama `PR_SET_PTRACER_ANY`), which
/// `process_vm_readv`/`process_vm_writev` from sibling ranks need under Yama scope 1.
/// Succeeds without effect on kernels without Yama (`EINVAL`).
pub fn allow_ptrace_from_any() -> io::Result<()> {
    match rustix::process::set_ptracer(rustix::process::PTracer::Any) {
        Ok(()) | Err(Errno::INVAL) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Descriptors taken by [`take_inherited_fd`], each at most once.
static TAKEN_FDS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// Takes ownership of descriptor `fd`, which this process inherited from whoever started it
/// (such as a PMI server's socket named by `PMI_FD`), as a `File` that closes it on drop. The
/// descriptor is marked close-on-exec so that children do not inherit it. Fails if `fd` is not
/// open, is a standard stream, or was taken before.
pub fn take_inherited_fd(fd: i32) -> io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    if fd <= 2 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("descriptor {fd} is a standard stream"),
        ));
    }
    let mut taken = TAKEN_FDS.lock().unwrap_or_else(|p| p.into_inner());
    if taken.contains(&fd) {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("descriptor {fd} was taken already"),
        ));
    }
    // SAFETY: F_GETFD only reads the descriptor's flags; an unopened fd gives EBADF.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: F_SETFD sets the flags of a descriptor just found open.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    taken.push(fd);
    // SAFETY: `fd` is open, was inherited by this process (nothing in it owns it yet) and is
    // handed out once, so the returned File is its only owner.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// The last termination signal caught while a [`TerminationSignals`] is installed (0: none).
static CAUGHT: AtomicI32 = AtomicI32::new(0);

extern "C" fn record_signal(sig: libc::c_int) {
    CAUGHT.store(sig, Ordering::SeqCst);
}

/// While alive, `SIGINT`, `SIGTERM` and `SIGHUP` do not kill the process but are recorded, to be
/// collected with [`TerminationSignals::take`]. Signals that were ignored when it was installed
/// stay ignored. Dropping it restores the previous dispositions. Install one at a time.
pub struct TerminationSignals {
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

impl TerminationSignals {
    /// Installs the recording handler for `SIGINT`, `SIGTERM` and `SIGHUP`.
    pub fn install() -> io::Result<TerminationSignals> {
        CAUGHT.store(0, Ordering::SeqCst);
        let mut installed = TerminationSignals {
            previous: Vec::new(),
        };
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: sigaction is a plain C struct for which all-zero bytes are a valid value.
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction = record_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            // SAFETY: sigemptyset initializes the mask inside our own, valid sigaction.
            unsafe { libc::sigemptyset(&raw mut action.sa_mask) };
            // SAFETY: as above: all-zero bytes are a valid sigaction; it receives the old one.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: both pointers are to valid sigaction values we own; the handler only
            // stores to an atomic, which is async-signal-safe.
            if unsafe { libc::sigaction(sig, &raw const action, &raw mut old) } != 0 {
                return Err(io::Error::last_os_error());
            }
            if old.sa_sigaction == libc::SIG_IGN {
                // SAFETY: restores the disposition just read into `old`, a valid sigaction.
                unsafe { libc::sigaction(sig, &raw const old, std::ptr::null_mut()) };
            } else {
                installed.previous.push((sig, old));
            }
        }
        Ok(installed)
    }

    /// The signal caught since the last call, if any.
    pub fn take(&self) -> Option<i32> {
        match CAUGHT.swap(0, Ordering::SeqCst) {
            0 => None,
            sig => Some(sig),
        }
    }
}

impl Drop for TerminationSignals {
    fn drop(&mut self) {
        for (sig, old) in &self.previous {
            // SAFETY: restores a disposition previously returned by sigaction, a valid value.
            unsafe { libc::sigaction(*sig, std::ptr::from_ref(old), std::ptr::null_mut()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{SIGKILL, Watch, kill, kill_group, peek_exit, pid_alive, pid_running};
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::{Command, ExitStatus, Stdio};
    use std::time::{Duration, Instant};

    /// Polls `peek_exit` until the child has ended.
    fn ended(pid: u32) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = peek_exit(pid).expect("peek_exit") {
                return status;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "{pid} runs on");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "starting processes is beyond Miri")]
    fn peek_exit_leaves_the_child_to_wait_for() {
        let mut child = Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .expect("spawn");
        let status = ended(child.id());
        assert_eq!(status.code(), Some(3));
        assert_eq!(peek_exit(child.id()).expect("peek again"), Some(status));
        assert_eq!(child.wait().expect("wait").code(), Some(3));
        assert!(peek_exit(child.id()).is_err(), "reaped child still found");
    }

    #[test]
    #[cfg_attr(miri, ignore = "starting processes is beyond Miri")]
    fn kill_group_reaches_the_grandchildren() {
        let mut child = Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("spawn");
        let mut line = String::new();
        let out = child.stdout.take().expect("stdout");
        BufReader::new(out).read_line(&mut line).expect("read");
        let grandchild: u32 = line.trim().parse().expect("pid");
        assert!(pid_running(grandchild));
        kill_group(child.id(), SIGKILL).expect("killpg");
        assert_eq!(ended(child.id()).signal(), Some(SIGKILL));
        child.wait().expect("wait");
        let start = Instant::now();
        while pid_running(grandchild) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "grandchild runs on"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(kill_group(0, SIGKILL).is_err());
    }

    /// A child that got pid `pid`, where this process may steer the kernel's next pid
    /// (`ns_last_pid`, which needs privileges); `None` where it may not. Other processes that
    /// start meanwhile can take the pid first, so it tries a few times.
    fn child_with_pid(pid: u32) -> Option<std::process::Child> {
        for _ in 0..20 {
            std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).ok()?;
            let mut child = Command::new("sleep").arg("30").spawn().expect("spawn");
            if child.id() == pid {
                return Some(child);
            }
            child.kill().expect("kill");
            child.wait().expect("wait");
        }
        None
    }

    #[test]
    #[cfg_attr(miri, ignore = "starting processes is beyond Miri")]
    fn a_watch_is_not_fooled_by_a_zombie_or_a_reused_pid() {
        let mut child = Command::new("sleep").arg("30").spawn().expect("spawn");
        let pid = child.id();
        let watch = Watch::new(pid).expect("watch");
        assert_eq!(watch.pid(), pid);
        assert!(watch.running());
        kill(pid, SIGKILL).expect("kill");
        assert_eq!(ended(pid).signal(), Some(SIGKILL));
        assert!(pid_alive(pid), "the zombie keeps its pid");
        assert!(!watch.running(), "a zombie runs no more");
        child.wait().expect("wait");
        assert!(!watch.running());
        assert!(!Watch::new(pid).expect("watch").running());
        match child_with_pid(pid) {
            Some(mut other) => {
                assert!(pid_running(pid), "the pid names a new process");
                assert!(
                    !watch.running(),
                    "the watch took the new process for the old"
                );
                assert!(Watch::new(pid).expect("watch").running());
                other.kill().expect("kill");
                other.wait().expect("wait");
            }
            None => eprintln!("pid {pid} could not be given to a new process; reuse not tried"),
        }
        assert!(Watch::new(0).is_err());
    }
}
