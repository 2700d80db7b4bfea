//! The RMA tests: put/get latency and bandwidth, timed as OSU times them.
//!
//! Per size, both ranks create a fresh window (latency: `size` bytes, bandwidth: `size * W`
//! bytes), rank 0 runs the timed loop (with rank 1 in fence mode), then both meet at a closing
//! fence and free the window. In the passive modes (flush, flush_local, lock, lock_all) rank 1
//! just waits in that fence: asleep on its doorbell over shared memory, polling the fabric
//! otherwise (as an MPI library's target does).

use super::options::{Kind, Pass, Plan};
use super::report::Report;
use super::{Creation, SyncMode, mbps, micros, timed};
use onesided::Assert;
use onesided::Info;
use onesided::LockType;
use onesided::Result;
use onesided::Window;
use onesided::World;
use std::time::Duration;

/// The operation a test times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Put,
    Get,
    /// compare_and_swap of one u64 (latency only).
    Cas,
}

/// The OSU header lines of a test.
fn title(op: Op, kind: Kind) -> &'static str {
    match (op, kind) {
        (Op::Put, Kind::Latency) => "OSU MPI_Put Latency Test v7.4",
        (Op::Get, Kind::Latency) => "OSU MPI_Get Latency Test v7.4",
        (Op::Put, Kind::Bandwidth) => "OSU MPI_Put Bandwidth Test v7.4",
        (Op::Get, Kind::Bandwidth) => "OSU MPI_Get Bandwidth Test v7.4",
        (Op::Cas, _) => "OSU MPI_Compare_and_swap latency Test v7.4",
    }
}

/// Runs one test over every size of the plan and prints its table.
pub(super) fn sweep(
    world: &World,
    op: Op,
    kind: Kind,
    plan: &Plan,
    report: &mut Report,
) -> Result<()> {
    let creation = format!("Window creation: {}", plan.creation.mpi_name());
    let sync = format!("Synchronization: {}", plan.sync.mpi_name());
    let column = match kind {
        Kind::Latency => "Latency (us)",
        Kind::Bandwidth => "Bandwidth (MB/s)",
    };
    report.table(&[title(op, kind), &creation, &sync], column)?;
    let count = match kind {
        Kind::Latency => 1,
        Kind::Bandwidth => plan.window,
    };
    // compare_and_swap moves one u64, whatever the sizes asked for.
    let sizes: Vec<usize> = match op {
        Op::Cas => vec![8],
        _ => plan.sizes.iter().collect(),
    };
    for size in sizes {
        let pass = plan.pass(kind, size);
        let time = with_window(world, plan.creation, size * count, |win| {
            // Filled with non-zero bytes, so that its pages are touched before the clock starts.
            let mut buf = vec![0x5au8; size * count];
            match (op, kind) {
                (Op::Put, Kind::Latency) => {
                    epochs(win, plan.sync, kind, pass, |w, t| w.put(&buf, t, 0))
                }
                (Op::Get, Kind::Latency) => {
                    epochs(win, plan.sync, kind, pass, |w, t| w.get(&mut buf, t, 0))
                }
                (Op::Put, Kind::Bandwidth) => epochs(win, plan.sync, kind, pass, |w, t| {
                    buf.chunks_exact(size)
                        .enumerate()
                        .try_for_each(|(j, m)| w.put(m, t, j * size))
                }),
                (Op::Get, Kind::Bandwidth) => epochs(win, plan.sync, kind, pass, |w, t| {
                    buf.chunks_exact_mut(size)
                        .enumerate()
                        .try_for_each(|(j, m)| w.get(m, t, j * size))
                }),
                (Op::Cas, _) => epochs(win, plan.sync, kind, pass, |w, t| {
                    w.compare_and_swap(1u64, 0u64, t, 0).map(drop)
                }),
            }
        })?;
        let value = match (kind, plan.sync) {
            (Kind::Latency, SyncMode::Fence) => micros(time, 2.0 * pass.iters as f64),
            (Kind::Latency, _) => micros(time, pass.iters as f64),
            (Kind::Bandwidth, _) => mbps(time, (size * count) as f64 * pass.iters as f64),
        };
        report.row(size, value)?;
    }
    Ok(())
}

/// Creates a window of `bytes` bytes on every rank, runs `f` on it, then meets the other rank
/// at a closing fence and frees the window (a failure of `f` returns at once: the job ends on
/// it).
fn with_window<R>(
    world: &World,
    creation: Creation,
    bytes: usize,
    f: impl FnOnce(&Window<'_>) -> Result<R>,
) -> Result<R> {
    let info = Info::new();
    // The closing barrier is the window's own, so that a passive rank 1 waits inside the
    // library, serving the fabric as MPI libraries' targets do (over shared memory it sleeps).
    // A failure of rank 0 ends the job (the launcher stops rank 1), so it returns at once.
    let run = |win: &Window<'_>| {
        let result = f(win)?;
        win.fence(Assert::NOPRECEDE | Assert::NOSUCCEED)?;
        Ok(result)
    };
    match creation {
        Creation::Allocate => {
            let win = Window::allocate(world, bytes, 1, &info)?;
            let result = run(&win);
            win.free()?;
            result
        }
        Creation::Create => {
            let mut memory = vec![0u8; bytes];
            Window::create(world, &mut memory[..], 1, &info, run)?
        }
    }
}

/// The timed loop of one size: `op(win, target)` issues the operation(s) of one iteration.
/// Returns rank 0's time (zero on a passive rank 1).
#[inline(always)]
fn epochs(
    win: &Window<'_>,
    sync: SyncMode,
    kind: Kind,
    pass: Pass,
    mut op: impl FnMut(&Window<'_>, usize) -> Result<()>,
) -> Result<Duration> {
    const N: Assert = Assert::NONE;
    let origin = win.rank() == 0;
    match (sync, kind) {
        (SyncMode::Fence, Kind::Latency) if origin => timed(pass, || {
            win.fence(N)?;
            op(win, 1)?;
            win.fence(N)?;
            win.fence(N)
        }),
        (SyncMode::Fence, Kind::Latency) => timed(pass, || {
            win.fence(N)?;
            win.fence(N)?;
            op(win, 0)?;
            win.fence(N)
        }),
        (SyncMode::Fence, Kind::Bandwidth) if origin => timed(pass, || {
            win.fence(N)?;
            op(win, 1)?;
            win.fence(N)
        }),
        (SyncMode::Fence, Kind::Bandwidth) => timed(pass, || {
            win.fence(N)?;
            win.fence(N)
        }),
        _ if !origin => Ok(Duration::ZERO),
        (SyncMode::Flush | SyncMode::FlushLocal, _) => {
            let local = sync == SyncMode::FlushLocal;
            win.lock(LockType::Shared, 1, N)?;
            let time = timed(pass, || {
                op(win, 1)?;
                if local {
                    win.flush_local(1)
                } else {
                    win.flush(1)
                }
            })?;
            win.unlock(1)?;
            Ok(time)
        }
        (SyncMode::Lock, _) => timed(pass, || {
            win.lock(LockType::Shared, 1, N)?;
            op(win, 1)?;
            win.unlock(1)
        }),
        (SyncMode::LockAll, _) => timed(pass, || {
            win.lock_all(N)?;
            op(win, 1)?;
            win.unlock_all()
        }),
    }
}
