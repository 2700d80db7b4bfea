//! MPI-4.1 Example 12.19: a checkerboard (double buffer) with post/start/complete/wait under
//! NOCHECK, on a ring of ranks. Array `A0` is updated from `A1` and `A1` from `A0`; window
//! `win0` exposes `A0`, `win1` exposes `A1`, each a block of `M` cells with a halo cell on
//! either side. Each iteration, as the chapter orders it:
//!
//! 1. `update2(A1, A0)`: `A1` from `A0` and its halo; `start(win0, NOCHECK)`, get the
//!    neighbours' edge cells of `A0` into the halo of `A0`; `update1(A1)`, a local update of
//!    `A1` concurrent with that communication; `post(win1, NOCHECK | NOPUT)`; `complete(win0)`,
//!    `wait(win0)`;
//! 2. the same with the arrays swapped, the next `post(win0)` skipped after the last iteration.
//!
//! The first `post(win0)` is followed by a barrier, since every `start` uses NOCHECK. After
//! `ITERATIONS` (first argument, default 30) rank 0 gathers the blocks and checks them bit for
//! bit against the same phases run serially; it prints `example_12_19: ok`.
//!
//! Run: `onesided run -n 4 -- target/debug/examples/example_12_19 [ITERATIONS]`.
//!
//! # MPI-4.1: 12.5.2 (post/start/complete/wait; Example 12.19), 12.5.5 (MPI_MODE_NOCHECK)

mod outcome;

use onesided::{Assert, Info, Window, World};
use outcome::Res;
use std::process::ExitCode;

const NAME: &str = "example_12_19";
/// Cells per rank.
const M: usize = 16;

/// `a` from `b` and its halo: the mean of each cell's three neighbours in `b`.
fn update2(a: &mut [f64], b: &[f64]) {
    for i in 1..=M {
        a[i] = (b[i - 1] + b[i] + b[i + 1]) / 3.0;
    }
}

/// A local update of `a` alone.
fn update1(a: &mut [f64]) {
    for x in &mut a[1..=M] {
        *x = *x * 0.75 + 0.125;
    }
}

/// Both arrays of rank `r` of `n` at the start, halos included (cell `i` of the block is global
/// cell `r * M + i - 1` of a ring).
fn initial(r: usize, n: usize) -> (Vec<f64>, Vec<f64>) {
    let at = |i: usize| (r * M + n * M + i - 1) % (n * M);
    let a0 = (0..M + 2).map(|i| (at(i) % 7) as f64 / 4.0).collect();
    let a1 = (0..M + 2).map(|i| (at(i) % 5) as f64 / 8.0).collect();
    (a0, a1)
}

/// Fill the halo of `a` of every rank from its neighbours' edge cells (the gets).
fn exchange(all: &mut [Vec<f64>]) {
    let n = all.len();
    let edges: Vec<(f64, f64)> = all.iter().map(|a| (a[1], a[M])).collect();
    for (r, a) in all.iter_mut().enumerate() {
        a[0] = edges[(r + n - 1) % n].1;
        a[M + 1] = edges[(r + 1) % n].0;
    }
}

/// The phases of every rank run one after another, as the parallel run orders them.
fn serial(n: usize, iterations: usize) -> Vec<Vec<f64>> {
    let (mut a0, mut a1): (Vec<_>, Vec<_>) = (0..n).map(|r| initial(r, n)).unzip();
    for _ in 0..iterations {
        (0..n).for_each(|r| update2(&mut a1[r], &a0[r]));
        exchange(&mut a0);
        a1.iter_mut().for_each(|a| update1(a));
        (0..n).for_each(|r| update2(&mut a0[r], &a1[r]));
        exchange(&mut a1);
        a0.iter_mut().for_each(|a| update1(a));
    }
    a0.into_iter()
        .zip(a1)
        .map(|(a, b)| [a, b].concat())
        .collect()
}

/// One half of an iteration: `to` updated from `from` (window `win_from`), the halo of `from`
/// fetched from `ranks`, `to` updated alone, `to` posted (unless `post_to` is false), then the
/// access and exposure epochs of `win_from` closed.
fn half(
    win_from: &Window<'_>,
    win_to: &Window<'_>,
    near: &onesided::Group,
    (left, right): (usize, usize),
    post_to: bool,
) -> Res {
    let (mut from, mut to) = (vec![0f64; M + 2], vec![0f64; M + 2]);
    win_from.read_local(0, &mut from)?;
    win_to.read_local(0, &mut to)?;
    update2(&mut to, &from);
    win_from.start(near, Assert::NOCHECK)?;
    let (mut l, mut r) = ([0f64], [0f64]);
    win_from.get(&mut l, left, M)?;
    win_from.get(&mut r, right, 1)?;
    update1(&mut to);
    win_to.write_local(0, &to)?;
    if post_to {
        win_to.post(near, Assert::NOCHECK | Assert::NOPUT)?;
    }
    win_from.complete()?;
    win_from.wait()?;
    win_from.write_local(0, &l)?;
    win_from.write_local(M + 1, &r)?;
    Ok(())
}

fn run() -> Res {
    let world = World::init()?;
    let (me, n) = (world.rank(), world.size());
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let mut ranks = vec![left, right];
    ranks.sort_unstable();
    ranks.dedup();
    let near = world.group().incl(&ranks)?;
    let win0 = Window::allocate(&world, (M + 2) * 8, 8, &Info::new())?;
    let win1 = Window::allocate(&world, (M + 2) * 8, 8, &Info::new())?;
    let (a0, a1) = initial(me, n);
    win0.write_local(0, &a0)?;
    win1.write_local(0, &a1)?;
    win0.post(&near, Assert::NOCHECK | Assert::NOPUT)?;
    world.barrier()?;
    for it in 0..iterations {
        half(&win0, &win1, &near, (left, right), true)?;
        half(&win1, &win0, &near, (left, right), it + 1 < iterations)?;
    }
    let mut mine = vec![0f64; 2 * (M + 2)];
    win0.read_local(0, &mut mine[..M + 2])?;
    win1.read_local(0, &mut mine[M + 2..])?;
    let bytes: Vec<u8> = mine.iter().flat_map(|v| v.to_le_bytes()).collect();
    let all = world.allgather(&bytes)?;
    win0.free()?;
    win1.free()?;
    if me == 0 {
        for (r, (got, want)) in all.iter().zip(serial(n, iterations)).enumerate() {
            let got: Vec<u64> = got
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect();
            let want: Vec<u64> = want.iter().map(|v| v.to_bits()).collect();
            if got != want {
                return Err(format!("rank {r}'s arrays differ from the serial run").into());
            }
        }
        println!("{NAME}: ok ({n} ranks, {iterations} iterations)");
    }
    Ok(())
}

fn main() -> ExitCode {
    outcome::exit(NAME, run())
}
