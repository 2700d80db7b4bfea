//! Where the results go, on rank 0 only: OSU's tables (`#` header lines, then one `%-10d%20.2f`
//! row per size) or IMB's (for the IMB-RMA benchmarks, `imb/text.rs`), CSV rows, or one JSON
//! document (format `onesided-bench/1`), printed or written to a file for `all` to merge.

use super::args::Format;
use super::context::Context;
use super::imb::text as imb_text;
use super::stats::Summary;
use onesided::{Error, ErrorClass, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::PathBuf;

/// The `format` field of the JSON document.
pub(super) const FORMAT: &str = "onesided-bench/1";
/// The header line of the CSV output.
const CSV_HEADER: &str =
    "test,sync,window,datatype,ranks,size,unit,iterations,repetitions,value,min,median,max,p10,p90";

/// One column of a table: its head in the OSU format, and the unit of its records.
#[derive(Debug, Clone, Copy)]
pub(super) struct Column {
    pub head: &'static str,
    pub unit: &'static str,
}

/// Microseconds per operation.
pub(super) const LATENCY: Column = Column {
    head: "Latency (us)",
    unit: "us",
};
/// Microseconds of the first of a kind (the job's first window), beside the later ones' latency.
pub(super) const FIRST: Column = Column {
    head: "First (us)",
    unit: "us first",
};
/// MB/s, 1 MB = 1e6 B.
pub(super) const BANDWIDTH: Column = Column {
    head: "Bandwidth (MB/s)",
    unit: "MB/s",
};

/// Messages per second (put_bw's second column, OSU's `osu_mbw_mr` message rate).
pub(super) const MESSAGE_RATE: Column = Column {
    head: "Messages/s",
    unit: "msg/s",
};

/// What one test prints before its rows, and the fields its records share.
#[derive(Debug, Clone)]
pub(super) struct Table {
    /// The test's name in the records: `onesided bench`'s (`put_latency`) or IMB's.
    pub name: &'static str,
    /// The first header line, without its "# ".
    pub title: String,
    /// Further header lines after the title (the floors' descriptions).
    pub notes: Vec<String>,
    /// `# Window creation: ...`
    pub window: Option<&'static str>,
    /// `# Synchronization: ...`
    pub sync: Option<&'static str>,
    /// `# Datatype: ....`
    pub datatype: Option<&'static str>,
    /// The ranks taking part.
    pub ranks: usize,
    /// Whether the header says `# Ranks: N` (the N-rank tests).
    pub show_ranks: bool,
    pub columns: Vec<Column>,
    /// IMB's header instead of OSU's (then rows are IMB's too: size, repetitions, values).
    pub imb: Option<imb_text::Block>,
    /// The threads of a rate test (`# Threads: T`); its records' units name them (`msg/s t4`),
    /// so that runs with different counts are different series.
    pub threads: Option<usize>,
}

/// One measured value of one size, as the JSON document and the CSV rows carry it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Record {
    pub test: String,
    pub sync: Option<String>,
    pub window: Option<String>,
    pub datatype: Option<String>,
    pub ranks: usize,
    pub size: usize,
    pub unit: String,
    pub iterations: usize,
    pub repetitions: usize,
    pub value: f64,
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub p10: f64,
    pub p90: f64,
}

/// The JSON document.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Document {
    pub format: String,
    pub context: Context,
    pub results: Vec<Record>,
}

fn io_err(e: std::io::Error) -> Error {
    Error::os("writing the results", e)
}

/// The results of a job, on rank 0: printed as they come (osu, csv) or at the end (json, and
/// every format when `all` merges the results of its jobs from files).
#[derive(Debug)]
pub(super) struct Report {
    on: bool,
    format: Format,
    file: Option<PathBuf>,
    /// Whether a table (osu) or the CSV header was printed already.
    started: bool,
    table: Option<Table>,
    records: Vec<Record>,
}

impl Report {
    /// A report of rank `rank` (only 0 reports) in `format`, to `file` as JSON if given;
    /// `after` if the output follows tables printed before (a blank line comes first).
    pub fn new(rank: usize, format: Format, file: Option<PathBuf>, after: bool) -> Report {
        Report {
            on: rank == 0,
            format,
            file,
            started: after,
            table: None,
            records: Vec::new(),
        }
    }

    /// Whether rows print as they come.
    fn streams(&self) -> bool {
        self.on && self.file.is_none() && self.format != Format::Json
    }

    /// Start a test's table: in the osu format, a blank line before every table but the first,
    /// the header lines and the column heads `# Size` and the columns'.
    pub fn table(&mut self, table: Table) -> Result<()> {
        if self.streams() {
            let mut out = std::io::stdout().lock();
            match (self.format, &table.imb) {
                (Format::Osu, Some(block)) => {
                    let heads: Vec<&str> = table.columns.iter().map(|c| c.head).collect();
                    imb_text::header(&mut out, block, &heads).map_err(io_err)?;
                }
                (Format::Osu, None) => {
                    if self.started {
                        writeln!(out).map_err(io_err)?;
                    }
                    write_header(&mut out, &table).map_err(io_err)?;
                }
                _ if !self.started => writeln!(out, "{CSV_HEADER}").map_err(io_err)?,
                _ => {}
            }
            self.started = true;
            out.flush().map_err(io_err)?;
        }
        self.table = Some(table);
        Ok(())
    }

    /// One row of the current table: for each column, the values of the repetitions.
    /// Printed at once in the osu and csv formats, so that a long sweep shows its progress.
    pub fn row(&mut self, size: usize, iterations: usize, columns: &[Vec<f64>]) -> Result<()> {
        if !self.on {
            return Ok(());
        }
        let table = self
            .table
            .as_ref()
            .ok_or_else(|| Error::new(ErrorClass::Intern, "a row of results before its table"))?;
        let records: Vec<Record> = table
            .columns
            .iter()
            .zip(columns)
            .map(|(column, samples)| record(table, column, size, iterations, samples))
            .collect();
        if self.streams() {
            let mut out = std::io::stdout().lock();
            match self.format {
                Format::Osu if table.imb.is_some() => {
                    let values: Vec<f64> = records.iter().map(|r| r.value).collect();
                    imb_text::row(&mut out, size, iterations, &values).map_err(io_err)?;
                }
                Format::Osu => {
                    write!(out, "{size:<10}").map_err(io_err)?;
                    for r in &records {
                        write!(out, "{:>20.2}", r.value).map_err(io_err)?;
                    }
                    writeln!(out).map_err(io_err)?;
                }
                _ => write_csv(&mut out, &records).map_err(io_err)?,
            }
            out.flush().map_err(io_err)?;
        }
        self.records.extend(records);
        Ok(())
    }

    /// Text that only the osu format prints, as it comes (IMB's list of benchmarks before its
    /// tables and its last line after them).
    pub fn text(
        &mut self,
        write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<()> {
        if self.streams() && self.format == Format::Osu {
            let mut out = std::io::stdout().lock();
            write(&mut out).map_err(io_err)?;
            out.flush().map_err(io_err)?;
            self.started = true;
        }
        Ok(())
    }

    /// The end of the job: the JSON document is printed, or written to the file, with
    /// `context` (which json and the file need).
    pub fn finish(self, context: Option<Context>) -> Result<()> {
        if !self.on || self.streams() {
            return Ok(());
        }
        let context = context
            .ok_or_else(|| Error::new(ErrorClass::Intern, "results without their context"))?;
        let doc = Document {
            format: FORMAT.to_owned(),
            context,
            results: self.records,
        };
        match &self.file {
            Some(path) => {
                let text = serde_json::to_string(&doc).map_err(json_err)?;
                std::fs::write(path, text)
                    .map_err(|e| Error::os(&format!("writing {}", path.display()), e))
            }
            None => print_document(Format::Json, &doc),
        }
    }
}

fn json_err(e: serde_json::Error) -> Error {
    Error::new(ErrorClass::Other, format!("JSON of the results: {e}"))
}

/// Prints `doc` to stdout in `format` (json or csv; `all` uses it for the merged results).
pub(super) fn print_document(format: Format, doc: &Document) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, doc).map_err(json_err)?;
            writeln!(out).map_err(io_err)?;
        }
        _ => {
            writeln!(out, "{CSV_HEADER}").map_err(io_err)?;
            write_csv(&mut out, &doc.results).map_err(io_err)?;
        }
    }
    out.flush().map_err(io_err)
}

/// Reads back a document [`Report::finish`] wrote to `path`.
pub(super) fn read_document(path: &std::path::Path) -> Result<Document> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::os(&format!("reading {}", path.display()), e))?;
    serde_json::from_str(&text).map_err(json_err)
}

fn record(
    table: &Table,
    column: &Column,
    size: usize,
    iterations: usize,
    samples: &[f64],
) -> Record {
    let s = Summary::of(samples);
    Record {
        test: table.name.to_owned(),
        sync: table.sync.map(str::to_owned),
        window: table.window.map(str::to_owned),
        datatype: table.datatype.map(str::to_owned),
        ranks: table.ranks,
        size,
        unit: match table.threads {
            Some(t) => format!("{} t{t}", column.unit),
            None => column.unit.to_owned(),
        },
        iterations,
        repetitions: samples.len(),
        value: s.median,
        min: s.min,
        median: s.median,
        max: s.max,
        p10: s.p10,
        p90: s.p90,
    }
}

fn write_header(out: &mut impl Write, t: &Table) -> std::io::Result<()> {
    writeln!(out, "# {}", t.title)?;
    for note in &t.notes {
        writeln!(out, "# {note}")?;
    }
    if let Some(w) = t.window {
        writeln!(out, "# Window creation: {w}")?;
    }
    if let Some(s) = t.sync {
        writeln!(out, "# Synchronization: {s}")?;
    }
    if let Some(d) = t.datatype {
        writeln!(out, "# Datatype: {d}.")?;
    }
    if t.show_ranks {
        writeln!(out, "# Ranks: {}", t.ranks)?;
    }
    if let Some(threads) = t.threads {
        writeln!(out, "# Threads: {threads}")?;
    }
    write!(out, "{:<10}", "# Size")?;
    for c in &t.columns {
        write!(out, "{:>20}", c.head)?;
    }
    writeln!(out)
}

/// A CSV field: quoted if it holds a comma, a quote or a line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn write_csv(out: &mut impl Write, records: &[Record]) -> std::io::Result<()> {
    let opt = |v: &Option<String>| v.as_deref().map(field).unwrap_or_default();
    for r in records {
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            field(&r.test),
            opt(&r.sync),
            opt(&r.window),
            opt(&r.datatype),
            r.ranks,
            r.size,
            field(&r.unit),
            r.iterations,
            r.repetitions,
            r.value,
            r.min,
            r.median,
            r.max,
            r.p10,
            r.p90
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_leave_null_fields_empty_and_quote_commas() {
        let r = Record {
            test: "barrier_latency".into(),
            sync: Some("a,b".into()),
            window: None,
            datatype: None,
            ranks: 4,
            size: 0,
            unit: "us".into(),
            iterations: 10,
            repetitions: 1,
            value: 1.5,
            min: 1.5,
            median: 1.5,
            max: 1.5,
            p10: 1.5,
            p90: 1.5,
        };
        let mut out = Vec::new();
        write_csv(&mut out, &[r]).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "barrier_latency,\"a,b\",,,4,0,us,10,1,1.5,1.5,1.5,1.5,1.5,1.5\n"
        );
        assert_eq!(CSV_HEADER.split(',').count(), 15);
    }
}
