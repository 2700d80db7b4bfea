//! MPI-4.1 Example 12.24: request-based operations overlapping communication with computation.
//! Every rank works on `STEPS` chunks of `N` doubles in the window of its right neighbour:
//! inside one `lock_all` epoch it fetches a chunk with `rget` into one of `M` local buffers,
//! waits for it, computes on it and writes it back with `rput`, so up to `M` puts are in flight
//! while it computes on the next chunks. A request borrows its buffer until it completes, so a
//! buffer is reused only after its put completed: the puts of each round of `M` chunks are
//! completed together with `Request::wait_all` (the chapter waits for any one with
//! `MPI_Waitany`; that order of reuse is not one the borrow rules can follow). After
//! `unlock_all` and a barrier every rank checks its own window against the computation done
//! serially. Rank 0 prints `example_12_24: ok`.
//!
//! Run: `onesided run -n 4 -- target/debug/examples/example_12_24`.
//!
//! # MPI-4.1: 12.3.5 (MPI_RPUT, MPI_RGET; Example 12.24)

mod outcome;

use onesided::{Assert, Info, Request, Window, World};
use outcome::Res;
use std::process::ExitCode;

const NAME: &str = "example_12_24";
/// Chunks, their length and the local buffers.
const STEPS: usize = 16;
const N: usize = 64;
const M: usize = 4;

/// The window's starting value at element `i` of rank `rank`.
fn initial(rank: usize, i: usize) -> f64 {
    (rank * 1000 + i) as f64 / 8.0
}

/// The computation on a chunk.
fn compute(chunk: &mut [f64]) {
    for x in chunk {
        *x = *x * 1.5 + 0.25;
    }
}

fn run() -> Res {
    let world = World::init()?;
    let (me, n) = (world.rank(), world.size());
    let target = (me + 1) % n;
    let win = Window::allocate(&world, STEPS * N * 8, 8, &Info::new())?;
    let start: Vec<f64> = (0..STEPS * N).map(|i| initial(me, i)).collect();
    win.write_local(0, &start)?;
    world.barrier()?;
    win.lock_all(Assert::NONE)?;
    let mut data = vec![[0f64; N]; M];
    for round in (0..STEPS).step_by(M) {
        let mut puts = Vec::with_capacity(M);
        for (j, buf) in data.iter_mut().enumerate() {
            let i = round + j;
            if i >= STEPS {
                break;
            }
            win.rget(&mut buf[..], target, i * N)?.wait()?;
            compute(buf);
            puts.push(win.rput(&buf[..], target, i * N)?);
        }
        Request::wait_all(puts)?;
    }
    win.unlock_all()?;
    world.barrier()?;
    let mut mine = vec![0f64; STEPS * N];
    win.read_local(0, &mut mine)?;
    let mut want = start;
    compute(&mut want);
    if let Some(i) = (0..STEPS * N).find(|&i| mine[i].to_bits() != want[i].to_bits()) {
        return Err(format!("rank {me} element {i}: {} instead of {}", mine[i], want[i]).into());
    }
    win.free()?;
    let verdicts = world.allgather(&[1])?;
    if me == 0 && verdicts.len() == n {
        println!("{NAME}: ok ({n} ranks, {STEPS} chunks of {N} through {M} buffers)");
    }
    Ok(())
}

fn main() -> ExitCode {
    outcome::exit(NAME, run())
}
