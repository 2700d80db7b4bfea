//! MPI-4.1 Example 12.18: the stencil of Example 12.17 in split phases, with gets. Each
//! iteration first updates the two boundary cells of this rank's block (which need the halos),
//! exposes them to the neighbours with `post(NOPUT)` (nobody puts into this window), and starts
//! an access epoch in which it gets the neighbours' new boundary cells into its halos for the
//! next iteration; the interior cells are updated meanwhile, overlapping the communication, and
//! `complete` and `wait` end the epochs. Cells of the previous iteration are read from a private
//! copy, so every cell is computed from its neighbours' values of one and the same iteration,
//! and the result equals a serial run bit for bit (`rod/mod.rs`). Rank 0 prints
//! `example_12_18: ok`.
//!
//! Run: `onesided run -n 4 -- target/debug/examples/example_12_18 [CELLS] [ITERATIONS]`.
//!
//! # MPI-4.1: 12.5.2 (MPI_WIN_POST with MPI_MODE_NOPUT, MPI_WIN_START; Example 12.18)

mod rod;

use onesided::{Assert, World};
use rod::{Rod, step};
use std::process::ExitCode;

const NAME: &str = "example_12_18";

fn run() -> Result<(), String> {
    let world = World::init().map_err(|e| format!("joining the job: {e}"))?;
    let rod = Rod::new(&world)?;
    let len = rod.len;
    let e = |what| rod.err(what);
    let group = rod.neighbours(&world)?;
    // The window's boundary cells are what the neighbours read; `u` holds this iteration's
    // values with halos (private), `next` the next iteration's.
    let (win, mut u) = rod.window(&world)?;
    let mut next = u.clone();
    for _ in 0..rod.iters {
        // Boundary cells first: the neighbours read them in this iteration's epoch.
        next[1] = step(u[0], u[1], u[2]);
        next[len] = step(u[len - 1], u[len], u[len + 1]);
        win.write_local(1, &next[1..2]).map_err(e("store"))?;
        win.write_local(len, &next[len..len + 1])
            .map_err(e("store"))?;
        win.post(&group, Assert::NOPUT).map_err(e("post"))?;
        win.start(&group, Assert::NONE).map_err(e("start"))?;
        if let Some(l) = rod.left() {
            win.get(&mut next[..1], l, rod.len_of(l))
                .map_err(e("get from the left neighbour"))?;
        }
        if let Some(r) = rod.right() {
            win.get(&mut next[len + 1..], r, 1)
                .map_err(e("get from the right neighbour"))?;
        }
        // The interior, while the epochs are open.
        for i in 2..len {
            next[i] = step(u[i - 1], u[i], u[i + 1]);
        }
        win.complete().map_err(e("complete"))?;
        win.wait().map_err(e("wait"))?;
        win.write_local(2, &next[2..len.max(2)])
            .map_err(e("store"))?;
        std::mem::swap(&mut u, &mut next);
    }
    win.free().map_err(e("free"))?;
    rod.check(&world, NAME, &u[1..=len])
}

fn main() -> ExitCode {
    rod::exit(NAME, run())
}
