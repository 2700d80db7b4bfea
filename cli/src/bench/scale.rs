//! The tests of scale: many windows alive at once (`window_scale`), and large shared windows
//! (`shared_alloc`).
//!
//! - `window_scale`: every rank of the job creates `-W COUNT` windows of `Window::allocate`
//!   (`-m` bytes per rank, 8 by default) and keeps them all, then frees them all; rank 0
//!   times both, from a barrier to a barrier, and reports the time per window. Between the two,
//!   the memory the windows hold: each rank's proportional set size (`/proc/self/smaps_rollup`:
//!   private pages, and shared ones split among the processes mapping them) and open file
//!   descriptors grown since before the first window, the largest over the ranks, and the
//!   growth of `/dev/shm` (shared segments) over the job's nodes, all per window and rank.
//! - `shared_alloc`: `Window::allocate_shared` of each size of `-m` (1 GiB to 16 GiB by
//!   default) split evenly over the ranks, timed at rank 0 from a barrier until it returns, then
//!   the resident memory it added (pages are touched only by use, so this stays small), then
//!   one page written per rank and the free.

use super::args::Test;
use super::options::Plan;
use super::report::{Column, Report, Table};
use onesided::{Error, ErrorClass, Info, Result, Window, World};
use std::time::Instant;

/// Microseconds to create one window, with all the others alive.
const CREATE: Column = Column {
    head: "Create (us)",
    unit: "us",
};
/// Microseconds to free one window.
const FREE: Column = Column {
    head: "Free (us)",
    unit: "us free",
};
/// Memory per window and rank (proportional set size: shared pages split among the
/// processes mapping them), the largest rank's.
const MEMORY: Column = Column {
    head: "Memory (KiB)",
    unit: "KiB",
};
/// Shared segments per window and rank.
const SHARED: Column = Column {
    head: "Shm (KiB)",
    unit: "KiB shm",
};
/// Open file descriptors per window, the largest rank's.
const FDS: Column = Column {
    head: "Fds",
    unit: "fd",
};

fn os(what: &str, e: std::io::Error) -> Error {
    Error::os(what, e)
}

/// This process's proportional set size in bytes: its private pages, and its share of the
/// pages it maps with other processes (a peer's segment mapped by N ranks counts 1/N here).
fn proportional() -> Result<u64> {
    let path = "/proc/self/smaps_rollup";
    let text = std::fs::read_to_string(path).map_err(|e| os(path, e))?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| Error::new(ErrorClass::Other, format!("{path}: no Pss line")))?;
    Ok(kib * 1024)
}

/// This process's open file descriptors.
fn descriptors() -> Result<u64> {
    let dir = std::fs::read_dir("/proc/self/fd").map_err(|e| os("/proc/self/fd", e))?;
    Ok(dir.count() as u64)
}

/// Bytes in use in `/dev/shm` (0 where there is none).
fn shm_used() -> u64 {
    match rustix::fs::statvfs("/dev/shm") {
        Ok(s) => (s.f_blocks - s.f_bfree) * s.f_frsize,
        Err(_) => 0,
    }
}

/// Every rank's three counters, as rank 0 gathers them.
fn gather(world: &World, values: [u64; 3]) -> Result<Vec<[u64; 3]>> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    world
        .allgather(&bytes)?
        .iter()
        .map(|b| {
            let word = |i: usize| {
                b.get(8 * i..8 * i + 8)
                    .and_then(|w| w.try_into().ok())
                    .map(u64::from_le_bytes)
                    .ok_or_else(|| Error::new(ErrorClass::Intern, "three counters of 8 bytes"))
            };
            Ok([word(0)?, word(1)?, word(2)?])
        })
        .collect()
}

/// `-W` windows of `-m` bytes alive at once.
pub(super) fn window_scale(world: &World, plan: &Plan, report: &mut Report) -> Result<()> {
    let count = plan.window_count();
    let bytes = plan.window_bytes();
    report.table(Table {
        name: Test::WindowScale.name(),
        title: "onesided Windows Alive Test".to_owned(),
        notes: vec![format!(
            "{count} windows of {bytes} bytes per rank created and kept, then freed; per \
             window: time, and memory and descriptors per rank"
        )],
        window: Some("MPI_Win_allocate"),
        sync: None,
        datatype: None,
        ranks: world.size(),
        show_ranks: true,
        columns: vec![CREATE, FREE, MEMORY, SHARED, FDS],
        imb: None,
        threads: None,
    })?;
    let node = world.split_shared()?;
    let info = Info::new();
    // A first window opens the transports' resources, which later ones share.
    Window::allocate(world, bytes, 1, &info)?.free()?;
    world.barrier()?;
    let before = [proportional()?, descriptors()?, shm_used()];
    world.barrier()?;
    let start = Instant::now();
    let mut windows = Vec::with_capacity(count);
    for _ in 0..count {
        windows.push(Window::allocate(world, bytes, 1, &info)?);
    }
    world.barrier()?;
    let created = start.elapsed();
    let after = [proportional()?, descriptors()?, shm_used()];
    let grown: Vec<[u64; 3]> = gather(
        world,
        [
            after[0].saturating_sub(before[0]),
            after[1].saturating_sub(before[1]),
            // One rank per node reads the node's /dev/shm.
            if node.rank() == 0 {
                after[2].saturating_sub(before[2])
            } else {
                0
            },
        ],
    )?;
    world.barrier()?;
    let start = Instant::now();
    for w in windows {
        w.free()?;
    }
    world.barrier()?;
    let freed = start.elapsed();
    let per = |total: f64| total / count as f64;
    let largest = |i: usize| grown.iter().map(|g| g[i]).max().unwrap_or(0) as f64;
    let shm: u64 = grown.iter().map(|g| g[2]).sum();
    report.row(
        bytes,
        count,
        &[
            vec![per(created.as_secs_f64() * 1e6)],
            vec![per(freed.as_secs_f64() * 1e6)],
            vec![per(largest(0) / 1024.0)],
            vec![per(shm as f64 / 1024.0 / world.size() as f64)],
            vec![per(largest(1))],
        ],
    )
}

/// Microseconds to allocate the shared window, at rank 0.
const ALLOCATE: Column = Column {
    head: "Allocate (us)",
    unit: "us",
};
/// Memory the window added before use, per rank.
const UNTOUCHED: Column = Column {
    head: "Memory (KiB)",
    unit: "KiB",
};

/// `Window::allocate_shared` of each size of the plan, split over the ranks.
pub(super) fn shared_alloc(world: &World, plan: &Plan, report: &mut Report) -> Result<()> {
    let n = world.size();
    report.table(Table {
        name: Test::SharedAlloc.name(),
        title: "onesided Shared Window Allocation Test".to_owned(),
        notes: vec![
            "Size bytes in all, split evenly over the ranks; memory: what it added per rank \
             before use (proportional set size), the largest rank's"
                .to_owned(),
        ],
        window: Some("MPI_Win_allocate_shared"),
        sync: None,
        datatype: None,
        ranks: n,
        show_ranks: true,
        columns: vec![ALLOCATE, FREE, UNTOUCHED],
        imb: None,
        threads: None,
    })?;
    let info = Info::new();
    for size in plan.shared_sizes() {
        let mine = size / n;
        let before = proportional()?;
        world.barrier()?;
        let start = Instant::now();
        let win = Window::allocate_shared(world, mine, 1, &info)?;
        let allocated = start.elapsed();
        let grown = proportional()?.saturating_sub(before);
        let all = gather(world, [grown, 0, 0])?;
        // Every rank writes the first word of its part; rank 0 reads them all directly.
        if mine >= 8 {
            win.write_local(0, &[world.rank() as u64 + 1])?;
        }
        world.barrier()?;
        if world.rank() == 0 && mine >= 8 {
            for r in 0..n {
                let mut word = [0u64];
                win.shared_query(Some(r))?.read(0, &mut word)?;
                if word[0] != r as u64 + 1 {
                    return Err(Error::new(
                        ErrorClass::Other,
                        format!("shared_alloc: rank {r}'s first word holds {}", word[0]),
                    ));
                }
            }
        }
        world.barrier()?;
        let start = Instant::now();
        win.free()?;
        world.barrier()?;
        let freed = start.elapsed();
        let largest = all.iter().map(|g| g[0]).max().unwrap_or(0) as f64;
        report.row(
            size,
            1,
            &[
                vec![allocated.as_secs_f64() * 1e6],
                vec![freed.as_secs_f64() * 1e6],
                vec![largest / 1024.0],
            ],
        )?;
    }
    Ok(())
}
