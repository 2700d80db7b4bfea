//! Saved benchmark results: `onesided bench compare A B` and `onesided bench plot FILES -o
//! OUT.svg`.
//!
//! A result file is read into a [`Run`]: what ran where ([`Context`]) and one [`Record`] per
//! test and size. Three formats are read, told apart by their content: onesided's JSON
//! (`--format json`, a document starting with `{`, see [`json`]), the text tables of the Intel
//! MPI Benchmarks (IMB-RMA's, which `onesided bench imb` prints too: a `# Benchmarking` line,
//! see [`imb_text`]) and those of the OSU micro-benchmarks, which onesided's default output
//! also prints (see [`osu_text`]).

mod cli;
mod compare;
mod imb_text;
mod json;
mod model;
mod osu_text;
mod plot;

pub use cli::{Tool, run_cli};
pub use model::{Context, Error, Metric, Record, Run, Series, Unit};

use std::path::Path;

/// Parses the content of a result file named `source`: JSON if it starts with `{` (after
/// blanks), IMB text if it has a `# Benchmarking` line, OSU text otherwise. A file without any
/// result is an error.
pub fn parse(source: &str, text: &str) -> Result<Run, Error> {
    let text = text.trim_start_matches('\u{feff}');
    let run = if text.trim_start().starts_with('{') {
        json::parse(source, text)?
    } else if imb_text::recognizes(text) {
        imb_text::parse(source, text)?
    } else {
        osu_text::parse(source, text)?
    };
    if run.records.is_empty() {
        return Err(Error::new(format!("{source}: no results in this file")));
    }
    Ok(run)
}

/// Reads and parses the result file at `path`.
pub fn load(path: &Path) -> Result<Run, Error> {
    let source = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::new(format!("reading {source}: {e}")))?;
    parse(&source, &text)
}
