//! `onesided bench compare` and `onesided bench plot` on saved runs: two JSON runs written here,
//! an OSU text file as `osu_put_latency` prints it, and a real `onesided bench put_latency` run.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The sizes of the JSON fixtures and of the real run.
const SIZES: [u64; 7] = [1, 2, 4, 8, 16, 32, 64];

/// Runs `onesided` with `args` in `dir`.
fn onesided(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_onesided"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running onesided")
}

/// The stdout of a run that must succeed.
fn ok(out: Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    stdout
}

/// The stderr of a run that must fail with exit code 1.
fn fails(out: Output) -> String {
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A JSON run from `host`: put_latency (flush, allocate) of `latency` at every size and put_bw
/// of `bandwidth` times the size.
fn json_run(host: &str, latency: f64, bandwidth: f64) -> String {
    let mut results = Vec::new();
    for size in SIZES {
        results.push(format!(
            r#"{{"test": "put_latency", "sync": "MPI_Win_flush", "window": "MPI_Win_allocate",
                "datatype": "MPI_CHAR", "ranks": 2, "size": {size}, "unit": "us",
                "iterations": 100, "repetitions": 5, "value": {latency}, "min": {latency},
                "median": {latency}, "max": {latency}, "p10": {latency}, "p90": {latency}}}"#
        ));
        let bw = bandwidth * size as f64;
        results.push(format!(
            r#"{{"test": "put_bw", "sync": "MPI_Win_flush", "window": "MPI_Win_allocate",
                "datatype": null, "ranks": 2, "size": {size}, "unit": "MB/s", "value": {bw},
                "future_field": {{"ignored": true}}}}"#
        ));
    }
    format!(
        r#"{{"format": "onesided-bench/1",
            "context": {{"onesided": "0.1.0", "transport": "shm", "provider": null, "ranks": 2,
                         "nodes": 1, "cpu": "Test CPU", "binding": "core", "host": "{host}",
                         "started": "2025-01-01T00:00:00Z"}},
            "results": [{}]}}"#,
        results.join(",\n")
    )
}

/// An OSU text file as `mpirun -n 2 osu_put_latency` leaves it, a launcher warning included.
const OSU_TEXT: &str = "\
Warning: Permanently added 'node2' to the list of known hosts.
# OSU MPI_Put Latency Test v7.4
# Window creation: MPI_Win_allocate
# Synchronization: MPI_Win_flush
# Datatype: MPI_CHAR.
# Size          Latency (us)
1                       4.00
2                       4.00
4                       0.50
[node1:1234] 1 more process has sent help message help-mpi-btl-openib.txt
8                       1.00
";

/// The directory of the fixtures: `a.json` (latency 2, bandwidth 10 per byte), `b.json`
/// (latency 1, bandwidth 25 per byte) and `osu.txt`.
fn fixtures() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    fs::write(dir.path().join("a.json"), json_run("alpha", 2.0, 10.0)).unwrap();
    fs::write(dir.path().join("b.json"), json_run("beta", 1.0, 25.0)).unwrap();
    fs::write(dir.path().join("osu.txt"), OSU_TEXT).unwrap();
    dir
}

/// The table rows of a comparison: size, A, B, B/A and the Better column.
fn rows(table: &str) -> Vec<(u64, f64, f64, f64, String)> {
    table
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            let num = |i: usize| t[i].parse::<f64>().unwrap_or_else(|_| panic!("{l}"));
            (
                t[0].parse().unwrap(),
                num(1),
                num(2),
                num(3),
                t[4..].join(" "),
            )
        })
        .collect()
}

/// The rows of the table whose header line starts with `# test`.
fn table_of(out: &str, test: &str) -> Vec<(u64, f64, f64, f64, String)> {
    let start = out
        .find(&format!("\n# {test},"))
        .unwrap_or_else(|| panic!("no {test} table in\n{out}"));
    let table = &out[start + 1..];
    let end = table.find("\n\n").unwrap_or(table.len());
    rows(&table[..end])
}

#[test]
fn compare_two_json_runs_prints_ratios_and_the_better_run() {
    let dir = fixtures();
    let out = ok(onesided(
        dir.path(),
        &["bench", "compare", "a.json", "b.json"],
    ));
    assert!(out.starts_with("# A: a.json (onesided-bench/1: onesided 0.1.0, shm"));
    assert!(out.contains("host alpha"), "{out}");
    assert!(
        out.contains("\n# B: b.json (") && out.contains("host beta"),
        "{out}"
    );
    assert!(out.contains("Latency (us); lower is better"), "{out}");
    assert!(out.contains("Bandwidth (MB/s); higher is better"), "{out}");
    let latency = table_of(&out, "put_latency");
    let sizes: Vec<u64> = latency.iter().map(|r| r.0).collect();
    assert_eq!(sizes, SIZES);
    for (_, a, b, ratio, better) in latency {
        assert_eq!((a, b, ratio, better.as_str()), (2.0, 1.0, 0.5, "B 2.00x"));
    }
    for (size, a, b, ratio, better) in table_of(&out, "put_bw") {
        assert_eq!((a, b), (10.0 * size as f64, 25.0 * size as f64));
        assert_eq!((ratio, better.as_str()), (2.5, "B 2.50x"));
    }
    let reverse = ok(onesided(
        dir.path(),
        &["bench", "compare", "b.json", "a.json"],
    ));
    for (_, a, b, ratio, better) in table_of(&reverse, "put_latency") {
        assert_eq!((a, b, ratio, better.as_str()), (1.0, 2.0, 2.0, "A 2.00x"));
    }
    let median = ok(onesided(
        dir.path(),
        &["bench", "compare", "a.json", "b.json", "--metric", "median"],
    ));
    assert!(
        median.contains("Latency (us), median; lower is better"),
        "{median}"
    );
    assert_eq!(table_of(&median, "put_latency").len(), SIZES.len());
}

#[test]
fn compare_json_with_osu_text() {
    let dir = fixtures();
    let out = ok(onesided(
        dir.path(),
        &["bench", "compare", "a.json", "osu.txt"],
    ));
    assert!(out.contains("\n# B: osu.txt (OSU text)\n"), "{out}");
    assert!(
        out.contains("# put_latency, MPI_Win_flush, MPI_Win_allocate, MPI_CHAR, 2 ranks"),
        "{out}"
    );
    let got: Vec<(u64, f64, String)> = table_of(&out, "put_latency")
        .into_iter()
        .map(|(size, _, _, ratio, better)| (size, ratio, better))
        .collect();
    let want = [
        (1, 2.0, "A 2.00x"),
        (2, 2.0, "A 2.00x"),
        (4, 0.25, "B 4.00x"),
        (8, 0.5, "B 2.00x"),
    ];
    let want: Vec<(u64, f64, String)> = want.map(|(s, r, b)| (s, r, b.to_owned())).into();
    assert_eq!(got, want);
    assert!(!out.contains("put_bw"), "{out}");
    let e = fails(onesided(
        dir.path(),
        &["bench", "compare", "a.json", "osu.txt", "--metric", "p90"],
    ));
    assert!(e.contains("OSU text has only `value`"), "{e}");
}

#[test]
fn compare_fails_when_nothing_matches() {
    let dir = fixtures();
    let other = OSU_TEXT.replace("MPI_Win_flush", "MPI_Win_lock/unlock");
    fs::write(dir.path().join("lock.txt"), other).unwrap();
    let e = fails(onesided(
        dir.path(),
        &["bench", "compare", "osu.txt", "lock.txt"],
    ));
    assert!(e.starts_with("onesided bench compare: no test"), "{e}");
    assert!(
        e.contains("lock.txt has:\n  put_latency, MPI_Win_lock/unlock"),
        "{e}"
    );
    let e = fails(onesided(
        dir.path(),
        &["bench", "compare", "a.json", "none.txt"],
    ));
    assert!(
        e.starts_with("onesided bench compare: reading none.txt: "),
        "{e}"
    );
}

#[test]
fn compare_and_plot_a_real_run() {
    let dir = fixtures();
    let real = ok(onesided(
        dir.path(),
        &[
            "bench",
            "put_latency",
            "-m",
            "1:64",
            "-i",
            "100",
            "-x",
            "10",
        ],
    ));
    fs::write(dir.path().join("real.txt"), &real).unwrap();
    let out = ok(onesided(
        dir.path(),
        &["bench", "compare", "a.json", "real.txt"],
    ));
    let rows = table_of(&out, "put_latency");
    assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), SIZES);
    for (_, a, b, ratio, better) in rows {
        assert_eq!(a, 2.0);
        assert!(
            (ratio - b / a).abs() <= 0.005 + 1e-9,
            "{b} / {a} printed as {ratio}"
        );
        let winner = if b < a { "B" } else { "A" };
        assert!(better.starts_with(winner) || better == "same", "{better}");
    }

    let svg = plot(dir.path(), &["a.json", "b.json", "osu.txt", "real.txt"]);
    for name in ["a.json", "b.json", "osu.txt", "real.txt"] {
        assert!(
            svg.contains(&format!("{name}: put_latency, MPI_Win_flush")),
            "{name}"
        );
    }
}

/// Plots `files` in `dir` into `out.svg` and returns the SVG after checking its frame, its two
/// panels and one line per series (each as many points as its sizes).
fn plot(dir: &Path, files: &[&str]) -> String {
    let mut args = vec!["bench", "plot"];
    args.extend(files);
    args.extend(["-o", "out.svg"]);
    ok(onesided(dir, &args));
    let path: PathBuf = dir.join("out.svg");
    let svg = fs::read_to_string(path).expect("out.svg written");
    assert!(svg.trim_start().starts_with("<svg"), "{svg}");
    assert!(svg.trim_end().ends_with("</svg>"), "{svg}");
    assert!(svg.contains("Latency (us) against message size"));
    assert!(svg.contains("Bandwidth (MB/s) against message size"));
    svg
}

/// The number of points of each data line of `svg` (2-pixel polylines of more than two
/// points; the legend's samples have two).
fn data_lines(svg: &str) -> Vec<usize> {
    svg.lines()
        .filter(|l| l.starts_with("<polyline") && l.contains(r#"stroke-width="2""#))
        .filter_map(|l| l.split("points=\"").nth(1)?.split('"').next())
        .map(|points| points.split_whitespace().count())
        .filter(|&n| n > 2)
        .collect()
}

#[test]
fn plot_draws_a_line_per_series_with_a_legend() {
    let dir = fixtures();
    let svg = plot(dir.path(), &["a.json", "b.json", "osu.txt"]);
    for label in [
        "a.json: put_latency, MPI_Win_flush",
        "b.json: put_latency, MPI_Win_flush",
        "osu.txt: put_latency, MPI_Win_flush",
        "a.json: put_bw, MPI_Win_flush",
        "b.json: put_bw, MPI_Win_flush",
    ] {
        assert!(svg.contains(label), "no legend entry {label}");
    }
    assert_eq!(data_lines(&svg), [7, 7, 4, 7, 7]);
    assert!(svg.contains(">\n64\n</text>"), "a size label of 64");
    let e = fails(onesided(
        dir.path(),
        &["bench", "plot", "a.json", "-o", "out.png"],
    ));
    assert!(
        e.contains("out.png: the output must be an .svg file"),
        "{e}"
    );
}
