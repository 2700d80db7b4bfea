//! A private one-node Slurm cluster for tests: its own `munged`, `slurmctld` and `slurmd`, all
//! started as child processes of the test binary, with every file (configuration, munge key and
//! socket, logs, state, spool) in a fresh temporary directory.
//!
//! Include it with
//!
//! ```ignore
//! #[path = "cluster/slurm.rs"]
//! mod slurm;
//! ```
//!
//! Two ways to use it:
//!
//! - [`Slurm::start`] starts a cluster owned by the caller; dropping the [`Slurm`] cancels every
//!   job, stops the daemons and removes the directory. Right for `#[test]` functions.
//! - [`shared`] starts one cluster for the whole process on first use and hands out
//!   `&'static Slurm`, for test binaries whose trials run in parallel threads. Statics are never
//!   dropped, so the binary's `main` must call [`stop_shared`] once every trial has finished
//!   (after `libtest_mimic::run` returned and before `exit`). Should the process die without
//!   that (a panic in `main`, a signal), the daemons still die with it (they get `SIGKILL` when
//!   it exits), but the temporary directory stays behind.
//!
//! Jobs are started with [`Slurm::srun`], which is `srun` pointed at this cluster by
//! `SLURM_CONF`. The node is the real host (its name is the kernel's host name) with
//! [`NODE_CPUS`] CPUs whatever the machine has, and the one partition allows oversubscription,
//! so jobs of up to [`NODE_CPUS`] tasks start on any machine. `MpiDefault=none`, and
//! `KillOnBadExit` keeps its default, so a task that fails does not end its step's other tasks.
//!
//! Where the Slurm or MUNGE programs are not installed, [`installed`] and [`Slurm::start`] say
//! which packages to install. The daemons, and so the jobs, run as the user running the tests
//! (`SlurmUser` and `SlurmdUser` name it); root is not needed. Where `/etc/munge/munge.key` is
//! not readable, a fresh key is made.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, mpsc};
use std::thread;
use std::time::{Duration, Instant};

/// What to install where a program is missing (Debian and Ubuntu package names).
pub const PACKAGES: &str = "apt-get install slurmctld slurmd munge slurm-wlm-basic-plugins";

/// CPUs the node claims to have, whatever the machine has.
pub const NODE_CPUS: usize = 128;

/// How long the node may take to become idle after the daemons were started.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long `munged` may take to create its socket.
const MUNGE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a daemon has between `SIGTERM` and `SIGKILL`.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// How long cancelled jobs may take to leave the queue when the cluster stops.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(5);
/// Limit of each client command (`sinfo`, `squeue`, `scancel`) run by this module.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// Lines of each log shown when the cluster does not come up.
const LOG_TAIL: usize = 25;
/// Name of the partition.
const PARTITION: &str = "test";
/// Start of the names of the clusters' directories, followed by `<pid>-<counter>`.
const DIR_PREFIX: &str = "onesided-slurm-";

/// The programs used, with their absolute paths.
struct Programs {
    munged: PathBuf,
    slurmctld: PathBuf,
    slurmd: PathBuf,
    srun: PathBuf,
    sinfo: PathBuf,
    squeue: PathBuf,
    scancel: PathBuf,
}

impl Programs {
    /// Finds every program in `PATH` or the usual `sbin` directories (not always in a user's
    /// `PATH`); `Err` naming the missing ones and the packages to install.
    fn find() -> Result<Programs, String> {
        let mut missing = Vec::new();
        let mut find = |name: &'static str| {
            find_program(name).unwrap_or_else(|| {
                missing.push(name);
                PathBuf::new()
            })
        };
        let programs = Programs {
            munged: find("munged"),
            slurmctld: find("slurmctld"),
            slurmd: find("slurmd"),
            srun: find("srun"),
            sinfo: find("sinfo"),
            squeue: find("squeue"),
            scancel: find("scancel"),
        };
        if missing.is_empty() {
            Ok(programs)
        } else {
            Err(format!(
                "Slurm test cluster: {} not installed; install with `{PACKAGES}`",
                missing.join(", ")
            ))
        }
    }
}

/// The absolute path of executable `name` in `PATH` or in the `sbin` directories.
fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|file| {
            fs::metadata(file).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Whether every program the cluster needs is installed: `Err` naming the missing programs and
/// the packages to install. [`Slurm::start`] fails with the same message in that case, so tests
/// can tell "not installed" (skip) from "did not come up" (fail).
#[allow(dead_code)]
pub fn installed() -> Result<(), String> {
    Programs::find().map(|_| ())
}

/// A daemon started by the cluster.
struct Daemon {
    name: &'static str,
    child: Child,
}

/// A running private one-node Slurm cluster; see the module documentation.
pub struct Slurm {
    /// The temporary directory holding every file of the cluster.
    dir: PathBuf,
    /// `dir/slurm.conf`.
    conf: PathBuf,
    programs: Programs,
    /// Running daemons in start order (`munged`, `slurmctld`, `slurmd`); empty once stopped.
    daemons: Mutex<Vec<Daemon>>,
}

impl Slurm {
    /// Starts a fresh cluster and waits (at most 20 s) until its node is idle. `Err` when a
    /// program is missing (naming the packages to install, as [`installed`] does), or when the
    /// cluster does not come up (with the tails of the daemons' logs); nothing is left running
    /// then.
    pub fn start() -> Result<Slurm, String> {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let programs = Programs::find()?;
        let host = fs::read_to_string("/proc/sys/kernel/hostname")
            .map_err(|e| format!("Slurm test cluster: reading the host name: {e}"))?
            .trim()
            .to_string();
        if host.is_empty() {
            return Err("Slurm test cluster: the host name is empty".into());
        }
        let tmp = std::env::temp_dir();
        remove_stale_dirs(&tmp);
        let dir = tmp.join(format!(
            "{DIR_PREFIX}{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        // Left over by an earlier process with the same pid.
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir)
            .map_err(|e| format!("Slurm test cluster: creating {}: {e}", dir.display()))?;
        let slurm = Slurm {
            conf: dir.join("slurm.conf"),
            dir,
            programs,
            daemons: Mutex::new(Vec::new()),
        };
        // On failure `slurm` is dropped, which stops what was started and removes the directory.
        match slurm.boot(&host) {
            Ok(()) => Ok(slurm),
            Err(e) => Err(format!(
                "Slurm test cluster did not come up: {e}\n{}",
                slurm.log_tails()
            )),
        }
    }

    /// The generated `slurm.conf`.
    #[allow(dead_code)]
    pub fn conf(&self) -> &Path {
        &self.conf
    }

    /// A `srun` command for this cluster: `SLURM_CONF` names [`Slurm::conf`], and the other
    /// `SLURM_*` variables of the environment (of an enclosing allocation, say) are removed.
    /// No arguments are set.
    #[allow(dead_code)]
    pub fn srun(&self) -> Command {
        let mut cmd = Command::new(&self.programs.srun);
        self.client_env(&mut cmd);
        cmd
    }

    /// Sets `SLURM_CONF` on `cmd` and removes every other inherited `SLURM_*` variable.
    fn client_env(&self, cmd: &mut Command) {
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("SLURM_") {
                cmd.env_remove(key);
            }
        }
        cmd.env("SLURM_CONF", &self.conf);
    }

    /// Writes the key and the configuration, starts the daemons and waits for the idle node.
    fn boot(&self, host: &str) -> Result<(), String> {
        let dir = &self.dir;
        let io_err = |what: &str, e: io::Error| format!("{what}: {e}");
        // Searchable by everybody: munged warns when its socket would not be reachable.
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755))
            .map_err(|e| io_err("chmod of the directory", e))?;
        for sub in ["state", "spool"] {
            fs::create_dir(dir.join(sub)).map_err(|e| io_err(sub, e))?;
        }
        let socket = dir.join("munge.sock");
        if socket.as_os_str().len() > 100 {
            return Err(format!(
                "the MUNGE socket path {} is too long for a Unix socket; set TMPDIR to a shorter directory",
                socket.display()
            ));
        }
        let key = dir.join("munge.key");
        write_key(&key).map_err(|e| io_err("writing the MUNGE key", e))?;
        let (ctld_port, slurmd_port) = free_ports().map_err(|e| io_err("choosing ports", e))?;
        let text = config(dir, host, &user_name(), &socket, ctld_port, slurmd_port);
        fs::write(&self.conf, text).map_err(|e| io_err("writing slurm.conf", e))?;

        let mut munged = Command::new(&self.programs.munged);
        munged
            .arg("-F")
            .arg("--force")
            .arg(arg("--socket=", &socket))
            .arg(arg("--key-file=", &key))
            .arg(arg("--pid-file=", &dir.join("munged.pid")))
            .arg(arg("--log-file=", &dir.join("munged.log")))
            .arg(arg("--seed-file=", &dir.join("munged.seed")));
        self.spawn("munged", munged)?;
        let deadline = Instant::now() + MUNGE_TIMEOUT;
        while !socket.exists() {
            self.check_running()?;
            if Instant::now() > deadline {
                return Err(format!("munged made no socket within {MUNGE_TIMEOUT:?}"));
            }
            thread::sleep(Duration::from_millis(20));
        }

        let mut ctld = Command::new(&self.programs.slurmctld);
        ctld.arg("-D").arg("-f").arg(&self.conf);
        self.spawn("slurmctld", ctld)?;
        let mut slurmd = Command::new(&self.programs.slurmd);
        slurmd
            .arg("-D")
            .arg("-f")
            .arg(&self.conf)
            .arg("-N")
            .arg(host);
        self.spawn("slurmd", slurmd)?;

        let deadline = Instant::now() + START_TIMEOUT;
        let mut state = String::new();
        loop {
            self.check_running()?;
            let mut sinfo = Command::new(&self.programs.sinfo);
            sinfo.args(["-h", "-o", "%T"]);
            self.client_env(&mut sinfo);
            if let Ok((status, out)) = run_within(sinfo, CLIENT_TIMEOUT) {
                state = if status.success() {
                    out.trim().to_string()
                } else {
                    format!("sinfo: {status}: {}", out.trim())
                };
                if state == "idle" {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the node was not idle within {START_TIMEOUT:?} (last state: {state:?})"
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Starts daemon `name` from the directory, with its standard output and error in
    /// `dir/<name>.out`, and keeps it (killed with the process should it die without
    /// [`Slurm::stop`]).
    fn spawn(&self, name: &'static str, mut cmd: Command) -> Result<(), String> {
        let out = fs::File::create(self.dir.join(format!("{name}.out")))
            .map_err(|e| format!("{name}: creating its output file: {e}"))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("{name}: output file: {e}"))?;
        cmd.current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        self.client_env(&mut cmd);
        let child = spawn_kept(cmd).map_err(|e| format!("starting {name}: {e}"))?;
        lock(&self.daemons).push(Daemon { name, child });
        Ok(())
    }

    /// `Err` when a daemon has exited.
    fn check_running(&self) -> Result<(), String> {
        for daemon in lock(&self.daemons).iter_mut() {
            if let Ok(Some(status)) = daemon.child.try_wait() {
                return Err(format!("{} exited: {status}", daemon.name));
            }
        }
        Ok(())
    }

    /// The last lines of every daemon's log (or, where the log is empty, of its output), for
    /// failure messages.
    fn log_tails(&self) -> String {
        let mut all = String::new();
        for name in ["munged", "slurmctld", "slurmd"] {
            let log = fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default();
            let (file, text) = if log.trim().is_empty() {
                let out = self.dir.join(format!("{name}.out"));
                let text = fs::read_to_string(&out).unwrap_or_default();
                (format!("{name}.out"), text)
            } else {
                (format!("{name}.log"), log)
            };
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(LOG_TAIL)..];
            all.push_str(&format!("--- {file} (last {} lines)\n", tail.len()));
            for line in tail {
                all.push_str(line);
                all.push('\n');
            }
        }
        all.push_str("---");
        all
    }

    /// Cancels every job (killing its processes), stops the daemons (`SIGTERM`, then `SIGKILL`
    /// after 2 s), kills any step process left behind, and removes the directory. Idempotent.
    fn stop(&self) {
        let mut daemons = lock(&self.daemons);
        if daemons.is_empty() && !self.dir.exists() {
            return;
        }
        let ctld_running = daemons
            .iter_mut()
            .any(|d| d.name == "slurmctld" && matches!(d.child.try_wait(), Ok(None)));
        if ctld_running {
            self.cancel_jobs();
        }
        let (munge, slurm): (Vec<Daemon>, Vec<Daemon>) =
            daemons.drain(..).partition(|d| d.name == "munged");
        terminate(slurm);
        let spare: Vec<u32> = munge.iter().map(|d| d.child.id()).collect();
        self.kill_leftovers(&spare);
        terminate(munge);
        let _ = fs::remove_dir_all(&self.dir);
    }

    /// Sends `SIGKILL` to the processes of every job, cancels the jobs and waits (bounded) until
    /// the queue is empty.
    fn cancel_jobs(&self) {
        let jobs = || {
            let mut squeue = Command::new(&self.programs.squeue);
            squeue.args(["-h", "-o", "%i"]);
            self.client_env(&mut squeue);
            match run_within(squeue, CLIENT_TIMEOUT) {
                Ok((status, out)) if status.success() => Some(
                    out.split_whitespace()
                        .map(str::to_string)
                        .collect::<Vec<_>>(),
                ),
                _ => None,
            }
        };
        let Some(ids) = jobs() else { return };
        if ids.is_empty() {
            return;
        }
        for signal in [&["-s", "KILL", "--full"][..], &[]] {
            let mut scancel = Command::new(&self.programs.scancel);
            scancel.arg("-Q").args(signal).args(&ids);
            self.client_env(&mut scancel);
            let _ = run_within(scancel, CLIENT_TIMEOUT);
        }
        let deadline = Instant::now() + CANCEL_TIMEOUT;
        while Instant::now() < deadline && jobs().is_some_and(|left| !left.is_empty()) {
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills (`SIGKILL`) every process other than this one started with this cluster's
    /// `SLURM_CONF` in its environment: `slurmstepd`s and tasks that outlived their job, and
    /// `srun`s still running. Daemons and clients get that variable from this module, and tasks
    /// inherit it from `srun`. The processes in `spare` (munged) are left alone.
    fn kill_leftovers(&self, spare: &[u32]) {
        let mut needle = b"SLURM_CONF=".to_vec();
        needle.extend_from_slice(self.conf.as_os_str().as_encoded_bytes());
        needle.push(0);
        let me = std::process::id();
        let Ok(entries) = fs::read_dir("/proc") else {
            return;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if pid == me || spare.contains(&pid) {
                continue;
            }
            let Ok(environ) = fs::read(entry.path().join("environ")) else {
                continue;
            };
            let ours = environ.starts_with(&needle[..])
                || environ
                    .windows(needle.len() + 1)
                    .any(|w| w[0] == 0 && w[1..] == needle[..]);
            if ours {
                // SAFETY: kill has no memory effects; pid names one process (never 0 or -1).
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
        }
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The process-wide cluster, started by the first call; later calls return the same cluster, or
/// the same error. Stop it with [`stop_shared`] at the end of `main`.
#[allow(dead_code)]
pub fn shared() -> Result<&'static Slurm, String> {
    SHARED
        .get_or_init(Slurm::start)
        .as_ref()
        .map_err(Clone::clone)
}

/// Stops the cluster of [`shared`], if one was started: cancels its jobs, stops its daemons and
/// removes its directory. Call it once at the end of the test binary's `main`, when no trial
/// uses the cluster any more (a static is never dropped, so nothing else stops it cleanly).
#[allow(dead_code)]
pub fn stop_shared() {
    if let Some(Ok(slurm)) = SHARED.get() {
        slurm.stop();
    }
}

static SHARED: OnceLock<Result<Slurm, String>> = OnceLock::new();

/// Locks `mutex`, ignoring poisoning (a panicking test must not stop the cleanup).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes the directories in `tmp` of clusters whose process died without stopping them (their
/// daemons died with it): the process named in the directory's name is gone and nothing answers
/// on the directory's MUNGE socket (the process may live in another pid namespace).
fn remove_stale_dirs(tmp: &Path) {
    let Ok(entries) = fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(DIR_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<libc::pid_t>().ok())
            .filter(|&pid| pid > 0)
        else {
            continue;
        };
        // SAFETY: kill with signal 0 only checks for existence; the pid is positive.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        let answering = UnixStream::connect(entry.path().join("munge.sock")).is_ok();
        if !alive && !answering {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// `prefix` followed by `path`, as one argument.
fn arg(prefix: &str, path: &Path) -> OsString {
    let mut s = OsString::from(prefix);
    s.push(path);
    s
}

/// Writes the MUNGE key: a copy of the installed `/etc/munge/munge.key` where this user can
/// read it, else 1024 random bytes. Mode 0600, as munged demands.
fn write_key(key: &Path) -> io::Result<()> {
    let bytes = match fs::read("/etc/munge/munge.key") {
        Ok(bytes) if !bytes.is_empty() => bytes,
        _ => {
            let mut bytes = vec![0; 1024];
            fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
            bytes
        }
    };
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(key)?;
    file.write_all(&bytes)
}

/// Two distinct TCP ports that were free a moment ago (the kernel's choice for port 0).
fn free_ports() -> io::Result<(u16, u16)> {
    let a = TcpListener::bind("127.0.0.1:0")?;
    let b = TcpListener::bind("127.0.0.1:0")?;
    Ok((a.local_addr()?.port(), b.local_addr()?.port()))
}

/// The name of the effective user (`SlurmUser`), or its uid as a string where it has none.
fn user_name() -> String {
    // SAFETY: geteuid cannot fail and has no memory effects.
    let uid = unsafe { libc::geteuid() };
    let mut buf = vec![0 as libc::c_char; 16384];
    // SAFETY: an all-zero passwd is a valid value (null pointers, zero ids).
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; buf's length is passed; on success the
    // strings of pwd point into buf, which outlives their use below.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
        return uid.to_string();
    }
    // SAFETY: pw_name is a NUL-terminated string in buf.
    unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) }
        .to_string_lossy()
        .into_owned()
}

/// The text of `slurm.conf`.
fn config(
    dir: &Path,
    host: &str,
    user: &str,
    socket: &Path,
    ctld_port: u16,
    slurmd_port: u16,
) -> String {
    let d = dir.display();
    let socket = socket.display();
    // Job ids of this cluster start where no earlier test cluster's did (it keeps no state): a
    // step killed with its job leaves `/tmp/spmix_appdir_<uid>_<job>.<step>` behind, and the
    // PMIx plugin of a later step with the same ids fails to launch on it.
    let first_job = 1000 + u64::from(std::process::id()) % 60_000 * 1000;
    format!(
        "\
# Private one-node test cluster of the onesided tests (tests/cluster/slurm.rs).
ClusterName=onesided
FirstJobId={first_job}
SlurmctldHost={host}(127.0.0.1)
SlurmUser={user}
SlurmdUser={user}
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={socket}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName={host} NodeAddr=127.0.0.1 CPUs={NODE_CPUS} Sockets=1 CoresPerSocket={NODE_CPUS} ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"
    )
}

/// Starts `cmd` on a thread that lives as long as the process, with `SIGKILL` as the child's
/// parent-death signal: the kernel sends it when the spawning *thread* ends, so spawning from a
/// test's thread would kill the shared cluster when that test ends, while this thread ends
/// only with the process.
fn spawn_kept(mut cmd: Command) -> io::Result<Child> {
    type Request = (Command, mpsc::Sender<io::Result<Child>>);
    static SPAWNER: OnceLock<mpsc::Sender<Request>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        thread::Builder::new()
            .name("slurm-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("starting the daemon spawner thread");
        tx
    });
    let parent = std::process::id();
    // SAFETY: the hook runs in the forked child before exec and only makes the
    // async-signal-safe system calls prctl and getppid; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() as u32 != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    let (tx, rx) = mpsc::channel();
    spawner
        .send((cmd, tx))
        .map_err(|_| io::Error::other("the daemon spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| io::Error::other("the daemon spawner thread is gone"))?
}

/// Sends `SIGTERM` to every daemon, waits up to [`STOP_GRACE`] for them all, then sends
/// `SIGKILL` to those left and reaps them.
fn terminate(mut daemons: Vec<Daemon>) {
    for d in &daemons {
        if let Ok(pid) = libc::pid_t::try_from(d.child.id()) {
            // SAFETY: kill has no memory effects; the pid is our unreaped child.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline
        && daemons
            .iter_mut()
            .any(|d| matches!(d.child.try_wait(), Ok(None)))
    {
        thread::sleep(Duration::from_millis(20));
    }
    for d in &mut daemons {
        if matches!(d.child.try_wait(), Ok(None)) {
            let _ = d.child.kill();
        }
        let _ = d.child.wait();
    }
}

/// Runs `cmd` with null input, returning its status and its standard output and error together;
/// killed and `Err` after `limit`.
fn run_within(mut cmd: Command, limit: Duration) -> io::Result<(ExitStatus, String)> {
    let (reader, writer) = io::pipe()?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer)
        .spawn()?;
    // The command's copies of the pipe's write end are closed once `cmd` is dropped.
    drop(cmd);
    let collect = thread::spawn(move || {
        let mut text = String::new();
        let _ = { reader }.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no exit within {limit:?}"),
            ));
        }
        thread::sleep(Duration::from_millis(10));
    };
    let text = collect.join().unwrap_or_default();
    Ok((status, text))
}
