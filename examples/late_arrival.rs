//! Late arrivals: how long after a late rank's signal a waiting rank sees it. Rank 1 computes
//! for `LATE_US` microseconds (3000 unless told) before it enters a fence, before it completes
//! a PSCW access epoch to rank 0, or before it releases the exclusive lock of rank 0's window
//! that it holds; rank 0, already waiting in its fence, its `Window::wait` or its `lock`, prints
//! the median, 90th percentile and largest time it waited beyond that, over `ROUNDS` rounds (40
//! unless told). A waiter that spins sees the signal at once; one that
//! sleeps sees it as soon as it is woken, or at the end of its nap where nothing wakes it.
//!
//! ```sh
//! target/release/onesided run -n 2 -- target/release/examples/late_arrival
//! rxe/run.sh 'ONESIDED_TRANSPORT=verbs target/release/onesided run -n 2 -- target/release/examples/late_arrival'
//! ```

use onesided::{Assert, Info, LockType, Result, Window, World};
use std::time::{Duration, Instant};

/// A whole number from the environment variable `name`, or `default`.
fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Keep the CPU busy for `d`, as a computing rank does.
fn compute(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn main() -> Result<()> {
    let world = World::init()?;
    if world.size() < 2 {
        println!("late_arrival: needs 2 ranks");
        return Ok(());
    }
    let late = Duration::from_micros(setting("LATE_US", 3000));
    let rounds = setting("ROUNDS", 40).max(1) as usize;
    let win = Window::allocate(&world, 4096, 8, &Info::new())?;
    let (zero, one) = (world.group().incl(&[0])?, world.group().incl(&[1])?);
    for mode in ["fence", "pscw", "lock"] {
        let mut beyond = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            win.fence(Assert::NONE)?;
            win.fence(Assert::NOSUCCEED)?;
            match (world.rank(), mode) {
                (1, "fence") => {
                    compute(late);
                    win.fence(Assert::NONE)?;
                }
                (1, "lock") => {
                    win.lock(LockType::Exclusive, 0, Assert::NONE)?;
                    world.barrier()?;
                    compute(late);
                    win.unlock(0)?;
                }
                (1, _) => {
                    win.start(&zero, Assert::NONE)?;
                    compute(late);
                    win.put(&[1u64], 0, 0)?;
                    win.complete()?;
                }
                (0, "fence") => {
                    let t = Instant::now();
                    win.fence(Assert::NONE)?;
                    beyond.push(t.elapsed().saturating_sub(late));
                }
                (0, "lock") => {
                    world.barrier()?;
                    let t = Instant::now();
                    win.lock(LockType::Exclusive, 0, Assert::NONE)?;
                    beyond.push(t.elapsed().saturating_sub(late));
                    win.unlock(0)?;
                }
                (_, "lock") => world.barrier()?,
                (0, _) => {
                    win.post(&one, Assert::NONE)?;
                    let t = Instant::now();
                    win.wait()?;
                    beyond.push(t.elapsed().saturating_sub(late));
                }
                (_, "fence") => win.fence(Assert::NONE)?,
                _ => {}
            }
        }
        if world.rank() == 0 {
            beyond.sort();
            let us = |d: Duration| d.as_secs_f64() * 1e6;
            println!(
                "late_arrival {mode}: {} ranks, rank 1 late by {} us: seen {:.0} us after it \
                 (median of {rounds}), 90th percentile {:.0}, largest {:.0}",
                world.size(),
                late.as_micros(),
                us(beyond[rounds / 2]),
                us(beyond[rounds * 9 / 10]),
                us(beyond[rounds - 1]),
            );
        }
    }
    win.free()
}
