//! Integration tests of the launcher (`onesided run`) and the bootstrap, with real processes.
//!
//! The rank programs are the `examples/boot_*.rs`, built once by the first test that needs them.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use onesided_shm::process::{SIGKILL, SIGTERM, kill};

/// The harness of the multi-process tests, for building the examples.
#[allow(dead_code)]
#[path = "ranks/harness.rs"]
mod harness;

/// Path of example `name` (built once by the shared harness).
fn example(name: &str) -> PathBuf {
    harness::example_exe(name).unwrap_or_else(|e| panic!("{e}"))
}

struct Outcome {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

/// Runs `cmd` to completion, killing it and failing the test after `limit`.
fn finish(mut cmd: Command, limit: Duration) -> Outcome {
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let collect = |mut r: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut s = String::new();
            r.read_to_string(&mut s).expect("read output");
            s
        })
    };
    let out = collect(Box::new(child.stdout.take().expect("stdout")));
    let err = collect(Box::new(child.stderr.take().expect("stderr")));
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} still running after {limit:?}");
        }
        thread::sleep(Duration::from_millis(10));
    };
    let elapsed = start.elapsed();
    Outcome {
        status,
        stdout: out.join().expect("stdout thread"),
        stderr: err.join().expect("stderr thread"),
        elapsed,
    }
}

/// `onesided run <args...> <example> <example_args...>`.
fn launcher(args: &[&str], program: &str, program_args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_onesided"));
    cmd.arg("run")
        .args(args)
        .arg(example(program))
        .args(program_args);
    cmd
}

fn run_job(args: &[&str], program: &str, program_args: &[&str]) -> Outcome {
    finish(
        launcher(args, program, program_args),
        Duration::from_secs(20),
    )
}

#[test]
fn allgathers_on_interleaved_and_concurrent_comms() {
    let out = run_job(&["-n", "4"], "boot_allgather", &[]);
    assert!(out.status.success(), "{}", out.stderr);
    for r in 0..4 {
        assert!(
            out.stdout.contains(&format!("rank {r} ok")),
            "{}",
            out.stdout
        );
    }
}

#[test]
fn tag_output_prefixes_lines_with_rank() {
    let out = run_job(&["-n", "3", "--tag-output", "--"], "boot_echo", &[]);
    assert!(out.status.success(), "{}", out.stderr);
    for r in 0..3 {
        let hello = format!("[{r}] hello from {r} of 3 on None\n");
        assert!(out.stdout.contains(&hello), "{}", out.stdout);
        assert!(
            out.stdout.contains(&format!("[{r}] partial {r}\n")),
            "{}",
            out.stdout
        );
        assert!(
            out.stderr.contains(&format!("[{r}] warning from {r}\n")),
            "{}",
            out.stderr
        );
    }
    assert!(
        out.stdout.lines().all(|l| l.starts_with('[')),
        "{}",
        out.stdout
    );
}

#[test]
fn simulate_nodes_sets_node_names() {
    let out = run_job(&["-n", "4", "--simulate-nodes", "2"], "boot_echo", &[]);
    assert!(out.status.success(), "{}", out.stderr);
    for (r, node) in [(0, "sim0"), (1, "sim0"), (2, "sim1"), (3, "sim1")] {
        let line = format!("hello from {r} of 4 on Some(\"{node}\")");
        assert!(out.stdout.contains(&line), "{}", out.stdout);
    }
}

#[test]
fn failing_rank_is_reported_and_blocked_ranks_do_not_hang() {
    let out = run_job(&["-n", "3"], "boot_fail", &["exit3"]);
    assert_eq!(out.status.code(), Some(3), "{}", out.stderr);
    assert!(
        out.stderr.contains("onesided run: rank 1 (pid "),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("exited with status 3"),
        "{}",
        out.stderr
    );
    assert!(
        out.elapsed < Duration::from_secs(5),
        "took {:?}",
        out.elapsed
    );
}

/// Runs `boot_fail <mode>` with 3 ranks, where rank 1 exits with status 0 without finalizing:
/// the others' allgather must fail promptly, naming rank 1.
fn rank_1_leaves_silently(mode: &str) {
    let out = run_job(&["-n", "3"], "boot_fail", &[mode]);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    for r in [0, 2] {
        let saw = format!("rank {r} saw: MPI_ERR_PROC_FAILED: rank 1 failed");
        assert!(out.stdout.contains(&saw), "{}", out.stdout);
    }
    assert!(
        out.elapsed < Duration::from_secs(5),
        "took {:?}",
        out.elapsed
    );
}

#[test]
fn rank_leaving_without_finalize_fails_peers_collectives() {
    rank_1_leaves_silently("vanish");
}

#[test]
fn rank_exiting_without_connecting_fails_peers_collectives() {
    rank_1_leaves_silently("noconnect");
}

#[test]
fn killed_rank_is_reported_with_its_signal() {
    let out = run_job(&["-n", "3"], "boot_fail", &["sigkill"]);
    assert_eq!(out.status.code(), Some(128 + SIGKILL), "{}", out.stderr);
    assert!(
        out.stderr.contains("onesided run: rank 2 (pid "),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("killed by signal 9 (SIGKILL)"),
        "{}",
        out.stderr
    );
    assert!(
        out.elapsed < Duration::from_secs(10),
        "took {:?}",
        out.elapsed
    );
}

/// The first `onesided run: rank ...` line of the launcher's stderr.
fn first_report(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.starts_with("onesided run: rank "))
        .unwrap_or_else(|| panic!("no rank named:\n{stderr}"))
}

/// A rank fails inside a `World` barrier and the others, learning of it through the collective
/// network, exit with status 1 at once without finalizing: the launcher still names the rank
/// that failed first, with its status, in every trial.
#[test]
fn the_first_failure_in_time_is_named_with_its_status() {
    for trial in 0..5 {
        let out = run_job(&["-n", "4"], "boot_fail", &["world_exit3"]);
        assert_eq!(out.status.code(), Some(3), "trial {trial}: {}", out.stderr);
        let first = first_report(&out.stderr);
        assert!(
            first.starts_with("onesided run: rank 1 (pid ") && first.ends_with("status 3"),
            "trial {trial}: {}",
            out.stderr
        );
        let out = run_job(&["-n", "4"], "boot_fail", &["world_sigkill"]);
        assert_eq!(
            out.status.code(),
            Some(128 + SIGKILL),
            "trial {trial}: {}",
            out.stderr
        );
        let first = first_report(&out.stderr);
        assert!(
            first.starts_with("onesided run: rank 2 (pid ")
                && first.ends_with("killed by signal 9 (SIGKILL)"),
            "trial {trial}: {}",
            out.stderr
        );
    }
}

/// Processes that ranks start are stopped with the job, whether it succeeds or a rank fails
/// (here every rank leaves a `sleep 60` behind, and rank 1 exits with the status given).
#[test]
fn grandchildren_of_the_ranks_are_gone_after_the_job() {
    for status in ["0", "3"] {
        let out = run_job(&["-n", "3"], "boot_echo", &["orphan", status]);
        assert_eq!(
            out.status.code(),
            status.parse().ok(),
            "{}\n{}",
            out.stdout,
            out.stderr
        );
        let children: Vec<u32> = out
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix("child ")?.parse().ok())
            .collect();
        assert_eq!(children.len(), 3, "{}", out.stdout);
        wait_gone(&children);
    }
}

/// A rank that never joins the hub is named once the others have waited the start-up timeout
/// for it (given by flag or environment), and the job stops with exit code 1; the rank would
/// otherwise sleep 30 s first (the bound on the job's time leaves room for a loaded machine).
#[test]
fn a_rank_that_never_joins_is_named_within_the_start_timeout() {
    let by_flag = run_job(&["-n", "3", "--start-timeout", "1"], "boot_fail", &["late"]);
    let mut cmd = launcher(&["-n", "3"], "boot_fail", &["late"]);
    cmd.env("ONESIDED_START_TIMEOUT", "0.5");
    let by_env = finish(cmd, Duration::from_secs(20));
    for (out, limit) in [(by_flag, "1s"), (by_env, "500ms")] {
        assert_eq!(out.status.code(), Some(1), "{}", out.stderr);
        let said = format!("did not join the job within {limit} of the first rank");
        let first = first_report(&out.stderr);
        assert!(
            first.starts_with("onesided run: rank 1 (pid ") && first.contains(&said),
            "{}",
            out.stderr
        );
        assert!(
            out.elapsed < Duration::from_secs(10),
            "took {:?}",
            out.elapsed
        );
    }
}

/// A gather announcing more members than the job has ranks is refused before the hub allocates
/// anything for them, and the job goes on.
#[test]
fn an_oversized_gather_is_refused_without_growing_the_hub() {
    let out = run_job(&["-n", "3"], "boot_abuse", &["oversize"]);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    for (seq, members) in [(0, 2_000_000), (1, u32::MAX)] {
        let said = format!(
            "refused {members}: MPI_ERR_ARG: allgather (9, {seq}): {members} members exceed \
             the job's 3 ranks"
        );
        assert!(out.stdout.contains(&said), "{}", out.stdout);
    }
    let grew: u64 = out
        .stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("hub peak grew ")?
                .strip_suffix(" KiB")?
                .parse()
                .ok()
        })
        .expect("growth");
    assert!(grew < 4096, "the hub grew by {grew} KiB");
    for r in 0..3 {
        assert!(
            out.stdout.contains(&format!("rank {r} ok")),
            "{}",
            out.stdout
        );
    }
}

/// Milliseconds after which rank `r` of `boot_abuse loris` was cut off.
fn cut_after(stdout: &str, r: usize) -> u128 {
    let prefix = format!("rank {r} cut after ");
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&prefix)?.strip_suffix(" ms")?.parse().ok())
        .unwrap_or_else(|| panic!("rank {r} not cut off:\n{stdout}"))
}

/// Clients trickling a byte every 2 s, one before its hello and one (rank 1) inside an
/// allgather, are cut off at the hub's 5 s deadline per message; cutting off rank 1 fails the
/// job, naming it.
#[test]
fn slow_loris_clients_are_cut_off_at_the_message_deadline() {
    let out = finish(
        launcher(&["-n", "2"], "boot_abuse", &["loris"]),
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let deadline = onesided::boot::hub::DEADLINE.as_millis();
    for r in 0..2 {
        let cut = cut_after(&out.stdout, r);
        assert!(
            cut + 500 >= deadline && cut < deadline + 2000,
            "rank {r} cut after {cut} ms"
        );
    }
    let saw = "rank 0 saw: MPI_ERR_PROC_FAILED: rank 1 failed: broke its bootstrap connection \
               (a message took longer than 5s)";
    assert!(out.stdout.contains(saw), "{}", out.stdout);
}

/// Connections beyond the hub's cap are closed at once, and the job goes on.
#[test]
fn connections_beyond_the_cap_are_refused() {
    let out = run_job(&["-n", "2"], "boot_abuse", &["flood"]);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let held = onesided::boot::hub::max_connections(2) - 2;
    let said = format!("held {held} refused {}", 60 - held);
    assert!(out.stdout.contains(&said), "{}", out.stdout);
    for r in 0..2 {
        assert!(
            out.stdout.contains(&format!("rank {r} ok")),
            "{}",
            out.stdout
        );
    }
}

#[test]
fn wrong_secret_and_duplicate_rank_are_refused() {
    let out = run_job(&["-n", "2"], "boot_badsecret", &[]);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.stdout.matches("refused: ").count(), 2, "{}", out.stdout);
    assert!(out.stdout.contains("rank 0 ok") && out.stdout.contains("rank 1 ok"));
}

#[test]
fn program_run_directly_has_no_job() {
    let mut cmd = Command::new(example("boot_echo"));
    for var in [
        "ONESIDED_RANK",
        "ONESIDED_SIZE",
        "ONESIDED_BOOT",
        "ONESIDED_SECRET",
    ] {
        cmd.env_remove(var);
    }
    let out = finish(cmd, Duration::from_secs(10));
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(out.stdout, "no job env\n");

    let mut cmd = Command::new(example("boot_echo"));
    cmd.env("ONESIDED_RANK", "x");
    let out = finish(cmd, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr.contains("MPI_ERR_ARG"), "{}", out.stderr);
}

#[test]
fn segments_of_the_job_and_of_dead_launchers_are_removed() {
    let mut dead = Command::new("true").spawn().expect("spawn true");
    let dead_pid = dead.id();
    dead.wait().expect("wait true");
    let stale = PathBuf::from(format!("/dev/shm/onesided-{dead_pid}-0badf00d-boottest"));
    std::fs::write(&stale, b"x").expect("create stale segment");

    let out = run_job(&["-n", "2"], "boot_echo", &["segment"]);
    assert!(out.status.success(), "{}", out.stderr);
    let job = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("job "))
        .expect("job id");
    for r in 0..2 {
        let segment = format!("/dev/shm/onesided-{job}-boottest-{r}");
        assert!(!Path::new(&segment).exists(), "{segment} left behind");
    }
    assert!(!stale.exists(), "stale segment left behind");
}

/// Starts `onesided run -n 2 boot_echo sleep`, waits for both ranks' pids, sends `sig` to the
/// launcher and returns its exit status and the ranks' pids.
fn signal_launcher(sig: i32) -> (Option<ExitStatus>, Vec<u32>) {
    let mut cmd = launcher(&["-n", "2"], "boot_echo", &["sleep"]);
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("spawn launcher");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let pids: Vec<u32> = stdout
        .lines()
        .take(2)
        .map(|l| l.expect("line")["pid ".len()..].parse().expect("pid"))
        .collect();
    kill(child.id(), sig).expect("signal the launcher");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if sig == SIGKILL || start.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(10));
    };
    (status, pids)
}

fn wait_gone(pids: &[u32]) {
    let start = Instant::now();
    while !pids.iter().all(|&p| harness::gone(p)) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "ranks {pids:?} survive"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sigterm_to_launcher_stops_the_ranks() {
    let (status, pids) = signal_launcher(SIGTERM);
    let status = status.expect("launcher did not exit after SIGTERM");
    assert_eq!(status.code(), Some(128 + SIGTERM));
    wait_gone(&pids);
}

#[test]
fn sigkilled_launcher_takes_its_ranks_along() {
    let (_, pids) = signal_launcher(SIGKILL);
    wait_gone(&pids);
}

/// A misspelt setting fails at `World::init`, naming the variable and the accepted values,
/// instead of being noticed (or not) when a window is created. (The launcher stops the other
/// ranks once the first fails, so not every rank need get to say so.)
#[test]
fn a_misspelt_setting_fails_at_init() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_onesided"));
    cmd.args(["run", "-n", "3", "--"])
        .arg(example("stencil"))
        .env("ONESIDED_TRANSPORT", "ucx");
    let out = finish(cmd, Duration::from_secs(20));
    assert!(!out.status.success(), "{}", out.stderr);
    let said = "ONESIDED_TRANSPORT=\"ucx\": accepted values are auto, fabric";
    assert!(out.stderr.contains(said), "{}", out.stderr);
    assert!(!out.stdout.contains("stencil: ok"), "{}", out.stdout);
}

/// Ranks whose settings differ (here rank 1 alone forces the fabric) fail at `World::init`,
/// naming the ranks and their settings: the settings are agreed once, at start-up.
#[test]
fn ranks_with_different_settings_fail_at_init() {
    let script = "if [ \"$ONESIDED_RANK\" = 1 ]; then export ONESIDED_TRANSPORT=fabric; fi; \
                  exec \"$0\"";
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_onesided"));
    cmd.args(["run", "-n", "2", "--", "sh", "-c", script])
        .arg(example("stencil"))
        .env("ONESIDED_TRANSPORT", "auto");
    let out = finish(cmd, Duration::from_secs(20));
    assert!(!out.status.success(), "{}", out.stderr);
    assert!(
        out.stderr.contains("the ranks' settings differ"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("rank 1: transport=fabric"),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("stencil: ok"), "{}", out.stdout);
}

/// Ranks that write each line in pieces (two `printf` processes per line, as unbuffered stderr
/// writes do) at the same time: the launcher forwards whole lines, so no line of one rank is
/// cut by another's, with or without `--tag-output`.
#[test]
fn lines_of_different_ranks_never_mix() {
    let script = "for i in $(seq 200); do printf 'line of rank %s' \"$ONESIDED_RANK\" >&2; \
                  printf ' number %s\\n' \"$i\" >&2; done";
    for tag in [false, true] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_onesided"));
        cmd.args(["run", "-n", "4"]);
        if tag {
            cmd.arg("--tag-output");
        }
        cmd.args(["--", "sh", "-c", script]);
        let out = finish(cmd, Duration::from_secs(20));
        assert!(out.status.success(), "{}", out.stderr);
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(lines.len(), 4 * 200, "{}", out.stderr);
        for line in lines {
            let body = match tag {
                true => line.split_once("] ").map_or("", |(_, rest)| rest),
                false => line,
            };
            let ok = body.starts_with("line of rank ")
                && body.split(' ').count() == 6
                && body.matches("number").count() == 1;
            assert!(ok, "a mixed line: {line:?}");
        }
    }
}

/// `examples/particles.rs`: a struct with `#[derive(onesided::Pod)]` moved by put and get
/// between 4 ranks, and a deliberate put outside an epoch reported readably by every rank.
#[test]
fn a_derived_pod_struct_moves_between_ranks() {
    let out = run_job(&["-n", "4", "--"], "particles", &[]);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("particles: ok (4 ranks, 56-byte particles)"),
        "{}",
        out.stdout
    );
    for r in 0..4 {
        let said = format!("particles: rank {r}: a put outside any epoch: MPI_ERR_RMA_SYNC: ");
        assert!(out.stdout.contains(&said), "{}", out.stdout);
    }
}

/// `cli/tests/downstream/`: a crate outside the workspace that depends on `onesided` alone,
/// built by cargo as a user builds it (offline, with the workspace's lock file), derives `Pod`
/// on its own struct, moves it by put and get under `onesided run -n 4`, and returns a
/// deliberate misuse from `main`, which Rust prints readably.
#[test]
fn a_crate_outside_the_workspace_builds_and_runs_on_onesided_alone() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let crate_dir = here.join("tests/downstream");
    let workspace_lock = here.join("../Cargo.lock");
    std::fs::copy(&workspace_lock, crate_dir.join("Cargo.lock")).expect("copying the lock file");
    let target_dir = Path::new(env!("CARGO_BIN_EXE_onesided"))
        .parent()
        .and_then(Path::parent)
        .expect("target directory")
        .join("downstream");
    let built = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--offline", "--manifest-path"])
        .arg(crate_dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .env_remove("RUSTFLAGS")
        .output()
        .expect("running cargo build");
    assert!(
        built.status.success(),
        "cargo build of the downstream crate failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_onesided"));
    cmd.args(["run", "-n", "4", "--"])
        .arg(target_dir.join("debug/downstream"));
    let out = finish(cmd, Duration::from_secs(30));
    for r in 0..4 {
        let ok = format!("downstream: rank {r} ok");
        assert!(out.stdout.contains(&ok), "{}\n{}", out.stdout, out.stderr);
    }
    assert_eq!(out.status.code(), Some(1), "{}", out.stderr);
    let printed = "Error: MPI_ERR_RMA_SYNC: rank 0, MPI_Put: ";
    assert!(out.stderr.contains(printed), "{}", out.stderr);
}

/// The library's diagnostics: silent without `ONESIDED_LOG`; with it, each rank's lines name
/// the rank and say how it joined and how its window reaches its targets; a filter `tracing`
/// cannot parse fails `World::init` with MPI_ERR_ARG.
#[test]
fn diagnostics_are_silent_by_default_and_follow_onesided_log() {
    let quiet = finish(
        launcher(&["-n", "2", "--"], "particles", &[]),
        Duration::from_secs(20),
    );
    assert!(quiet.status.success(), "{}", quiet.stderr);
    assert_eq!(quiet.stderr, "", "diagnostics printed without ONESIDED_LOG");
    let mut cmd = launcher(&["-n", "2", "--"], "particles", &[]);
    cmd.env("ONESIDED_LOG", "onesided=debug");
    let loud = finish(cmd, Duration::from_secs(20));
    assert!(loud.status.success(), "{}", loud.stderr);
    for r in 0..2 {
        for said in [
            format!("rank {r} DEBUG onesided::world: joined the job pm=Onesided rank={r} size=2"),
            format!("rank {r} DEBUG onesided::window::setup: window created"),
        ] {
            assert!(
                loud.stderr.contains(&said),
                "{said:?} missing:\n{}",
                loud.stderr
            );
        }
    }
    let mut cmd = launcher(&["-n", "2", "--"], "particles", &[]);
    cmd.env("ONESIDED_LOG", "onesided=[");
    let bad = finish(cmd, Duration::from_secs(20));
    assert!(!bad.status.success());
    let said = "MPI_ERR_ARG: MPI_Init: ONESIDED_LOG=\"onesided=[\" is not a tracing filter";
    assert!(bad.stderr.contains(said), "{}", bad.stderr);
}

/// Where the fabric serves the windows, `World::init` begins libfabric's start-up on a thread
/// of its own, and each rank's log says it finished and found the provider: the fabric forced,
/// or two nodes under `auto` with no verbs device here. Over shared memory on one node no rank
/// starts it.
#[test]
fn world_init_starts_libfabric_only_where_the_fabric_serves() {
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = launcher(args, "particles", &[]);
        cmd.env("ONESIDED_LOG", "onesided=debug")
            .env_remove("ONESIDED_TRANSPORT")
            .envs(env.iter().copied());
        let out = finish(cmd, Duration::from_secs(30));
        assert!(out.status.success(), "{}", out.stderr);
        out.stderr
    };
    let said = "libfabric started ahead of the first window";
    let shm = run(&["-n", "2", "--"], &[]);
    assert!(!shm.contains(said), "started over shared memory:\n{shm}");
    if onesided_fabric::BUILT_WITH.is_none() {
        eprintln!("world_init_starts_libfabric: fabric half skipped: built without libfabric");
        return;
    }
    let tcp = [("FI_PROVIDER", "tcp")];
    let forced = [("ONESIDED_TRANSPORT", "fabric"), tcp[0]];
    let mut jobs = vec![run(&["-n", "2", "--"], &forced)];
    if onesided_verbs::active_device().is_none() {
        jobs.push(run(&["-n", "2", "--simulate-nodes", "2", "--"], &tcp));
    }
    for stderr in jobs {
        for r in 0..2 {
            let start = format!("rank {r} DEBUG onesided::transport::fabric::start: {said}");
            let line = stderr.lines().find(|l| l.contains(&start));
            assert!(
                line.is_some_and(|l| l.contains("ok=true")),
                "{start:?} with ok=true missing:\n{stderr}"
            );
        }
    }
}

/// The ranks start with rxm's buffer and receive sizes and connection-event interval of
/// `cli/src/launch/tuning.rs`, and a value the launcher's own environment gives is kept.
#[test]
fn ranks_get_the_rxm_settings_unless_the_environment_has_them() {
    let echo = r#"echo "buffer=$FI_OFI_RXM_BUFFER_SIZE rx=$FI_OFI_RXM_MSG_RX_SIZE cm=$FI_OFI_RXM_CM_PROGRESS_INTERVAL""#;
    let job = |env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_onesided"));
        cmd.args(["run", "-n", "2", "--", "/bin/sh", "-c", echo])
            .env_remove("FI_OFI_RXM_BUFFER_SIZE")
            .env_remove("FI_OFI_RXM_MSG_RX_SIZE")
            .env_remove("FI_OFI_RXM_CM_PROGRESS_INTERVAL")
            .envs(env.iter().copied());
        let out = finish(cmd, Duration::from_secs(20));
        assert!(out.status.success(), "{}", out.stderr);
        out.stdout
    };
    assert_eq!(job(&[]), "buffer=33792 rx=128 cm=1000\n".repeat(2));
    let kept = job(&[("FI_OFI_RXM_MSG_RX_SIZE", "64")]);
    assert_eq!(kept, "buffer=33792 rx=64 cm=1000\n".repeat(2));
}

/// Where the launcher binds each rank to a CPU and leaves some CPUs to no rank, the ranks' fabric
/// progress threads run on those, and the ranks' own threads on their CPUs; where it leaves
/// none, on their rank's CPU; ranks bound by other means (`taskset` here, as `mpirun` or `srun`
/// bind) find those CPUs themselves; and `ONESIDED_FABRIC_PROGRESS_CPUS` in the launcher's
/// environment names them instead.
#[test]
fn progress_threads_run_on_the_cpus_no_rank_is_bound_to() {
    if onesided_fabric::BUILT_WITH.is_none() {
        eprintln!(
            "progress_threads_run_on_the_cpus_no_rank_is_bound_to: skipped: built without libfabric"
        );
        return;
    }
    const VAR: &str = "ONESIDED_FABRIC_PROGRESS_CPUS";
    // Per rank of the `n` that `cmd` starts: its own CPUs, and each progress thread's.
    let placed = |mut cmd: Command, n: usize, env: &[(&str, &str)]| {
        cmd.env("ONESIDED_TRANSPORT", "fabric")
            .env("FI_PROVIDER", "tcp")
            .env_remove(VAR)
            .envs(env.iter().copied());
        let out = finish(cmd, Duration::from_secs(30));
        assert!(out.status.success(), "{}", out.stderr);
        (0..n)
            .map(|r| {
                let prefix = format!("rank {r} cpus ");
                let line = out
                    .stdout
                    .lines()
                    .find_map(|l| l.strip_prefix(prefix.as_str()))
                    .unwrap_or_else(|| panic!("no line of rank {r}: {}", out.stdout));
                let (own, progress) = line.split_once(" progress ").expect("progress");
                let progress: Vec<Vec<usize>> = progress.split(';').map(cpu_list).collect();
                assert!(
                    !progress.is_empty(),
                    "rank {r} has no progress thread: {line}"
                );
                (cpu_list(own), progress)
            })
            .collect::<Vec<(Vec<usize>, Vec<Vec<usize>>)>>()
    };
    // A job of `n` that `onesided run` starts with `args`.
    let job = |n: usize, args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_onesided"));
        cmd.args(["run", "-n", &n.to_string()])
            .args(args)
            .arg(example("progress_cpus"));
        placed(cmd, n, env)
    };
    let allowed = allowed_cpus();
    // The launcher binds rank r to the r-th allowed CPU where there is one for each rank.
    for n in [1, 2.min(allowed.len())] {
        let spare = allowed[n..].to_vec();
        for (r, (own, progress)) in job(n, &["--"], &[]).into_iter().enumerate() {
            assert_eq!(own, vec![allowed[r]], "rank {r} of {n}");
            let want = if spare.is_empty() { &own } else { &spare };
            assert!(
                progress.iter().all(|p| p == want),
                "rank {r} of {n}: progress threads on {progress:?}, not {want:?}"
            );
        }
    }
    // Bound to the first CPU by taskset: both ranks of a job the launcher binds none of, and a
    // program run directly (a world of one rank).
    let first = allowed[0].to_string();
    let by_taskset = ["--bind-to", "none", "--", "taskset", "-c", &first];
    let mut direct = Command::new("taskset");
    direct.args(["-c", &first]).arg(example("progress_cpus"));
    let bound = [
        ("a job bound by taskset", job(2, &by_taskset, &[])),
        ("run directly under taskset", placed(direct, 1, &[])),
    ];
    for (how, ranks) in bound {
        for (r, (own, progress)) in ranks.into_iter().enumerate() {
            assert_eq!(own, vec![allowed[0]], "rank {r}, {how}");
            let want = if allowed.len() > 1 {
                &allowed[1..]
            } else {
                &own[..]
            };
            assert!(
                progress.iter().all(|p| p == want),
                "rank {r}, {how}: progress threads on {progress:?}, not {want:?}"
            );
        }
    }
    let last = allowed[allowed.len() - 1];
    for (r, (_, progress)) in job(2, &["--"], &[(VAR, &last.to_string())])
        .into_iter()
        .enumerate()
    {
        assert!(
            progress.iter().all(|p| *p == [last]),
            "rank {r}: progress threads on {progress:?}, not CPU {last} as {VAR} says"
        );
    }
}

/// A kernel CPU list such as `0-3,8,10-11`, expanded.
fn cpu_list(list: &str) -> Vec<usize> {
    let number = |s: &str| s.trim().parse::<usize>().expect("a CPU number");
    list.split(',')
        .filter(|part| !part.trim().is_empty())
        .flat_map(|part| match part.split_once('-') {
            Some((first, last)) => (number(first)..=number(last)).collect(),
            None => vec![number(part)],
        })
        .collect()
}

/// The CPUs this test, and so the launcher it starts, may run on.
fn allowed_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list");
    cpu_list(list)
}

/// The CPUs each of 2 ranks started with `onesided run -n 2 --bind-to MODE` may run on, the
/// launcher's environment extended with `env`.
fn affinities(mode: &str, env: &[(&str, &str)]) -> Vec<Vec<usize>> {
    let mut cmd = launcher(&["-n", "2", "--bind-to", mode], "boot_echo", &["affinity"]);
    cmd.envs(env.iter().copied());
    let out = finish(cmd, Duration::from_secs(20));
    assert!(out.status.success(), "{}", out.stderr);
    (0..2)
        .map(|r| {
            let prefix = format!("rank {r} cpus ");
            let list = out
                .stdout
                .lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .unwrap_or_else(|| panic!("no affinity of rank {r}: {}", out.stdout));
            cpu_list(list)
        })
        .collect()
}

#[test]
fn bind_to_none_leaves_the_launchers_cpus() {
    let allowed = allowed_cpus();
    assert_eq!(affinities("none", &[]), vec![allowed.clone(), allowed]);
}

#[cfg(not(feature = "hwloc"))]
#[test]
fn bind_to_core_pins_rank_r_to_the_r_th_allowed_cpu() {
    let allowed = allowed_cpus();
    let want: Vec<Vec<usize>> = (0..2).map(|r| vec![allowed[r % allowed.len()]]).collect();
    assert_eq!(affinities("core", &[]), want);
}

#[cfg(not(feature = "hwloc"))]
#[test]
fn bind_to_numa_is_refused_without_the_hwloc_feature() {
    let out = run_job(
        &["-n", "2", "--bind-to", "numa"],
        "boot_echo",
        &["affinity"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("--bind-to numa needs the `hwloc` feature"),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("cpus"), "a rank ran: {}", out.stdout);
}

/// The allowed CPUs of each object of type `ty` hwloc reports that has some, in logical order.
#[cfg(feature = "hwloc")]
fn hwloc_sets(ty: hwlocality::object::types::ObjectType) -> Vec<Vec<usize>> {
    let allowed = allowed_cpus();
    let topology = hwlocality::Topology::new().expect("hwloc topology");
    topology
        .objects_with_type(ty)
        .filter_map(|object| object.cpuset())
        .map(|set| {
            set.iter_set()
                .map(usize::from)
                .filter(|cpu| allowed.contains(cpu))
                .collect::<Vec<usize>>()
        })
        .filter(|set| !set.is_empty())
        .collect()
}

#[cfg(feature = "hwloc")]
#[test]
fn bind_to_core_gives_rank_r_the_r_th_whole_core() {
    let cores = hwloc_sets(hwlocality::object::types::ObjectType::Core);
    let got = affinities("core", &[]);
    for (r, cpus) in got.iter().enumerate() {
        assert_eq!(cpus, &cores[r % cores.len()], "rank {r} of {got:?}");
    }
    if cores.len() >= 2 {
        assert!(
            got[0].iter().all(|cpu| !got[1].contains(cpu)),
            "two ranks share a core: {got:?}"
        );
    }
}

#[cfg(feature = "hwloc")]
#[test]
fn bind_to_numa_gives_rank_r_the_cpus_of_the_r_th_node() {
    let nodes = hwloc_sets(hwlocality::object::types::ObjectType::NUMANode);
    let got = affinities("numa", &[]);
    for (r, cpus) in got.iter().enumerate() {
        assert_eq!(cpus, &nodes[r % nodes.len()], "rank {r} of {got:?}");
    }
}

/// hwloc's synthetic topologies (`HWLOC_SYNTHETIC`, read by the launcher's hwloc) number their
/// CPUs from 0: a core of two hardware threads, and two NUMA nodes of one CPU each, over CPUs 0
/// and 1 of this machine. The ranks are really bound; only the shape is made up.
#[cfg(feature = "hwloc")]
#[test]
fn bind_to_core_and_numa_follow_synthetic_topologies() {
    if !allowed_cpus().starts_with(&[0, 1]) {
        println!("bind: CPUs 0 and 1 are not both allowed here; synthetic topologies not tried");
        return;
    }
    let smt = [("HWLOC_SYNTHETIC", "core:1 pu:2")];
    assert_eq!(
        affinities("core", &smt),
        vec![vec![0, 1], vec![0, 1]],
        "a whole core, both its threads"
    );
    let two_nodes = [("HWLOC_SYNTHETIC", "pack:2 numa:1 core:1 pu:1")];
    assert_eq!(affinities("numa", &two_nodes), vec![vec![0], vec![1]]);
}
