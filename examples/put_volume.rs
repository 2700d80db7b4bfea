//! Test program for `tests/netns.rs`: rank 0 puts a known volume of data into rank 1's window,
//! so that the test can compare it with the bytes a network interface received.
//!
//! Needs exactly 2 ranks. Rank 1's window holds `WINDOW` bytes. In each of `MIB` fence epochs
//! (first argument, default 16) rank 0 fills the whole window with puts of `CHUNK` bytes; word
//! `w` of epoch `e` is `e << 32 | w`. After each epoch rank 1 checks every word. At the end
//! rank 1 prints `put_volume: ok, <bytes> bytes put` with the number of bytes rank 0 put. Any
//! mismatch or error makes the program exit with a non-zero status and a message.
//!
//! Run it with `onesided run -n 2 --simulate-nodes 2 -- target/debug/examples/put_volume`.

use onesided::{Assert, Info, Window, World};
use std::process::ExitCode;

/// Bytes of rank 1's window: one epoch's data.
const WINDOW: usize = 1 << 20;
/// Bytes of one put.
const CHUNK: usize = 64 << 10;
/// Words of one put.
const CHUNK_WORDS: usize = CHUNK / 8;

/// Word `w` of the window after epoch `epoch`.
fn word(epoch: usize, w: usize) -> u64 {
    ((epoch as u64) << 32) | w as u64
}

fn run() -> Result<(), String> {
    let epochs = match std::env::args().nth(1) {
        None => 16,
        Some(s) => s
            .parse()
            .map_err(|_| format!("{s:?} is not a number of epochs"))?,
    };
    let world = World::init().map_err(|e| format!("joining the job: {e}"))?;
    let rank = world.rank();
    if world.size() != 2 {
        return Err(format!("needs 2 ranks, not {}", world.size()));
    }
    let e = |what: &'static str| move |err: onesided::Error| format!("rank {rank}: {what}: {err}");
    let len = if rank == 1 { WINDOW } else { 0 };
    let win = Window::allocate(&world, len, 8, &Info::new()).map_err(e("allocate"))?;
    let mut chunk = vec![0u64; CHUNK_WORDS];
    let mut seen = vec![0u64; WINDOW / 8];
    for epoch in 0..epochs {
        win.fence(Assert::NOPRECEDE).map_err(e("opening fence"))?;
        if rank == 0 {
            for first in (0..WINDOW / 8).step_by(CHUNK_WORDS) {
                for (i, w) in chunk.iter_mut().enumerate() {
                    *w = word(epoch, first + i);
                }
                win.put(&chunk, 1, first).map_err(e("put"))?;
            }
        }
        win.fence(Assert::NOSTORE | Assert::NOSUCCEED)
            .map_err(e("closing fence"))?;
        if rank == 1 {
            win.read_local(0, &mut seen).map_err(e("load"))?;
            if let Some(w) = (0..seen.len()).find(|&w| seen[w] != word(epoch, w)) {
                return Err(format!(
                    "epoch {epoch}: word {w} is {:#x}, expected {:#x}",
                    seen[w],
                    word(epoch, w)
                ));
            }
        }
    }
    win.free().map_err(e("free"))?;
    if rank == 1 {
        println!("put_volume: ok, {} bytes put", epochs * WINDOW);
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("put_volume: {msg}");
            ExitCode::FAILURE
        }
    }
}
