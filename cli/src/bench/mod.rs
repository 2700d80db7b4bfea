//! `onesided bench TEST [options]`: the OSU one-sided micro-benchmarks (put/get latency and
//! bandwidth, put bi-directional bandwidth, accumulate, get_accumulate, fetch_and_op and
//! compare_and_swap latency), measured the OSU way and printed as OSU prints them; notified
//! puts against put, flush and a flag (`notify_latency`); tests of
//! N ranks (fence, barrier, lock and fetch_and_op contention, all-to-all puts); the 19
//! benchmarks of IMB-RMA in IMB's tables (`imb`); the message rate of threads sharing a
//! window (`put_rate`, `get_rate`, `fop_rate`, `acc_rate`, `notify_rate` with `-t T`); and two
//! floor tests that show what the hardware allows on this machine (single-thread memcpy
//! bandwidth, and the half round trip of an atomic flag in shared memory).
//!
//! The OSU tests and the floors run on two ranks, the N-rank tests on `-n` ranks (4 unless
//! told). Started directly, `bench` starts itself again as a job of that many ranks through the
//! launcher and exits with the job's exit code (`all`: a job of 2 ranks, then one of N); started
//! by `onesided run -n N` or another process manager, it uses the job's ranks. Rank 0 prints
//! the results: OSU's (or IMB's) tables, or one JSON document, or CSV (`--format`).

mod args;
mod atomic;
mod busy;
mod context;
mod floor;
mod group;
mod imb;
mod measure;
mod notify;
mod options;
mod pages;
mod rate;
mod report;
mod rma;
mod scale;
mod sizes;
mod start;
mod stats;

pub use args::BenchArgs;

use onesided::ErrorClass;

/// Runs `onesided bench` with parsed arguments; returns the process exit code: 0, 2 for
/// invalid arguments, 1 for other errors (printed to stderr as `onesided bench: <error>`).
///
/// Outside a job, a test of several ranks starts the current program again, with this
/// process's command-line arguments, as a job: call it from the `onesided` command.
pub fn run_cli(args: BenchArgs) -> i32 {
    match start::run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("onesided bench: {e}");
            if e.class() == ErrorClass::Arg { 2 } else { 1 }
        }
    }
}
