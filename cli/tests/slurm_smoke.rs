//! Smoke tests of the private Slurm test cluster (`tests/cluster/slurm.rs`): each test starts its
//! own cluster and runs jobs through `srun`.
//!
//! Where Slurm or MUNGE is not installed, a test prints `slurm_smoke: skipped: <reason>` to
//! stderr and passes, unless `ONESIDED_REQUIRE_CLUSTER=1`, which makes it fail instead. A cluster
//! that is installed but does not come up fails the test, with the daemons' logs.

#[path = "cluster/slurm.rs"]
mod slurm;

use std::io::Read;
use std::process::{ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use slurm::Slurm;

/// Every `srun` is killed and its test failed after this long.
const JOB_TIMEOUT: Duration = Duration::from_secs(60);

/// Environment variable that turns a missing Slurm installation from a skip into a failure.
const ENV_REQUIRE: &str = "ONESIDED_REQUIRE_CLUSTER";

/// A fresh cluster, or `None` (test skipped) where Slurm is not installed and the environment
/// does not require it.
fn cluster() -> Option<Slurm> {
    if let Err(why) = slurm::installed() {
        if std::env::var(ENV_REQUIRE).is_ok_and(|v| v == "1") {
            panic!("{ENV_REQUIRE}=1 but {why}");
        }
        eprintln!("slurm_smoke: skipped: {why}");
        return None;
    }
    let start = Instant::now();
    let slurm = Slurm::start().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("slurm_smoke: cluster up in {:.2?}", start.elapsed());
    Some(slurm)
}

/// What a finished `srun` did.
struct Outcome {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl Outcome {
    fn describe(&self) -> String {
        format!(
            "{} after {:.2?}\n--- stdout\n{}--- stderr\n{}---",
            self.status, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// Runs `srun ARGS` on `slurm`, failing the test after [`JOB_TIMEOUT`].
fn srun(slurm: &Slurm, args: &[&str]) -> Outcome {
    let start = Instant::now();
    let mut child = slurm
        .srun()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn srun");
    let collect = |mut r: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = collect(Box::new(child.stdout.take().unwrap()));
    let err = collect(Box::new(child.stderr.take().unwrap()));
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for srun") {
            break status;
        }
        if start.elapsed() > JOB_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("srun {args:?} did not end within {JOB_TIMEOUT:?}");
        }
        thread::sleep(Duration::from_millis(10));
    };
    let outcome = Outcome {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        elapsed: start.elapsed(),
    };
    eprintln!("slurm_smoke: srun {args:?}: {:.2?}", outcome.elapsed);
    outcome
}

/// Drops `slurm`, reporting how long stopping took.
fn stop(slurm: Slurm) {
    let start = Instant::now();
    drop(slurm);
    eprintln!("slurm_smoke: cluster stopped in {:.2?}", start.elapsed());
}

#[test]
fn four_tasks_run_hostname() {
    let Some(slurm) = cluster() else { return };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let out = srun(&slurm, &["-n", "4", "hostname"]);
    assert!(out.status.success(), "{}", out.describe());
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", out.describe());
    assert!(
        lines.iter().all(|l| *l == host.trim()),
        "{}",
        out.describe()
    );
    stop(slurm);
}

#[test]
fn pmix_and_pmi2_wire_up() {
    let Some(slurm) = cluster() else { return };
    let out = srun(&slurm, &["--mpi=pmix", "-n", "2", "env"]);
    assert!(out.status.success(), "{}", out.describe());
    let mut ranks: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("PMIX_RANK="))
        .collect();
    ranks.sort_unstable();
    assert_eq!(ranks, ["0", "1"], "{}", out.describe());

    let out = srun(&slurm, &["--mpi=pmi2", "-n", "2", "env"]);
    assert!(out.status.success(), "{}", out.describe());
    let fds = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("PMI_FD="))
        .count();
    assert_eq!(fds, 2, "{}", out.describe());
    stop(slurm);
}

#[test]
fn sixty_four_tasks_oversubscribe() {
    let Some(slurm) = cluster() else { return };
    let out = srun(&slurm, &["-n", "64", "true"]);
    assert!(out.status.success(), "{}", out.describe());
    stop(slurm);
}

/// A job still running when the cluster stops is cancelled, and none of its processes survive.
#[test]
fn stop_cancels_running_jobs() {
    let Some(slurm) = cluster() else { return };
    let mut job = slurm
        .srun()
        .args(["-n", "2", "sleep", "300"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn srun");
    // Wait until both tasks run.
    let conf = slurm.conf().to_path_buf();
    let deadline = Instant::now() + JOB_TIMEOUT;
    let sleepers = || {
        let mut needle = b"SLURM_CONF=".to_vec();
        needle.extend_from_slice(conf.as_os_str().as_encoded_bytes());
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "sleep")
                    && std::fs::read(e.path().join("environ"))
                        .is_ok_and(|env| env.windows(needle.len()).any(|w| w == needle))
            })
            .count()
    };
    while sleepers() < 2 {
        assert!(Instant::now() < deadline, "the tasks did not start");
        assert!(job.try_wait().unwrap().is_none(), "srun ended early");
        thread::sleep(Duration::from_millis(50));
    }
    stop(slurm);
    assert_eq!(sleepers(), 0, "tasks survived the cluster");
    let status = job.wait().unwrap();
    assert!(!status.success(), "srun of a cancelled job succeeded");
}
