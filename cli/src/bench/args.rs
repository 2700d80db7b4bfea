//! The command line of `onesided bench`: the tests, their synchronization modes, window
//! creation, datatypes, output formats and options, as clap parses them.

use super::busy;
use super::imb::Benchmark;
use super::sizes::{Sizes, parse_sizes};
use std::path::PathBuf;

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
    /// MPI_Put bi-directional bandwidth (osu_put_bibw), pscw or fence.
    PutBibw,
    /// MPI_Accumulate latency, MPI_SUM of -T elements (osu_acc_latency).
    AccLatency,
    /// MPI_Get_accumulate latency, MPI_SUM of -T elements (osu_get_acc_latency).
    GetAccLatency,
    /// MPI_Fetch_and_op latency, MPI_SUM of one -T element (osu_fop_latency).
    FopLatency,
    /// MPI_Compare_and_swap latency, one -T element (osu_cas_latency).
    CasLatency,
    /// Half round trip of Size bytes handed over with put_notify + wait_notify, against put +
    /// flush + a flag put the target polls (notified RMA, not MPI-4.1).
    NotifyLatency,
    /// N ranks: time per MPI_Win_fence with nothing in between.
    FenceLatency,
    /// N ranks: time per barrier (Comm::barrier).
    BarrierLatency,
    /// N ranks each increment a counter on rank 0 under an exclusive lock; time per increment.
    LockContention,
    /// N ranks each add 1 to a counter on rank 0 with fetch_and_op; time per increment.
    FopContention,
    /// N ranks: every rank puts Size bytes into every other rank's window, per fence epoch.
    AlltoallPut,
    /// N ranks: rounds of a seeded mix of fence, PSCW, lock and lock_all epochs (about 20
    /// operations per rank) and two barriers; time per round.
    MixedEpochs,
    /// N ranks: time to create a window, the job's first and later ones.
    WindowCreate,
    /// N ranks: -W windows (1000 unless told) alive at once: time to create and free one, and
    /// the memory and file descriptors each holds.
    WindowScale,
    /// N ranks: Window::allocate_shared of Size bytes in all (1 GiB to 16 GiB unless told):
    /// time to allocate and free, memory before use.
    SharedAlloc,
    /// Message rate of 8-byte puts, each followed by a flush, from -t threads of rank 0 sharing
    /// one window (Window::share), to the other ranks (RMA-MT's put rate); not part of `all`.
    PutRate,
    /// As put_rate, with 8-byte gets.
    GetRate,
    /// As put_rate, with fetch_and_op (MPI_SUM of one u64).
    FopRate,
    /// As put_rate, with an accumulate of four u64 (MPI_SUM).
    AccRate,
    /// As put_rate, with put_notify (each thread its own notification id).
    NotifyRate,
    /// Floor: single-thread memcpy bandwidth in one process.
    MemcpyBw,
    /// Floor: half round trip of an atomic flag ping-pong through shared memory.
    AtomicPingpong,
    /// Every test above in sequence.
    All,
    /// N ranks: the benchmarks of IMB-RMA (Intel MPI Benchmarks), those named after `imb`
    /// (all 19 when none is), printed as IMB prints them; not part of `all`.
    Imb,
}

impl Test {
    /// The tests `all` runs, in order: those of 2 ranks, then the N-rank tests.
    pub(super) const EVERY: [Test; 21] = [
        Test::PutLatency,
        Test::GetLatency,
        Test::PutBw,
        Test::GetBw,
        Test::PutBibw,
        Test::AccLatency,
        Test::GetAccLatency,
        Test::FopLatency,
        Test::CasLatency,
        Test::NotifyLatency,
        Test::MemcpyBw,
        Test::AtomicPingpong,
        Test::FenceLatency,
        Test::BarrierLatency,
        Test::LockContention,
        Test::FopContention,
        Test::AlltoallPut,
        Test::MixedEpochs,
        Test::WindowCreate,
        Test::WindowScale,
        Test::SharedAlloc,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Test::PutLatency => "put_latency",
            Test::GetLatency => "get_latency",
            Test::PutBw => "put_bw",
            Test::GetBw => "get_bw",
            Test::PutBibw => "put_bibw",
            Test::AccLatency => "acc_latency",
            Test::GetAccLatency => "get_acc_latency",
            Test::FopLatency => "fop_latency",
            Test::CasLatency => "cas_latency",
            Test::NotifyLatency => "notify_latency",
            Test::FenceLatency => "fence_latency",
            Test::BarrierLatency => "barrier_latency",
            Test::LockContention => "lock_contention",
            Test::FopContention => "fop_contention",
            Test::AlltoallPut => "alltoall_put",
            Test::MixedEpochs => "mixed_epochs",
            Test::WindowCreate => "window_create",
            Test::WindowScale => "window_scale",
            Test::SharedAlloc => "shared_alloc",
            Test::PutRate => "put_rate",
            Test::GetRate => "get_rate",
            Test::FopRate => "fop_rate",
            Test::AccRate => "acc_rate",
            Test::NotifyRate => "notify_rate",
            Test::MemcpyBw => "memcpy_bw",
            Test::AtomicPingpong => "atomic_pingpong",
            Test::All => "all",
            Test::Imb => "imb",
        }
    }

    /// One of OSU's one-sided tests (2 ranks, `-s` and `-w`).
    pub(super) fn is_osu(self) -> bool {
        matches!(
            self,
            Test::PutLatency
                | Test::GetLatency
                | Test::PutBw
                | Test::GetBw
                | Test::PutBibw
                | Test::AccLatency
                | Test::GetAccLatency
                | Test::FopLatency
                | Test::CasLatency
        )
    }

    /// A test of N ranks (`-n`).
    pub(super) fn is_group(self) -> bool {
        matches!(
            self,
            Test::FenceLatency
                | Test::BarrierLatency
                | Test::LockContention
                | Test::FopContention
                | Test::AlltoallPut
                | Test::MixedEpochs
                | Test::WindowCreate
                | Test::WindowScale
                | Test::SharedAlloc
                | Test::Imb
        )
    }

    /// A message-rate test of rank 0's threads (`-t`), on `-n` ranks (2 unless told).
    pub(super) fn is_rate(self) -> bool {
        matches!(
            self,
            Test::PutRate | Test::GetRate | Test::FopRate | Test::AccRate | Test::NotifyRate
        )
    }

    /// A test with W operations per synchronization (`-W`).
    pub(super) fn is_windowed(self) -> bool {
        matches!(
            self,
            Test::PutBw | Test::GetBw | Test::PutBibw | Test::MemcpyBw
        )
    }

    /// A test of the accumulate family, which takes an element type (`-T`).
    pub(super) fn is_typed(self) -> bool {
        matches!(
            self,
            Test::AccLatency | Test::GetAccLatency | Test::FopLatency | Test::CasLatency
        )
    }

    /// A test that sweeps message sizes (`-m`).
    pub(super) fn is_sized(self) -> bool {
        matches!(
            self,
            Test::PutLatency
                | Test::GetLatency
                | Test::PutBw
                | Test::GetBw
                | Test::PutBibw
                | Test::AccLatency
                | Test::GetAccLatency
                | Test::NotifyLatency
                | Test::AlltoallPut
                | Test::MemcpyBw
                | Test::WindowScale
                | Test::SharedAlloc
                | Test::Imb
        )
    }

    /// The ranks the test runs on when started directly (memcpy_bw: one process; `all`: a job
    /// of 2 ranks first); `n` is `-n`.
    pub(super) fn job_ranks(self, n: usize) -> usize {
        match self {
            Test::MemcpyBw => 1,
            t if t.is_group() || t.is_rate() => n,
            _ => 2,
        }
    }
}

/// The synchronization of the OSU tests' timed loops (`-s`).
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
    /// Active target: post/start/complete/wait (put_bibw's default, as OSU's).
    Pscw,
}

impl SyncMode {
    /// The MPI calls, as OSU names them in its header.
    pub(super) fn mpi_name(self) -> &'static str {
        match self {
            SyncMode::Flush => "MPI_Win_flush",
            SyncMode::FlushLocal => "MPI_Win_flush_local",
            SyncMode::Lock => "MPI_Win_lock/unlock",
            SyncMode::LockAll => "MPI_Win_lock_all/unlock_all",
            SyncMode::Fence => "MPI_Win_fence",
            SyncMode::Pscw => "MPI_Win_post/start/complete/wait",
        }
    }

    /// The value of `-s`.
    pub(super) fn cli_name(self) -> &'static str {
        match self {
            SyncMode::Flush => "flush",
            SyncMode::FlushLocal => "flush_local",
            SyncMode::Lock => "lock",
            SyncMode::LockAll => "lock_all",
            SyncMode::Fence => "fence",
            SyncMode::Pscw => "pscw",
        }
    }
}

/// How the OSU tests create their windows (`-w`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
#[value(rename_all = "snake_case")]
pub enum Creation {
    /// Window::allocate (MPI_Win_allocate).
    Allocate,
    /// Window::create over memory the benchmark lends (MPI_Win_create).
    Create,
    /// Window::create over memory from Comm::alloc_mem (MPI_Alloc_mem, MPI_Win_create); the
    /// origin buffers of put and get come from alloc_mem too.
    AllocMem,
    /// Window::create_dynamic with the benchmark's memory attached (MPI_Win_create_dynamic,
    /// MPI_Win_attach); operations address the peer's memory by its address.
    Dynamic,
}

impl Creation {
    pub(super) fn mpi_name(self) -> &'static str {
        match self {
            Creation::Allocate => "MPI_Win_allocate",
            Creation::Create | Creation::AllocMem => "MPI_Win_create",
            Creation::Dynamic => "MPI_Win_create_dynamic",
        }
    }
}

/// The element type of the accumulate tests (`-T`), with OSU's names for it.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
#[value(rename_all = "snake_case")]
pub enum Datatype {
    /// 32-bit signed integers (MPI_INT).
    Int,
    /// 64-bit signed integers (MPI_LONG).
    Long,
    /// 32-bit floats (MPI_FLOAT).
    Float,
    /// 64-bit floats (MPI_DOUBLE).
    Double,
}

impl Datatype {
    pub(super) fn mpi_name(self) -> &'static str {
        match self {
            Datatype::Int => "MPI_INT",
            Datatype::Long => "MPI_LONG",
            Datatype::Float => "MPI_FLOAT",
            Datatype::Double => "MPI_DOUBLE",
        }
    }
}

/// How the results are printed (`--format`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
#[value(rename_all = "snake_case")]
pub enum Format {
    /// OSU's tables: `#` header lines, then `Size  value` rows (the median of the repetitions).
    Osu,
    /// One JSON document (format `onesided-bench/1`): the context and one record per size.
    Json,
    /// A header line, then one row per size (the fields of the JSON records).
    Csv,
}

/// The part of `all` a job runs (set by `all` when it starts its two jobs).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
#[value(rename_all = "snake_case")]
pub enum Part {
    /// The tests of 2 ranks: OSU's and the floors.
    Pairs,
    /// The N-rank tests.
    Groups,
}

/// Command-line arguments of `onesided bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// The test to run.
    #[arg(value_enum, value_name = "TEST")]
    pub test: Test,
    /// The IMB-RMA benchmarks `imb` runs, by IMB's names in any case (Unidir_put ...
    /// Truly_passive_put) [default: all 19, in IMB's order].
    #[arg(value_enum, value_name = "BENCHMARK", ignore_case = true)]
    pub benchmarks: Vec<Benchmark>,
    /// Synchronization of the OSU tests, and of the rate tests (flush or fence) [default:
    /// flush; put_bibw: pscw].
    #[arg(short = 's', value_enum, value_name = "SYNC")]
    pub sync: Option<SyncMode>,
    /// Window creation of the OSU tests and imb [default: allocate; imb: create, as IMB's].
    #[arg(short = 'w', value_enum, value_name = "WIN")]
    pub creation: Option<Creation>,
    /// Message sizes: MAX, MIN:MAX, MIN: or :MAX, in bytes with an optional K or M suffix;
    /// sizes run from MIN, doubling up to MAX [default: 1:4M; imb: 0, then 1:4M].
    #[arg(short = 'm', value_name = "[MIN:]MAX", value_parser = parse_sizes)]
    pub sizes: Option<Sizes>,
    /// Timed iterations per repetition [default: OSU's, by test and size; imb: IMB's, 1000 or
    /// 40 MiB / size if fewer].
    #[arg(short = 'i', value_name = "ITER")]
    pub iterations: Option<usize>,
    /// Warm-up iterations per size, before the first repetition [default: OSU's, by test and
    /// size; imb: IMB's, a tenth of the iterations, at least 10].
    #[arg(short = 'x', value_name = "WARMUP")]
    pub warmup: Option<usize>,
    /// Element type of the accumulate tests (acc_latency, get_acc_latency, fop_latency,
    /// cas_latency), as OSU's `-T` [default: int].
    #[arg(short = 'T', value_enum, value_name = "TYPE")]
    pub datatype: Option<Datatype>,
    /// Operations per synchronization in the bandwidth tests [default: 64]; window_scale: the
    /// windows alive at once [default: 1000].
    #[arg(short = 'W', value_name = "WINDOW")]
    pub window: Option<usize>,
    /// Ranks of the N-rank tests (fence_latency, barrier_latency, lock_contention,
    /// fop_contention, alltoall_put, mixed_epochs, window_create, imb) and of the rate tests
    /// [default: 4, rate tests 2; inside a job: the job's].
    #[arg(short = 'n', long = "ranks", value_name = "N")]
    pub ranks: Option<usize>,
    /// Threads of rank 0 in the rate tests (put_rate, get_rate, fop_rate, acc_rate,
    /// notify_rate), each making the test's calls through one shared window; 0: rank 0's own
    /// thread calls the window itself, without sharing it [default: 1]. notify_latency -t 1:
    /// each rank's notified hand-offs are made by a thread of its own through the shared window
    /// [default: 0].
    #[arg(short = 't', long = "threads", value_name = "T")]
    pub threads: Option<usize>,
    /// Start the job as K simulated nodes, as `onesided run --simulate-nodes K` does: a window
    /// then reaches the ranks of its node through shared memory and the others through the
    /// network transport (the cluster's shape on one machine). The JSON context records the
    /// nodes. Only where `bench` starts the job itself.
    #[arg(long, value_name = "K")]
    pub simulate_nodes: Option<usize>,
    /// Output: OSU's tables, one JSON document, or CSV rows.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = Format::Osu)]
    pub format: Format,
    /// Timed repetitions per size; json and csv report min, median, max, p10 and p90 over them,
    /// osu prints the median [default: 1 for osu, 5 for json and csv].
    #[arg(short = 'r', long = "repetitions", value_name = "R")]
    pub repetitions: Option<usize>,
    /// Transport: auto (shared memory on one node), fabric (libfabric for every target;
    /// provider from FI_PROVIDER) or verbs (direct verbs for every target) [default: auto, or
    /// ONESIDED_TRANSPORT].
    #[arg(long, value_name = "auto|fabric|verbs", value_parser = onesided::TransportChoice::parse)]
    pub transport: Option<onesided::TransportChoice>,
    /// Time each iteration of an OSU test on its own and report the median iteration, as
    /// latency probes such as the C floor of libfabric do, instead of OSU's mean over the loop
    /// (which a preempted iteration raises on a shared machine).
    #[arg(long)]
    pub per_op: bool,
    /// What rank 1 does while rank 0 times a passive-target OSU test (-s flush, flush_local,
    /// lock, lock_all; not over dynamic windows)
    #[arg(long, value_enum, value_name = "TARGET")]
    pub target: Option<busy::Target>,
    /// The part of `all` this job runs (set by `all` for its jobs).
    #[arg(long, value_enum, hide = true)]
    pub part: Option<Part>,
    /// Write the results as JSON to this file instead of printing them (set by `all`).
    #[arg(long, hide = true, value_name = "PATH")]
    pub results_file: Option<PathBuf>,
}
