//! Test program for `tests/launcher.rs`: reports its job environment.
//!
//! Modes (first argument): none prints lines on stdout and stderr; `segment` creates a fake
//! shared-memory segment of the job; `sleep` prints its pid and sleeps. Run directly (without
//! the launcher) it prints `no job env`.

use std::process::ExitCode;
use std::time::Duration;

use onesided::boot::JobEnv;

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
        Some("sleep") => {
            println!("pid {}", std::process::id());
            std::thread::sleep(Duration::from_secs(30));
        }
        Some(other) => {
            eprintln!("boot_echo: unknown mode {other}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
