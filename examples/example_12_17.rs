//! MPI-4.1 Example 12.17: the iterative stencil of Example 12.15 (`stencil.rs`) with
//! post/start/complete/wait instead of fences, so that each rank synchronizes with its
//! neighbours only. Every iteration: update the cells locally; `post` to the neighbours (they
//! may now put into this rank's halos); `start` toward them; put the first cell into the left
//! neighbour's right halo and the last into the right neighbour's left halo; `complete`;
//! `wait` (both halos have arrived). The rod and the check against a serial run are in
//! `rod/mod.rs`; rank 0 prints `example_12_17: ok`.
//!
//! Run: `onesided run -n 4 -- target/debug/examples/example_12_17 [CELLS] [ITERATIONS]`.
//!
//! # MPI-4.1: 12.5.2 (MPI_WIN_POST, MPI_WIN_START, MPI_WIN_COMPLETE, MPI_WIN_WAIT; Example 12.17)

#[path = "rod/puts.rs"]
mod puts;
mod rod;

use onesided::{Assert, Group, Window};
use rod::Rod;
use std::process::ExitCode;

const NAME: &str = "example_12_17";

/// The neighbours put into this rank's halos, and it into theirs.
fn exchange(win: &Window<'static>, rod: &Rod, near: &Group, next: &[f64]) -> Result<(), String> {
    win.post(near, Assert::NONE).map_err(rod.err("post"))?;
    win.start(near, Assert::NONE).map_err(rod.err("start"))?;
    puts::put_boundaries(win, rod, next)?;
    win.complete().map_err(rod.err("complete"))?;
    win.wait().map_err(rod.err("wait"))
}

fn main() -> ExitCode {
    rod::exit(NAME, puts::run(NAME, exchange))
}
