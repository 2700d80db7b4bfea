//! onesided's JSON results (`onesided bench --format json`): a document of format
//! `onesided-bench/1` with a `context` object and a `results` array, one object per test and
//! size. Fields this reader does not know are ignored; absent optional fields are `null`.

use super::{Context, Error, Record, Run, Series, Unit};
use serde::Deserialize;

/// The format this reader understands, up to the version number.
const FORMAT: &str = "onesided-bench/";
/// The versions of the format this reader understands.
const VERSIONS: [&str; 1] = ["1"];
/// The ranks of a record that names none and whose context names none: OSU's two.
const DEFAULT_RANKS: u32 = 2;

/// The whole document.
#[derive(Deserialize)]
struct Document {
    format: String,
    #[serde(default)]
    context: Context,
    results: Vec<Entry>,
}

/// One object of `results`.
#[derive(Deserialize)]
struct Entry {
    test: String,
    sync: Option<String>,
    window: Option<String>,
    datatype: Option<String>,
    ranks: Option<u32>,
    size: u64,
    unit: String,
    value: f64,
    min: Option<f64>,
    median: Option<f64>,
    max: Option<f64>,
    p10: Option<f64>,
    p90: Option<f64>,
}

/// Parses the JSON document `text` of the file named `source`.
pub(super) fn parse(source: &str, text: &str) -> Result<Run, Error> {
    let doc: Document =
        serde_json::from_str(text).map_err(|e| Error::new(format!("{source}: {e}")))?;
    let version = doc.format.strip_prefix(FORMAT);
    if !version.is_some_and(|v| VERSIONS.contains(&v)) {
        return Err(Error::new(format!(
            "{source}: format `{}` is not one this onesided reads ({FORMAT}{})",
            doc.format,
            VERSIONS.join(", ")
        )));
    }
    let default_ranks = doc.context.ranks.unwrap_or(DEFAULT_RANKS);
    let records = doc
        .results
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            // A unit may name which of a test's columns it is: `us flag`, `us t_max`.
            let (symbol, column) = match r.unit.trim().split_once(char::is_whitespace) {
                Some((symbol, column)) => (symbol, Some(column.trim())),
                None => (r.unit.as_str(), None),
            };
            let unit = Unit::from_symbol(symbol).ok_or_else(|| {
                Error::new(format!(
                    "{source}: results[{i}]: unknown unit `{}` (us, MB/s, msg/s, KiB or fd, each \
                     optionally followed by the name of a column)",
                    r.unit
                ))
            })?;
            let test = match column {
                Some(c) => format!("{} {c}", r.test),
                None => r.test,
            };
            Ok(Record {
                series: Series {
                    test,
                    sync: r.sync,
                    window: r.window,
                    datatype: r.datatype,
                    ranks: r.ranks.unwrap_or(default_ranks),
                    unit,
                },
                size: r.size,
                value: r.value,
                min: r.min,
                median: r.median,
                max: r.max,
                p10: r.p10,
                p90: r.p90,
            })
        })
        .collect::<Result<_, Error>>()?;
    Ok(Run {
        source: source.to_owned(),
        format: doc.format,
        context: doc.context,
        records,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_documented_format_and_ignores_unknown_fields() {
        let text = r#"{
          "format": "onesided-bench/1",
          "context": {"onesided": "0.1.0", "transport": "shm", "provider": null, "ranks": 2,
                      "nodes": 1, "cpu": "x", "binding": "core", "host": "h",
                      "started": "2025-01-01T00:00:00Z", "extra": [1, 2]},
          "results": [
            {"test": "put_latency", "sync": "MPI_Win_flush", "window": "MPI_Win_allocate",
             "datatype": null, "ranks": 2, "size": 8, "unit": "us", "iterations": 10,
             "repetitions": 5, "value": 0.11, "min": 0.1, "median": 0.11, "max": 0.13,
             "p10": 0.1, "p90": 0.12, "new_field": "ignored"},
            {"test": "put_bw", "size": 64, "unit": "MB/s", "value": 900.5}
          ]
        }"#;
        let run = parse("a.json", text).unwrap();
        assert_eq!(run.format, "onesided-bench/1");
        assert_eq!(run.context.host.as_deref(), Some("h"));
        assert_eq!(run.records.len(), 2);
        assert_eq!(run.records[0].series.sync.as_deref(), Some("MPI_Win_flush"));
        assert_eq!(run.records[0].median, Some(0.11));
        assert_eq!(run.records[1].series.unit, Unit::MegabytesPerSec);
        assert_eq!(run.records[1].series.ranks, 2);
        assert_eq!(run.records[1].min, None);
    }

    #[test]
    fn rejects_other_formats_and_units() {
        let other = r#"{"format": "onesided-bench/2", "results": []}"#;
        let e = parse("a.json", other).unwrap_err().to_string();
        assert!(e.contains("onesided-bench/2"), "{e}");
        let unit = r#"{"format": "onesided-bench/1",
            "results": [{"test": "t", "size": 1, "unit": "s", "value": 1}]}"#;
        let e = parse("a.json", unit).unwrap_err().to_string();
        assert!(e.contains("unknown unit `s`"), "{e}");
    }

    #[test]
    fn a_unit_naming_a_column_names_a_series_of_its_own() {
        let text = r#"{"format": "onesided-bench/1", "results": [
            {"test": "notify_latency", "size": 8, "unit": "us", "value": 1},
            {"test": "notify_latency", "size": 8, "unit": "us flag", "value": 2},
            {"test": "All_put_all", "size": 8, "unit": "us t_max", "value": 3}]}"#;
        let run = parse("a.json", text).unwrap();
        let tests: Vec<(&str, Unit)> = run
            .records
            .iter()
            .map(|r| (r.series.test.as_str(), r.series.unit))
            .collect();
        assert_eq!(
            tests,
            [
                ("notify_latency", Unit::Micros),
                ("notify_latency flag", Unit::Micros),
                ("All_put_all t_max", Unit::Micros),
            ]
        );
    }
}
