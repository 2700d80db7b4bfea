//! The text tables of the OSU micro-benchmarks, as `osu_put_latency` and friends print them and
//! as `onesided bench` prints them by default:
//!
//! ```text
//! # OSU MPI_Put Latency Test v7.4
//! # Window creation: MPI_Win_allocate
//! # Synchronization: MPI_Win_flush
//! # Size          Latency (us)
//! 1                       0.11
//! ```
//!
//! A table starts at its title line (`# OSU <Title> Test [vX.Y]` or `# onesided <Title> Test`);
//! the `#` lines after it may name the window creation, the synchronization, the datatype
//! (`# Datatype: MPI_CHAR.`) and the ranks (`# Ranks: N`, two when absent); the `# Size` line
//! names the unit of the first value column; each row after it is a size and a value (further
//! columns are ignored). A file may hold several tables; lines that are none of these (blank
//! lines, the launcher's warnings) are skipped.
//!
//! The test's name comes from the title: OSU's one-sided titles map to onesided's test names
//! (`MPI_Put Latency` is `put_latency`, see [`KNOWN`]); any other title becomes its words in
//! lower case joined by `_` (`Fence Latency` is `fence_latency`).

use super::{Context, Error, Record, Run, Series, Unit};

/// Titles (without `OSU`/`onesided`, `Test` and the version) and the test names they map to;
/// compared ignoring ASCII case.
const KNOWN: [(&str, &str); 12] = [
    ("MPI_Put Latency", "put_latency"),
    ("MPI_Get Latency", "get_latency"),
    ("MPI_Put Bandwidth", "put_bw"),
    ("MPI_Get Bandwidth", "get_bw"),
    ("MPI_Put Bi-directional Bandwidth", "put_bibw"),
    ("MPI_Accumulate latency", "acc_latency"),
    ("MPI_Get_accumulate latency", "get_acc_latency"),
    ("MPI_Fetch_and_op latency", "fop_latency"),
    ("MPI_Compare_and_swap latency", "cas_latency"),
    ("Notified Put Latency", "notify_latency"),
    ("Floor: memcpy Bandwidth", "memcpy_bw"),
    ("Floor: Atomic Ping-Pong Latency", "atomic_pingpong"),
];
/// The words a title line starts with.
const PRODUCERS: [&str; 2] = ["OSU", "onesided"];
/// The ranks of a table without a `# Ranks:` line: OSU's one-sided tests run on two.
const DEFAULT_RANKS: u32 = 2;

/// The table being read: its series once its title is seen, its unit once its `# Size` line is.
struct Table {
    series: Series,
    unit_seen: bool,
}

/// The test name of a title line's text (after `# `), or `None` if it is no title line.
fn title(text: &str) -> Option<String> {
    let mut words: Vec<&str> = text.split_whitespace().collect();
    if !PRODUCERS
        .iter()
        .any(|p| words.first().is_some_and(|w| w.eq_ignore_ascii_case(p)))
    {
        return None;
    }
    let version = |w: &&str| {
        w.strip_prefix(['v', 'V'])
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
    };
    if words.last().is_some_and(version) {
        words.pop();
    }
    if !words.last().is_some_and(|w| w.eq_ignore_ascii_case("Test")) || words.len() < 3 {
        return None;
    }
    let name = words[1..words.len() - 1].join(" ");
    let known = KNOWN
        .iter()
        .find(|(t, _)| t.eq_ignore_ascii_case(&name))
        .map(|(_, test)| (*test).to_owned());
    Some(known.unwrap_or_else(|| {
        name.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect::<Vec<_>>()
            .join("_")
    }))
}

/// The unit of a `# Size` line's value column: `(us)`, `MB/s`, `msg/s` or `Messages/s`.
fn unit(column: &str) -> Option<Unit> {
    let column = column.to_ascii_lowercase();
    if column.contains("(us)") {
        Some(Unit::Micros)
    } else if column.contains("mb/s") {
        Some(Unit::MegabytesPerSec)
    } else if column.contains("msg/s") || column.contains("messages/s") {
        Some(Unit::MessagesPerSec)
    } else {
        None
    }
}

/// The value after `key:` of a header line, without a closing period (`MPI_CHAR.`).
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let (k, v) = text.split_once(':')?;
    k.trim().eq_ignore_ascii_case(key).then(|| {
        let v = v.trim();
        v.strip_suffix('.').unwrap_or(v)
    })
}

/// A row: a size and a finite value, then anything.
fn row(line: &str) -> Option<(u64, f64)> {
    let mut tokens = line.split_whitespace();
    let size = tokens.next()?.parse().ok()?;
    let value: f64 = tokens.next()?.parse().ok()?;
    value.is_finite().then_some((size, value))
}

/// Applies the header line `text` (after `#`) to the table being read; `line` numbers errors.
fn header(table: &mut Option<Table>, text: &str, source: &str, line: usize) -> Result<(), Error> {
    if let Some(test) = title(text) {
        *table = Some(Table {
            series: Series {
                test,
                sync: None,
                window: None,
                datatype: None,
                ranks: DEFAULT_RANKS,
                unit: Unit::Micros,
            },
            unit_seen: false,
        });
        return Ok(());
    }
    let Some(t) = table.as_mut() else {
        return Ok(());
    };
    if let Some(v) = field(text, "Synchronization") {
        t.series.sync = Some(v.to_owned());
    } else if let Some(v) = field(text, "Window creation") {
        t.series.window = Some(v.to_owned());
    } else if let Some(v) = field(text, "Datatype") {
        t.series.datatype = Some(v.to_owned());
    } else if let Some(v) = field(text, "Ranks") {
        t.series.ranks = v
            .parse()
            .map_err(|_| Error::new(format!("{source}:{line}: `{v}` is not a number of ranks")))?;
    } else if let Some(column) = text.strip_prefix("Size") {
        t.series.unit = unit(column).ok_or_else(|| {
            Error::new(format!(
                "{source}:{line}: unknown column `{}`: expected Latency (us), Bandwidth (MB/s) \
                 or Messages/s",
                column.trim()
            ))
        })?;
        t.unit_seen = true;
    }
    Ok(())
}

/// Parses the OSU text `text` of the file named `source`.
pub(super) fn parse(source: &str, text: &str) -> Result<Run, Error> {
    let mut table: Option<Table> = None;
    let mut records = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix('#') {
            header(&mut table, rest.trim(), source, i + 1)?;
        } else if let (Some(t), Some((size, value))) = (&table, row(line))
            && t.unit_seen
        {
            records.push(Record {
                series: t.series.clone(),
                size,
                value,
                min: None,
                median: None,
                max: None,
                p10: None,
                p90: None,
            });
        }
    }
    Ok(Run {
        source: source.to_owned(),
        format: "OSU text".to_owned(),
        context: Context::default(),
        records,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record's test, sync, datatype, ranks, unit, size and value.
    type Row<'a> = (
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
        u32,
        Unit,
        u64,
        f64,
    );

    #[test]
    fn titles_map_to_test_names() {
        assert_eq!(
            title("OSU MPI_Put Latency Test v7.4").as_deref(),
            Some("put_latency")
        );
        assert_eq!(
            title("OSU MPI_Compare_and_swap latency Test v7.4").as_deref(),
            Some("cas_latency")
        );
        assert_eq!(
            title("osu mpi_put bi-directional bandwidth test v5.6.2").as_deref(),
            Some("put_bibw")
        );
        assert_eq!(
            title("onesided Fence Latency Test").as_deref(),
            Some("fence_latency")
        );
        assert_eq!(
            title("onesided Floor: memcpy Bandwidth Test").as_deref(),
            Some("memcpy_bw")
        );
        assert_eq!(title("Synchronization: MPI_Win_flush"), None);
        assert_eq!(title("OSU Test"), None);
    }

    #[test]
    fn reads_several_tables_and_skips_stray_lines() {
        let text = "\
[warn] mpirun: a warning before anything
# OSU MPI_Put Latency Test v7.4
# Window creation: MPI_Win_allocate
# Synchronization: MPI_Win_flush
# Datatype: MPI_CHAR.
# Size          Latency (us)
1                       0.11
2 more processes have sent help message
2                       0.12

# OSU MPI_Get Bandwidth Test v7.4
# Window creation: MPI_Win_create
# Synchronization: MPI_Win_lock/unlock
# Size      Bandwidth (MB/s)
64                    123.45
# onesided Fence Latency Test
# Ranks: 4
# Size          Latency (us)
8                       1.50
";
        let run = parse("osu.txt", text).unwrap();
        let got: Vec<Row> = run
            .records
            .iter()
            .map(|r| {
                let s = &r.series;
                let (sync, dt) = (s.sync.as_deref(), s.datatype.as_deref());
                (s.test.as_str(), sync, dt, s.ranks, s.unit, r.size, r.value)
            })
            .collect();
        let flush = Some("MPI_Win_flush");
        let char = Some("MPI_CHAR");
        let lock = Some("MPI_Win_lock/unlock");
        assert_eq!(
            got,
            [
                ("put_latency", flush, char, 2, Unit::Micros, 1, 0.11),
                ("put_latency", flush, char, 2, Unit::Micros, 2, 0.12),
                ("get_bw", lock, None, 2, Unit::MegabytesPerSec, 64, 123.45),
                ("fence_latency", None, None, 4, Unit::Micros, 8, 1.5),
            ]
        );
        assert_eq!(
            run.records[2].series.window.as_deref(),
            Some("MPI_Win_create")
        );
    }

    #[test]
    fn rows_before_a_table_are_skipped_and_unknown_columns_are_errors() {
        let run = parse("x.txt", "1 2.0\n# Size Latency (us)\n1 2.0\n").unwrap();
        assert!(run.records.is_empty());
        let e = parse(
            "x.txt",
            "# OSU MPI_Put Latency Test\n# Size  Furlongs\n1 2\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("x.txt:2: unknown column `Furlongs`"), "{e}");
    }
}
