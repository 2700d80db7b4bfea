//! The N-rank tests: every rank of the job takes part, rank 0 times and reports.
//!
//! - `fence_latency`: MPI_Win_fence with nothing in between; time per fence.
//! - `barrier_latency`: Comm::barrier; time per barrier.
//! - `lock_contention`: every rank increments one u64 counter on rank 0 under an exclusive
//!   lock (lock, get, flush, put of the value + 1, unlock).
//! - `fop_contention`: every rank adds 1 to one u64 counter on rank 0 with fetch_and_op
//!   (lock_all held across the loop, a flush after each).
//! - `alltoall_put`: every rank puts Size bytes into every other rank's window, then fences;
//!   latency per fence epoch and each rank's bandwidth (Size * (N - 1) bytes per epoch).
//! - `mixed_epochs`: rounds of a seeded mix of fence, PSCW, lock and lock_all epochs with
//!   about 20 operations per rank and two world barriers, the shape of an application's time
//!   step; time per round. Run it with `--simulate-nodes K` for the cluster's shape (shared
//!   memory inside a node, the network transport across), without for one transport to every
//!   target. Afterwards rank 0 checks that the counters hold every rank's additions.
//! - `window_create`: `Window::allocate` of 8 bytes per rank, from a barrier until it returns
//!   at rank 0: the job's first window (which opens the network transport's resources, loading
//!   libfabric where it is used, and connects the ranks), and later ones, each freed before the
//!   next.
//!
//! The contention tests time from a barrier before the loop to a barrier after it, so the
//! time covers every rank's increments, and report it per increment of the whole job
//! (time / (N * iterations)): increments of one counter are serialized, so this is the cost of
//! one under contention. Afterwards rank 0 checks that the counter holds exactly every rank's
//! increments, and fails otherwise. Rows of the tests without a message size have size 0.

use super::args::Test;
use super::measure::{mbps, micros, timed};
use super::options::{Kind, Pass, Plan};
use super::pages::Pages;
use super::report::{BANDWIDTH, Column, FIRST, LATENCY, Report, Table};
use super::rma::repeat;
use onesided::{Assert, Error, ErrorClass, Group, Info, LockType, Op, Result, Window, World};
use std::time::{Duration, Instant};

const N: Assert = Assert::NONE;

/// The table of an N-rank test.
fn table(
    world: &World,
    test: Test,
    title: &str,
    sync: &'static str,
    datatype: Option<&'static str>,
    columns: &[Column],
) -> Table {
    Table {
        name: test.name(),
        title: format!("onesided {title} Test"),
        notes: Vec::new(),
        window: (test != Test::BarrierLatency).then_some("MPI_Win_allocate"),
        sync: Some(sync),
        datatype,
        ranks: world.size(),
        show_ranks: true,
        columns: columns.to_vec(),
        imb: None,
        threads: None,
    }
}

/// Rank 0's time per unit for every repetition, `units` units per timed iteration.
fn per_unit(times: &[Duration], pass: Pass, units: f64) -> Vec<f64> {
    times
        .iter()
        .map(|&t| micros(t, units * pass.iters as f64))
        .collect()
}

/// Runs `f` on a window of `bytes` bytes (unit `unit`) and frees it; `f`'s failure comes after
/// the free only if the free fails too (a failure of one rank ends the job).
fn on_window<R>(
    world: &World,
    bytes: usize,
    unit: usize,
    f: impl FnOnce(&Window<'_>) -> Result<R>,
) -> Result<R> {
    let win = Window::allocate(world, bytes, unit, &Info::new())?;
    let result = f(&win);
    win.free()?;
    result
}

/// Time per MPI_Win_fence of all ranks.
pub(super) fn fence_latency(world: &World, plan: &Plan, report: &mut Report) -> Result<()> {
    let t = table(
        world,
        Test::FenceLatency,
        "Fence Latency",
        "MPI_Win_fence",
        None,
        &[LATENCY],
    );
    report.table(t)?;
    let pass = plan.pass(Kind::Latency, 0);
    let times = on_window(world, 8, 1, |win| {
        repeat(plan.repetitions, pass, |p| timed(p, || win.fence(N)))
    })?;
    report.row(0, pass.iters, &[per_unit(&times, pass, 1.0)])
}

/// Time per barrier of all ranks.
pub(super) fn barrier_latency(world: &World, plan: &Plan, report: &mut Report) -> Result<()> {
    let t = table(
        world,
        Test::BarrierLatency,
        "Barrier Latency",
        "MPI_Barrier",
        None,
        &[LATENCY],
    );
    report.table(t)?;
    let pass = plan.pass(Kind::Latency, 0);
    let times = repeat(plan.repetitions, pass, |p| timed(p, || world.barrier()))?;
    report.row(0, pass.iters, &[per_unit(&times, pass, 1.0)])
}

/// Runs `body` `pass.warmup` times, then, between two barriers, `pass.iters` times: the time
/// every rank took, as rank 0 sees it.
fn together(world: &World, pass: Pass, mut body: impl FnMut() -> Result<()>) -> Result<Duration> {
    for _ in 0..pass.warmup {
        body()?;
    }
    world.barrier()?;
    let start = Instant::now();
    for _ in 0..pass.iters {
        body()?;
    }
    world.barrier()?;
    Ok(start.elapsed())
}

/// After the repetitions of a contention test: rank 0 reads the counter and fails unless it
/// holds every rank's increments.
fn check_count(world: &World, win: &Window<'_>, test: Test, plan: &Plan, pass: Pass) -> Result<()> {
    let n = world.size();
    // The counter wraps as u64 arithmetic does; so does the count it should hold.
    let per_rank = (pass.iters as u64)
        .wrapping_mul(plan.repetitions as u64)
        .wrapping_add(pass.warmup as u64);
    let expected = per_rank.wrapping_mul(n as u64);
    world.barrier()?;
    if win.rank() != 0 {
        return Ok(());
    }
    win.lock(LockType::Shared, 0, N)?;
    let count = win.fetch_and_op(0u64, 0, 0, Op::NoOp)?;
    win.unlock(0)?;
    if count != expected {
        return Err(Error::new(
            ErrorClass::Other,
            format!(
                "{}: the counter on rank 0 holds {count} after {n} ranks added {expected} in all",
                test.name()
            ),
        ));
    }
    Ok(())
}

/// Every rank increments a counter on rank 0 under an exclusive lock.
pub(super) fn lock_contention(world: &World, plan: &Plan, report: &mut Report) -> Result<()> {
    let t = table(
        world,
        Test::LockContention,
        "Lock Contention",
        "MPI_Win_lock/unlock",
        Some("MPI_UINT64_T"),
        &[LATENCY],
    );
    report.table(t)?;
    let pass = plan.pass(Kind::Latency, 0);
    let times = on_window(world, 8, 8, |win| {
        let times = repeat(plan.repetitions, pass, |p| {
            together(world, p, || {
                let mut v = [0u64];
                win.lock(LockType::Exclusive, 0, N)?;
                win.get(&mut v, 0, 0)?;
                win.flush(0)?;
                win.put(&[v[0].wrapping_add(1)], 0, 0)?;
                win.unlock(0)
            })
        })?;
        check_count(world, win, Test::LockContention, plan, pass)?;
        Ok(times)
    })?;
    let values = per_unit(&times, pass, world.size() as f64);
    report.row(0, pass.iters, &[values])
}

/// Every rank adds 1 to a counter on rank 0 with fetch_and_op.
pub(super) fn fop_contention(world: &World, plan: &Plan, report: &mut Report) -> Result<()> {
    let t = table(
        world,
        Test::FopContention,
        "Fetch_and_op Contention",
        "MPI_Win_flush",
        Some("MPI_UINT64_T"),
        &[LATENCY],
    );
    report.table(t)?;
    let pass = plan.pass(Kind::Latency, 0);
    let times = on_window(world, 8, 8, |win| {
        let times = repeat(plan.repetitions, pass, |p| {
            win.lock_all(N)?;
            let time = together(world, p, || {
                win.fetch_and_op(1u64, 0, 0, Op::Sum)?;
                win.flush(0)
            });
            win.unlock_all()?;
            time
        })?;
        check_count(world, win, Test::FopContention, plan, pass)?;
        Ok(times)
    })?;
    let values = per_unit(&times, pass, world.size() as f64);
    report.row(0, pass.iters, &[values])
}

/// Every rank puts `size` bytes into every other rank's window, per fence epoch.
pub(super) fn alltoall_put(world: &World, plan: &Plan, report: &mut Report) -> Result<()> {
    let t = table(
        world,
        Test::AlltoallPut,
        "All-to-all Put",
        "MPI_Win_fence",
        Some("MPI_CHAR"),
        &[LATENCY, BANDWIDTH],
    );
    report.table(t)?;
    let (n, me) = (world.size(), world.rank());
    for size in plan.sizes.iter() {
        let pass = plan.pass(Kind::Bandwidth, size);
        let buf = Pages::filled(size, 0x5au8);
        let times = on_window(world, size * n, 1, |win| {
            win.fence(Assert::NOPRECEDE)?;
            let times = repeat(plan.repetitions, pass, |p| {
                timed(p, || {
                    (1..n).try_for_each(|k| win.put(&buf, (me + k) % n, me * size))?;
                    win.fence(N)
                })
            })?;
            win.fence(Assert::NOSUCCEED)?;
            Ok(times)
        })?;
        let bytes = (size * (n - 1)) as f64 * pass.iters as f64;
        let latency = per_unit(&times, pass, 1.0);
        let bandwidth = times.iter().map(|&t| mbps(t, bytes)).collect();
        report.row(size, pass.iters, &[latency, bandwidth])?;
    }
    Ok(())
}

/// A deterministic generator (splitmix64): the same seed, the same operations.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n`.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Additions to the counters (word 0 of each rank) that one rank makes per round of
/// `mixed_epochs`.
const ADDS_PER_ROUND: u64 = 7;

/// One round of `mixed_epochs` at rank `me` of `n`: a fence epoch (two puts, a get, two
/// accumulates to random targets), a PSCW epoch (exposed to the left neighbour, accessing the
/// right one with a put and an accumulate), an exclusive lock of a random target (fetch_and_op,
/// put), a lock_all epoch (three each of get, accumulate and compare_and_swap to random
/// targets, then flush_all), and two world barriers. Window words: 0 the counter, 1 a word for
/// compare_and_swap, 2 + r rank r's slot. `sides`: the groups of the left and the right
/// neighbour, and the right one's rank.
fn mixed_round(
    world: &World,
    win: &Window<'_>,
    (left, right_group, right): (&Group, &Group, usize),
    rng: &mut Seeded,
) -> Result<()> {
    let (n, me) = (world.size(), world.rank());
    let slot = 2 + me;
    let mut got = [0u64];
    win.fence(Assert::NOPRECEDE)?;
    for _ in 0..2 {
        win.put(&[rng.next()], rng.below(n), slot)?;
    }
    win.get(&mut got, rng.below(n), 2 + rng.below(n))?;
    for _ in 0..2 {
        win.accumulate(&[1u64], rng.below(n), 0, Op::Sum)?;
    }
    win.fence(Assert::NOSUCCEED)?;
    win.post(left, N)?;
    win.start(right_group, N)?;
    win.put(&[rng.next()], right, slot)?;
    win.accumulate(&[1u64], right, 0, Op::Sum)?;
    win.complete()?;
    win.wait()?;
    let t = rng.below(n);
    win.lock(LockType::Exclusive, t, N)?;
    win.fetch_and_op(1u64, t, 0, Op::Sum)?;
    win.put(&[rng.next()], t, slot)?;
    win.unlock(t)?;
    win.lock_all(N)?;
    for _ in 0..3 {
        win.get(&mut got, rng.below(n), 2 + rng.below(n))?;
        win.accumulate(&[1u64], rng.below(n), 0, Op::Sum)?;
        win.compare_and_swap(me as u64 + 1, 0, rng.below(n), 1)?;
    }
    win.flush_all()?;
    win.unlock_all()?;
    world.barrier()?;
    world.barrier()
}

/// Rounds of a seeded mix of epochs ([`mixed_round`]); time per round.
pub(super) fn mixed_epochs(world: &World, plan: &Plan, report: &mut Report) -> Result<()> {
    let t = table(
        world,
        Test::MixedEpochs,
        "Mixed Epochs",
        "MPI_Win_fence, post/start/complete/wait, MPI_Win_lock, MPI_Win_lock_all",
        Some("MPI_UINT64_T"),
        &[LATENCY],
    );
    report.table(t)?;
    let (n, me) = (world.size(), world.rank());
    let pass = plan.pass(Kind::Bandwidth, 0);
    let right = (me + 1) % n;
    let left = world.group().incl(&[(me + n - 1) % n])?;
    let right_group = world.group().incl(&[right])?;
    let sides = (&left, &right_group, right);
    let mut rng = Seeded(0x6d69_7865_6400 ^ me as u64);
    let times = on_window(world, 8 * (2 + n), 8, |win| {
        let times = repeat(plan.repetitions, pass, |p| {
            timed(p, || mixed_round(world, win, sides, &mut rng))
        })?;
        world.barrier()?;
        if me == 0 {
            let rounds = (pass.warmup + pass.iters * plan.repetitions) as u64;
            let expected = rounds * ADDS_PER_ROUND * n as u64;
            let mut total = 0u64;
            win.lock_all(N)?;
            for r in 0..n {
                let mut c = [0u64];
                win.get(&mut c, r, 0)?;
                win.flush(r)?;
                total += c[0];
            }
            win.unlock_all()?;
            if total != expected {
                return Err(Error::new(
                    ErrorClass::Other,
                    format!("mixed_epochs: the counters hold {total} additions, not {expected}"),
                ));
            }
        }
        world.barrier()?;
        Ok(times)
    })?;
    report.row(0, pass.iters, &[per_unit(&times, pass, 1.0)])
}

/// Time to create a window of 8 bytes per rank: the job's first, then later ones.
pub(super) fn window_create(world: &World, plan: &Plan, report: &mut Report) -> Result<()> {
    let t = table(
        world,
        Test::WindowCreate,
        "Window Creation",
        "MPI_Win_allocate, then MPI_Win_free",
        None,
        &[FIRST, LATENCY],
    );
    report.table(t)?;
    let create = || Window::allocate(world, 8, 8, &Info::new());
    world.barrier()?;
    let start = Instant::now();
    let win = create()?;
    let first = start.elapsed();
    win.free()?;
    let pass = plan.pass(Kind::Bandwidth, 0);
    let times = repeat(plan.repetitions, pass, |p| {
        for _ in 0..p.warmup {
            create()?.free()?;
        }
        let mut spent = Duration::ZERO;
        for _ in 0..p.iters {
            world.barrier()?;
            let start = Instant::now();
            let win = create()?;
            spent += start.elapsed();
            win.free()?;
        }
        Ok(spent)
    })?;
    let firsts = vec![micros(first, 1.0); times.len()];
    report.row(0, pass.iters, &[firsts, per_unit(&times, pass, 1.0)])
}
