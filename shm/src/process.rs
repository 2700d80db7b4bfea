//! Operating-system process helpers of the launcher and the ranks: liveness checks, signals to
//! processes and process groups, exit statuses read without reaping, parent-death signals for
//! children, termination-signal capture and ptrace permission.
//!
//! Everything exported here is safe to call; the `unsafe` FFI stays inside this module.

use std::io;
use std::os::unix::process::CommandExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};

/// `SIGINT`: interrupt from the terminal.
pub const SIGINT: i32 = libc::SIGINT;
/// `SIGTERM`: polite termination request.
pub const SIGTERM: i32 = libc::SIGTERM;
/// `SIGKILL`: uncatchable kill.
pub const SIGKILL: i32 = libc::SIGKILL;
/// `SIGHUP`: the controlling terminal went away.
pub const SIGHUP: i32 = libc::SIGHUP;

/// Converts a pid to the kernel type, refusing 0 and values that would address process groups.
fn to_pid(pid: u32) -> Option<libc::pid_t> {
    libc::pid_t::try_from(pid).ok().filter(|&p| p > 0)
}

/// Whether a process with this pid exists (it may be a zombie). `kill(pid, 0)` succeeds, or fails
/// with `EPERM` (exists but belongs to another user). Pid 0 and out-of-range pids are not alive.
#[must_use]
pub fn pid_alive(pid: u32) -> bool {
    let Some(pid) = to_pid(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks for existence and permission; it has no memory effects.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
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

/// Sends signal `sig` to process `pid`. Pid 0 and out-of-range pids are refused with
/// `InvalidInput` (they would address process groups).
pub fn kill(pid: u32, sig: i32) -> io::Result<()> {
    let pid = to_pid(pid).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: kill has no memory effects; the pid was checked to name a single process.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends signal `sig` to every process of process group `pgid` (`killpg`). Pgid 0 and
/// out-of-range values are refused with `InvalidInput` (0 would address the caller's group).
pub fn kill_group(pgid: u32, sig: i32) -> io::Result<()> {
    let pgid = to_pid(pgid).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: killpg has no memory effects; the group id was checked to be positive.
    if unsafe { libc::killpg(pgid, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The exit status of child `pid` if it has ended, without reaping it (`waitid` with
/// `WNOWAIT`): the child stays a zombie, so its pid and process group id cannot be reused until
/// it is waited for. `Ok(None)` while it runs. Fails for a pid that is not a child of this
/// process, or was reaped already.
pub fn peek_exit(pid: u32) -> io::Result<Option<ExitStatus>> {
    let id = to_pid(pid).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: siginfo_t is a plain C struct for which all-zero bytes are a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `info` is a valid siginfo_t we own; waitid writes only into it.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                id as libc::id_t,
                &raw mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    // SAFETY: after a successful waitid the SIGCHLD fields of `info` are initialized (all zero
    // when no child had changed state).
    let (child, status) = unsafe { (info.si_pid(), info.si_status()) };
    if child == 0 {
        return Ok(None);
    }
    let raw = match info.si_code {
        libc::CLD_EXITED => (status & 0xff) << 8,
        libc::CLD_DUMPED => (status & 0x7f) | 0x80,
        _ => status & 0x7f,
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
    // SAFETY: PR_SET_PDEATHSIG takes a signal number and touches no memory of ours.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getppid cannot fail and has no memory effects.
    let ppid = unsafe { libc::getppid() };
    if u32::try_from(ppid).ok() != Some(parent) {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// The CPUs this process may run on, ascending.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a writable cpu_set_t of the size passed.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0
    {
        return Err(io::Error::last_os_error());
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: CPU_ISSET reads the set for an index below its capacity.
    Ok((0..max)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Makes the child that `cmd` will start run only on CPU `cpu`.
pub fn bind_to_cpu(cmd: &mut Command, cpu: usize) {
    // SAFETY: the hook runs in the forked child before exec; it makes one async-signal-safe
    // system call on a set on its stack and allocates nothing.
    unsafe {
        cmd.pre_exec(move || set_affinity(cpu));
    }
}

/// Pre-exec body of [`bind_to_cpu`]: async-signal-safe, no allocation.
fn set_affinity(cpu: usize) -> io::Result<()> {
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below the set's capacity (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Allows any process of the same user to ptrace this one (Yama `PR_SET_PTRACER_ANY`), which
/// `process_vm_readv`/`process_vm_writev` from sibling ranks need under Yama scope 1.
/// Succeeds without effect on kernels without Yama (`EINVAL`).
pub fn allow_ptrace_from_any() -> io::Result<()> {
    // SAFETY: PR_SET_PTRACER takes a pid-like value and touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY) };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EINVAL) {
        Ok(())
    } else {
        Err(err)
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
    use super::{SIGKILL, kill_group, peek_exit, pid_running};
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
}
