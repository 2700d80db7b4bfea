//! The text tables of the Intel(R) MPI Benchmarks (IMB-RMA, and IMB-MPI1 or IMB-EXT alike), as
//! IMB prints them and as `onesided bench imb` prints them:
//!
//! ```text
//! #---------------------------------------------------
//! # Benchmarking Unidir_put
//! # #processes = 2
//! #---------------------------------------------------
//! #
//! #    MODE: AGGREGATE
//! #
//!        #bytes #repetitions      t[usec]   Mbytes/sec
//!             8         1000         2.23         3.59
//! ```
//!
//! A table starts at `# Benchmarking NAME`; `# #processes = N` gives its ranks, `MODE:` its
//! mode (kept as the series' synchronization); the line of column heads (`#bytes`,
//! `#repetitions`, then the figures) ends the header, and every line of numbers after it is a
//! row. Each figure column becomes a series of its own: `t[usec]` is the benchmark's latency
//! (`Unidir_put`, in us), `Mbytes/sec` its bandwidth (MB/s), `Msg/sec` its message rate; any
//! other `NAME[usec]` column is a latency named after both (`All_put_all t_max`,
//! `Truly_passive_put t_ovrl`). Other columns (`overlap[%]`, `defects`) are skipped, and so are
//! lines that are none of these (IMB's preamble, `Attention` notes, the launcher's warnings).

use super::{Context, Error, Record, Run, Series, Unit};

/// What a header line says: the start of a table, or something about the current one.
const BENCHMARKING: &str = "Benchmarking ";
const PROCESSES: &str = "#processes = ";
const MODE: &str = "MODE:";

/// Whether `text` is IMB's output: a line starting a table.
pub(super) fn recognizes(text: &str) -> bool {
    text.lines().any(|l| {
        l.trim()
            .strip_prefix('#')
            .is_some_and(|rest| rest.trim_start().starts_with(BENCHMARKING))
    })
}

/// A figure column: what it measures and the name of its series.
#[derive(Debug, Clone, PartialEq)]
enum Column {
    /// `#bytes`: the message size.
    Bytes,
    /// A figure: unit and the suffix of the series' test name (`t_max`), if any.
    Figure(Unit, Option<String>),
    /// `#repetitions` and columns this reader does not take.
    Skip,
}

fn column(head: &str) -> Column {
    match head {
        "#bytes" => Column::Bytes,
        "t[usec]" => Column::Figure(Unit::Micros, None),
        "Mbytes/sec" => Column::Figure(Unit::MegabytesPerSec, None),
        "Msg/sec" => Column::Figure(Unit::MessagesPerSec, None),
        h => match h.strip_suffix("[usec]") {
            Some(name) if !name.is_empty() => Column::Figure(Unit::Micros, Some(name.to_owned())),
            _ => Column::Skip,
        },
    }
}

/// The table being read.
struct Table {
    name: String,
    processes: u32,
    mode: Option<String>,
    /// The columns once their heads are read.
    columns: Option<Vec<Column>>,
}

/// Parses the IMB text `text` of the file named `source`.
pub(super) fn parse(source: &str, text: &str) -> Result<Run, Error> {
    let mut table: Option<Table> = None;
    let mut records = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix('#').map(str::trim)
            && !line.starts_with("#bytes")
            && !line.starts_with("#repetitions")
        {
            if let Some(name) = rest.strip_prefix(BENCHMARKING) {
                table = Some(Table {
                    name: name.trim().to_owned(),
                    processes: 2,
                    mode: None,
                    columns: None,
                });
            } else if let Some(t) = table.as_mut() {
                if let Some(n) = rest.strip_prefix(PROCESSES) {
                    // `# #processes = 4; rank order (rowwise):` too.
                    let n = n.split(|c: char| !c.is_ascii_digit()).next().unwrap_or("");
                    t.processes = n.parse().map_err(|_| {
                        Error::new(format!(
                            "{source}:{}: `{rest}`: no number of processes",
                            i + 1
                        ))
                    })?;
                } else if let Some(mode) = rest.strip_prefix(MODE) {
                    t.mode = Some(mode.trim().to_owned());
                }
            }
            continue;
        }
        let Some(t) = table.as_mut() else { continue };
        if line.starts_with("#bytes") || line.starts_with("#repetitions") {
            t.columns = Some(line.split_whitespace().map(column).collect());
            continue;
        }
        if let Some(columns) = &t.columns {
            records.extend(row(t, columns, line));
        }
    }
    Ok(Run {
        source: source.to_owned(),
        format: "IMB text".to_owned(),
        context: Context::default(),
        records,
    })
}

/// The records of one row of `table` (none if it is not a row of numbers of every column).
fn row(table: &Table, columns: &[Column], line: &str) -> Vec<Record> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    if tokens.len() < columns.len() || tokens.iter().any(|t| t.parse::<f64>().is_err()) {
        return Vec::new();
    }
    let size = columns
        .iter()
        .position(|c| *c == Column::Bytes)
        .and_then(|i| tokens[i].parse::<u64>().ok())
        .unwrap_or(0);
    columns
        .iter()
        .zip(&tokens)
        .filter_map(|(c, token)| match c {
            Column::Figure(unit, suffix) => {
                let test = match suffix {
                    Some(s) => format!("{} {s}", table.name),
                    None => table.name.clone(),
                };
                Some(Record {
                    series: Series {
                        test,
                        sync: table.mode.clone(),
                        window: None,
                        datatype: None,
                        ranks: table.processes,
                        unit: *unit,
                    },
                    size,
                    value: token.parse().ok()?,
                    min: None,
                    median: None,
                    max: None,
                    p10: None,
                    p90: None,
                })
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMB: &str = "\
#----------------------------------------------------------------
#    Intel(R) MPI Benchmarks 2018, MPI-RMA part
#----------------------------------------------------------------
# List of Benchmarks to run:

# Unidir_put

#---------------------------------------------------
# Benchmarking Unidir_put 
# #processes = 2 
# ( 2 additional processes waiting in MPI_Barrier)
#---------------------------------------------------
#
#    MODE: AGGREGATE 
#
       #bytes #repetitions      t[usec]   Mbytes/sec
            0         1000         0.02         0.00
            8         1000         2.23         3.59
Attention, msg size 9 truncated to 8

#----------------------------------------------------------------
# Benchmarking All_put_all 
# #processes = 4 
#----------------------------------------------------------------
       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]
            8         1000         2.09         2.11         2.10

#---------------------------------------------------
# Benchmarking Truly_passive_put 
# #processes = 2 
#---------------------------------------------------
       #bytes #repetitions t_pure[usec] t_ovrl[usec]
           64         1000         2.67         2.85


# All processes entering MPI_Finalize
";

    /// A record's test, sync, ranks, unit, size and value.
    type Row<'a> = (String, Option<&'a str>, u32, Unit, u64, f64);

    fn rows(run: &Run) -> Vec<Row<'_>> {
        run.records
            .iter()
            .map(|r| {
                let s = &r.series;
                (
                    s.test.clone(),
                    s.sync.as_deref(),
                    s.ranks,
                    s.unit,
                    r.size,
                    r.value,
                )
            })
            .collect()
    }

    #[test]
    fn every_figure_column_is_a_series() {
        assert!(recognizes(IMB));
        let run = parse("imb.txt", IMB).unwrap();
        let agg = Some("AGGREGATE");
        let (us, mbs) = (Unit::Micros, Unit::MegabytesPerSec);
        assert_eq!(
            rows(&run),
            [
                ("Unidir_put".into(), agg, 2, us, 0, 0.02),
                ("Unidir_put".into(), agg, 2, mbs, 0, 0.0),
                ("Unidir_put".into(), agg, 2, us, 8, 2.23),
                ("Unidir_put".into(), agg, 2, mbs, 8, 3.59),
                ("All_put_all t_min".into(), None, 4, us, 8, 2.09),
                ("All_put_all t_max".into(), None, 4, us, 8, 2.11),
                ("All_put_all t_avg".into(), None, 4, us, 8, 2.10),
                ("Truly_passive_put t_pure".into(), None, 2, us, 64, 2.67),
                ("Truly_passive_put t_ovrl".into(), None, 2, us, 64, 2.85),
            ]
        );
    }

    #[test]
    fn tables_without_sizes_and_with_rank_orders_are_read() {
        let text = "\
# Benchmarking Barrier 
# #processes = 4; rank order (rowwise): 
       #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]   overlap[%]
         1000         1.00         3.00         2.00        50.00
";
        let run = parse("mpi1.txt", text).unwrap();
        let got = rows(&run);
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[1],
            ("Barrier t_max".into(), None, 4, Unit::Micros, 0, 3.0)
        );
        assert!(!recognizes("# OSU MPI_Put Latency Test v7.4\n"));
    }
}
