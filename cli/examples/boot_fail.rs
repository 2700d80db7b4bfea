//! Test program for `tests/launcher.rs`: one rank fails while the others are in an allgather.
//!
//! Modes (first argument): `exit3` (rank 1 exits with status 3), `vanish` (rank 1 exits with
//! status 0 without finalizing), `noconnect` (rank 1 exits with status 0 without ever
//! connecting), `sigkill` (rank 2 kills itself with SIGKILL), `late` (rank 1 sleeps 30 s before
//! it connects). The surviving ranks print `rank R saw: <error>` and exit 0 if their allgather
//! failed with `MPI_ERR_PROC_FAILED` naming the failed rank, and exit 1 otherwise.
//!
//! `world_exit3` and `world_sigkill` do the same in a `World`'s barrier (rank 1 exits with
//! status 3, rank 2 kills itself), and the survivors return the error their barrier gives, so
//! that they exit with status 1 as soon as they learn of the failure, often before the launcher
//! has seen the failed rank exit: it must still name the rank that failed first.

use std::process::ExitCode;
use std::time::Duration;

use onesided::boot::{BootClient, JobEnv};
use onesided::{ErrorClass, World};
use onesided_shm::process::{SIGKILL, kill};

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let result = if mode.starts_with("world_") {
        world(&mode)
    } else {
        run(&mode)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("boot_fail: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Kills this process with `SIGKILL`.
fn kill_self() -> Result<(), String> {
    kill(std::process::id(), SIGKILL).map_err(|e| e.to_string())?;
    Err("still alive after SIGKILL".into())
}

fn world(mode: &str) -> Result<(), String> {
    let victim = match mode {
        "world_exit3" => 1,
        "world_sigkill" => 2,
        _ => return Err(format!("unknown mode {mode:?}")),
    };
    let world = World::init().map_err(|e| e.to_string())?;
    world.barrier().map_err(|e| e.to_string())?;
    if world.rank() == victim {
        if victim == 1 {
            std::process::exit(3);
        }
        return kill_self();
    }
    match world.barrier() {
        Ok(()) => Err("barrier succeeded although a rank failed".into()),
        Err(e) => Err(format!("rank {} saw: {e}", world.rank())),
    }
}

fn run(mode: &str) -> Result<(), String> {
    let env = JobEnv::from_env()
        .map_err(|e| e.to_string())?
        .ok_or("not started by onesided run")?;
    let (rank, size) = (env.rank, env.size);
    let victim = match mode {
        "exit3" | "vanish" | "noconnect" | "late" => 1,
        "sigkill" => 2,
        _ => return Err(format!("unknown mode {mode:?}")),
    };
    if mode == "noconnect" && rank == victim {
        return Ok(());
    }
    if mode == "late" && rank == victim {
        std::thread::sleep(Duration::from_secs(30));
    }
    let client = BootClient::connect(&env).map_err(|e| e.to_string())?;
    if mode != "noconnect" && mode != "late" {
        client
            .allgather(7, 0, size, rank, b"up")
            .map_err(|e| e.to_string())?;
    }
    if rank == victim {
        match mode {
            "exit3" => std::process::exit(3),
            "vanish" => std::process::exit(0),
            "sigkill" => return kill_self(),
            _ => {}
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
