//! A build with the fabric transport on a machine where libfabric cannot be loaded: each test
//! runs `onesided` in a private mount namespace (`unshare -m`) where the libfabric library file
//! reads as empty (`/dev/null` bound over it), so `dlopen` fails as it does where none is
//! installed. Jobs over shared memory never load libfabric, so they run; a job that needs the
//! fabric fails with an error that says why; `onesided info` says so too. (Linked, as it was,
//! no process of the build started at all there.)
//!
//! Where the namespace cannot be made (not root, no `unshare`) or the crate was built without
//! libfabric, a test prints `no-libfabric: skipped: <reason>` to stderr and passes.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The exit status of the wrapper script when it could not hide the library.
const NO_NAMESPACE: i32 = 97;
/// The longest a job of these tests may take (`timeout`).
const LIMIT_S: &str = "60";
/// Transport choices of the surrounding environment that must not reach the tests' jobs.
const TRANSPORT_VARS: &[&str] = &["ONESIDED_TRANSPORT", "ONESIDED_FABRIC_PROVIDER"];

/// The libfabric library file the loader would open, from its cache.
fn library_file() -> Result<PathBuf, String> {
    let out = Command::new("ldconfig")
        .arg("-p")
        .output()
        .map_err(|e| format!("cannot run `ldconfig -p`: {e}"))?;
    let listing = String::from_utf8_lossy(&out.stdout);
    let line = listing
        .lines()
        .find(|l| l.trim_start().starts_with("libfabric.so.1 "))
        .ok_or("the loader's cache lists no libfabric.so.1")?;
    let path = line.rsplit("=> ").next().unwrap_or_default().trim();
    std::fs::canonicalize(path).map_err(|e| format!("{path}: {e}"))
}

/// Run `onesided ARGS` (with `env`) where libfabric cannot be loaded; `Err` with the reason to
/// skip where that cannot be arranged here.
fn without_libfabric(args: &[&str], env: &[(&str, &str)]) -> Result<Output, String> {
    if onesided_fabric::BUILT_WITH.is_none() {
        return Err("built without libfabric".into());
    }
    let lib = library_file()?;
    let script = format!(
        "mount --bind /dev/null \"$0\" || exit {NO_NAMESPACE}; exec timeout {LIMIT_S} \"$@\""
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "sh", "-c", &script])
        .arg(&lib)
        .arg(env!("CARGO_BIN_EXE_onesided"))
        .args(args)
        .stdin(Stdio::null());
    for var in TRANSPORT_VARS {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run `unshare`: {e}"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(NO_NAMESPACE) || err.starts_with("unshare:") {
        return Err(format!(
            "cannot hide {} in a mount namespace: {}",
            lib.display(),
            err.trim()
        ));
    }
    Ok(out)
}

/// The job's output, or `None` after saying why the test is skipped.
fn run(args: &[&str], env: &[(&str, &str)]) -> Option<Output> {
    match without_libfabric(args, env) {
        Ok(out) => Some(out),
        Err(why) => {
            // Past the harness's capture, so that CI's log shows it.
            let _ = writeln!(std::io::stderr(), "no-libfabric: skipped: {why}");
            None
        }
    }
}

#[test]
fn a_job_over_shared_memory_runs() {
    let Some(out) = run(&["bench", "put_latency", "-m", "8:8", "-i", "20"], &[]) else {
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let row = stdout.lines().find(|l| l.starts_with("8 "));
    assert!(row.is_some(), "no 8-byte row: {stdout}");
}

#[test]
fn a_job_over_the_fabric_says_libfabric_cannot_be_loaded() {
    let args = [
        "bench",
        "put_latency",
        "-m",
        "8:8",
        "-i",
        "20",
        "--transport",
        "fabric",
    ];
    let Some(out) = run(&args, &[("FI_PROVIDER", "tcp")]) else {
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}: {stderr}", out.status);
    assert!(
        stderr.contains("MPI_ERR_OTHER")
            && stderr.contains("needs libfabric, which this process cannot load"),
        "{stderr}"
    );
}

#[test]
fn info_says_libfabric_is_not_loaded() {
    let Some(out) = run(&["info"], &[]) else {
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}: {stdout}", out.status);
    assert!(stdout.contains("not loaded: loading libfabric"), "{stdout}");
}
