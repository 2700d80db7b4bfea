//! The 1-D heat (Jacobi) rod that the stencil examples share: the problem, its split into
//! blocks, a serial reference and the final check.
//!
//! A rod of `CELLS` cells (first argument, default 240) with fixed temperatures beyond both ends
//! is split into blocks, one per rank (sizes differ by at most one). Each rank's window holds its
//! block plus one halo cell on each side: `[left halo, cells..., right halo]`, as f64 with
//! displacement unit 8; an iteration (second argument: how many, default 100) computes every
//! cell from its neighbours' values of the previous iteration. At the end every rank contributes
//! its block to an allgather, and rank 0 compares the whole rod with a serial computation of the
//! same problem: each cell's arithmetic is done in the same order in both, so the comparison is
//! exact (bit for bit).

use onesided::{Group, Info, Window, World};
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
pub fn step(l: f64, c: f64, r: f64) -> f64 {
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

/// This rank's part of the problem.
pub struct Rod {
    pub cells: usize,
    pub iters: usize,
    pub rank: usize,
    pub size: usize,
    /// This rank's cells.
    pub len: usize,
    first: usize,
}

impl Rod {
    /// The problem of the command line, split among the ranks of `world`.
    pub fn new(world: &World) -> Result<Rod, String> {
        let (cells, iters) = (arg(1, 240)?, arg(2, 100)?);
        let (rank, size) = (world.rank(), world.size());
        if cells < size {
            return Err(format!("{cells} cells cannot be split among {size} ranks"));
        }
        let (first, len) = block(cells, size, rank);
        Ok(Rod {
            cells,
            iters,
            rank,
            size,
            len,
            first,
        })
    }

    /// A message-maker for errors of `what` on this rank.
    pub fn err(&self, what: &'static str) -> impl Fn(onesided::Error) -> String + use<> {
        let rank = self.rank;
        move |e| format!("rank {rank}: {what}: {e}")
    }

    /// The group of this rank's neighbours.
    pub fn neighbours(&self, world: &World) -> Result<Group, String> {
        let ranks: Vec<usize> = self.left().into_iter().chain(self.right()).collect();
        world
            .group()
            .incl(&ranks)
            .map_err(self.err("neighbour group"))
    }

    /// The window `[left halo, cells..., right halo]` holding the start values, and a copy of
    /// them.
    pub fn window(&self, world: &World) -> Result<(Window<'static>, Vec<f64>), String> {
        let win = Window::allocate(world, 8 * (self.len + 2), 8, &Info::new())
            .map_err(self.err("allocate"))?;
        let u = self.start_values();
        win.write_local(0, &u).map_err(self.err("initial store"))?;
        Ok((win, u))
    }

    /// The number of cells of `rank`.
    pub fn len_of(&self, rank: usize) -> usize {
        block(self.cells, self.size, rank).1
    }

    /// The left neighbour, if any.
    pub fn left(&self) -> Option<usize> {
        self.rank.checked_sub(1)
    }

    /// The right neighbour, if any.
    pub fn right(&self) -> Option<usize> {
        (self.rank + 1 < self.size).then_some(self.rank + 1)
    }

    /// This rank's block with its halos at the start: `[left halo, cells..., right halo]`.
    fn start_values(&self) -> Vec<f64> {
        let mut u = Vec::with_capacity(self.len + 2);
        u.push(match self.left() {
            None => LEFT_END,
            Some(_) => initial(self.first - 1),
        });
        u.extend((self.first..self.first + self.len).map(initial));
        u.push(match self.right() {
            None => RIGHT_END,
            Some(_) => initial(self.first + self.len),
        });
        u
    }

    /// Gather every rank's final cells `mine` and, on rank 0, compare them with the serial
    /// computation and print `NAME: ok`.
    pub fn check(&self, world: &World, name: &str, mine: &[f64]) -> Result<(), String> {
        let blocks = world
            .allgather(bytemuck::cast_slice(mine))
            .map_err(|e| format!("rank {}: allgather: {e}", self.rank))?;
        if self.rank != 0 {
            return Ok(());
        }
        let rod: Vec<f64> = blocks
            .iter()
            .flat_map(|b| b.chunks_exact(8))
            .map(|c| f64::from_ne_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let want = serial(self.cells, self.iters);
        if rod.len() != want.len() {
            return Err(format!(
                "gathered {} cells, expected {}",
                rod.len(),
                want.len()
            ));
        }
        if let Some(i) = (0..self.cells).find(|&i| rod[i].to_bits() != want[i].to_bits()) {
            return Err(format!(
                "cell {i}: parallel {} but serial {}",
                rod[i], want[i]
            ));
        }
        println!(
            "{name}: ok ({} cells, {} iterations, {} ranks)",
            self.cells, self.iters, self.size
        );
        Ok(())
    }
}

/// The exit code of `run`, printing its error after `NAME: `.
pub fn exit(name: &str, run: Result<(), String>) -> ExitCode {
    match run {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("{name}: {msg}");
            ExitCode::FAILURE
        }
    }
}
