//! MPI-4.1 Example 12.23: data moved by plain loads and stores through a shared-memory window,
//! with the processes synchronized by messages and the memory by `sync` (MPI_WIN_SYNC), inside
//! a `lock_all(NOCHECK)` epoch. Rank 0 (process A) stores `X` in its part of an
//! `allocate_shared` window, calls `sync` and "sends"; rank 1 (process B) "receives", calls
//! `sync` and loads `X` through `shared_query`, then stores its answer `Y` the same way and
//! "sends" back, for `ROUNDS` rounds (first argument, default 200). onesided has no
//! point-to-point messages, so the send/receive pairs are the world's barriers, in which every
//! other rank joins. Each side checks every value it loads; rank 0 prints `example_12_23: ok`.
//!
//! Run: `onesided run -n 2 -- target/debug/examples/example_12_23 [ROUNDS]`.
//!
//! # MPI-4.1: 12.7 (memory model; Example 12.23), 12.5.4 (MPI_WIN_SYNC)

mod outcome;

use onesided::{Assert, Info, Window, World};
use outcome::Res;
use std::process::ExitCode;

const NAME: &str = "example_12_23";

fn run() -> Res {
    let world = World::init()?;
    let (me, n) = (world.rank(), world.size());
    if n < 2 {
        return Err("needs 2 ranks or more".into());
    }
    let rounds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    // X lives in rank 0's part of the window, Y in rank 1's.
    let win = Window::allocate_shared(&world, 8, 8, &Info::new())?;
    let (x, y) = (win.shared_query(Some(0))?, win.shared_query(Some(1))?);
    win.lock_all(Assert::NOCHECK)?;
    for k in 1..=rounds {
        match me {
            0 => {
                x.write(0, &[k])?;
                win.sync()?;
                world.barrier()?; // send to B
                world.barrier()?; // receive from B
                win.sync()?;
                let mut got = [0u64];
                y.read(0, &mut got)?;
                if got[0] != 2 * k {
                    return Err(format!("round {k}: A loaded Y = {}, not {}", got[0], 2 * k).into());
                }
            }
            1 => {
                world.barrier()?; // receive from A
                win.sync()?;
                let mut got = [0u64];
                x.read(0, &mut got)?;
                if got[0] != k {
                    return Err(format!("round {k}: B loaded X = {}, not {k}", got[0]).into());
                }
                y.write(0, &[2 * k])?;
                win.sync()?;
                world.barrier()?; // send to A
            }
            _ => {
                world.barrier()?;
                world.barrier()?;
            }
        }
    }
    win.unlock_all()?;
    win.free()?;
    if me == 0 {
        println!("{NAME}: ok ({rounds} rounds of store, sync, message, sync, load)");
    }
    Ok(())
}

fn main() -> ExitCode {
    outcome::exit(NAME, run())
}
