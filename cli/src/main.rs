//! The `onesided` command: `run` starts a job of ranks on this machine; `bench` runs the OSU
//! one-sided micro-benchmarks, compares and plots their results; `info` lists the libfabric
//! providers.
use clap::error::ErrorKind::MissingRequiredArgument;
use clap::{CommandFactory, Parser, Subcommand};

mod bench;
mod launch;
mod results;

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
    /// Run the OSU one-sided micro-benchmarks (2 ranks) and the N-rank tests, or compare or
    /// plot saved results.
    Bench(BenchCmd),
    /// List libfabric providers with their RMA/atomic support and memory-registration mode, and
    /// the verbs devices with their ports, GIDs and limits.
    Info,
}

/// `onesided bench TEST [options]`, or `onesided bench compare|plot ...` on saved results.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct BenchCmd {
    #[command(subcommand)]
    tool: Option<results::Tool>,
    #[command(flatten)]
    run: Option<bench::BenchArgs>,
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Run(args) => launch::run_cli(args),
        Cmd::Bench(BenchCmd {
            tool: Some(tool), ..
        }) => results::run_cli(tool),
        Cmd::Bench(BenchCmd {
            run: Some(args), ..
        }) => bench::run_cli(args),
        Cmd::Bench(_) => Cli::command()
            .error(
                MissingRequiredArgument,
                "`onesided bench` needs a TEST or a command",
            )
            .exit(),
        Cmd::Info => {
            print!("{}", onesided::launcher::providers());
            print!("{}", onesided::launcher::verbs());
            0
        }
    };
    std::process::exit(code);
}
