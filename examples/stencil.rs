//! An iterative 1-D heat (Jacobi) stencil with fence synchronization, after the MPI-4.1
//! example of MPI_WIN_FENCE with assertions (Example 12.15).
//!
//! A rod of `CELLS` cells (first argument, default 240) with fixed temperatures beyond both ends
//! is split into blocks, one per rank (sizes differ by at most one). Each rank's window holds its
//! block plus one halo cell on each side: `[left halo, cells..., right halo]`, as f64 with
//! displacement unit 8. Every iteration (second argument, default 100):
//!
//! 1. update the interior from the current values, by local loads and stores
//!    (`read_local` / `write_local`): `u[i] += ALPHA * ((u[i-1] - 2 u[i]) + u[i+1])`;
//! 2. `fence(NOPRECEDE)`: no RMA call precedes it;
//! 3. put the first cell into the left neighbour's right halo and the last cell into the right
//!    neighbour's left halo;
//! 4. `fence(NOSTORE | NOSUCCEED)`: no local store happened in the epoch, and no RMA call
//!    follows before the next fence, so local updates are allowed again.
//!
//! The ends of the rod are halos that never change. At the end every rank contributes its block
//! to an allgather, and rank 0 compares the whole rod with a serial computation of the same
//! problem. The arithmetic of each cell is done in the same order in both, so the comparison is
//! exact (bit for bit). Rank 0 prints `stencil: ok`; any mismatch or error makes the program
//! exit with a non-zero status and a message.
//!
//! Run it with `onesided run -n 4 -- target/debug/examples/stencil`, or directly (one rank).
//!
//! # MPI-4.1: 12.5.1 (MPI_WIN_FENCE, Example 12.15)

use onesided::{Assert, Info, Window, World};
use std::process::ExitCode;

/// Diffusion coefficient (stable for ALPHA <= 0.5).
const ALPHA: f64 = 0.25;
/// Fixed temperature left of the first cell.
const LEFT_END: f64 = 1.0;
/// Fixed temperature right of the last cell.
const RIGHT_END: f64 = -0.5;

/// The initial temperature of global cell `i`.
fn initial(i: usize) -> f64 {
    ((i * 7) % 13) as f64 / 13.0
}

/// One Jacobi step of cell value `c` between `l` and `r`; the same expression serves the serial
/// and the parallel computation, so both round identically.
fn step(l: f64, c: f64, r: f64) -> f64 {
    c + ALPHA * ((l - 2.0 * c) + r)
}

/// The first global cell and the number of cells of `rank` among `size` ranks.
fn block(cells: usize, size: usize, rank: usize) -> (usize, usize) {
    let (base, extra) = (cells / size, cells % size);
    (
        rank * base + rank.min(extra),
        base + usize::from(rank < extra),
    )
}

/// The whole rod after `iters` steps, computed by one process.
fn serial(cells: usize, iters: usize) -> Vec<f64> {
    let mut u: Vec<f64> = std::iter::once(LEFT_END)
        .chain((0..cells).map(initial))
        .chain(std::iter::once(RIGHT_END))
        .collect();
    for _ in 0..iters {
        let old = u.clone();
        for i in 1..=cells {
            u[i] = step(old[i - 1], old[i], old[i + 1]);
        }
    }
    u[1..=cells].to_vec()
}

fn arg(pos: usize, default: usize) -> Result<usize, String> {
    match std::env::args().nth(pos) {
        None => Ok(default),
        Some(s) => s
            .parse()
            .map_err(|_| format!("argument {pos}: {s:?} is not a count")),
    }
}

fn run() -> Result<(), String> {
    let cells = arg(1, 240)?;
    let iters = arg(2, 100)?;
    let world = World::init().map_err(|e| format!("joining the job: {e}"))?;
    let (rank, size) = (world.rank(), world.size());
    if cells < size {
        return Err(format!("{cells} cells cannot be split among {size} ranks"));
    }
    let (first, len) = block(cells, size, rank);
    let e = |what: &'static str| move |err: onesided::Error| format!("rank {rank}: {what}: {err}");

    // Window: [left halo, len cells, right halo].
    let win = Window::allocate(&world, 8 * (len + 2), 8, &Info::new()).map_err(e("allocate"))?;
    let mut u = Vec::with_capacity(len + 2);
    u.push(if rank == 0 {
        LEFT_END
    } else {
        initial(first - 1)
    });
    u.extend((first..first + len).map(initial));
    u.push(if rank + 1 == size {
        RIGHT_END
    } else {
        initial(first + len)
    });
    win.write_local(0, &u).map_err(e("initial store"))?;

    let left = rank.checked_sub(1);
    let right = (rank + 1 < size).then_some(rank + 1);
    let mut next = vec![0.0f64; len];
    for _ in 0..iters {
        // 1. Local update: the halos hold the neighbours' values of the previous step.
        win.read_local(0, &mut u).map_err(e("load"))?;
        for (i, cell) in next.iter_mut().enumerate() {
            *cell = step(u[i], u[i + 1], u[i + 2]);
        }
        win.write_local(1, &next).map_err(e("store"))?;
        // 2.-4. Exchange the boundary cells.
        win.fence(Assert::NOPRECEDE)
            .map_err(e("fence(NOPRECEDE)"))?;
        if let Some(l) = left {
            let (_, l_len) = block(cells, size, l);
            win.put(&next[..1], l, l_len + 1)
                .map_err(e("put to the left neighbour"))?;
        }
        if let Some(r) = right {
            win.put(&next[len - 1..], r, 0)
                .map_err(e("put to the right neighbour"))?;
        }
        win.fence(Assert::NOSTORE | Assert::NOSUCCEED)
            .map_err(e("fence(NOSTORE|NOSUCCEED)"))?;
    }

    let mut mine = vec![0.0f64; len];
    win.read_local(1, &mut mine).map_err(e("final load"))?;
    win.free().map_err(e("free"))?;
    let blocks = world
        .allgather(bytemuck::cast_slice(&mine))
        .map_err(e("allgather"))?;
    if rank != 0 {
        return Ok(());
    }
    let mut rod = Vec::with_capacity(cells);
    for b in &blocks {
        rod.extend(
            b.chunks_exact(8)
                .map(|c| f64::from_ne_bytes(c.try_into().expect("8 bytes"))),
        );
    }
    let want = serial(cells, iters);
    if rod.len() != want.len() {
        return Err(format!(
            "gathered {} cells, expected {}",
            rod.len(),
            want.len()
        ));
    }
    if let Some(i) = (0..cells).find(|&i| rod[i].to_bits() != want[i].to_bits()) {
        return Err(format!(
            "cell {i}: parallel {} but serial {}",
            rod[i], want[i]
        ));
    }
    println!("stencil: ok ({cells} cells, {iters} iterations, {size} ranks)");
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("stencil: {msg}");
            ExitCode::FAILURE
        }
    }
}
