//! The benchmarks of IMB-RMA, the MPI-RMA part of the Intel(R) MPI Benchmarks
//! (`onesided bench imb`): what each is ([`catalog`]), its timed loops, the driver that runs
//! them and reports, and IMB's text layout ([`text`], which the report uses).

mod catalog;
mod loops;
mod run;
pub(super) mod text;

pub use catalog::Benchmark;
pub(super) use catalog::{MAX_SIZE, Mode, repetitions, warmup};
pub(super) use run::run;
