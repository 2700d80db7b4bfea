//! Test program for `tests/launcher.rs`: reports its job environment.
//!
//! Modes (first argument): none prints lines on stdout and stderr; `segment` creates a fake
//! shared-memory segment of the job; `sleep` prints its pid and sleeps; `orphan STATUS` starts a
//! `sleep 60` child that it leaves behind, prints `child PID`, waits in an allgather until every
//! rank has done so, and exits with status STATUS on rank 1 and 0 elsewhere; `affinity` prints
//! `rank R cpus LIST` with the CPUs it may run on (the kernel's `Cpus_allowed_list`). Run directly
//! (without the launcher) it prints `no job env`.

use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use onesided::boot::{BootClient, JobEnv};

fn main() -> ExitCode {
    let env = match JobEnv::from_env() {
        Ok(Some(env)) => env,
        Ok(None) => {
            println!("no job env");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("boot_echo: {e}");
            return ExitCode::from(2);
        }
    };
    let rank = env.rank;
    match std::env::args().nth(1).as_deref() {
        None => {
            println!("hello from {rank} of {} on {:?}", env.size, env.node);
            eprintln!("warning from {rank}");
            print!("partial {rank}");
        }
        Some("segment") => {
            let path = format!("/dev/shm/onesided-{}-boottest-{rank}", env.job);
            if let Err(e) = std::fs::write(&path, b"x") {
                eprintln!("boot_echo: creating {path}: {e}");
                return ExitCode::FAILURE;
            }
            println!("job {}", env.job);
        }
        Some("affinity") => {
            let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            let Some(cpus) = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            else {
                eprintln!("boot_echo: no Cpus_allowed_list in /proc/self/status");
                return ExitCode::FAILURE;
            };
            println!("rank {rank} cpus {}", cpus.trim());
        }
        Some("sleep") => {
            println!("pid {}", std::process::id());
            std::thread::sleep(Duration::from_secs(30));
        }
        Some("orphan") => {
            let status: Option<u8> = std::env::args().nth(2).and_then(|s| s.parse().ok());
            let child = Command::new("sleep")
                .arg("60")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            match (status, child) {
                (Some(status), Ok(child)) => {
                    println!("child {}", child.id());
                    let all_started = BootClient::connect(&env).and_then(|client| {
                        client.allgather(1, 0, env.size, rank, b"started")?;
                        client.finalize()
                    });
                    if let Err(e) = all_started {
                        eprintln!("boot_echo: {e}");
                        return ExitCode::FAILURE;
                    }
                    if rank == 1 {
                        return ExitCode::from(status);
                    }
                }
                (None, _) => {
                    eprintln!("boot_echo: orphan needs an exit status");
                    return ExitCode::FAILURE;
                }
                (_, Err(e)) => {
                    eprintln!("boot_echo: starting sleep: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        Some(other) => {
            eprintln!("boot_echo: unknown mode {other}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
