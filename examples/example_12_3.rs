//! MPI-4.1 Example 12.3: `B(map(i)) += A(i)` for every global `i`, where several entries of
//! `A` map to the same element of `B`: one `accumulate(SUM)` per entry of `A` inside a fence
//! epoch, combined atomically at the target. The values are multiples of 1/4, so every order of
//! the sums gives the same result; each rank checks its block of `B` against the serial sums
//! and rank 0 prints `example_12_3: ok`.
//!
//! Run: `onesided run -n 4 -- target/debug/examples/example_12_3`.
//!
//! # MPI-4.1: 12.3.4 (MPI_ACCUMULATE; Example 12.3)

mod mapvals;

use mapvals::{M, Res, Setup};
use onesided::{Assert, Op, World};
use std::process::ExitCode;

const NAME: &str = "example_12_3";

/// The map with collisions: `len / 4` targets of `B`, four entries of `A` each.
fn map_many(s: &Setup, i: usize) -> usize {
    s.map(i) % (s.len / 4).max(1)
}

/// The value of global element `i` of `A`: a multiple of 1/4.
fn a(i: usize) -> f64 {
    (i % 9) as f64 * 0.25
}

fn run() -> Res {
    let world = World::init()?;
    let s = Setup::new(&world);
    let win = s.window_of_b(&world)?;
    win.fence(Assert::NOPRECEDE)?;
    for k in 0..M {
        let i = s.global(k);
        let j = map_many(&s, i);
        win.accumulate(&[a(i)], j / M, j % M, Op::Sum)?;
    }
    // The fence completes the accumulates: `B` holds the sums after it.
    let want = |j: usize| {
        let added: f64 = (0..s.len).filter(|&i| map_many(&s, i) == j).map(a).sum();
        Setup::b(j) + added
    };
    win.fence(Assert::NONE)?;
    let mut b = vec![0f64; M];
    win.read_local(0, &mut b)?;
    s.finish(&world, win, (NAME, "B"), &b, want)
}

fn main() -> ExitCode {
    mapvals::exit(NAME, run())
}
