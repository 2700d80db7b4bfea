//! A 2-D heat (Jacobi) stencil with fence synchronization and noncontiguous halo exchange: the
//! `N` x `N` grid (first argument, default 48) is split into `q` x `q` blocks over `q * q` ranks
//! (1, 4, 9, ...). Each rank keeps its block with a one-cell halo in its window, row by row.
//! Every iteration:
//!
//! 1. `fence(NOPRECEDE)`;
//! 2. put the block's edge rows into the halo rows of the neighbours above and below, and its
//!    edge columns (a strided layout on both sides) into the halo columns of the neighbours to
//!    the left and right (`put_layout` with subarray layouts);
//! 3. `fence(NOSTORE | NOSUCCEED)`;
//! 4. update the interior from the current values by local loads and stores:
//!    `u = (n + s + w + e) / 4`. Halo cells on the grid's edge hold the fixed boundary values.
//!
//! After `ITERATIONS` (second argument, default 20) every rank's block is gathered and checked
//! bit for bit against the same iterations run serially; rank 0 prints `stencil2d: ok`.
//!
//! Run: `onesided run -n 4 -- target/debug/examples/stencil2d [N] [ITERATIONS]`.
//!
//! # MPI-4.1: 12.3.1 (MPI_PUT with derived datatypes), 12.5.1 (MPI_WIN_FENCE)

mod outcome;

use onesided::{Assert, Info, Layout, Window, World};
use outcome::Res;
use std::process::ExitCode;

const NAME: &str = "stencil2d";

/// The fixed value of the boundary cell at global row `r`, column `c` (outside the grid).
fn boundary(r: isize, c: isize) -> f64 {
    ((r * 7 + c * 3).rem_euclid(11)) as f64 / 10.0
}

/// The starting value of interior cell (`r`, `c`).
fn start(r: usize, c: usize) -> f64 {
    ((r * 13 + c * 5) % 17) as f64 / 16.0
}

/// One Jacobi step of the interior of `u`, a `(m + 2) x (m + 2)` array with halo.
fn step(u: &[f64], m: usize) -> Vec<f64> {
    let w = m + 2;
    let mut next = u.to_vec();
    for r in 1..=m {
        for c in 1..=m {
            let sum =
                (u[(r - 1) * w + c] + u[(r + 1) * w + c]) + (u[r * w + c - 1] + u[r * w + c + 1]);
            next[r * w + c] = sum / 4.0;
        }
    }
    next
}

/// A `(m + 2) x (m + 2)` array for the block whose first interior cell is global (`r0`, `c0`)
/// of an `n` x `n` grid: interior from `start`, halo from `boundary` (inner halo cells are
/// overwritten by the neighbours' puts).
fn initial(n: usize, m: usize, r0: usize, c0: usize) -> Vec<f64> {
    let w = m + 2;
    let mut u = vec![0.0; w * w];
    for r in 0..w {
        for c in 0..w {
            let (gr, gc) = (r0 as isize + r as isize - 1, c0 as isize + c as isize - 1);
            let inside = (0..n as isize).contains(&gr) && (0..n as isize).contains(&gc);
            u[r * w + c] = match inside {
                true => start(gr as usize, gc as usize),
                false => boundary(gr, gc),
            };
        }
    }
    u
}

/// The interior of a `(m + 2) x (m + 2)` array, row by row.
fn interior(u: &[f64], m: usize) -> Vec<f64> {
    let w = m + 2;
    (1..=m)
        .flat_map(|r| u[r * w + 1..r * w + 1 + m].to_vec())
        .collect()
}

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn run() -> Res {
    let world = World::init()?;
    let (me, size) = (world.rank(), world.size());
    let (n, iters) = (arg(1, 48), arg(2, 20));
    let q = (1..=size).find(|q| q * q >= size).unwrap_or(1);
    if q * q != size || n % q != 0 {
        return Err(format!("{size} ranks are not a square grid dividing {n}").into());
    }
    let (m, w) = (n / q, n / q + 2);
    let (pr, pc) = (me / q, me % q);
    let mut u = initial(n, m, pr * m, pc * m);
    let win = Window::allocate(&world, w * w * 8, 8, &Info::new())?;
    win.write_local(0, &u)?;
    let whole = [w, w];
    // Sent: the first and last interior row and column; received: the halo row or column on
    // the other side of the neighbour.
    let row = |at: usize| Layout::subarray(&whole, &[1, m], &[at, 1]);
    let col = |at: usize| Layout::subarray(&whole, &[m, 1], &[1, at]);
    let neighbours = [
        (pr > 0, me.wrapping_sub(q), row(1)?, row(m + 1)?),
        (pr + 1 < q, me + q, row(m)?, row(0)?),
        (pc > 0, me.wrapping_sub(1), col(1)?, col(m + 1)?),
        (pc + 1 < q, me + 1, col(m)?, col(0)?),
    ];
    for _ in 0..iters {
        win.fence(Assert::NOPRECEDE)?;
        for (exists, rank, send, recv) in &neighbours {
            if *exists {
                win.put_layout(&u, send, *rank, 0, recv)?;
            }
        }
        win.fence(Assert::NOSTORE | Assert::NOSUCCEED)?;
        win.read_local(0, &mut u)?;
        u = step(&u, m);
        win.write_local(0, &u)?;
    }
    let mine: Vec<u8> = interior(&u, m)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let blocks = world.allgather(&mine)?;
    win.free()?;
    if me == 0 {
        let mut serial = initial(n, n, 0, 0);
        for _ in 0..iters {
            serial = step(&serial, n);
        }
        let serial = interior(&serial, n);
        for (rank, block) in blocks.iter().enumerate() {
            let (br, bc) = (rank / q, rank % q);
            for (k, v) in block.chunks_exact(8).enumerate() {
                let got = f64::from_le_bytes(v.try_into()?);
                let (r, c) = (br * m + k / m, bc * m + k % m);
                let want = serial[r * n + c];
                if got.to_bits() != want.to_bits() {
                    return Err(
                        format!("cell ({r}, {c}) of rank {rank}: {got} vs serial {want}").into(),
                    );
                }
            }
        }
        println!("{NAME}: ok ({n} x {n} grid, {size} ranks, {iters} iterations)");
    }
    Ok(())
}

fn main() -> ExitCode {
    outcome::exit(NAME, run())
}
