//! Requests as futures: every rank reads its right neighbour's 64 elements of a typed window
//! with 64 `rget`s and awaits them together (`futures::future::join_all`) on `futures`'
//! executor, whose thread sleeps until a request's transport wakes it (over the fabric, the
//! endpoint's progress thread when the reads complete). Each rank checks what it read; rank 0
//! prints `async_gets: ok`.
//!
//! Run: `onesided run -n 3 -- target/debug/examples/async_gets` (add
//! `ONESIDED_TRANSPORT=fabric` to go through libfabric).
//!
//! # MPI-4.1: 12.3.5 (MPI_RGET)

mod outcome;

use futures::executor::block_on;
use futures::future::join_all;
use onesided::{Assert, Info, ThreadLevel, TypedWindow, World};
use outcome::Res;
use std::process::ExitCode;

const NAME: &str = "async_gets";
/// Elements per rank, each read by its own request.
const COUNT: usize = 64;

/// The value of element `i` of rank `r`.
fn value(r: usize, i: usize) -> u64 {
    (r as u64) << 32 | i as u64
}

fn run() -> Res {
    // The executor runs on the thread that initialized the world: MPI_THREAD_FUNNELED.
    let (world, provided) = World::init_thread(ThreadLevel::Funneled)?;
    if provided != ThreadLevel::Funneled || world.query_thread() != provided {
        return Err(format!("asked for Funneled, provided {provided:?}").into());
    }
    let (me, n) = (world.rank(), world.size());
    let right = (me + 1) % n;
    let win = TypedWindow::<u64>::allocate(&world, COUNT, &Info::new())?;
    let mine: Vec<u64> = (0..COUNT).map(|i| value(me, i)).collect();
    win.write_local(0, &mine)?;
    world.barrier()?;

    win.lock_all(Assert::NONE)?;
    let mut got = vec![0u64; COUNT];
    let requests = got
        .chunks_mut(1)
        .enumerate()
        .map(|(i, one)| win.rget(one, right, i))
        .collect::<onesided::Result<Vec<_>>>()?;
    for done in block_on(join_all(requests)) {
        done?;
    }
    win.unlock_all()?;
    let want: Vec<u64> = (0..COUNT).map(|i| value(right, i)).collect();
    if got != want {
        return Err(format!("rank {me} read {got:?} from rank {right}, not {want:?}").into());
    }
    win.free()?;
    world.barrier()?;
    if me == 0 {
        println!("{NAME}: ok ({n} ranks, {COUNT} requests awaited by each)");
    }
    Ok(())
}

fn main() -> ExitCode {
    outcome::exit(NAME, run())
}
