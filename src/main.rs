//! The `onesided` command: `run` starts a job of ranks on this machine.
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "onesided", version, about = "MPI-4.1 one-sided communication for Rust")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start N ranks of PROGRAM on this machine.
    Run(onesided::launch::RunArgs),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Run(args) => onesided::launch::run_cli(args),
    };
    std::process::exit(code);
}
