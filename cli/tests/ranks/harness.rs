//! The test side: running jobs through the real launcher with a time limit, and looking at what
//! they left behind.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

/// Every job is killed and its trial failed after this long.
pub const JOB_TIMEOUT: Duration = Duration::from_secs(60);

/// Environment variables of the bootstrap, which a program run without the launcher must not
/// inherit from whoever ran the tests.
pub const BOOT_VARS: &[&str] = &[
    "ONESIDED_RANK",
    "ONESIDED_SIZE",
    "ONESIDED_BOOT",
    "ONESIDED_SECRET",
    "ONESIDED_JOB",
    "ONESIDED_NODE",
];

/// Whether `pid` is gone (or a zombie nobody reaped). Used by the launcher and netns tests.
#[allow(dead_code)]
pub fn gone(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = stat
        .rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
    !onesided_shm::process::pid_alive(pid) || zombie
}

/// What a finished job did.
pub struct Outcome {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    /// Pid of the process started (the launcher, whose pid starts the job id).
    pub pid: u32,
}

impl Outcome {
    /// Status, time and output, for failure messages.
    pub fn describe(&self) -> String {
        format!(
            "{} after {:.2?}\n--- stdout\n{}--- stderr\n{}---",
            self.status, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// `onesided run -n N ARGS... -- PROGRAM`.
pub fn launcher(n: usize, args: &[&str], program: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_onesided"));
    cmd.arg("run")
        .arg("-n")
        .arg(n.to_string())
        .args(args)
        .arg("--")
        .arg(program);
    cmd
}

/// `program` run by itself: a world of size 1.
pub fn direct(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    for var in BOOT_VARS {
        cmd.env_remove(var);
    }
    cmd
}

/// Run `cmd` to completion with its output captured; after `limit` it is killed (its ranks die
/// with it: the launcher gives them a parent-death signal) and the job counts as failed.
pub fn run(mut cmd: Command, limit: Duration) -> Result<Outcome, String> {
    // In the software RoCE guest (`rxe/run.sh`), whose CPU is emulated, jobs take longer.
    let limit = match std::env::var("ONESIDED_RXE").as_deref() {
        Ok("1") => limit * 4,
        _ => limit,
    };
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {cmd:?}: {e}"))?;
    let pid = child.id();
    let drain = |mut from: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = from.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let err = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() > limit => {
                timed_out = true;
                let _ = child.kill();
                break child
                    .wait()
                    .map_err(|e| format!("waiting for {cmd:?}: {e}"))?;
            }
            Ok(None) => thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("waiting for {cmd:?}: {e}")),
        }
    };
    let elapsed = start.elapsed();
    let outcome = Outcome {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        elapsed,
        pid,
    };
    if timed_out {
        return Err(format!(
            "timed out, killed after {limit:?}: {}",
            outcome.describe()
        ));
    }
    Ok(outcome)
}

/// The `/dev/shm/onesided-<pid>-*` entries of the job started by launcher `pid`.
pub fn leftover_segments(pid: u32) -> Vec<String> {
    let prefix = format!("onesided-{pid}-");
    std::fs::read_dir("/dev/shm")
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|name| name.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// The libfabric shm segments `/dev/shm/<pid>:...` of the processes `pids`.
pub fn fabric_segments(pids: &[u32]) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|name| {
                    name.split_once(':')
                        .and_then(|(pid, _)| pid.parse::<u32>().ok())
                        .is_some_and(|pid| pids.contains(&pid))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `Err` naming the job's segments if any is left in /dev/shm.
pub fn no_leftovers(out: &Outcome) -> Result<(), String> {
    let left = leftover_segments(out.pid);
    if left.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "segments left in /dev/shm: {left:?}\n{}",
            out.describe()
        ))
    }
}

/// Path of example `name`. Every example of the library and of this crate is built once per test
/// binary with the test's profile and target directory (`cargo test` does not build examples by itself; when
/// they are up to date this costs one quick cargo call). In the software RoCE guest
/// (`ONESIDED_RXE=1`), whose view of the tree is a read-only snapshot, the examples built on the
/// host beforehand are used as they are.
pub fn example_exe(name: &str) -> Result<PathBuf, String> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let profile_dir = Path::new(env!("CARGO_BIN_EXE_onesided"))
            .parent()
            .ok_or("no profile directory")?;
        if std::env::var("ONESIDED_RXE").as_deref() == Ok("1") {
            return Ok(profile_dir.join("examples"));
        }
        let target_dir = profile_dir.parent().ok_or("no target directory")?;
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => "dev",
            Some(other) => other,
        };
        let out = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "--examples", "--profile", profile])
            .args(["-p", "onesided", "-p", "onesided-cli"])
            .arg("--manifest-path")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .arg("--target-dir")
            .arg(target_dir)
            .output()
            .map_err(|e| format!("running cargo build: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cargo build --examples failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(profile_dir.join("examples"))
    });
    let exe = dir.as_ref().map_err(Clone::clone)?.join(name);
    if exe.exists() {
        Ok(exe)
    } else {
        Err(format!(
            "{} missing after the build (in the rxe guest: build the examples on the host first)",
            exe.display()
        ))
    }
}
