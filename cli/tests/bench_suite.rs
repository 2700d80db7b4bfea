//! `onesided bench`: every test runs as real jobs through the launcher (started directly, the
//! command starts itself as a job), with few iterations and small sizes; the tests check the
//! output formats (OSU's headers, the JSON document, the CSV rows), the N-rank tests and the
//! refusals. Performance is never asserted.

use serde_json::Value;
use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(120);

/// Runs `onesided ARGS...` to completion (killed and failed after [`LIMIT`]).
fn onesided(args: &[&str]) -> Output {
    onesided_with(args, &[])
}

/// [`onesided`] with the variables `env` set.
fn onesided_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_onesided"))
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn onesided");
    let read = |mut r: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut v = Vec::new();
            r.read_to_end(&mut v).expect("read output");
            v
        })
    };
    let out = read(Box::new(child.stdout.take().expect("stdout")));
    let err = read(Box::new(child.stderr.take().expect("stderr")));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("onesided {args:?} still running after {LIMIT:?}");
        }
        thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: out.join().expect("stdout"),
        stderr: err.join().expect("stderr"),
    }
}

/// `onesided bench ARGS...`, which must succeed; its stdout.
fn bench(args: &[&str]) -> String {
    let mut all = vec!["bench"];
    all.extend(args);
    let out = onesided(&all);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "onesided {all:?}: {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `onesided bench ARGS...`, which must fail with a usage error; its stderr.
fn refused(args: &[&str]) -> String {
    let mut all = vec!["bench"];
    all.extend(args);
    let out = onesided(&all);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "onesided {all:?}: {stderr}");
    stderr
}

const SMALL: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

/// The records of `test` in a parsed document.
fn records<'a>(doc: &'a Value, test: &str) -> Vec<&'a Value> {
    doc["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["test"] == test)
        .collect()
}

/// Every statistic of `r` is positive and ordered.
fn check_values(r: &Value) {
    let f = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k} of {r}"));
    assert!(f("min") > 0.0, "{r}");
    assert!(f("min") <= f("p10") && f("p10") <= f("median"), "{r}");
    assert!(f("median") <= f("p90") && f("p90") <= f("max"), "{r}");
    assert_eq!(f("value"), f("median"), "{r}");
}

fn sizes_of(records: &[&Value]) -> Vec<usize> {
    records
        .iter()
        .map(|r| r["size"].as_u64().expect("size") as usize)
        .collect()
}

#[test]
fn bench_json_has_the_context_and_a_record_per_size() {
    let out = bench(&[
        "put_latency",
        "-m",
        "1:64",
        "-i",
        "50",
        "-x",
        "5",
        "--format",
        "json",
        "-r",
        "3",
    ]);
    let doc: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(doc["format"], "onesided-bench/1");
    let c = &doc["context"];
    assert_eq!(c["onesided"], env!("CARGO_PKG_VERSION"));
    assert_eq!(c["transport"], "shm");
    assert_eq!(c["provider"], Value::Null);
    assert_eq!(
        (c["ranks"].as_u64(), c["nodes"].as_u64()),
        (Some(2), Some(1))
    );
    for key in ["cpu", "binding", "host"] {
        assert!(c[key].as_str().is_some_and(|s| !s.is_empty()), "{key}: {c}");
    }
    let started = c["started"].as_str().expect("started");
    assert!(
        started.len() == 20 && started.ends_with('Z') && &started[10..11] == "T",
        "{started}"
    );
    let recs = records(&doc, "put_latency");
    assert_eq!(sizes_of(&recs), SMALL);
    for r in recs {
        check_values(r);
        assert_eq!(r["sync"], "MPI_Win_flush");
        assert_eq!(r["window"], "MPI_Win_allocate");
        assert_eq!(r["datatype"], "MPI_CHAR");
        assert_eq!(r["unit"], "us");
        assert_eq!(
            (r["ranks"].as_u64(), r["iterations"].as_u64()),
            (Some(2), Some(50))
        );
        assert_eq!(r["repetitions"], 3);
    }
}

#[test]
fn bench_json_of_accumulate_and_n_rank_tests() {
    let out = bench(&[
        "acc_latency",
        "-m",
        "1:64",
        "-i",
        "30",
        "-x",
        "2",
        "--format",
        "json",
    ]);
    let doc: Value = serde_json::from_str(&out).expect("JSON");
    let recs = records(&doc, "acc_latency");
    // 32-bit elements: the sizes below one element are skipped, as OSU skips them.
    assert_eq!(sizes_of(&recs), [4, 8, 16, 32, 64]);
    recs.iter().for_each(|r| check_values(r));
    assert_eq!(recs[0]["datatype"], "MPI_INT");
    assert_eq!(recs[0]["repetitions"], 5);

    // `-T double`: 64-bit elements, so the sweep starts at 8 bytes; fetch_and_op moves one.
    for (test, sizes) in [
        ("get_acc_latency", &[8, 16, 32, 64][..]),
        ("fop_latency", &[8]),
    ] {
        let mut args = vec![
            test, "-T", "double", "-i", "30", "-x", "2", "--format", "json",
        ];
        if test == "get_acc_latency" {
            args.extend(["-m", "1:64"]);
        }
        let out = bench(&args);
        let doc: Value = serde_json::from_str(&out).expect("JSON");
        let recs = records(&doc, test);
        assert_eq!(sizes_of(&recs), sizes, "{out}");
        recs.iter().for_each(|r| check_values(r));
        assert_eq!(recs[0]["datatype"], "MPI_DOUBLE");
    }

    let out = bench(&[
        "alltoall_put",
        "-n",
        "3",
        "-m",
        "1:64",
        "-i",
        "5",
        "-x",
        "1",
        "--format",
        "json",
        "-r",
        "2",
    ]);
    let doc: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(doc["context"]["ranks"], 3);
    let recs = records(&doc, "alltoall_put");
    let (lat, bw): (Vec<&Value>, Vec<&Value>) = recs.iter().partition(|r| r["unit"] == "us");
    assert_eq!(sizes_of(&lat), SMALL);
    assert_eq!(sizes_of(&bw), SMALL);
    assert!(bw.iter().all(|r| r["unit"] == "MB/s" && r["ranks"] == 3));
    recs.iter().for_each(|r| check_values(r));
}

#[test]
fn bench_csv_has_a_header_and_one_row_per_size() {
    let out = bench(&[
        "get_bw", "-m", "1:64", "-i", "5", "-x", "1", "-W", "4", "--format", "csv",
    ]);
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some(
            "test,sync,window,datatype,ranks,size,unit,iterations,repetitions,value,min,median,max,p10,p90"
        )
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), SMALL.len(), "{out}");
    for (row, size) in rows.iter().zip(SMALL) {
        assert_eq!(row.len(), 15, "{row:?}");
        assert_eq!(
            row[..9],
            [
                "get_bw",
                "MPI_Win_flush",
                "MPI_Win_allocate",
                "MPI_CHAR",
                "2",
                &size.to_string(),
                "MB/s",
                "5",
                "5"
            ]
        );
        assert!(row[9].parse::<f64>().is_ok_and(|v| v > 0.0), "{row:?}");
    }
    let out = bench(&[
        "barrier_latency",
        "-n",
        "3",
        "-i",
        "20",
        "--format",
        "csv",
        "-r",
        "2",
    ]);
    let rows: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{out}");
    assert!(
        rows[0].starts_with("barrier_latency,MPI_Barrier,,,3,0,us,20,2,"),
        "{out}"
    );
}

/// The header lines of an OSU table, and its rows' sizes (every value positive).
fn osu_table(out: &str) -> (Vec<&str>, Vec<usize>) {
    let header: Vec<&str> = out.lines().take_while(|l| l.starts_with('#')).collect();
    let sizes = out
        .lines()
        .skip(header.len())
        .map(|l| {
            let mut f = l.split_whitespace();
            let size = f.next().and_then(|s| s.parse().ok()).expect("size");
            assert!(f.all(|v| v.parse::<f64>().is_ok_and(|v| v > 0.0)), "{l}");
            size
        })
        .collect();
    (header, sizes)
}

#[test]
fn bench_new_osu_tests_print_osu_headers() {
    let cases: [(&str, &str, &str, &str, &[&str]); 7] = [
        (
            "put_bibw",
            "OSU MPI_Put Bi-directional Bandwidth Test v7.4",
            "MPI_Win_post/start/complete/wait",
            "MPI_CHAR",
            &["-m", "4K:8K", "-W", "4"],
        ),
        (
            "acc_latency",
            "OSU MPI_Accumulate latency Test v7.4",
            "MPI_Win_flush",
            "MPI_INT",
            &["-m", "1:64"],
        ),
        (
            "get_acc_latency",
            "OSU MPI_Get_accumulate latency Test v7.4",
            "MPI_Win_lock/unlock",
            "MPI_INT",
            &["-m", "1:64", "-s", "lock"],
        ),
        (
            "fop_latency",
            "OSU MPI_Fetch_and_op latency Test v7.4",
            "MPI_Win_lock_all/unlock_all",
            "MPI_INT",
            &["-s", "lock_all", "-w", "create"],
        ),
        (
            "cas_latency",
            "OSU MPI_Compare_and_swap latency Test v7.4",
            "MPI_Win_fence",
            "MPI_INT",
            &["-s", "fence"],
        ),
        (
            "put_latency",
            "OSU MPI_Put Latency Test v7.4",
            "MPI_Win_post/start/complete/wait",
            "MPI_CHAR",
            &["-m", "1:64", "-s", "pscw"],
        ),
        (
            "get_bw",
            "OSU MPI_Get Bandwidth Test v7.4",
            "MPI_Win_post/start/complete/wait",
            "MPI_CHAR",
            &["-m", "4K:8K", "-s", "pscw", "-W", "4"],
        ),
    ];
    for (test, title, sync, datatype, extra) in cases {
        let mut args = vec![test, "-i", "20", "-x", "2"];
        args.extend(extra);
        let out = bench(&args);
        let (header, sizes) = osu_table(&out);
        let window = if test == "fop_latency" {
            "MPI_Win_create"
        } else {
            "MPI_Win_allocate"
        };
        let column = if test.contains("bw") {
            "Bandwidth (MB/s)"
        } else {
            "Latency (us)"
        };
        assert_eq!(
            header,
            [
                format!("# {title}"),
                format!("# Window creation: {window}"),
                format!("# Synchronization: {sync}"),
                format!("# Datatype: {datatype}."),
                format!("{:<10}{column:>20}", "# Size"),
            ],
            "{out}"
        );
        let expected: &[usize] = match test {
            "put_latency" => &SMALL,
            // Bandwidth of 1-byte messages prints as 0.00 MB/s on a loaded machine.
            "put_bibw" | "get_bw" => &[4096, 8192],
            "acc_latency" | "get_acc_latency" => &SMALL[2..],
            _ => &[4],
        };
        assert_eq!(sizes, expected, "{out}");
    }
}

#[test]
fn bench_sizes_stay_within_bounds_that_are_not_powers_of_two() {
    let out = bench(&["put_latency", "-m", "3:100", "-i", "10", "-x", "1"]);
    assert_eq!(osu_table(&out).1, [3, 6, 12, 24, 48, 96]);
    let out = bench(&["put_bw", "-m", ":20", "-i", "2", "-x", "1", "-W", "2"]);
    assert_eq!(osu_table(&out).1, [1, 2, 4, 8, 16]);
}

#[test]
fn bench_put_bw_reports_the_message_rate() {
    let out = bench(&[
        "put_bw", "-m", "8:8", "-i", "20", "-x", "2", "-W", "4", "--format", "json",
    ]);
    let doc: Value = serde_json::from_str(&out).expect("one JSON document");
    let recs = records(&doc, "put_bw");
    let units: Vec<&str> = recs.iter().map(|r| r["unit"].as_str().unwrap()).collect();
    assert_eq!(units, ["MB/s", "msg/s"], "{out}");
    assert_eq!(sizes_of(&recs), [8, 8]);
    recs.iter().for_each(|r| check_values(r));
    let out = bench(&["put_bw", "-m", "8:8", "-i", "20", "-x", "2", "-W", "4"]);
    let size = out.lines().find(|l| l.starts_with("# Size"));
    assert!(size.is_some_and(|l| l.ends_with(" Messages/s")), "{out}");
}

#[test]
fn bench_n_rank_tests_run_on_4_ranks_and_counts_are_exact() {
    // Started directly: a job of 4 ranks (the default of -n).
    for test in [
        "fence_latency",
        "barrier_latency",
        "lock_contention",
        "fop_contention",
    ] {
        let out = bench(&[test, "-i", "200", "-x", "5", "-r", "2"]);
        let (header, sizes) = osu_table(&out);
        assert!(header.contains(&"# Ranks: 4"), "{out}");
        assert!(header[0].starts_with("# onesided "), "{out}");
        assert_eq!(sizes, [0], "{out}");
    }
    // Inside a job of 4 ranks started by the launcher.
    let exe = env!("CARGO_BIN_EXE_onesided");
    let out = onesided(&[
        "run",
        "-n",
        "4",
        "--",
        exe,
        "bench",
        "lock_contention",
        "-i",
        "300",
        "-x",
        "3",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.matches("# onesided Lock Contention Test").count(),
        1,
        "{stdout}"
    );
    // Sizes of 1 KiB and more: a 1-byte epoch's bandwidth per rank prints as 0.00 MB/s on a
    // loaded machine.
    let out = bench(&["alltoall_put", "-m", "1K:4K", "-i", "5", "-x", "1"]);
    let (header, sizes) = osu_table(&out);
    assert!(header.contains(&"# Ranks: 4"), "{out}");
    assert_eq!(sizes, [1024, 2048, 4096], "{out}");
}

/// `window_create` reports the job's first window and later ones, as two records.
#[test]
fn bench_window_create_reports_the_first_window_and_later_ones() {
    let out = bench(&[
        "window_create",
        "-n",
        "3",
        "-i",
        "5",
        "-x",
        "1",
        "--format",
        "json",
        "-r",
        "2",
    ]);
    let doc: Value = serde_json::from_str(&out).expect("JSON");
    let recs = records(&doc, "window_create");
    let units: Vec<&str> = recs.iter().map(|r| r["unit"].as_str().unwrap()).collect();
    assert_eq!(units, ["us first", "us"], "{out}");
    assert!(recs.iter().all(|r| r["ranks"] == 3), "{out}");
    recs.iter().for_each(|r| check_values(r));
}

/// `mixed_epochs` checks its counters; on two simulated nodes (where libfabric is built: shared
/// memory inside each node, its tcp provider across) it records the nodes. `--simulate-nodes`
/// is refused for a test of 2 ranks.
#[test]
fn bench_mixed_epochs_runs_on_simulated_nodes() {
    let mut args = vec![
        "mixed_epochs",
        "-n",
        "4",
        "-i",
        "10",
        "-x",
        "1",
        "--format",
        "json",
        "-r",
        "2",
    ];
    let nodes = match onesided_fabric::BUILT_WITH {
        Some(_) => {
            args.extend(["--simulate-nodes", "2"]);
            2
        }
        None => 1,
    };
    let out = bench(&args);
    let doc: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(doc["context"]["ranks"], 4, "{out}");
    assert_eq!(doc["context"]["nodes"], nodes, "{out}");
    let recs = records(&doc, "mixed_epochs");
    assert_eq!(recs.len(), 1, "{out}");
    assert_eq!(recs[0]["unit"], "us", "{out}");
    recs.iter().for_each(|r| check_values(r));
    let err = refused(&["put_latency", "--simulate-nodes", "2"]);
    assert!(
        err.contains("--simulate-nodes applies to the N-rank tests"),
        "{err}"
    );
}

#[test]
fn bench_all_json_is_one_document_of_every_test() {
    let out = bench(&[
        "all", "-m", "1:8", "-i", "20", "-x", "2", "--format", "json", "-r", "2",
    ]);
    let doc: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(doc["context"]["ranks"], 4);
    for (test, ranks) in [
        ("put_latency", 2),
        ("get_latency", 2),
        ("put_bw", 2),
        ("get_bw", 2),
        ("put_bibw", 2),
        ("acc_latency", 2),
        ("get_acc_latency", 2),
        ("fop_latency", 2),
        ("cas_latency", 2),
        ("notify_latency", 2),
        ("memcpy_bw", 1),
        ("atomic_pingpong", 2),
        ("fence_latency", 4),
        ("barrier_latency", 4),
        ("lock_contention", 4),
        ("fop_contention", 4),
        ("alltoall_put", 4),
        ("mixed_epochs", 4),
        ("window_create", 4),
        ("window_scale", 4),
        ("shared_alloc", 4),
    ] {
        let recs = records(&doc, test);
        assert!(!recs.is_empty(), "no {test}: {out}");
        assert!(recs.iter().all(|r| r["ranks"] == ranks), "{test}: {out}");
        // The scale tests' memory and descriptor counts may be 0.
        if !matches!(test, "window_scale" | "shared_alloc") {
            recs.iter().for_each(|r| check_values(r));
        }
    }
}

/// `--target sleep` and `compute`: rank 1 stays out of onesided while rank 0 times its loop,
/// over shared memory and (where built) over libfabric's tcp provider, whose progress thread
/// serves it; the loops end (rank 1 saw rank 0's end-of-loop word) and the header says so.
#[test]
fn bench_busy_targets_are_served_and_noted() {
    let mut transports = vec!["auto"];
    if onesided_fabric::BUILT_WITH.is_some() {
        transports.push("fabric");
    }
    for transport in transports {
        let runs: [&[&str]; 3] = [
            &["fop_latency", "-T", "long", "--target", "compute"],
            &[
                "put_latency",
                "-m",
                "8:8",
                "-s",
                "lock",
                "--target",
                "sleep",
            ],
            &[
                "acc_latency",
                "-m",
                "8:64",
                "-w",
                "create",
                "--target",
                "compute",
                "-r",
                "2",
            ],
        ];
        for args in runs {
            let mut all = vec!["bench"];
            all.extend(args);
            all.extend(["-i", "30", "-x", "3", "--transport", transport]);
            let out = onesided_with(&all, &[("FI_PROVIDER", "tcp")]);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{all:?}: {}\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            let busy = if all.contains(&"sleep") {
                "sleeps"
            } else {
                "computes"
            };
            let note = format!("# rank 1 {busy}, without calling onesided");
            assert!(stdout.lines().any(|l| l == note), "{all:?}:\n{stdout}");
            let (_, sizes) = osu_table(&stdout);
            assert!(!sizes.is_empty(), "{all:?}: no rows\n{stdout}");
        }
    }
}

/// `--per-op`: each iteration timed on its own, the median reported; the OSU header and the JSON
/// context say so, and only the OSU tests take it.
#[test]
fn bench_per_op_reports_median_iterations_and_says_so() {
    let table = bench(&["get_latency", "-m", "8:16", "-i", "200", "--per-op"]);
    let note = "# median of per-iteration times (--per-op), not the loop's mean";
    assert!(table.lines().any(|l| l == note), "{table}");
    let (_, sizes) = osu_table(&table);
    assert_eq!(sizes, [8, 16], "{table}");
    let args = [
        "cas_latency",
        "-i",
        "200",
        "-r",
        "3",
        "--per-op",
        "--format",
        "json",
    ];
    let doc: Value = serde_json::from_str(&bench(&args)).expect("json");
    assert_eq!(doc["context"]["timing"], "per-op median", "{doc}");
    records(&doc, "cas_latency")
        .iter()
        .for_each(|r| check_values(r));
    let mean: Value =
        serde_json::from_str(&bench(&["cas_latency", "-i", "200", "--format", "json"]))
            .expect("json");
    assert!(mean["context"].get("timing").is_none(), "{mean}");
    assert!(refused(&["fence_latency", "--per-op"]).contains("--per-op applies to the OSU tests"));
}

#[test]
fn bench_refusals_say_why() {
    assert!(refused(&["put_bibw", "-s", "flush"]).contains("takes -s pscw or -s fence"));
    assert!(refused(&["fop_latency", "-m", "8"]).contains("one element"));
    assert!(refused(&["put_latency", "-T", "double"]).contains("-T applies to the accumulate"));
    assert!(refused(&["put_latency", "-n", "4"]).contains("-n applies to the N-rank tests"));
    assert!(refused(&["fence_latency", "-n", "1"]).contains("at least 2"));
    assert!(refused(&["put_latency", "-r", "0"]).contains("-r must be at least 1"));
    assert!(refused(&["put_latency", "-m", "0:8"]).contains("at least 1 byte"));
    let busy = |more: &[&str]| {
        let mut args = vec!["put_latency", "--target", "compute"];
        args.extend(more);
        refused(&args)
    };
    assert!(busy(&["-s", "fence"]).contains("needs a passive-target -s"));
    assert!(busy(&["-w", "dynamic"]).contains("not -w dynamic"));
    assert!(refused(&["put_bibw", "--target", "sleep"]).contains("not put_bibw"));
    assert!(refused(&["fence_latency", "--target", "sleep"]).contains("--target applies to"));
    assert!(refused(&["put_latency", "Unidir_put"]).contains("follow `imb`"));
    assert!(refused(&["imb", "-w", "dynamic"]).contains("not -w dynamic"));
    assert!(refused(&["imb", "-s", "lock"]).contains("-s applies to"));
    assert!(refused(&["imb", "No_such_put"]).contains("invalid value 'No_such_put'"));
    assert!(refused(&["fence_latency", "-W", "8"]).contains("and window_scale"));
    assert!(refused(&["put_latency", "-t", "2"]).contains("-t applies to the rate tests"));
    let exe = env!("CARGO_BIN_EXE_onesided");
    let out = onesided(&[
        "run",
        "-n",
        "3",
        "--",
        exe,
        "bench",
        "put_latency",
        "-i",
        "5",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("put_latency needs exactly 2 ranks"));
}

/// The tables of IMB text: per `# Benchmarking` line, the name, the processes, the mode (if
/// any), the column heads and the sizes of its rows.
type ImbTable = (String, usize, Option<String>, Vec<String>, Vec<usize>);

fn imb_tables(out: &str) -> Vec<ImbTable> {
    let mut tables: Vec<ImbTable> = Vec::new();
    for line in out.lines() {
        if let Some(name) = line.strip_prefix("# Benchmarking ") {
            tables.push((name.trim().to_owned(), 0, None, Vec::new(), Vec::new()));
            continue;
        }
        let Some(t) = tables.last_mut() else { continue };
        if let Some(n) = line.strip_prefix("# #processes = ") {
            t.1 = n.trim().parse().expect("processes");
        } else if let Some(mode) = line.strip_prefix("#    MODE: ") {
            t.2 = Some(mode.trim().to_owned());
        } else if line.trim_start().starts_with("#bytes") {
            t.3 = line.split_whitespace().map(str::to_owned).collect();
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(fields.len(), t.3.len(), "row {line:?} of {}", t.0);
            for f in &fields[2..] {
                let v: f64 = f.parse().unwrap_or_else(|_| panic!("{line:?}"));
                assert!(v >= 0.0 && v.is_finite(), "{line:?}");
            }
            // Every field 13 wide, as IMB prints them.
            assert_eq!(line.len(), 13 * fields.len(), "{line:?}");
            t.4.push(fields[0].parse().expect("size"));
        }
    }
    tables
}

/// `bench imb`: all 19 IMB-RMA benchmarks in IMB's order and tables, the single transfers on 2
/// of the job's 3 ranks in both modes, the others on all 3; sizes from 0 as IMB's, one element
/// for the atomics; the output reads back with `bench compare`.
#[test]
fn bench_imb_runs_every_benchmark_in_imbs_tables() {
    let out = bench(&["imb", "-n", "3", "-m", "8:64", "-i", "5", "-x", "1"]);
    let tables = imb_tables(&out);
    let names: Vec<&str> = tables.iter().map(|t| t.0.as_str()).collect();
    let mut distinct = names.clone();
    distinct.dedup();
    assert_eq!(
        distinct,
        [
            "Unidir_put",
            "Unidir_get",
            "Bidir_put",
            "Bidir_get",
            "One_put_all",
            "One_get_all",
            "All_put_all",
            "All_get_all",
            "Put_local",
            "Get_local",
            "Put_all_local",
            "Get_all_local",
            "Exchange_put",
            "Exchange_get",
            "Accumulate",
            "Get_accumulate",
            "Fetch_and_op",
            "Compare_and_swap",
            "Truly_passive_put",
        ],
        "{out}"
    );
    assert_eq!(tables.len(), 19 + 10, "10 benchmarks in two modes:\n{out}");
    let time_bw = ["#bytes", "#repetitions", "t[usec]", "Mbytes/sec"];
    let range = [
        "#bytes",
        "#repetitions",
        "t_min[usec]",
        "t_max[usec]",
        "t_avg[usec]",
    ];
    for (name, processes, mode, heads, sizes) in &tables {
        let (want_ranks, want_heads): (usize, &[&str]) = match name.as_str() {
            "All_put_all" | "All_get_all" | "Exchange_put" | "Exchange_get" => (3, &range),
            "One_put_all" | "One_get_all" | "Put_all_local" | "Get_all_local" => (3, &time_bw),
            "Truly_passive_put" => (
                2,
                &["#bytes", "#repetitions", "t_pure[usec]", "t_ovrl[usec]"],
            ),
            _ => (2, &time_bw),
        };
        assert_eq!(*processes, want_ranks, "{name}");
        assert_eq!(heads, want_heads, "{name}");
        let want_sizes: &[usize] = match name.as_str() {
            "Fetch_and_op" | "Compare_and_swap" => &[4],
            _ => &[0, 8, 16, 32, 64],
        };
        assert_eq!(sizes, want_sizes, "{name}");
        assert_eq!(
            mode.is_some(),
            want_ranks == 2 && heads == &time_bw,
            "{name}"
        );
    }
    assert!(
        out.contains("# ( 1 additional process waiting in MPI_Barrier)"),
        "{out}"
    );
    assert!(out.contains("#    MODE: NON-AGGREGATE \n"), "{out}");
    assert!(
        out.ends_with("# All processes entering MPI_Finalize\n\n"),
        "{out}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("imb.txt");
    std::fs::write(&file, &out).expect("write");
    let path = file.to_str().expect("path");
    let compared = bench(&["compare", path, path]);
    for series in [
        "# Unidir_put, AGGREGATE, 2 ranks: Latency (us)",
        "# Truly_passive_put t_ovrl, 2 ranks: Latency (us)",
        "# Exchange_get t_max, 3 ranks: Latency (us)",
        "# One_put_all, 3 ranks: Bandwidth (MB/s)",
    ] {
        assert!(compared.contains(series), "{series}:\n{compared}");
    }
}

/// `bench imb --format json`: a record per size and column, named as IMB names the benchmark
/// and the column; with repetitions, the statistics over them.
#[test]
fn bench_imb_json_names_benchmarks_and_columns_as_imb() {
    let out = bench(&[
        "imb",
        "Exchange_put",
        "truly_passive_put",
        "FETCH_AND_OP",
        "-n",
        "3",
        "-m",
        "64:128",
        "-i",
        "4",
        "-x",
        "1",
        "--format",
        "json",
        "-r",
        "2",
    ]);
    let doc: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(doc["context"]["ranks"], 3);
    let exchange = records(&doc, "Exchange_put");
    let units: Vec<&str> = exchange
        .iter()
        .map(|r| r["unit"].as_str().unwrap())
        .collect();
    assert_eq!(units, ["us t_min", "us t_max", "us t_avg"].repeat(3));
    assert_eq!(sizes_of(&exchange), [0, 0, 0, 64, 64, 64, 128, 128, 128]);
    for r in &exchange {
        assert_eq!(r["ranks"], 3);
        assert_eq!(r["window"], "MPI_Win_create");
        assert_eq!(r["repetitions"], 2);
        assert_eq!(r["sync"], Value::Null);
        if r["size"] != 0 {
            check_values(r);
        }
    }
    let passive = records(&doc, "Truly_passive_put");
    assert_eq!(passive.len(), 6);
    assert!(passive.iter().all(|r| r["ranks"] == 2), "{out}");
    let fop = records(&doc, "Fetch_and_op");
    let modes: Vec<(&str, &str)> = fop
        .iter()
        .map(|r| (r["sync"].as_str().unwrap(), r["unit"].as_str().unwrap()))
        .collect();
    assert_eq!(
        modes,
        [
            ("NON-AGGREGATE", "us"),
            ("NON-AGGREGATE", "MB/s"),
            ("AGGREGATE", "us"),
            ("AGGREGATE", "MB/s"),
        ]
    );
    assert!(
        fop.iter()
            .all(|r| r["size"] == 4 && r["datatype"] == "MPI_FLOAT")
    );
}

/// `bench imb` over libfabric (tcp and shm providers, where built) and over windows of every
/// creation it takes: every benchmark runs and prints its rows.
#[test]
fn bench_imb_runs_over_the_fabric_and_every_window_creation() {
    let mut runs: Vec<(Vec<&str>, &str)> =
        vec![(vec!["-w", "allocate"], ""), (vec!["-w", "alloc_mem"], "")];
    if onesided_fabric::BUILT_WITH.is_some() {
        runs.push((vec!["--transport", "fabric"], "tcp"));
        runs.push((vec!["--transport", "fabric"], "shm"));
    }
    for (extra, provider) in runs {
        let mut args = vec![
            "bench", "imb", "-n", "2", "-m", "1K:4K", "-i", "4", "-x", "1",
        ];
        args.extend(&extra);
        let out = onesided_with(&args, &[("FI_PROVIDER", provider)]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{args:?} FI_PROVIDER={provider}: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let tables = imb_tables(&stdout);
        assert_eq!(tables.len(), 29, "{args:?} {provider}:\n{stdout}");
        assert!(tables.iter().all(|t| !t.4.is_empty()), "{stdout}");
    }
}

/// `window_scale` and `shared_alloc` over shared memory and (where built) libfabric's tcp
/// provider: every window alive at once and freed, a row of positive times and counts, the
/// shared window's parts written and read back (rank 0 fails otherwise).
#[test]
fn bench_scale_tests_keep_many_windows_and_large_shared_ones() {
    let mut transports = vec!["auto"];
    if onesided_fabric::BUILT_WITH.is_some() {
        transports.push("fabric");
    }
    for transport in transports {
        let out = onesided_with(
            &[
                "bench",
                "window_scale",
                "-n",
                "3",
                "-W",
                "300",
                "--format",
                "json",
                "-r",
                "1",
                "--transport",
                transport,
            ],
            &[("FI_PROVIDER", "tcp")],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{transport}: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: Value = serde_json::from_str(&stdout).expect("json");
        let rows = records(&doc, "window_scale");
        let units: Vec<&str> = rows.iter().map(|r| r["unit"].as_str().unwrap()).collect();
        assert_eq!(units, ["us", "us free", "KiB", "KiB shm", "fd"], "{stdout}");
        for r in &rows {
            assert_eq!(
                (r["size"].as_u64(), r["iterations"].as_u64()),
                (Some(8), Some(300))
            );
            assert!(r["value"].as_f64().unwrap() >= 0.0, "{r}");
        }
        assert!(rows[0]["value"].as_f64().unwrap() > 0.0, "{stdout}");
        // A window holds some memory, and no descriptor of its own over these transports.
        assert!(rows[2]["value"].as_f64().unwrap() > 0.0, "{stdout}");
        assert!(rows[4]["value"].as_f64().unwrap() < 1.0, "{stdout}");
    }
    let out = bench(&["shared_alloc", "-n", "3", "-m", "1G:4G"]);
    assert!(
        out.contains("# Window creation: MPI_Win_allocate_shared"),
        "{out}"
    );
    let rows: Vec<Vec<f64>> = out
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            l.split_whitespace()
                .map(|v| v.parse().expect("number"))
                .collect()
        })
        .collect();
    let sizes: Vec<f64> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(
        sizes,
        [1u64 << 30, 2 << 30, 4 << 30].map(|s| s as f64),
        "{out}"
    );
    for r in &rows {
        assert!(r[1] > 0.0 && r[2] > 0.0, "{out}");
        // Pages are touched only by use: far less than the window's GiBs.
        assert!(r[3] < 16.0 * 1024.0, "{out}");
    }
}

/// The transports the rate tests run over: shared memory, and libfabric's tcp provider where
/// it is built.
fn rate_transports() -> Vec<&'static str> {
    let mut transports = vec!["auto"];
    if onesided_fabric::BUILT_WITH.is_some() {
        transports.push("fabric");
    }
    transports
}

/// `onesided bench ARGS... -n 3 -i 200 -r 2 --transport TRANSPORT` (libfabric's tcp provider
/// for `fabric`), which must succeed; its stdout.
fn rate_job(args: &[&str], transport: &str) -> String {
    let mut all = vec!["bench"];
    all.extend(args);
    all.extend(["-n", "3", "-i", "200", "-r", "2", "--transport", transport]);
    let out = onesided_with(&all, &[("FI_PROVIDER", "tcp")]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{all:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The rate tests: rank 0's threads share the window; the header names the threads, the JSON
/// units carry them (`msg/s t4`), fop_rate's and acc_rate's counts and notify_rate's
/// notifications are checked by the targets (a wrong count fails the job), and `-t 0` runs
/// without sharing; over shared memory and (where built) over libfabric's tcp provider.
#[test]
fn bench_rate_tests_share_the_window_with_threads() {
    let out = bench(&["put_rate", "-t", "2", "-i", "300", "-x", "5"]);
    let (header, sizes) = osu_table(&out);
    assert!(header.contains(&"# Threads: 2"), "{out}");
    assert!(header.contains(&"# Ranks: 2"), "{out}");
    assert_eq!(sizes, [8], "{out}");
    let out = bench(&["get_rate", "-t", "0", "-i", "300"]);
    assert!(osu_table(&out).0.contains(&"# Threads: 0"), "{out}");
    for transport in rate_transports() {
        for test in ["fop_rate", "acc_rate", "notify_rate"] {
            let args = [test, "-t", "4", "--format", "json"];
            let stdout = rate_job(&args, transport);
            let doc: Value = serde_json::from_str(&stdout).expect("json");
            let recs = records(&doc, test);
            assert_eq!(recs.len(), 1, "{test} {transport}: {stdout}");
            assert_eq!(recs[0]["unit"], "msg/s t4", "{test} {transport}: {stdout}");
            assert_eq!(recs[0]["ranks"], 3, "{test} {transport}: {stdout}");
            check_values(recs[0]);
        }
    }
}

/// `notify_latency -t 1`: a thread of each rank bounces the notified hand-offs through the
/// shared window; the header and the units say so, over shared memory and (where built)
/// libfabric's tcp provider. `-t 2` is refused, as is `-t` for a test without threads.
#[test]
fn bench_notify_latency_bounces_through_threads() {
    for transport in rate_transports() {
        let mut args = vec![
            "bench",
            "notify_latency",
            "-t",
            "1",
            "-m",
            "8:64",
            "-i",
            "100",
        ];
        args.extend(["-x", "10", "--format", "json", "--transport", transport]);
        let out = onesided_with(&args, &[("FI_PROVIDER", "tcp")]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{transport}: {stdout}");
        let doc: Value = serde_json::from_str(&stdout).expect("json");
        let recs = records(&doc, "notify_latency");
        assert_eq!(recs.len(), 8, "4 sizes, 2 ways: {stdout}");
        let units: Vec<&str> = recs.iter().filter_map(|r| r["unit"].as_str()).collect();
        assert!(units.iter().all(|u| u.ends_with(" t1")), "{units:?}");
        recs.iter().for_each(|r| check_values(r));
    }
    let out = bench(&["notify_latency", "-t", "1", "-m", "8:8", "-i", "100"]);
    assert!(osu_table(&out).0.contains(&"# Threads: 1"), "{out}");
    let refusal = refused(&["notify_latency", "-t", "2"]);
    assert!(
        refusal.contains("notify_latency takes -t 0 or -t 1"),
        "{refusal}"
    );
    let refusal = refused(&["put_latency", "-t", "1"]);
    assert!(
        refusal.contains("-t applies to the rate tests"),
        "{refusal}"
    );
}

/// `-s fence` for the rate tests: the calls are made in a fence epoch without flushes, and the
/// header says so; fop_rate's and acc_rate's counts and notify_rate's notifications are still
/// checked by the targets (a call the closing fence did not complete fails the job); over
/// shared memory and (where built) libfabric's tcp provider. A passive-target sync other than
/// flush is refused.
#[test]
fn bench_rate_tests_run_in_a_fence_epoch() {
    for transport in rate_transports() {
        for test in ["put_rate", "fop_rate", "acc_rate", "notify_rate"] {
            let stdout = rate_job(&[test, "-s", "fence", "-t", "2"], transport);
            let (header, sizes) = osu_table(&stdout);
            let sync = "# Synchronization: MPI_Win_fence around the calls";
            assert!(header.contains(&sync), "{test} {transport}: {stdout}");
            let size = if test == "acc_rate" { 32 } else { 8 };
            assert_eq!(sizes, [size], "{test} {transport}: {stdout}");
        }
    }
    let refusal = refused(&["put_rate", "-s", "lock"]);
    assert!(
        refusal.contains("put_rate takes -s flush or -s fence"),
        "{refusal}"
    );
}
