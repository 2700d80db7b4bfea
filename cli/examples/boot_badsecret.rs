//! Test program for `tests/launcher.rs`: the hub refuses connections with a wrong secret or a
//! rank already connected, and the job carries on.
//!
//! Rank 0 re-runs itself as a probe, once with a corrupted `ONESIDED_SECRET` and once
//! impersonating rank 1; each probe prints `refused: <error>` if its connection was refused.
//! Every rank prints `rank R ok` at the end.

use std::process::{Command, ExitCode};

use onesided::boot::{BootClient, ENV_RANK, ENV_SECRET, JobEnv};

const PROBE: &str = "BOOT_BADSECRET_PROBE";

fn main() -> ExitCode {
    let result = if std::env::var_os(PROBE).is_some() {
        probe()
    } else {
        run()
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("boot_badsecret: {e}");
            ExitCode::FAILURE
        }
    }
}

fn job_env() -> Result<JobEnv, String> {
    JobEnv::from_env()
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "not started by onesided run".to_string())
}

fn probe() -> Result<(), String> {
    match BootClient::connect(&job_env()?) {
        Ok(_) => Err("the hub accepted the probe".into()),
        Err(e) => {
            println!("refused: {e}");
            Ok(())
        }
    }
}

/// Runs this program as a probe with `var=value` and checks that it was refused.
fn run_probe(var: &str, value: &str) -> Result<(), String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(me)
        .env(PROBE, "1")
        .env(var, value)
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    if out.status.success() && stdout.contains("refused") {
        Ok(())
    } else {
        Err(format!("probe with {var}={value}: {}", out.status))
    }
}

fn run() -> Result<(), String> {
    let env = job_env()?;
    let client = BootClient::connect(&env).map_err(|e| e.to_string())?;
    let (rank, size) = (env.rank, env.size);
    let all = |seq| client.allgather(3, seq, size, rank, &[rank as u8]);
    all(0).map_err(|e| e.to_string())?;
    if rank == 0 {
        let secret = std::env::var(ENV_SECRET).map_err(|e| e.to_string())?;
        let flipped = if secret.starts_with('0') { "1" } else { "0" };
        run_probe(ENV_SECRET, &format!("{flipped}{}", &secret[1..]))?;
        run_probe(ENV_RANK, "1")?;
    }
    let got = all(1).map_err(|e| e.to_string())?;
    if got != (0..size).map(|r| vec![r as u8]).collect::<Vec<_>>() {
        return Err("unexpected allgather result".into());
    }
    client.finalize().map_err(|e| e.to_string())?;
    println!("rank {rank} ok");
    Ok(())
}
