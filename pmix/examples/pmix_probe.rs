//! Exercises the PMIx client under a real launcher, for instance
//! `mpirun.openmpi --allow-run-as-root --oversubscribe -np 3 target/debug/examples/pmix_probe`:
//! init; namespace, rank, job size and local peers; every rank puts a key holding its rank,
//! commits and fences with data collection, then gets and checks every other rank's key (and
//! that keys too long or reserved for PMIx are refused); the failure handler is registered;
//! a plain fence; finalize. Each rank prints `pmix_probe ok rank R/N`, or `pmix_probe: <error>`
//! and exits with status 1 (as it does without a launcher, when `Client::init` fails).
//!
//! After the plain fence, with
//! - `--kill R`: rank R kills itself with SIGKILL; every other rank waits up to 5 s for the
//!   failure callback, prints `pmix_probe rank Q saw <failure>` or `pmix_probe rank Q saw no
//!   failure`, and finishes as above;
//! - `--abort R`: rank R asks PMIx to abort the namespace with status 3; every rank waits up to
//!   10 s to be ended by the launcher, else fails with `pmix_probe: rank Q not aborted`;
//! - `--lose-server DIR` (under `mpirun` only): once every rank is past the fence, rank 0
//!   kills its parent, the `mpirun` that serves PMIx; every rank waits up to 5 s for the failure callback, finalizes, and writes
//!   its `saw` line to `DIR/rank.Q`, as its output went with `mpirun`.

use std::io::Write;
use std::process::ExitCode;

/// What the ranks do after the plain fence.
#[cfg(have_pmix)]
enum Then {
    Finish,
    Kill(u32),
    Abort(u32),
    LoseServer(std::path::PathBuf),
}

#[cfg(have_pmix)]
fn parse(args: &[String]) -> Result<Then, String> {
    let rank = |r: &str| r.parse().map_err(|_| format!("expected a rank, not {r:?}"));
    match args {
        [] => Ok(Then::Finish),
        [flag, r] if flag == "--kill" => Ok(Then::Kill(rank(r)?)),
        [flag, r] if flag == "--abort" => Ok(Then::Abort(rank(r)?)),
        [flag, dir] if flag == "--lose-server" => Ok(Then::LoseServer(dir.into())),
        _ => Err("usage: pmix_probe [--kill RANK | --abort RANK | --lose-server DIR]".into()),
    }
}

/// Init, put/commit/fence/get and the failure handler; then what `args` ask for.
#[cfg(have_pmix)]
fn probe(args: &[String]) -> Result<String, String> {
    use onesided_pmix::Client;
    use std::sync::mpsc;

    let then = parse(args)?;
    let client = Client::init().map_err(|e| e.to_string())?;
    let rank = client.rank();
    let size = client.job_size().map_err(|e| e.to_string())?;
    let peers = client.local_peers().map_err(|e| e.to_string())?;
    println!(
        "pmix_probe rank {rank}: namespace {} job size {size} local peers {peers:?}",
        client.namespace()
    );
    if !peers.contains(&rank) {
        return Err(format!(
            "rank {rank} is not among its local peers {peers:?}"
        ));
    }
    let long = "k".repeat(512);
    for bad in ["pmix.probe", long.as_str()] {
        if client.put(bad, b"x").is_ok() {
            return Err(format!("put of key {bad:?} succeeded"));
        }
    }
    let key = "probe.rank";
    let mine = format!("rank {rank}");
    client
        .put(key, mine.as_bytes())
        .map_err(|e| e.to_string())?;
    client.commit().map_err(|e| e.to_string())?;
    client.fence(true).map_err(|e| e.to_string())?;
    for r in (0..size).filter(|&r| r != rank) {
        let got = client.get(r, key).map_err(|e| e.to_string())?;
        if got != format!("rank {r}").as_bytes() {
            let got = String::from_utf8_lossy(&got);
            return Err(format!("rank {r}'s {key} reads {got:?}"));
        }
    }
    let (tx, rx) = mpsc::channel();
    client
        .on_failure(move |f| drop(tx.send(f)))
        .map_err(|e| e.to_string())?;
    client.fence(false).map_err(|e| e.to_string())?;
    let saw = || match rx.recv_timeout(std::time::Duration::from_secs(5)) {
        Ok(f) => format!("pmix_probe rank {rank} saw {f:?}"),
        Err(_) => format!("pmix_probe rank {rank} saw no failure"),
    };
    match then {
        Then::Finish => {}
        Then::Kill(victim) => {
            if rank == victim {
                // SAFETY: raise takes a signal number; SIGKILL ends this process at once.
                unsafe { libc::raise(libc::SIGKILL) };
            }
            println!("{}", saw());
        }
        Then::Abort(victim) => {
            if rank == victim {
                client
                    .abort(3, "pmix_probe: abort requested")
                    .map_err(|e| e.to_string())?;
            }
            std::thread::sleep(std::time::Duration::from_secs(10));
            return Err(format!("rank {rank} not aborted"));
        }
        Then::LoseServer(dir) => {
            std::fs::write(dir.join(format!("past.{rank}")), "")
                .map_err(|e| format!("writing to {}: {e}", dir.display()))?;
            if rank == 0 {
                kill_mpirun(&dir, size)?;
            }
            let seen = saw();
            drop(client);
            let report = dir.join(format!("rank.{rank}"));
            std::fs::write(&report, format!("{seen}\n"))
                .map_err(|e| format!("writing {}: {e}", report.display()))?;
            return Ok(seen);
        }
    }
    drop(client);
    Ok(format!("pmix_probe ok rank {rank}/{size}"))
}

/// Once every rank has left the plain fence (each leaves a `past.R` file in `dir`; a rank
/// still inside would see the fence fail), kills this process's parent with SIGKILL, if it is
/// Open MPI's `mpirun` (or `orterun`).
#[cfg(have_pmix)]
fn kill_mpirun(dir: &std::path::Path, size: u32) -> Result<(), String> {
    let start = std::time::Instant::now();
    while !(0..size).all(|r| dir.join(format!("past.{r}")).exists()) {
        if start.elapsed() > std::time::Duration::from_secs(20) {
            return Err("the other ranks did not leave the fence".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: getppid takes no arguments and cannot fail.
    let parent = unsafe { libc::getppid() };
    let comm = std::fs::read_to_string(format!("/proc/{parent}/comm")).unwrap_or_default();
    if !["mpirun", "orterun"].iter().any(|m| comm.starts_with(m)) {
        return Err(format!("parent {parent} is {:?}, not mpirun", comm.trim()));
    }
    // SAFETY: kill takes a pid and a signal number; the pid is our parent's.
    match unsafe { libc::kill(parent, libc::SIGKILL) } {
        0 => Ok(()),
        _ => Err(format!(
            "kill {parent}: {}",
            std::io::Error::last_os_error()
        )),
    }
}

#[cfg(not(have_pmix))]
fn probe(_args: &[String]) -> Result<String, String> {
    Err("onesided-pmix was built without libpmix".into())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (line, code) = match probe(&args) {
        Ok(line) => (line, ExitCode::SUCCESS),
        Err(e) => (format!("pmix_probe: {e}"), ExitCode::FAILURE),
    };
    // With --lose-server the output went with mpirun: the report file is what counts.
    drop(writeln!(std::io::stdout(), "{line}"));
    code
}
