//! An iterative 1-D heat (Jacobi) stencil with fence synchronization, after the MPI-4.1
//! example of MPI_WIN_FENCE with assertions (Example 12.15). The rod, its split into blocks and
//! the final check against a serial run are in `rod/mod.rs`, the iteration in `rod/puts.rs`.
//! Every iteration:
//!
//! 1. update the interior from the current values, by local loads and stores
//!    (`read_local` / `write_local`): `u[i] += ALPHA * ((u[i-1] - 2 u[i]) + u[i+1])`;
//! 2. `fence(NOPRECEDE)`: no RMA call precedes it;
//! 3. put the first cell into the left neighbour's right halo and the last cell into the right
//!    neighbour's left halo;
//! 4. `fence(NOSTORE | NOSUCCEED)`: no local store happened in the epoch, and no RMA call
//!    follows before the next fence, so local updates are allowed again.
//!
//! Rank 0 prints `stencil: ok`; any mismatch or error makes the program exit with a non-zero
//! status and a message. Run it with `onesided run -n 4 -- target/debug/examples/stencil
//! [CELLS] [ITERATIONS]`, or directly (one rank).
//!
//! # MPI-4.1: 12.5.1 (MPI_WIN_FENCE, Example 12.15)

#[path = "rod/puts.rs"]
mod puts;
mod rod;

use onesided::{Assert, Group, Window};
use rod::Rod;
use std::process::ExitCode;

/// Fences around the puts.
fn exchange(win: &Window<'static>, rod: &Rod, _: &Group, next: &[f64]) -> Result<(), String> {
    win.fence(Assert::NOPRECEDE)
        .map_err(rod.err("fence(NOPRECEDE)"))?;
    puts::put_boundaries(win, rod, next)?;
    win.fence(Assert::NOSTORE | Assert::NOSUCCEED)
        .map_err(rod.err("fence(NOSTORE|NOSUCCEED)"))
}

fn main() -> ExitCode {
    rod::exit("stencil", puts::run("stencil", exchange))
}
