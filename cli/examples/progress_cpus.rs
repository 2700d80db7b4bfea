//! Test program for `tests/launcher.rs`: where the threads of a rank that reaches its window's
//! targets through libfabric run.
//!
//! Run with `ONESIDED_TRANSPORT=fabric onesided run -n N progress_cpus`; each rank puts to every
//! rank (its endpoint and progress thread are open then) and prints
//! `rank R cpus LIST progress LIST;LIST...`: the CPUs its own thread may run on, then those of
//! each of its progress threads, as `/proc` lists them.

use std::process::ExitCode;

use onesided::{Assert, Info, Window, World};

fn main() -> ExitCode {
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("progress_cpus: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<String, String> {
    let world = World::init().map_err(|e| e.to_string())?;
    let (me, n) = (world.rank(), world.size());
    let win = Window::allocate(&world, 8 * n, 8, &Info::new()).map_err(|e| e.to_string())?;
    win.lock_all(Assert::NONE).map_err(|e| e.to_string())?;
    for t in 0..n {
        win.put(&[me as u64], t, me).map_err(|e| e.to_string())?;
    }
    win.flush_all().map_err(|e| e.to_string())?;
    win.unlock_all().map_err(|e| e.to_string())?;
    let own = cpus_of("/proc/thread-self")?;
    let mut progress = Vec::new();
    let tasks = std::fs::read_dir("/proc/self/task").map_err(|e| e.to_string())?;
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        // The kernel keeps 15 bytes of a thread's name ("onesided-progress").
        if comm.trim() == "onesided-progre" {
            progress.push(cpus_of(&task.path().to_string_lossy())?);
        }
    }
    world.barrier().map_err(|e| e.to_string())?;
    win.free().map_err(|e| e.to_string())?;
    Ok(format!(
        "rank {me} cpus {own} progress {}",
        progress.join(";")
    ))
}

/// The `Cpus_allowed_list` of the task whose `/proc` directory is `dir`.
fn cpus_of(dir: &str) -> Result<String, String> {
    let status = std::fs::read_to_string(format!("{dir}/status")).map_err(|e| e.to_string())?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|l| l.trim().to_owned())
        .ok_or_else(|| format!("no Cpus_allowed_list in {dir}/status"))
}
