//! MPI-4.1 Example 12.18: the stencil of Example 12.17 in split phases, with gets
//! (`rod/gets.rs`): the epochs of each iteration are `post(NOPUT)` (nobody puts into this
//! window) and `start` to the neighbours, closed by `complete` and `wait`. Rank 0 prints
//! `example_12_18: ok`.
//!
//! Run: `onesided run -n 4 -- target/debug/examples/example_12_18 [CELLS] [ITERATIONS]`.
//!
//! # MPI-4.1: 12.5.2 (MPI_WIN_POST with MPI_MODE_NOPUT, MPI_WIN_START; Example 12.18)

#[path = "rod/gets.rs"]
mod gets;
mod rod;

use onesided::Assert;
use std::process::ExitCode;

const NAME: &str = "example_12_18";

fn main() -> ExitCode {
    let epochs = gets::Epochs {
        open: |win, group| {
            win.post(group, Assert::NOPUT)?;
            win.start(group, Assert::NONE)
        },
        close: |win| {
            win.complete()?;
            win.wait()
        },
    };
    rod::exit(NAME, gets::run(NAME, epochs))
}
