//! `onesided bench TEST [options]`: the OSU one-sided micro-benchmarks (put/get latency and
//! bandwidth), measured the OSU way and printed as OSU prints them, plus two floor tests that
//! show what the hardware allows on this machine (single-thread memcpy bandwidth, and the
//! half round trip of an atomic flag in shared memory).
//!
//! Every test runs on exactly two ranks. Started directly, `bench` starts itself again as a job
//! of two ranks through the launcher and exits with the job's exit code; started by
//! `onesided run -n 2`, it uses the job's ranks. Rank 0 issues the operations, times and prints.

mod floor;
mod options;
mod report;
mod rma;

pub use options::{Sizes, parse_sizes};

use crate::launch::{self, Job};
use onesided::World;
use onesided::launcher::ENV_TRANSPORT;
use onesided::{Config, ProcessManager, TransportChoice};
use onesided::{Error, ErrorClass, Result};
use options::{Kind, Pass, Plan};
use report::Report;
use rma::Op;
use std::time::{Duration, Instant};

/// A benchmark of `onesided bench`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
#[value(rename_all = "snake_case")]
pub enum Test {
    /// MPI_Put latency (osu_put_latency).
    PutLatency,
    /// MPI_Get latency (osu_get_latency).
    GetLatency,
    /// MPI_Put bandwidth (osu_put_bw).
    PutBw,
    /// MPI_Get bandwidth (osu_get_bw).
    GetBw,
    /// MPI_Compare_and_swap latency (osu_cas_latency), 8 bytes.
    CasLatency,
    /// Floor: single-thread memcpy bandwidth in one process.
    MemcpyBw,
    /// Floor: half round trip of an atomic flag ping-pong through shared memory.
    AtomicPingpong,
    /// Every test above in sequence.
    All,
}

impl Test {
    /// The tests `all` runs, in order.
    const EVERY: [Test; 7] = [
        Test::PutLatency,
        Test::GetLatency,
        Test::PutBw,
        Test::GetBw,
        Test::CasLatency,
        Test::MemcpyBw,
        Test::AtomicPingpong,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Test::PutLatency => "put_latency",
            Test::GetLatency => "get_latency",
            Test::PutBw => "put_bw",
            Test::GetBw => "get_bw",
            Test::CasLatency => "cas_latency",
            Test::MemcpyBw => "memcpy_bw",
            Test::AtomicPingpong => "atomic_pingpong",
            Test::All => "all",
        }
    }

    /// Whether the test needs the second rank (memcpy_bw runs in one process).
    fn needs_peer(self) -> bool {
        self != Test::MemcpyBw
    }
}

/// The synchronization of the RMA tests' timed loops (`-s`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
#[value(rename_all = "snake_case")]
pub enum SyncMode {
    /// lock(SHARED) once; every iteration: operation(s), then flush.
    Flush,
    /// lock(SHARED) once; every iteration: operation(s), then flush_local.
    FlushLocal,
    /// Every iteration: lock(SHARED), operation(s), unlock.
    Lock,
    /// Every iteration: lock_all, operation(s), unlock_all.
    LockAll,
    /// Active target: fences on both ranks.
    Fence,
}

impl SyncMode {
    /// The MPI calls, as OSU names them in its header.
    fn mpi_name(self) -> &'static str {
        match self {
            SyncMode::Flush => "MPI_Win_flush",
            SyncMode::FlushLocal => "MPI_Win_flush_local",
            SyncMode::Lock => "MPI_Win_lock/unlock",
            SyncMode::LockAll => "MPI_Win_lock_all/unlock_all",
            SyncMode::Fence => "MPI_Win_fence",
        }
    }
}

/// How the RMA tests create their windows (`-w`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
#[value(rename_all = "snake_case")]
pub enum Creation {
    /// Window::allocate (MPI_Win_allocate).
    Allocate,
    /// Window::create over memory the benchmark lends (MPI_Win_create).
    Create,
}

impl Creation {
    fn mpi_name(self) -> &'static str {
        match self {
            Creation::Allocate => "MPI_Win_allocate",
            Creation::Create => "MPI_Win_create",
        }
    }
}

/// Command-line arguments of `onesided bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// The test to run.
    #[arg(value_enum, value_name = "TEST")]
    pub test: Test,
    /// Synchronization of the RMA tests [default: flush].
    #[arg(short = 's', value_enum, value_name = "SYNC")]
    pub sync: Option<SyncMode>,
    /// Window creation of the RMA tests [default: allocate].
    #[arg(short = 'w', value_enum, value_name = "WIN")]
    pub creation: Option<Creation>,
    /// Message sizes, powers of two with an optional K or M suffix [default: 1:4M].
    #[arg(short = 'm', value_name = "[MIN:]MAX", value_parser = parse_sizes)]
    pub sizes: Option<Sizes>,
    /// Timed iterations per size [default: OSU's, by test and size].
    #[arg(short = 'i', value_name = "ITER")]
    pub iterations: Option<usize>,
    /// Warm-up iterations per size [default: OSU's, by test and size].
    #[arg(short = 'x', value_name = "WARMUP")]
    pub warmup: Option<usize>,
    /// Operations per synchronization in the bandwidth tests [default: 64].
    #[arg(short = 'W', value_name = "WINDOW")]
    pub window: Option<usize>,
    /// Transport: auto (shared memory on one node) or fabric (libfabric for every target;
    /// provider from FI_PROVIDER) [default: auto, or ONESIDED_TRANSPORT].
    #[arg(long, value_name = "auto|fabric", value_parser = TransportChoice::parse)]
    pub transport: Option<TransportChoice>,
}

/// Runs `onesided bench` with parsed arguments; returns the process exit code: 0, 2 for
/// invalid arguments, 1 for other errors (printed to stderr as `onesided bench: <error>`).
///
/// Outside a job, a test that needs two ranks starts the current program again, with this
/// process's command-line arguments, as a job of 2 ranks: call it from the `onesided` command.
pub fn run_cli(args: BenchArgs) -> i32 {
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("onesided bench: {e}");
            if e.class() == ErrorClass::Arg { 2 } else { 1 }
        }
    }
}

/// Runs the benchmark; started directly, as a job of 2 ranks. Returns the exit code.
fn run(args: &BenchArgs) -> Result<i32> {
    let plan = Plan::new(args)?;
    let mut config = Config::from_env()?;
    if let Some(t) = args.transport {
        config = config.transport(t);
    }
    let pm = onesided::launcher::process_manager(&config)?;
    if args.test.needs_peer() && pm == ProcessManager::Singleton {
        let transport = vec![(
            ENV_TRANSPORT.to_owned(),
            config.transport_choice().as_str().to_owned(),
        )];
        let program = std::env::current_exe().map_err(|e| Error::os("finding this program", e))?;
        return launch::run(&Job {
            n: 2,
            program,
            args: std::env::args_os().skip(1).collect(),
            tag_output: false,
            simulate_nodes: None,
            extra_env: transport,
            bind: launch::Bind::Auto,
        });
    }
    let world = World::init_with(config)?;
    if args.test.needs_peer() && world.size() != 2 {
        // Every rank fails the same way; one message is enough.
        if world.rank() != 0 {
            return Ok(2);
        }
        return Err(Error::new(
            ErrorClass::Arg,
            format!(
                "{} needs exactly 2 ranks; this job has {}",
                args.test.name(),
                world.size()
            ),
        ));
    }
    let mut report = Report::new(world.rank());
    match args.test {
        Test::All => Test::EVERY
            .iter()
            .try_for_each(|&t| one(&world, t, &plan, &mut report))?,
        t => one(&world, t, &plan, &mut report)?,
    }
    Ok(0)
}

/// Runs one test (not `all`).
fn one(world: &World, test: Test, plan: &Plan, report: &mut Report) -> Result<()> {
    match test {
        Test::PutLatency => rma::sweep(world, Op::Put, Kind::Latency, plan, report),
        Test::GetLatency => rma::sweep(world, Op::Get, Kind::Latency, plan, report),
        Test::PutBw => rma::sweep(world, Op::Put, Kind::Bandwidth, plan, report),
        Test::GetBw => rma::sweep(world, Op::Get, Kind::Bandwidth, plan, report),
        Test::CasLatency => rma::sweep(world, Op::Cas, Kind::Latency, plan, report),
        Test::MemcpyBw => floor::memcpy_bw(world, plan, report),
        Test::AtomicPingpong => floor::atomic_pingpong(world, plan, report),
        Test::All => Err(Error::new(ErrorClass::Intern, "`all` inside `all`")),
    }
}

/// Runs `body` `pass.warmup` times, then `pass.iters` times under the clock; returns the time
/// of the timed iterations.
#[inline(always)]
fn timed(pass: Pass, mut body: impl FnMut() -> Result<()>) -> Result<Duration> {
    for _ in 0..pass.warmup {
        body()?;
    }
    let start = Instant::now();
    for _ in 0..pass.iters {
        body()?;
    }
    Ok(start.elapsed())
}

/// Microseconds per unit, `units` units in `time` (counts as f64: -i may be huge).
fn micros(time: Duration, units: f64) -> f64 {
    time.as_secs_f64() * 1e6 / units
}

/// MB/s (1 MB = 1e6 B) of `bytes` bytes moved in `time`.
fn mbps(time: Duration, bytes: f64) -> f64 {
    bytes / 1e6 / time.as_secs_f64()
}
