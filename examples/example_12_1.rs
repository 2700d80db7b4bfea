//! MPI-4.1 Example 12.1: the indirect assignment `A = B(map)`, where `A` and `B` are
//! distributed in blocks of `M` over the ranks and `map` is a permutation of the global
//! indices. Each rank builds, per target rank, an indexed layout of the elements of `A` whose
//! source lies there and one of those sources in the target's block of `B`, and reads them with
//! one `get_layout` per target inside a fence epoch. Each rank checks its `A`; rank 0 prints
//! `example_12_1: ok`.
//!
//! Run: `onesided run -n 4 -- target/debug/examples/example_12_1`.
//!
//! # MPI-4.1: 12.3.2 (MPI_GET; Example 12.1)

mod mapvals;

use mapvals::{M, Res, Setup};
use onesided::{Assert, Layout, World};
use std::process::ExitCode;

const NAME: &str = "example_12_1";

fn run() -> Res {
    let world = World::init()?;
    let s = Setup::new(&world);
    let win = s.window_of_b(&world)?;
    // Per target: (position in A, position in the target's block of B), in order of A.
    let mut pairs: Vec<Vec<(usize, usize)>> = vec![Vec::new(); s.n];
    for k in 0..M {
        let j = s.map(s.global(k));
        pairs[j / M].push((k, j % M));
    }
    let mut a = vec![0f64; M];
    win.fence(Assert::NOPRECEDE)?;
    for (target, p) in pairs.iter().enumerate().filter(|(_, p)| !p.is_empty()) {
        let into: Vec<(usize, usize)> = p.iter().map(|&(k, _)| (k, 1)).collect();
        let from: Vec<(usize, usize)> = p.iter().map(|&(_, j)| (j, 1)).collect();
        win.get_layout(
            &mut a,
            &Layout::indexed(&into)?,
            target,
            0,
            &Layout::indexed(&from)?,
        )?;
    }
    s.finish(&world, win, (NAME, "A"), &a, |i| Setup::b(s.map(i)))
}

fn main() -> ExitCode {
    mapvals::exit(NAME, run())
}
