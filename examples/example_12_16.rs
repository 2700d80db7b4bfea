//! MPI-4.1 Example 12.16: the fence stencil of Example 12.15 in split phases, with gets
//! (`rod/gets.rs`): each iteration's epoch opens with `fence(NOPUT | NOPRECEDE)` (nobody puts
//! into the window, no RMA call precedes) and closes with `fence(NOSUCCEED)`, the interior
//! updated in between. Rank 0 prints `example_12_16: ok`.
//!
//! Run: `onesided run -n 4 -- target/debug/examples/example_12_16 [CELLS] [ITERATIONS]`.
//!
//! # MPI-4.1: 12.5.1 (MPI_WIN_FENCE; Example 12.16)

#[path = "rod/gets.rs"]
mod gets;
mod rod;

use onesided::Assert;
use std::process::ExitCode;

const NAME: &str = "example_12_16";

fn main() -> ExitCode {
    let epochs = gets::Epochs {
        open: |win, _| win.fence(Assert::NOPUT | Assert::NOPRECEDE),
        close: |win| win.fence(Assert::NOSUCCEED),
    };
    rod::exit(NAME, gets::run(NAME, epochs))
}
