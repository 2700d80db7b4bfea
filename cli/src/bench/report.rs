//! The OSU table: `#` header lines, then one `%-10d%20.2f` row per size. Only rank 0 prints.

use onesided::{Error, Result};
use std::io::Write;

/// Where a test's table goes: stdout on rank 0, nowhere on the other ranks.
#[derive(Debug)]
pub(super) struct Report {
    on: bool,
    started: bool,
}

fn io_err(e: std::io::Error) -> Error {
    Error::os("writing the results", e)
}

impl Report {
    /// A report printed by rank `rank` only if it is 0.
    pub fn new(rank: usize) -> Report {
        Report {
            on: rank == 0,
            started: false,
        }
    }

    /// Start a table: a blank line before every table but the first, the `lines` (without their
    /// leading "# "), then the column heads `# Size` and `column`.
    pub fn table(&mut self, lines: &[&str], column: &str) -> Result<()> {
        if !self.on {
            return Ok(());
        }
        let mut out = std::io::stdout().lock();
        if self.started {
            writeln!(out).map_err(io_err)?;
        }
        self.started = true;
        for line in lines {
            writeln!(out, "# {line}").map_err(io_err)?;
        }
        writeln!(out, "{:<10}{:>20}", "# Size", column).map_err(io_err)?;
        out.flush().map_err(io_err)
    }

    /// One row, flushed at once so that a long sweep shows its progress.
    pub fn row(&self, size: usize, value: f64) -> Result<()> {
        if !self.on {
            return Ok(());
        }
        let mut out = std::io::stdout().lock();
        writeln!(out, "{size:<10}{value:>20.2}").map_err(io_err)?;
        out.flush().map_err(io_err)
    }
}
