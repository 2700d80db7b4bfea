//! IMB's text output, as the Intel(R) MPI Benchmarks print it: each table opens with a blank
//! line, a rule, `# Benchmarking NAME`, the processes taking part (and those waiting in a
//! barrier), a rule, the `MODE:` lines where the benchmark has modes and the column heads;
//! then one row per size, every field 13 characters wide (integers, then floats with two
//! decimals).
//!
//! ```text
//!
//! #---------------------------------------------------
//! # Benchmarking Unidir_put
//! # #processes = 2
//! #---------------------------------------------------
//! #
//! #    MODE: NON-AGGREGATE
//! #
//!        #bytes #repetitions      t[usec]   Mbytes/sec
//!             0         1000         0.05         0.00
//! ```
//!
//! (IMB leaves a blank after the name, the count and the mode; so does this writer.)

use std::io::{self, Write};

/// IMB's field width (`ow_format`).
const WIDTH: usize = 13;

/// What the header of one table names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The benchmark, as IMB names it.
    pub name: &'static str,
    /// The ranks taking part.
    pub processes: usize,
    /// The ranks of the job waiting in barriers meanwhile.
    pub idle: usize,
    /// `AGGREGATE` or `NON-AGGREGATE`, where the benchmark has modes.
    pub mode: Option<&'static str>,
}

/// A rule as wide as `fields` fields.
fn rule(out: &mut (impl Write + ?Sized), fields: usize) -> io::Result<()> {
    writeln!(out, "#{}", "-".repeat(fields * WIDTH - 1))
}

/// The header of a table whose rows have the size, the repetitions and `heads`.
pub fn header(out: &mut (impl Write + ?Sized), block: &Block, heads: &[&str]) -> io::Result<()> {
    let fields = 2 + heads.len();
    writeln!(out)?;
    rule(out, fields)?;
    writeln!(out, "# Benchmarking {} ", block.name)?;
    writeln!(out, "# #processes = {} ", block.processes)?;
    match block.idle {
        0 => {}
        1 => writeln!(out, "# ( 1 additional process waiting in MPI_Barrier)")?,
        n => writeln!(out, "# ( {n} additional processes waiting in MPI_Barrier)")?,
    }
    rule(out, fields)?;
    if let Some(mode) = block.mode {
        writeln!(out, "#\n#    MODE: {mode} \n#")?;
    }
    for head in ["#bytes", "#repetitions"].iter().chain(heads) {
        write!(out, "{head:>WIDTH$}")?;
    }
    writeln!(out)
}

/// One row: the size, the repetitions, the values.
pub fn row(
    out: &mut (impl Write + ?Sized),
    size: usize,
    repetitions: usize,
    values: &[f64],
) -> io::Result<()> {
    write!(out, "{size:>WIDTH$}{repetitions:>WIDTH$}")?;
    for v in values {
        write!(out, "{v:>WIDTH$.2}")?;
    }
    writeln!(out)
}

/// What IMB prints before its tables: the list of benchmarks to run, each with its comments.
pub fn preamble(
    out: &mut (impl Write + ?Sized),
    title: &str,
    list: &[(&str, &[&str])],
) -> io::Result<()> {
    writeln!(out, "#{}", "-".repeat(64))?;
    writeln!(out, "#    {title}")?;
    writeln!(out, "#{}", "-".repeat(64))?;
    writeln!(out, "\n# List of Benchmarks to run:\n")?;
    for (name, comments) in list {
        writeln!(out, "# {name}")?;
        if !comments.is_empty() {
            writeln!(out, "#     Comments on this Benchmark:")?;
        }
        for c in *comments {
            writeln!(out, "#     {c}")?;
        }
    }
    Ok(())
}

/// What IMB prints after its last table.
pub fn finale(out: &mut (impl Write + ?Sized)) -> io::Result<()> {
    writeln!(out, "\n\n# All processes entering MPI_Finalize\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_laid_out_as_imb_lays_it_out() {
        let mut out = Vec::new();
        let block = Block {
            name: "Unidir_put",
            processes: 2,
            idle: 2,
            mode: Some("AGGREGATE"),
        };
        header(&mut out, &block, &["t[usec]", "Mbytes/sec"]).unwrap();
        row(&mut out, 4096, 1000, &[1.234, 3319.4567]).unwrap();
        let line = format!("#{}", "-".repeat(51));
        let want = format!(
            "\n{line}\n# Benchmarking Unidir_put \n# #processes = 2 \n\
             # ( 2 additional processes waiting in MPI_Barrier)\n{line}\n\
             #\n#    MODE: AGGREGATE \n#\n\
             \x20      #bytes #repetitions      t[usec]   Mbytes/sec\n\
             \x20        4096         1000         1.23      3319.46\n"
        );
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }

    #[test]
    fn tables_without_modes_or_idle_ranks_skip_those_lines() {
        let mut out = Vec::new();
        let block = Block {
            name: "All_put_all",
            processes: 4,
            idle: 0,
            mode: None,
        };
        header(
            &mut out,
            &block,
            &["t_min[usec]", "t_max[usec]", "t_avg[usec]"],
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("MODE"), "{text}");
        assert!(!text.contains("additional"), "{text}");
        assert!(text.ends_with("t_avg[usec]\n"), "{text}");
    }
}
