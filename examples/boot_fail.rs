//! Test program for `tests/launcher.rs`: one rank fails while the others are in an allgather.
//!
//! Modes (first argument): `exit3` (rank 1 exits with status 3), `vanish` (rank 1 exits with
//! status 0 without finalizing), `noconnect` (rank 1 exits with status 0 without ever
//! connecting), `sigkill` (rank 2 kills itself with SIGKILL). The surviving
//! ranks print `rank R saw: <error>` and exit 0 if their allgather failed with
//! `MPI_ERR_PROC_FAILED` naming the failed rank, and exit 1 otherwise.

use std::process::ExitCode;

use onesided::ErrorClass;
use onesided::boot::{BootClient, JobEnv};
use onesided_shm::process::{SIGKILL, kill};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("boot_fail: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let env = JobEnv::from_env()
        .map_err(|e| e.to_string())?
        .ok_or("not started by onesided run")?;
    let (rank, size) = (env.rank, env.size);
    let victim = match mode.as_str() {
        "exit3" | "vanish" | "noconnect" => 1,
        "sigkill" => 2,
        _ => return Err(format!("unknown mode {mode:?}")),
    };
    if mode == "noconnect" && rank == victim {
        return Ok(());
    }
    let client = BootClient::connect(&env).map_err(|e| e.to_string())?;
    if mode != "noconnect" {
        client
            .allgather(7, 0, size, rank, b"up")
            .map_err(|e| e.to_string())?;
    }
    if rank == victim {
        match mode.as_str() {
            "exit3" => std::process::exit(3),
            "vanish" => std::process::exit(0),
            _ => {
                kill(std::process::id(), SIGKILL).map_err(|e| e.to_string())?;
                return Err("still alive after SIGKILL".into());
            }
        }
    }
    match client.allgather(7, 1, size, rank, b"again") {
        Ok(_) => Err("allgather succeeded although a rank failed".into()),
        Err(e) => {
            println!("rank {rank} saw: {e}");
            let named = e.message().contains(&format!("rank {victim}"));
            if e.class() == ErrorClass::ProcFailed && named {
                Ok(())
            } else {
                Err(format!("unexpected error {e}"))
            }
        }
    }
}
