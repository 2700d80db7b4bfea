//! The OSU put/get tests (latency, bandwidth, put bi-directional bandwidth), timed as OSU times
//! them, and what every OSU test shares: its table, its window per size, its timed loop.
//!
//! Per size, both ranks create a fresh window (latency: `size` bytes, bandwidth: `size * W`
//! bytes), rank 0 runs the timed loop (with rank 1 in fence mode, and issuing its own puts in
//! put_bibw), repetition after repetition, then both meet at a closing fence and free the
//! window. In the passive modes (flush, flush_local, lock, lock_all) rank 1 just waits in that
//! fence: asleep on its doorbell over shared memory, polling the fabric otherwise (as an MPI
//! library's target does); with `--target sleep` or `compute` it first sleeps or computes
//! until the timed loop is over (`busy.rs`).

use super::args::{Creation, SyncMode, Test};
use super::busy::{self, Target};
use super::measure::{mbps, micros, timed};
use super::options::{Kind, Pass, Plan};
use super::pages::Pages;
use super::report::{BANDWIDTH, Column, LATENCY, MESSAGE_RATE, Report, Table};
use onesided::{Assert, Error, ErrorClass, Info, LockType, Result, Window, World};
use std::time::Duration;

/// The datatype OSU's put and get tests move and name in their header.
const BYTES: &str = "MPI_CHAR";

/// What the memory a benchmark lends to a window holds before the test (OSU: `memset` to 'b').
const WINDOW_FILL: u8 = 0xa5;

/// The title line of an OSU test.
fn title(test: Test) -> &'static str {
    match test {
        Test::PutLatency => "OSU MPI_Put Latency Test v7.4",
        Test::GetLatency => "OSU MPI_Get Latency Test v7.4",
        Test::PutBw => "OSU MPI_Put Bandwidth Test v7.4",
        Test::GetBw => "OSU MPI_Get Bandwidth Test v7.4",
        Test::PutBibw => "OSU MPI_Put Bi-directional Bandwidth Test v7.4",
        Test::AccLatency => "OSU MPI_Accumulate latency Test v7.4",
        Test::GetAccLatency => "OSU MPI_Get_accumulate latency Test v7.4",
        Test::FopLatency => "OSU MPI_Fetch_and_op latency Test v7.4",
        _ => "OSU MPI_Compare_and_swap latency Test v7.4",
    }
}

/// The note of a table whose values are median iterations (`--per-op`).
const PER_OP: &str = "median of per-iteration times (--per-op), not the loop's mean";

/// The table of an OSU test: title, window creation, synchronization and datatype, one column.
pub(super) fn osu_table(test: Test, plan: &Plan, datatype: &'static str, column: Column) -> Table {
    Table {
        name: test.name(),
        title: title(test).to_owned(),
        notes: plan
            .target
            .note()
            .map(String::from)
            .into_iter()
            .chain(plan.per_op.then(|| PER_OP.to_owned()))
            .collect(),
        window: Some(plan.creation.mpi_name()),
        sync: Some(plan.sync(test).mpi_name()),
        datatype: Some(datatype),
        ranks: 2,
        show_ranks: false,
        columns: vec![column],
        imb: None,
        threads: None,
    }
}

/// How an OSU test synchronizes its timed loop.
#[derive(Debug, Clone, Copy)]
pub(super) struct Loop {
    pub sync: SyncMode,
    pub kind: Kind,
    /// The lock each iteration takes in the lock mode.
    pub lock: LockType,
    /// The lock held across the loop in the flush modes.
    pub hold: LockType,
    /// Both ranks issue operations (put_bibw).
    pub both: bool,
    /// What rank 1 does meanwhile in the passive modes.
    pub target: Target,
}

/// Runs one put/get test over every size of the plan and reports its rows; put_bw also reports
/// its message rate (messages per second) in a second column.
pub(super) fn sweep(world: &World, test: Test, plan: &Plan, report: &mut Report) -> Result<()> {
    let (kind, both) = match test {
        Test::PutLatency | Test::GetLatency => (Kind::Latency, false),
        Test::PutBw | Test::GetBw => (Kind::Bandwidth, false),
        _ => (Kind::Bandwidth, true),
    };
    let put = matches!(test, Test::PutLatency | Test::PutBw | Test::PutBibw);
    let column = match kind {
        Kind::Latency => LATENCY,
        Kind::Bandwidth => BANDWIDTH,
    };
    let mut table = osu_table(test, plan, BYTES, column);
    let rate = test == Test::PutBw;
    if rate {
        table.columns.push(MESSAGE_RATE);
    }
    report.table(table)?;
    let count = match kind {
        Kind::Latency => 1,
        Kind::Bandwidth => plan.window,
    };
    let sync = plan.sync(test);
    let how = Loop {
        sync,
        kind,
        lock: LockType::Shared,
        hold: LockType::Shared,
        both,
        target: plan.target,
    };
    for size in plan.sizes.iter() {
        let pass = plan.pass(kind, size);
        let times = with_window(world, plan.creation, size * count, |win, at| {
            // Page-aligned and filled with non-zero bytes, as OSU's; from alloc_mem where the
            // window's memory is (registered with the NIC ahead).
            let (mut plain, mut special);
            let buf: &mut [u8] = match plan.creation {
                Creation::AllocMem => {
                    special = world.alloc_mem::<u8>(size * count, &Info::new())?;
                    special.fill(0x5a);
                    &mut special[..]
                }
                _ => {
                    plain = Pages::filled(size * count, 0x5au8);
                    &mut plain[..]
                }
            };
            repeat(plan.repetitions, pass, |p| match (put, kind) {
                (true, Kind::Latency) => epochs(win, how, p, |w, t| w.put(buf, t, at)),
                (false, Kind::Latency) => epochs(win, how, p, |w, t| w.get(buf, t, at)),
                // The window's operations in flight together, as MPI_Put and MPI_Get are until
                // the synchronization that follows them.
                (true, Kind::Bandwidth) => epochs(win, how, p, |w, t| {
                    let puts = buf.chunks_exact(size).enumerate();
                    w.put_many(puts.map(|(j, m)| (m, t, at + j * size)))
                }),
                (false, Kind::Bandwidth) => epochs(win, how, p, |w, t| {
                    let gets = buf.chunks_exact_mut(size).enumerate();
                    w.get_many(gets.map(|(j, m)| (m, t, at + j * size)))
                }),
            })
        })?;
        let directions = if both { 2.0 } else { 1.0 };
        let values = times
            .iter()
            .map(|&time| match kind {
                Kind::Latency => latency(time, sync, pass),
                Kind::Bandwidth => {
                    directions * mbps(time, (size * count) as f64 * pass.iters as f64)
                }
            })
            .collect();
        if rate {
            let messages = (count * pass.iters) as f64;
            let rates = times.iter().map(|t| messages / t.as_secs_f64()).collect();
            report.row(size, pass.iters, &[values, rates])?;
        } else {
            report.row(size, pass.iters, &[values])?;
        }
    }
    Ok(())
}

/// Microseconds per operation of a latency loop that took `time` (fence: two per iteration).
pub(super) fn latency(time: Duration, sync: SyncMode, pass: Pass) -> f64 {
    let per_iteration = match sync {
        SyncMode::Fence | SyncMode::Pscw => 2.0,
        _ => 1.0,
    };
    micros(time, per_iteration * pass.iters as f64)
}

/// `reps` timed repetitions of `f`; the warm-up of `pass` only before the first.
pub(super) fn repeat(
    reps: usize,
    pass: Pass,
    mut f: impl FnMut(Pass) -> Result<Duration>,
) -> Result<Vec<Duration>> {
    (0..reps)
        .map(|r| f(if r == 0 { pass } else { pass.again() }))
        .collect()
}

/// Creates a window of `bytes` bytes (and the end-of-loop word of a busy target,
/// [`busy::window_bytes`]) on every rank, runs `f` on it with the displacement of
/// the peer's first byte (0, or its address in a dynamic window), then meets the other rank
/// at a closing fence and frees the window (a failure of `f` returns at once: the job ends on
/// it).
pub(super) fn with_window<R>(
    world: &World,
    creation: Creation,
    bytes: usize,
    f: impl FnOnce(&Window<'_>, usize) -> Result<R>,
) -> Result<R> {
    let info = Info::new();
    // The closing barrier is the window's own, so that a passive rank 1 waits inside the
    // library, serving the fabric as MPI libraries' targets do (over shared memory it sleeps).
    // A failure of rank 0 ends the job (the launcher stops rank 1), so it returns at once.
    let run = |win: &Window<'_>, at: usize| {
        let result = f(win, at)?;
        win.fence(Assert::NOPRECEDE | Assert::NOSUCCEED)?;
        Ok(result)
    };
    match creation {
        Creation::Allocate => {
            let win = Window::allocate(world, busy::window_bytes(bytes), 1, &info)?;
            let result = run(&win, 0);
            win.free()?;
            result
        }
        Creation::Create => {
            let mut memory = Pages::filled(busy::window_bytes(bytes), WINDOW_FILL);
            Window::create(world, &mut memory[..], 1, &info, |win| run(win, 0))?
        }
        Creation::AllocMem => {
            let mut memory = world.alloc_mem::<u8>(busy::window_bytes(bytes), &info)?;
            memory.fill(WINDOW_FILL);
            Window::create(world, &mut memory[..], 1, &info, |win| run(win, 0))?
        }
        Creation::Dynamic => {
            let mut memory = Pages::filled(bytes, WINDOW_FILL);
            Window::create_dynamic(world, &info, |win| {
                let mine = win.attach(&mut memory[..])?;
                let all = world.allgather(&(mine.disp() as u64).to_le_bytes())?;
                let peer = &all[1 - world.rank().min(1)];
                let at = peer
                    .as_slice()
                    .try_into()
                    .map(u64::from_le_bytes)
                    .map_err(|_| Error::new(ErrorClass::Intern, "an address of 8 bytes"))?;
                run(win, at as usize)
            })?
        }
    }
}

/// The timed loop of one repetition: `op(win, target)` issues the operation(s) of one
/// iteration. Returns rank 0's time (zero on a passive rank 1).
#[inline(always)]
pub(super) fn epochs(
    win: &Window<'_>,
    how: Loop,
    pass: Pass,
    mut op: impl FnMut(&Window<'_>, usize) -> Result<()>,
) -> Result<Duration> {
    const N: Assert = Assert::NONE;
    let origin = win.rank() == 0;
    let peer = 1 - win.rank();
    let time = match (how.sync, how.kind) {
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
        (SyncMode::Fence, Kind::Bandwidth) if origin || how.both => timed(pass, || {
            win.fence(N)?;
            op(win, peer)?;
            win.fence(N)
        }),
        (SyncMode::Fence, Kind::Bandwidth) => timed(pass, || {
            win.fence(N)?;
            win.fence(N)
        }),
        (SyncMode::Pscw, kind) => {
            let other = win.group().incl(&[peer])?;
            match kind {
                Kind::Latency if origin => timed(pass, || {
                    win.start(&other, N)?;
                    op(win, peer)?;
                    win.complete()?;
                    win.post(&other, N)?;
                    win.wait()
                }),
                Kind::Latency => timed(pass, || {
                    win.post(&other, N)?;
                    win.wait()?;
                    win.start(&other, N)?;
                    op(win, peer)?;
                    win.complete()
                }),
                Kind::Bandwidth if how.both => timed(pass, || {
                    win.post(&other, N)?;
                    win.start(&other, N)?;
                    op(win, peer)?;
                    win.complete()?;
                    win.wait()
                }),
                Kind::Bandwidth if origin => timed(pass, || {
                    win.start(&other, N)?;
                    op(win, peer)?;
                    win.complete()
                }),
                Kind::Bandwidth => timed(pass, || {
                    win.post(&other, N)?;
                    win.wait()
                }),
            }
        }
        _ if !origin => {
            busy::occupy(win, how.target)?;
            Ok(Duration::ZERO)
        }
        (SyncMode::Flush | SyncMode::FlushLocal, _) => {
            let local = how.sync == SyncMode::FlushLocal;
            win.lock(how.hold, 1, N)?;
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
            win.lock(how.lock, 1, N)?;
            op(win, 1)?;
            win.unlock(1)
        }),
        (SyncMode::LockAll, _) => timed(pass, || {
            win.lock_all(N)?;
            op(win, 1)?;
            win.unlock_all()
        }),
    }?;
    if origin {
        busy::release(win, how.target)?;
    }
    Ok(time)
}
