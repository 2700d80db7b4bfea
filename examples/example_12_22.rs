//! MPI-4.1 Example 12.22: a critical region among many processes with a spinlock, taken by
//! `compare_and_swap(A, 0 -> 1)` plus `flush` until it succeeds and released by
//! `compare_and_swap(A, 1 -> 0)`, inside one `lock_all` epoch. Rank 0 holds the lock word A,
//! zeroed before the epoch, and a counter that every rank
//! increments `ROUNDS` times (first argument, default 100) in the region by a plain get and put:
//! only mutual exclusion makes the final count exact, and every release must find the lock
//! held. Rank 0 prints `example_12_22: ok`.
//!
//! Run: `onesided run -n 4 -- target/debug/examples/example_12_22 [ROUNDS]`.
//!
//! # MPI-4.1: 12.3.4 (MPI_COMPARE_AND_SWAP), 12.5.4 (MPI_WIN_FLUSH; Example 12.22)

#[path = "region/critical.rs"]
mod critical;
mod region;

use onesided::World;
use std::process::ExitCode;

const NAME: &str = "example_12_22";
/// Displacements at rank 0: the lock word A and the counter.
const LOCK: usize = 0;
const COUNT: usize = 1;

fn run() -> region::Res {
    let world = World::init()?;
    let (me, n) = (world.rank(), world.size());
    let rounds = region::rounds(100);
    let win = region::locked_window(&world, 2)?;
    for _ in 0..rounds {
        while win.compare_and_swap(1u64, 0, 0, LOCK)? != 0 {
            win.flush(0)?;
        }
        critical::increment(&win, COUNT)?;
        let held = win.compare_and_swap(0u64, 1, 0, LOCK)?;
        if held != 1 {
            return Err(format!("rank {me} released a lock word that read {held}").into());
        }
    }
    critical::finish(&world, win, COUNT, rounds * n as u64)?;
    if me == 0 {
        println!("{NAME}: ok ({rounds} entries per rank, {n} ranks)");
    }
    Ok(())
}

fn main() -> ExitCode {
    region::exit(NAME, run())
}
