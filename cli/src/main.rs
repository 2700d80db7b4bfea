//! The `onesided` command: `run` starts a job of ranks on this machine; `bench` runs the OSU
//! one-sided micro-benchmarks; `info` lists the libfabric providers.
use clap::{Parser, Subcommand};

mod bench;
mod launch;

#[derive(Parser)]
#[command(
    name = "onesided",
    version,
    about = "MPI-4.1 one-sided communication for Rust"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start N ranks of PROGRAM on this machine.
    Run(launch::RunArgs),
    /// Run the OSU one-sided micro-benchmarks (2 ranks) and the N-rank tests.
    Bench(bench::BenchArgs),
    /// List libfabric providers with their RMA/atomic support and memory-registration mode.
    Info,
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Run(args) => launch::run_cli(args),
        Cmd::Bench(args) => bench::run_cli(args),
        Cmd::Info => {
            print!("{}", onesided::launcher::providers());
            0
        }
    };
    std::process::exit(code);
}
