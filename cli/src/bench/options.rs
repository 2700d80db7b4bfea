//! The options of `onesided bench`, checked against the test they are given to, and the
//! OSU iteration counts.

use super::args::{BenchArgs, Creation, Datatype, Format, SyncMode, Test};
use super::busy::Target;
use super::imb;
use super::sizes::Sizes;
use onesided::{Error, ErrorClass, Result};

/// The largest window a test may create (bandwidth tests: size * W bytes).
const MAX_WINDOW: usize = 1 << 30;
/// Messages up to this size get the "small" iteration counts.
const SMALL: usize = 8192;
/// Ranks of the N-rank tests when `-n` is not given.
const DEFAULT_RANKS: usize = 4;
/// Timed repetitions per size of the json and csv formats when `-r` is not given.
const DEFAULT_REPETITIONS: usize = 5;

/// Which OSU iteration counts a test uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Latency,
    Bandwidth,
}

/// Warm-up and timed iterations of one repetition.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pass {
    pub warmup: usize,
    pub iters: usize,
    /// Time each iteration on its own (`--per-op`).
    pub per_op: bool,
}

impl Pass {
    /// The same timed iterations without the warm-up (repetitions after the first).
    pub fn again(self) -> Pass {
        Pass { warmup: 0, ..self }
    }
}

/// The options with their defaults filled in, valid for every test they will run.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    /// `-s` as given ([`Plan::sync`] has the default of each test).
    sync: Option<SyncMode>,
    pub creation: Creation,
    pub datatype: Datatype,
    pub sizes: Sizes,
    /// Whether `-m` was given (imb starts at size 0 otherwise, as IMB does).
    sizes_given: bool,
    pub window: usize,
    /// `-W` as given (window_scale's count of windows).
    window_given: Option<usize>,
    /// Ranks of the N-rank tests.
    pub ranks: usize,
    pub format: Format,
    pub repetitions: usize,
    iterations: Option<usize>,
    warmup: Option<usize>,
    /// What rank 1 does during a passive-target test.
    pub target: Target,
    /// Report the median iteration instead of the mean (`--per-op`).
    pub per_op: bool,
    /// Simulated nodes of the job `bench` starts (`--simulate-nodes`).
    pub simulate_nodes: Option<usize>,
    /// Threads of rank 0 in the rate tests (`-t`; 0: no sharing).
    pub threads: usize,
    /// `-t` was given (notify_latency: `-t 1` bounces through a thread of each rank).
    pub threads_given: bool,
}

fn usage(msg: String) -> Error {
    Error::new(ErrorClass::Arg, msg)
}

/// The tests that accept an option, for the message when it is given to another one.
fn refuse(test: Test, option: &str, accepted_by: &str) -> Error {
    usage(format!(
        "{option} applies to {accepted_by}, not to {}",
        test.name()
    ))
}

impl Plan {
    /// Checks `args` against the test and fills in the defaults.
    pub fn new(args: &BenchArgs) -> Result<Plan> {
        let t = args.test;
        let all = t == Test::All;
        if !args.benchmarks.is_empty() && t != Test::Imb {
            return Err(usage(format!(
                "benchmark names follow `imb`, not {}",
                t.name()
            )));
        }
        if t == Test::Imb && args.creation == Some(Creation::Dynamic) {
            return Err(usage(
                "imb addresses displacement 0 of each window: not -w dynamic".into(),
            ));
        }
        if let Some(sync) = args.sync {
            check_sync(t, sync)?;
        }
        if args.creation.is_some() && !(all || t.is_osu() || t == Test::Imb) {
            return Err(refuse(t, "-w", "the OSU tests and imb"));
        }
        if args.window.is_some() && !(all || t.is_windowed() || t == Test::WindowScale) {
            return Err(refuse(
                t,
                "-W",
                "the bandwidth tests (put_bw, get_bw, put_bibw, memcpy_bw) and window_scale",
            ));
        }
        if args.datatype.is_some() && !(all || t.is_typed()) {
            return Err(refuse(
                t,
                "-T",
                "the accumulate tests (acc_latency, get_acc_latency, fop_latency, cas_latency)",
            ));
        }
        if args.sizes.is_some() && matches!(t, Test::FopLatency | Test::CasLatency) {
            return Err(usage(format!(
                "{} moves one element: -m does not apply",
                t.name()
            )));
        }
        if args.sizes.is_some() && !(all || t.is_sized()) {
            return Err(refuse(t, "-m", "the tests that sweep message sizes"));
        }
        if args.threads.is_some() && !(t.is_rate() || t == Test::NotifyLatency) {
            return Err(refuse(
                t,
                "-t",
                "the rate tests (put_rate, get_rate, fop_rate, acc_rate, notify_rate) and \
                 notify_latency",
            ));
        }
        if t == Test::NotifyLatency && args.threads.is_some_and(|t| t > 1) {
            return Err(usage(
                "notify_latency takes -t 0 or -t 1 (a thread of each rank bounces)".into(),
            ));
        }
        if args.ranks.is_some() && !(all || t.is_group() || t.is_rate()) {
            return Err(refuse(
                t,
                "-n",
                "the N-rank tests (the OSU tests and the floors run on 2 ranks)",
            ));
        }
        if args.simulate_nodes.is_some() && !(all || t.is_group()) {
            return Err(refuse(t, "--simulate-nodes", "the N-rank tests"));
        }
        if let Some(target) = args.target {
            check_target(t, args, target)?;
        }
        if args.per_op && !t.is_osu() {
            return Err(refuse(t, "--per-op", "the OSU tests"));
        }
        if args.iterations == Some(0) {
            return Err(usage("-i must be at least 1".into()));
        }
        if args.repetitions == Some(0) {
            return Err(usage("-r must be at least 1".into()));
        }
        let ranks = args
            .ranks
            .unwrap_or(if t.is_rate() { 2 } else { DEFAULT_RANKS });
        if ranks < 2 {
            return Err(usage("-n must be at least 2".into()));
        }
        let window = args.window.unwrap_or(64);
        if window == 0 {
            return Err(usage("-W must be at least 1".into()));
        }
        let sizes = args.sizes.unwrap_or(Sizes::DEFAULT);
        let per_size = match t {
            Test::AlltoallPut => ranks,
            // Exchange_put and Exchange_get: a message from each neighbour.
            Test::Imb => 2,
            Test::All => window.max(ranks),
            t if t.is_windowed() => window,
            _ => 1,
        };
        // shared_alloc is about windows beyond it.
        if t != Test::SharedAlloc
            && sizes
                .max
                .checked_mul(per_size)
                .is_none_or(|b| b > MAX_WINDOW)
        {
            return Err(usage(format!(
                "messages of {} bytes, {per_size} per window, need more than {MAX_WINDOW} bytes of window",
                sizes.max
            )));
        }
        let format = args.format;
        let repetitions = args.repetitions.unwrap_or(match format {
            Format::Osu => 1,
            Format::Json | Format::Csv => DEFAULT_REPETITIONS,
        });
        Ok(Plan {
            sync: args.sync,
            creation: args.creation.unwrap_or(if t == Test::Imb {
                Creation::Create
            } else {
                Creation::Allocate
            }),
            datatype: args.datatype.unwrap_or(Datatype::Int),
            sizes,
            sizes_given: args.sizes.is_some(),
            window,
            window_given: args.window,
            ranks,
            format,
            repetitions,
            iterations: args.iterations,
            warmup: args.warmup,
            target: args.target.unwrap_or_default(),
            per_op: args.per_op,
            simulate_nodes: args.simulate_nodes,
            threads: args.threads.unwrap_or(1),
            threads_given: args.threads.is_some(),
        })
    }

    /// The synchronization of `test`: `-s`, else flush (put_bibw: pscw, as OSU's; under `all`,
    /// fence where `-s` names one it does not take).
    pub fn sync(&self, test: Test) -> SyncMode {
        match (test, self.sync) {
            (Test::PutBibw, None) => SyncMode::Pscw,
            (Test::PutBibw, Some(s)) if check_sync(test, s).is_err() => SyncMode::Fence,
            (_, s) => s.unwrap_or(SyncMode::Flush),
        }
    }

    /// The iterations of a `kind` test at `size` bytes: the OSU counts unless -i / -x say otherwise.
    pub fn pass(&self, kind: Kind, size: usize) -> Pass {
        let (iters, warmup) = match (kind, size <= SMALL) {
            (Kind::Latency, true) => (10_000, 100),
            (Kind::Latency, false) => (1_000, 10),
            (Kind::Bandwidth, true) => (100, 10),
            (Kind::Bandwidth, false) => (20, 2),
        };
        Pass {
            warmup: self.warmup.unwrap_or(warmup),
            iters: self.iterations.unwrap_or(iters),
            per_op: self.per_op,
        }
    }
}

impl Plan {
    /// The windows window_scale keeps alive at once: `-W`, else 1000.
    pub fn window_count(&self) -> usize {
        self.window_given.unwrap_or(1000)
    }

    /// The bytes per rank of each window of window_scale: `-m`'s largest size, else 8.
    pub fn window_bytes(&self) -> usize {
        if self.sizes_given { self.sizes.max } else { 8 }
    }

    /// The sizes of shared_alloc: `-m`'s, else 1, 8 and 16 GiB.
    pub fn shared_sizes(&self) -> Vec<usize> {
        match self.sizes_given {
            true => self.sizes.iter().collect(),
            false => vec![1 << 30, 8 << 30, 16 << 30],
        }
    }

    /// The smallest message after 0 and the largest of imb: `-m`, else IMB's 1 to 4 MiB.
    pub fn imb_sizes(&self) -> (usize, usize) {
        match self.sizes_given {
            true => (self.sizes.min, self.sizes.max),
            false => (1, imb::MAX_SIZE),
        }
    }

    /// The warm-up and timed iterations of imb at `size` bytes in `mode`: IMB's unless -x /
    /// -i say otherwise.
    pub fn imb_pass(&self, size: usize, mode: Option<imb::Mode>) -> (usize, usize) {
        let iters = self.iterations.unwrap_or(imb::repetitions(size, mode));
        (self.warmup.unwrap_or(imb::warmup(iters)), iters)
    }
}

/// MPI_ERR_ARG unless `test` can run with `--target target`: a busy rank 1 needs a
/// passive-target OSU test over a window with an end-of-loop word (not a dynamic one).
fn check_target(test: Test, args: &BenchArgs, target: Target) -> Result<()> {
    if target == Target::Wait {
        return Ok(());
    }
    if !test.is_osu() || test == Test::PutBibw {
        return Err(refuse(
            test,
            "--target",
            "the OSU tests of one origin (not put_bibw)",
        ));
    }
    let sync = args.sync.unwrap_or(SyncMode::Flush);
    if matches!(sync, SyncMode::Fence | SyncMode::Pscw) {
        return Err(usage(format!(
            "--target {} needs a passive-target -s (flush, flush_local, lock, lock_all), not -s {}",
            target.name(),
            sync.cli_name()
        )));
    }
    if args.creation == Some(Creation::Dynamic) {
        return Err(usage(format!(
            "--target {} needs a window with memory of its own: not -w dynamic",
            target.name()
        )));
    }
    Ok(())
}

/// MPI_ERR_ARG unless `test` can run with `-s sync` (`all`: some of its tests can).
fn check_sync(test: Test, sync: SyncMode) -> Result<()> {
    match test {
        Test::PutBibw if !matches!(sync, SyncMode::Fence | SyncMode::Pscw) => Err(usage(format!(
            "put_bibw takes -s pscw or -s fence (as OSU's), not -s {}",
            sync.cli_name()
        ))),
        Test::All => Ok(()),
        t if t.is_rate() && !matches!(sync, SyncMode::Flush | SyncMode::Fence) => {
            Err(usage(format!(
                "{} takes -s flush or -s fence, not -s {}",
                t.name(),
                sync.cli_name()
            )))
        }
        t if !t.is_osu() && !t.is_rate() => Err(refuse(t, "-s", "the OSU and rate tests")),
        _ => Ok(()),
    }
}
