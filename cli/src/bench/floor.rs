//! Floor tests: what the hardware allows on this machine, in the OSU table format.
//!
//! - `memcpy_bw`: single-thread memcpy bandwidth in one process, with put_bw's access pattern
//!   (W copies of `size` bytes to consecutive offsets per iteration, OSU bandwidth iterations).
//! - `atomic_pingpong`: two ranks bounce an atomic flag in a shared-memory window; the half
//!   round trip is the least any synchronization between two processes can cost.

use super::args::Test;
use super::measure::{mbps, micros, timed};
use super::options::{Kind, Pass, Plan};
use super::pages::Pages;
use super::report::{BANDWIDTH, Column, LATENCY, Report, Table};
use super::rma::repeat;
use onesided::Info;
use onesided::Result;
use onesided::Window;
use onesided::World;
use std::hint::spin_loop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The size of the ping-pong flag, the one row of its table.
const FLAG: usize = 8;
/// Spins between two yields of a waiting rank, about a millisecond: yielding sooner keeps two
/// ranks that start on one core there (each looks cache-hot to the scheduler), never yielding
/// costs a whole time slice per turn when the other core is busy.
const YIELD_EVERY: u32 = 1 << 16;

/// The table of a floor test: its title and description.
fn table(test: Test, title: &str, note: String, ranks: usize, column: Column) -> Table {
    Table {
        name: test.name(),
        title: title.to_owned(),
        notes: vec![note],
        window: None,
        sync: None,
        datatype: None,
        ranks,
        show_ranks: false,
        columns: vec![column],
        imb: None,
        threads: None,
    }
}

/// memcpy bandwidth per size on rank 0; the other ranks wait at a world barrier.
pub(super) fn memcpy_bw(world: &World, plan: &Plan, report: &mut Report) -> Result<()> {
    let copies = format!(
        "Copies: {} of Size bytes per iteration, one thread",
        plan.window
    );
    report.table(table(
        Test::MemcpyBw,
        "onesided Floor: memcpy Bandwidth Test",
        copies,
        1,
        BANDWIDTH,
    ))?;
    if world.rank() == 0 {
        for size in plan.sizes.iter() {
            let pass = plan.pass(Kind::Bandwidth, size);
            let bytes = size * plan.window;
            let src = Pages::filled(bytes, 0x5au8);
            let mut dst = Pages::filled(bytes, 0xa5u8);
            let times = repeat(plan.repetitions, pass, |p| {
                timed(p, || {
                    for (d, s) in dst.chunks_exact_mut(size).zip(src.chunks_exact(size)) {
                        d.copy_from_slice(s);
                    }
                    std::hint::black_box(&mut dst);
                    Ok(())
                })
            })?;
            let moved = bytes as f64 * pass.iters as f64;
            let values = times.iter().map(|&t| mbps(t, moved)).collect();
            report.row(size, pass.iters, &[values])?;
        }
    }
    world.barrier()
}

/// Half round trip of an atomic flag ping-pong between ranks 0 and 1.
pub(super) fn atomic_pingpong(world: &World, plan: &Plan, report: &mut Report) -> Result<()> {
    report.table(table(
        Test::AtomicPingpong,
        "onesided Floor: Atomic Ping-Pong Latency Test",
        "Half round trip of an AtomicU64 flag in shared memory".to_owned(),
        2,
        LATENCY,
    ))?;
    let pass = plan.pass(Kind::Latency, FLAG);
    let win = Window::allocate_shared(world, 64, 8, &Info::new())?;
    let mut seen = 0;
    let result = repeat(plan.repetitions, pass, |p| bounce(&win, p, &mut seen));
    world.barrier()?;
    win.free()?;
    let values = result?
        .iter()
        .map(|&t| micros(t, 2.0 * pass.iters as f64))
        .collect();
    report.row(FLAG, pass.iters, &[values])
}

/// Rank 0 raises the flag to odd values and waits for the next even one; rank 1 answers.
/// `seen` is the last even value (both ranks carry it from one repetition to the next).
fn bounce(win: &Window<'_>, pass: Pass, seen: &mut u64) -> Result<Duration> {
    let region = win.shared_query(Some(0))?;
    let flag = region.atomic_u64(0)?;
    if win.rank() == 0 {
        timed(pass, || {
            flag.store(*seen + 1, Ordering::Release);
            *seen = wait_for(flag, *seen + 2);
            Ok(())
        })
    } else {
        timed(pass, || {
            *seen = wait_for(flag, *seen + 1);
            flag.store(*seen + 1, Ordering::Release);
            *seen += 1;
            Ok(())
        })
    }
}

/// Spins until `flag` holds `value`; returns it. Yields the core now and then, so that the two
/// ranks still progress when they have to share one core.
#[inline(always)]
fn wait_for(flag: &AtomicU64, value: u64) -> u64 {
    let mut spins = 0u32;
    while flag.load(Ordering::Acquire) != value {
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(YIELD_EVERY) {
            std::thread::yield_now();
        } else {
            spin_loop();
        }
    }
    value
}
