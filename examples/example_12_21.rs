//! MPI-4.1 Example 12.21: a critical region between two processes by Peterson's algorithm,
//! with accumulate(REPLACE) to write and get_accumulate(NO_OP) to read the public copies inside
//! one `lock_all` epoch, and `flush_all` while spinning. Rank 0 (A) owns its flag X, the turn T
//! and a counter; rank 1 (B) owns its flag Y. Each rank enters the region `ROUNDS` times (first
//! argument, default 200) and increments the counter there by a plain get and put: only mutual
//! exclusion makes the final count exactly twice that. Rank 0 prints `example_12_21: ok`.
//!
//! Run: `onesided run -n 2 -- target/debug/examples/example_12_21 [ROUNDS]`.
//!
//! # MPI-4.1: 12.3.4 (MPI_ACCUMULATE, MPI_GET_ACCUMULATE), 12.5.4 (Example 12.21)

#[path = "region/critical.rs"]
mod critical;
mod region;

use onesided::{Op, Window, World};
use std::process::ExitCode;

const NAME: &str = "example_12_21";
/// Displacements at rank 0: its flag X, the turn T, the counter; rank 1's flag Y is at FLAG.
const FLAG: usize = 0;
const TURN: usize = 1;
const COUNT: usize = 2;

/// The value of the word at `disp` of `rank`, read atomically.
fn read(win: &Window<'_>, rank: usize, disp: usize) -> onesided::Result<u64> {
    let mut v = [0u64];
    win.get_accumulate(&[0u64], &mut v, rank, disp, Op::NoOp)?;
    Ok(v[0])
}

fn run() -> region::Res {
    let world = World::init()?;
    let (me, n) = (world.rank(), world.size());
    if n != 2 {
        return Err(format!("Peterson's algorithm runs on 2 ranks, not {n}").into());
    }
    let rounds = region::rounds(200);
    let other = 1 - me;
    // A waits while B is interested and it is B's turn (T = 1); B while A is and T = 0.
    let yield_turn = other as u64;
    let win = region::locked_window(&world, 3)?;
    for _ in 0..rounds {
        win.accumulate(&[1u64], me, FLAG, Op::Replace)?;
        win.accumulate(&[yield_turn], 0, TURN, Op::Replace)?;
        win.flush_all()?;
        while read(&win, other, FLAG)? == 1 && read(&win, 0, TURN)? == yield_turn {
            win.flush_all()?;
        }
        critical::increment(&win, COUNT)?;
        win.accumulate(&[0u64], me, FLAG, Op::Replace)?;
        win.flush_all()?;
    }
    critical::finish(&world, win, COUNT, 2 * rounds)?;
    if me == 0 {
        println!("{NAME}: ok ({rounds} entries per rank)");
    }
    Ok(())
}

fn main() -> ExitCode {
    region::exit(NAME, run())
}
