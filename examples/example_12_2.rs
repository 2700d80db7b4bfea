//! MPI-4.1 Example 12.2: the indirect assignment `A = B(map)` of Example 12.1 without layouts
//! for the target side: one `get` of one element per entry of `A`, inside a fence epoch. Each
//! rank checks its `A`; rank 0 prints `example_12_2: ok`.
//!
//! Run: `onesided run -n 4 -- target/debug/examples/example_12_2`.
//!
//! # MPI-4.1: 12.3.2 (MPI_GET; Example 12.2)

mod mapvals;

use mapvals::{M, Res, Setup};
use onesided::{Assert, World};
use std::process::ExitCode;

const NAME: &str = "example_12_2";

fn run() -> Res {
    let world = World::init()?;
    let s = Setup::new(&world);
    let win = s.window_of_b(&world)?;
    let mut a = vec![0f64; M];
    win.fence(Assert::NOPRECEDE)?;
    for (k, slot) in a.iter_mut().enumerate() {
        let j = s.map(s.global(k));
        win.get(std::slice::from_mut(slot), j / M, j % M)?;
    }
    s.finish(&world, win, (NAME, "A"), &a, |i| Setup::b(s.map(i)))
}

fn main() -> ExitCode {
    mapvals::exit(NAME, run())
}
