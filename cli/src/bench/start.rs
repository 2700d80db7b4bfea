//! Where the benchmark runs. Started directly (a singleton), a test of several ranks starts
//! this program again as a job of that many ranks through the launcher; `all` starts two jobs,
//! one of 2 ranks for the OSU tests and the floors, then one of `-n` ranks for the N-rank tests,
//! and merges their results when they are JSON or CSV (each job writes its document to a file).
//! Inside a job, the tests run on the job's ranks.

use super::args::{BenchArgs, Format, Part, Test};
use super::context::Context;
use super::imb::{self, Benchmark};
use super::options::Plan;
use super::report::{self, Report};
use super::{atomic, floor, group, notify, rate, rma, scale};
use crate::launch::{self, Job};
use onesided::launcher::ENV_TRANSPORT;
use onesided::{Config, Error, ErrorClass, ProcessManager, Result, ThreadLevel, World};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::SystemTime;

/// Runs the benchmark as `args` say; returns the exit code.
pub(super) fn run(args: &BenchArgs) -> Result<i32> {
    let plan = Plan::new(args)?;
    let mut config = Config::from_env()?;
    if let Some(t) = args.transport {
        config = config.transport(t);
    }
    if onesided::launcher::process_manager(&config)? == ProcessManager::Singleton {
        let ranks = match (args.test, args.part) {
            (Test::All, None) => return run_all(&plan, &config),
            (_, Some(Part::Groups)) => plan.ranks,
            (_, Some(Part::Pairs)) => 2,
            (t, None) => t.job_ranks(plan.ranks),
        };
        if ranks > 1 {
            // A rank bound to one core would run all its threads there.
            let bind = match args.test.is_rate() {
                true => launch::Bind::None,
                false => launch::Bind::Auto,
            };
            return job(ranks, &config, args.simulate_nodes, bind, Vec::new());
        }
    }
    if args.simulate_nodes.is_some() {
        return Err(Error::new(
            ErrorClass::Arg,
            "--simulate-nodes needs bench to start its job itself (it is inside one already, or \
             the test runs on one rank)",
        ));
    }
    in_job(args, &plan, config)
}

/// Starts this program with its arguments and `extra` ones as a job of `n` ranks (on `nodes`
/// simulated nodes where given); the job's exit code.
fn job(
    n: usize,
    config: &Config,
    nodes: Option<usize>,
    bind: launch::Bind,
    extra: Vec<OsString>,
) -> Result<i32> {
    let transport = vec![(
        ENV_TRANSPORT.to_owned(),
        config.transport_choice().as_str().to_owned(),
    )];
    let program = std::env::current_exe().map_err(|e| Error::os("finding this program", e))?;
    let mut args: Vec<OsString> = without_simulate_nodes(std::env::args_os().skip(1));
    args.extend(extra);
    launch::run(&Job {
        n,
        program,
        args,
        tag_output: false,
        simulate_nodes: nodes,
        extra_env: transport,
        bind,
    })
}

/// The arguments of this program without `--simulate-nodes K` (or `--simulate-nodes=K`),
/// which the job it starts does not take again.
fn without_simulate_nodes(args: impl Iterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for a in args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        match a.to_str() {
            Some("--simulate-nodes") => skip_value = true,
            Some(s) if s.starts_with("--simulate-nodes=") => {}
            _ => out.push(a),
        }
    }
    out
}

/// `all` started directly: a job of 2 ranks, then one of `plan.ranks`.
fn run_all(plan: &Plan, config: &Config) -> Result<i32> {
    let merge = plan.format != Format::Osu;
    let mut docs = Vec::new();
    for (name, n) in [("pairs", 2), ("groups", plan.ranks)] {
        let mut extra: Vec<OsString> = vec!["--part".into(), name.into()];
        let file = merge.then(|| {
            std::env::temp_dir().join(format!("onesided-bench-{}-{name}.json", std::process::id()))
        });
        if let Some(f) = &file {
            extra.extend(["--results-file".into(), f.clone().into_os_string()]);
        }
        let code = job(n, config, plan.simulate_nodes, launch::Bind::Auto, extra)?;
        if let Some(f) = file {
            let doc = (code == 0).then(|| report::read_document(&f));
            // Best effort: a job that failed may have left no file.
            let _ = std::fs::remove_file(&f);
            if let Some(doc) = doc {
                docs.push(doc?);
            }
        }
        if code != 0 {
            return Ok(code);
        }
    }
    let mut docs = docs.into_iter();
    if let Some(first) = docs.next() {
        let doc = docs.fold(first, |mut a, b| {
            a.context = a.context.merge(&b.context);
            a.results.extend(b.results);
            a
        });
        report::print_document(plan.format, &doc)?;
    }
    Ok(0)
}

/// The tests of `args` that run in a job of `size` ranks and those `all` skips there, or why
/// they cannot run.
fn tests(args: &BenchArgs, size: usize) -> Result<(Vec<Test>, Vec<Test>)> {
    let pairs = Test::EVERY.into_iter().filter(|t| !t.is_group());
    let groups = Test::EVERY.into_iter().filter(|t| t.is_group());
    let fits = |t: &Test| match t {
        Test::MemcpyBw => true,
        t if t.is_group() || t.is_rate() => size >= 2,
        _ => size == 2,
    };
    let list: Vec<Test> = match (args.test, args.part) {
        (Test::All, Some(Part::Pairs)) => pairs.collect(),
        (Test::All, Some(Part::Groups)) => groups.collect(),
        (Test::All, None) => return Ok(Test::EVERY.into_iter().partition(fits)),
        (t, _) => vec![t],
    };
    if let Some(t) = list.iter().find(|t| !fits(t)) {
        let need = if t.is_group() || t.is_rate() {
            "at least 2"
        } else {
            "exactly 2"
        };
        return Err(Error::new(
            ErrorClass::Arg,
            format!("{} needs {need} ranks; this job has {size}", t.name()),
        ));
    }
    if let Some(n) = args
        .ranks
        .filter(|&n| n != size && list.iter().any(|t| t.is_group() || t.is_rate()))
    {
        return Err(Error::new(
            ErrorClass::Arg,
            format!("-n {n}, but this job has {size} ranks"),
        ));
    }
    Ok((list, Vec::new()))
}

/// Runs the tests in the job this process belongs to.
fn in_job(args: &BenchArgs, plan: &Plan, config: Config) -> Result<i32> {
    let started = SystemTime::now();
    // The tests of threads (the message-rate tests, `-t`) share windows with them:
    // MPI_THREAD_MULTIPLE, so that the direct verbs transport gives them lanes.
    let level = match args.test.is_rate() || args.threads.is_some() {
        true => ThreadLevel::Multiple,
        false => ThreadLevel::Funneled,
    };
    let (world, _) = World::init_thread_with(config, level)?;
    let (tests, skipped) = match tests(args, world.size()) {
        Ok(tests) => tests,
        // Every rank fails the same way; one message is enough.
        Err(_) if world.rank() != 0 => return Ok(2),
        Err(e) => return Err(e),
    };
    if world.rank() == 0 && !skipped.is_empty() {
        let names: Vec<&str> = skipped.iter().map(|t| t.name()).collect();
        eprintln!(
            "onesided bench: all: {} skipped in a job of {} ranks",
            names.join(", "),
            world.size()
        );
    }
    let file: Option<PathBuf> = args.results_file.clone();
    let context = if plan.format != Format::Osu || file.is_some() {
        Some(Context::gather(&world, started, plan.per_op)?)
    } else {
        None
    };
    let after = args.part == Some(Part::Groups);
    let mut report = Report::new(world.rank(), plan.format, file, after);
    for t in tests {
        one(&world, t, &args.benchmarks, plan, &mut report)?;
    }
    report.finish(context)?;
    Ok(0)
}

/// Runs one test (not `all`) in `world`; `benchmarks`: imb's.
fn one(
    world: &World,
    test: Test,
    benchmarks: &[Benchmark],
    plan: &Plan,
    report: &mut Report,
) -> Result<()> {
    match test {
        Test::PutLatency | Test::GetLatency | Test::PutBw | Test::GetBw | Test::PutBibw => {
            rma::sweep(world, test, plan, report)
        }
        Test::AccLatency | Test::GetAccLatency | Test::FopLatency | Test::CasLatency => {
            atomic::sweep(world, test, plan, report)
        }
        Test::NotifyLatency => notify::notify_latency(world, plan, report),
        Test::FenceLatency => group::fence_latency(world, plan, report),
        Test::BarrierLatency => group::barrier_latency(world, plan, report),
        Test::LockContention => group::lock_contention(world, plan, report),
        Test::FopContention => group::fop_contention(world, plan, report),
        Test::AlltoallPut => group::alltoall_put(world, plan, report),
        Test::MixedEpochs => group::mixed_epochs(world, plan, report),
        Test::WindowCreate => group::window_create(world, plan, report),
        Test::WindowScale => scale::window_scale(world, plan, report),
        Test::SharedAlloc => scale::shared_alloc(world, plan, report),
        Test::PutRate | Test::GetRate | Test::FopRate | Test::AccRate | Test::NotifyRate => {
            rate::rate(world, test, plan, report)
        }
        Test::MemcpyBw => floor::memcpy_bw(world, plan, report),
        Test::AtomicPingpong => floor::atomic_pingpong(world, plan, report),
        Test::Imb => {
            let list = match benchmarks {
                [] => &Benchmark::ALL[..],
                named => named,
            };
            imb::run(world, plan, list, report)
        }
        Test::All => Err(onesided::Error::new(
            ErrorClass::Intern,
            "`all` inside `all`",
        )),
    }
}
