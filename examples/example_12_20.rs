//! MPI-4.1 Example 12.20: a naive counting semaphore. Rank 0 holds the count X, set to the
//! number of ranks by a local store made public with `sync`; after a barrier every rank adds -1
//! to X with `accumulate` and spins on `get_accumulate(NO_OP)` plus `flush` until X is 0, all
//! inside one `lock_all` epoch. Leaving the loop means that every rank has arrived: each rank
//! also counts its arrival in a second word before it decrements X, and checks after the loop
//! that every arrival of the round is there. Rank 0 prints `example_12_20: ok`.
//!
//! Run: `onesided run -n 4 -- target/debug/examples/example_12_20 [ROUNDS]`.
//!
//! # MPI-4.1: 12.5.4 (MPI_WIN_SYNC, MPI_WIN_FLUSH), 12.3.4 (MPI_GET_ACCUMULATE; Example 12.20)

mod region;

use onesided::{Op, World};
use std::process::ExitCode;

const NAME: &str = "example_12_20";
/// Displacement of the count X at rank 0.
const X: usize = 0;
/// Displacement of the arrivals at rank 0.
const ARRIVED: usize = 1;

fn run() -> region::Res {
    let world = World::init()?;
    let (me, n) = (world.rank(), world.size());
    let rounds = region::rounds(20) as usize;
    let win = region::locked_window(&world, 2)?;
    for round in 0..rounds {
        if me == 0 {
            win.write_local(X, &[n as i64])?;
            win.sync()?;
        }
        world.barrier()?;
        win.accumulate(&[1i64], 0, ARRIVED, Op::Sum)?;
        win.flush(0)?;
        win.accumulate(&[-1i64], 0, X, Op::Sum)?;
        let mut z = [1i64];
        while z[0] != 0 {
            win.get_accumulate(&[0i64], &mut z, 0, X, Op::NoOp)?;
            win.flush(0)?;
        }
        let mut arrived = [0i64];
        win.get_accumulate(&[0i64], &mut arrived, 0, ARRIVED, Op::NoOp)?;
        win.flush(0)?;
        let want = ((round + 1) * n) as i64;
        if arrived[0] < want {
            return Err(format!(
                "rank {me} left round {round} with {} arrivals of {want}",
                arrived[0]
            )
            .into());
        }
        // Nobody may still spin on X when rank 0 sets it for the next round.
        world.barrier()?;
    }
    win.unlock_all()?;
    win.free()?;
    if me == 0 {
        println!("{NAME}: ok ({rounds} rounds, {n} ranks)");
    }
    Ok(())
}

fn main() -> ExitCode {
    region::exit(NAME, run())
}
