//! The PMIx client against a real PMIx server, Open MPI's `mpirun`, through the
//! `pmix_probe` example (which `cargo test` builds next to this test; `cargo test --test probe`
//! alone does not rebuild it): three ranks exchange keys; an abort ends the job with its
//! status; a lost server reaches every rank's failure callback; a peer killed by a signal
//! leaves the others able to finish. Without a server, `Client::init` fails cleanly.
//!
//! Where libpmix, the example or `mpirun.openmpi` is missing, a test says why and passes,
//! unless `ONESIDED_REQUIRE_PMIX=1`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const MPIRUN: &str = "mpirun.openmpi";

/// Why a test cannot run here; fails instead under `ONESIDED_REQUIRE_PMIX=1`.
fn skip(why: &str) {
    assert!(
        std::env::var("ONESIDED_REQUIRE_PMIX").as_deref() != Ok("1"),
        "{why} (and ONESIDED_REQUIRE_PMIX=1)"
    );
    eprintln!("pmix probe: skipped: {why}");
}

/// The `pmix_probe` example, when the crate has PMIx and the example is built.
fn probe() -> Option<PathBuf> {
    if onesided_pmix::BUILT_WITH.is_none() {
        skip("onesided-pmix was built without libpmix");
        return None;
    }
    let exe = std::env::current_exe().expect("this test's path");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let probe = dir.join("examples").join("pmix_probe");
    if probe.exists() {
        return Some(probe);
    }
    skip(&format!("{} is not built", probe.display()));
    None
}

/// The probe, and that mpirun runs here.
fn probe_and_mpirun() -> Option<PathBuf> {
    let probe = probe()?;
    let found = Command::new(MPIRUN)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match found {
        Ok(s) if s.success() => Some(probe),
        Ok(s) => {
            skip(&format!("{MPIRUN} --version: {s}"));
            None
        }
        Err(e) => {
            skip(&format!("cannot run {MPIRUN}: {e}"));
            None
        }
    }
}

/// A fresh directory for one test's files, removed when the test passes.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("pmix-probe-{name}-{}", std::process::id()));
    drop(std::fs::remove_dir_all(&dir));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// What a finished command did.
struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` with its output in `dir`; a command still running after `limit` is killed and
/// the test fails.
fn run(mut cmd: Command, dir: &Path, limit: Duration) -> Ran {
    let (out, err) = (dir.join("stdout"), dir.join("stderr"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("stdout file"))
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .spawn()
        .expect("starting the command");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the command") {
            break status;
        }
        if start.elapsed() > limit {
            drop(child.kill());
            drop(child.wait());
            panic!("{cmd:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    Ran {
        status,
        stdout: read(&out),
        stderr: read(&err),
    }
}

/// `mpirun.openmpi -np 3` of the probe with `args`.
fn mpirun(probe: &Path, extra: &[&str], args: &[&str]) -> Command {
    let mut cmd = Command::new(MPIRUN);
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "--bind-to",
        "none",
    ])
    .args(extra)
    .args(["-np", "3"])
    .arg(probe)
    .args(args);
    cmd
}

#[cfg(have_pmix)]
#[test]
fn the_client_may_be_shared_between_threads() {
    fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<onesided_pmix::Client>();
}

#[test]
fn init_fails_without_a_server() {
    let Some(probe) = probe() else { return };
    let dir = scratch("alone");
    let mut cmd = Command::new(&probe);
    for (var, _) in std::env::vars_os() {
        let var = var.to_string_lossy().into_owned();
        if var.starts_with("PMIX_") || var.starts_with("OMPI_") {
            cmd.env_remove(var);
        }
    }
    let ran = run(cmd, &dir, Duration::from_secs(30));
    println!("alone: {} {}", ran.status, ran.stdout.trim());
    assert_eq!(
        ran.status.code(),
        Some(1),
        "the probe must exit 1 (no signal): {}\n{}",
        ran.stdout,
        ran.stderr
    );
    assert!(
        ran.stdout.contains("pmix_probe: PMIx_Init: "),
        "PMIx_Init must fail: {}",
        ran.stdout
    );
    drop(std::fs::remove_dir_all(&dir));
}

#[test]
fn three_ranks_under_mpirun() {
    let Some(probe) = probe_and_mpirun() else {
        return;
    };
    let dir = scratch("three");
    let ran = run(mpirun(&probe, &[], &[]), &dir, Duration::from_secs(120));
    let all = format!("{}\n{}", ran.stdout, ran.stderr);
    assert!(ran.status.success(), "{MPIRUN}: {}\n{all}", ran.status);
    for r in 0..3 {
        assert!(
            ran.stdout
                .contains(&format!("pmix_probe rank {r}: namespace ")),
            "rank {r} did not say who it is:\n{all}"
        );
        assert!(
            ran.stdout.contains(&format!("pmix_probe ok rank {r}/3\n")),
            "rank {r} did not report:\n{all}"
        );
    }
    print!("{}", ran.stdout);
    drop(std::fs::remove_dir_all(&dir));
}

#[test]
fn abort_ends_the_job_with_its_status() {
    let Some(probe) = probe_and_mpirun() else {
        return;
    };
    let dir = scratch("abort");
    let ran = run(
        mpirun(&probe, &[], &["--abort", "1"]),
        &dir,
        Duration::from_secs(120),
    );
    let all = format!("{}\n{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.status.code(),
        Some(3),
        "{MPIRUN}: {}\n{all}",
        ran.status
    );
    assert!(!all.contains("not aborted"), "{all}");
    drop(std::fs::remove_dir_all(&dir));
}

#[test]
fn lost_server_reaches_every_rank() {
    let Some(probe) = probe_and_mpirun() else {
        return;
    };
    let dir = scratch("lose");
    let reports = dir.to_str().expect("utf-8 scratch path");
    let ran = run(
        mpirun(&probe, &[], &["--lose-server", reports]),
        &dir,
        Duration::from_secs(120),
    );
    let start = Instant::now();
    let mut seen = Vec::new();
    for r in 0..3 {
        let report = dir.join(format!("rank.{r}"));
        while !report.exists() && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let line = std::fs::read_to_string(&report).unwrap_or_default();
        assert!(
            line.contains(&format!("rank {r} saw Failure {{ rank: None, status: -61,")),
            "rank {r} reported {line:?} (mpirun: {})\n{}\n{}",
            ran.status,
            ran.stdout,
            ran.stderr
        );
        seen.push(line);
    }
    print!("{}", seen.concat());
    drop(std::fs::remove_dir_all(&dir));
}

#[test]
fn killed_peer_leaves_the_others_able_to_finish() {
    let Some(probe) = probe_and_mpirun() else {
        return;
    };
    let dir = scratch("kill");
    let ran = run(
        mpirun(&probe, &["--enable-recovery"], &["--kill", "2"]),
        &dir,
        Duration::from_secs(120),
    );
    let all = format!("{}\n{}", ran.stdout, ran.stderr);
    for r in 0..2 {
        let no_failure = format!("pmix_probe rank {r} saw no failure\n");
        let failure = format!("pmix_probe rank {r} saw Failure {{ rank: Some(2),");
        assert!(
            ran.stdout.contains(&no_failure) || ran.stdout.contains(&failure),
            "rank {r} saw something else:\n{all}"
        );
        assert!(
            ran.stdout.contains(&format!("pmix_probe ok rank {r}/3\n")),
            "rank {r} did not finish:\n{all}"
        );
    }
    print!("{all}");
    drop(std::fs::remove_dir_all(&dir));
}
