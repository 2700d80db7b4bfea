//! The PMIx client against a real PMIx server: Open MPI's `mpirun`.
//!
//! This executable plays two parts. Started by `cargo test`, it runs itself under
//! `mpirun -np 3` and checks that every rank reports; then runs itself without a server and
//! checks that `Client::init` fails instead of hanging. Started with `PROBE_RANK=1` (by the
//! first part), it is a rank: init, job size, put/commit/fence/get of every rank's key, the
//! failure handler, finalize; it prints `probe ok rank R/N` or the error.
//!
//! Where mpirun or libpmix is missing the test says so and passes, unless
//! `ONESIDED_REQUIRE_PMIX=1`.

use std::process::{Command, Stdio};

#[cfg(have_pmix)]
fn rank() -> Result<String, String> {
    let client = onesided_pmix::Client::init().map_err(|e| e.to_string())?;
    let step = |r: Result<(), onesided_pmix::PmixError>| r.map_err(|e| e.to_string());
    let (rank, size) = (client.rank(), client.job_size().map_err(|e| e.to_string())?);
    step(client.put("probe", format!("from {rank}").as_bytes()))?;
    step(client.commit())?;
    step(client.fence(true))?;
    for r in 0..size {
        let got = client.get(r, "probe").map_err(|e| e.to_string())?;
        if got != format!("from {r}").as_bytes() {
            return Err(format!("rank {r}'s value reads {got:?}"));
        }
    }
    if client.get(rank, "never put").is_ok() {
        return Err("a key nobody put has a value".into());
    }
    step(client.on_failure(|f| eprintln!("probe: failure {f:?}")))?;
    step(client.fence(false))?;
    Ok(format!(
        "probe ok rank {rank}/{size} namespace {}",
        client.namespace()
    ))
}

#[cfg(not(have_pmix))]
fn rank() -> Result<String, String> {
    Err("built without PMIx".into())
}

fn skip(why: &str) {
    assert!(
        std::env::var("ONESIDED_REQUIRE_PMIX").as_deref() != Ok("1"),
        "{why} (and ONESIDED_REQUIRE_PMIX=1)"
    );
    eprintln!("pmix probe: skipped: {why}");
}

fn main() {
    if std::env::var_os("PROBE_RANK").is_some() {
        match rank() {
            Ok(line) => println!("{line}"),
            Err(e) => {
                println!("probe failed: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    if onesided_pmix::BUILT_WITH.is_none() {
        return skip("built without libpmix");
    }
    let exe = std::env::current_exe().expect("this executable");
    let alone = Command::new(&exe)
        .env("PROBE_RANK", "1")
        .env_remove("PMIX_NAMESPACE")
        .env_remove("PMIX_RANK")
        .stdin(Stdio::null())
        .output()
        .expect("running the probe alone");
    let said = String::from_utf8_lossy(&alone.stdout);
    assert!(
        !alone.status.success() && said.contains("PMIx_Init"),
        "without a server PMIx_Init must fail: {said}"
    );
    let launched = Command::new("mpirun.openmpi")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "--bind-to",
            "none",
        ])
        .args(["-np", "3"])
        .arg(&exe)
        .env("PROBE_RANK", "1")
        .stdin(Stdio::null())
        .output();
    let out = match launched {
        Ok(out) => out,
        Err(e) => return skip(&format!("cannot run mpirun.openmpi: {e}")),
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "mpirun: {}\n{text}\n{err}",
        out.status
    );
    for r in 0..3 {
        let ok = format!("probe ok rank {r}/3 ");
        assert!(
            text.contains(&ok),
            "rank {r} did not report:\n{text}\n{err}"
        );
    }
    println!("pmix probe: 3 ranks under mpirun.openmpi: ok");
}
