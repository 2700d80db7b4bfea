//! The command line of `onesided bench compare` and `onesided bench plot`.

use super::{Error, Metric, compare, load, plot};
use std::path::PathBuf;

/// What `onesided bench` does with saved results.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum Tool {
    /// Compare two result files (onesided JSON or OSU text): A, B, B/A and the better run,
    /// for every test and size in both.
    Compare(CompareArgs),
    /// Draw the results of several files against message size, log-log, into one SVG file.
    Plot(PlotArgs),
}

/// Arguments of `onesided bench compare`.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// The first result file: the baseline, A.
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The second result file, B, compared with A.
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// The statistic to compare (OSU text has only `value`).
    #[arg(long, value_enum, default_value_t = Metric::Value)]
    pub metric: Metric,
}

/// Arguments of `onesided bench plot`.
#[derive(clap::Args, Debug, Clone)]
pub struct PlotArgs {
    /// Result files (onesided JSON or OSU text).
    #[arg(value_name = "FILES", required = true)]
    pub files: Vec<PathBuf>,
    /// The SVG file to write.
    #[arg(short = 'o', long = "output", value_name = "OUT.svg")]
    pub output: PathBuf,
    /// The statistic to plot (OSU text has only `value`).
    #[arg(long, value_enum, default_value_t = Metric::Value)]
    pub metric: Metric,
}

/// Runs `tool`; returns the process exit code: 0, or 1 after printing the error to stderr as
/// `onesided bench compare: <error>`.
pub fn run_cli(tool: Tool) -> i32 {
    let (name, result) = match tool {
        Tool::Compare(args) => ("compare", run_compare(&args)),
        Tool::Plot(args) => ("plot", run_plot(&args)),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("onesided bench {name}: {e}");
            1
        }
    }
}

/// Prints the comparison of the two files.
fn run_compare(args: &CompareArgs) -> Result<(), Error> {
    let (a, b) = (load(&args.a)?, load(&args.b)?);
    print!("{}", compare::compare(&a, &b, args.metric)?);
    Ok(())
}

/// Writes the chart of the files.
fn run_plot(args: &PlotArgs) -> Result<(), Error> {
    let svg = args
        .output
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("svg"));
    if !svg {
        return Err(Error::new(format!(
            "{}: the output must be an .svg file",
            args.output.display()
        )));
    }
    let runs = args
        .files
        .iter()
        .map(|f| load(f))
        .collect::<Result<Vec<_>, Error>>()?;
    plot::plot(&runs, args.metric, &args.output)
}
