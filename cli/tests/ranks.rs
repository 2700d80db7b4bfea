//! Multi-process tests: every scenario runs as real ranks started by the real launcher.
//!
//! This one executable plays two parts. Started by `cargo test`, it is a libtest-mimic harness
//! with one trial per (scenario, variant, rank count); each trial starts
//! `onesided run -n N -- <this executable>` with `ONESIDED_SCENARIO=<scenario>` (and the window
//! flavor of the variant in `ONESIDED_TEST_FLAVOR`, and the transport's settings), within a time limit, and checks the exit
//! status and output. Started with `ONESIDED_SCENARIO` set, it is a rank: it joins the world,
//! runs the scenario, prints `ok <scenario> rank R/N` and exits 0, or prints what broke and
//! exits 1.
//!
//! A scenario is a `fn(&World, Flavor) -> Result<(), String>` that uses only the public API, so
//! the same scenarios run over every transport of [`OVERS`]: shared memory, and the fabric
//! forced for every target over libfabric's tcp provider (with the provider's MR mode and
//! accumulates served by the target; and with the verbs provider's MR mode, the NIC's 64-bit
//! atomics and emulated accumulates), and over its shm provider (its native atomics; and
//! accumulates served by the target). Where a verbs device is present (software RoCE in the
//! guest of `rxe/run.sh`, as CI runs it), also over libfabric's `verbs;ofi_rxm` and over the
//! direct verbs transport, at 2 and 3 ranks. Trial names start with the transport.

#[macro_use]
#[path = "ranks/util.rs"]
mod util;
#[path = "ranks/alloc.rs"]
mod alloc;
#[path = "ranks/atomics.rs"]
mod atomics;
#[path = "ranks/batches.rs"]
mod batches;
#[path = "ranks/dynamic.rs"]
mod dynamic;
#[path = "ranks/edge.rs"]
mod edge;
#[path = "ranks/errors.rs"]
mod errors;
#[path = "ranks/failure.rs"]
mod failure;
#[path = "ranks/fence.rs"]
mod fence;
#[path = "ranks/fuzz.rs"]
mod fuzz;
#[path = "ranks/harness.rs"]
mod harness;
#[path = "ranks/hints.rs"]
mod hints;
#[path = "ranks/noncontig.rs"]
mod noncontig;
#[path = "ranks/notify.rs"]
mod notify;
#[path = "ranks/passive.rs"]
mod passive;
#[path = "ranks/pm.rs"]
mod pm;
#[path = "ranks/pscw.rs"]
mod pscw;
#[path = "ranks/requests.rs"]
mod requests;
#[path = "ranks/shared.rs"]
mod shared;
#[path = "cluster/slurm.rs"]
mod slurm;
#[path = "ranks/soundness.rs"]
mod soundness;
#[path = "ranks/stress.rs"]
mod stress;
#[path = "ranks/threads.rs"]
mod threads;
#[path = "ranks/typed.rs"]
mod typed;
#[path = "ranks/world.rs"]
mod world;

use libtest_mimic::{Arguments, Failed, Trial};
use onesided::{Flavor, ThreadLevel, World};
use onesided_shm::process::{SIGKILL, signal_name};
use pm::{ALL_PMS, Pm};

const SIGABRT: i32 = 6;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use util::{ALL_FLAVORS, ENV_FLAVOR, Res, flavor_name};

/// Environment variable that turns this executable into a rank of the named scenario.
const ENV_SCENARIO: &str = "ONESIDED_SCENARIO";

/// How fast the launcher must end a job after a rank was killed.
const FAILURE_LIMIT: Duration = Duration::from_secs(10);

/// [`FAILURE_LIMIT`] for jobs over `over`: scaled for libfabric's providers in the emulated
/// guest of `rxe/run.sh`, whose waits on a dead peer run through rxm's own timers there; the
/// direct verbs transport is held to the bound itself.
fn failure_limit(over: &Over) -> Duration {
    match over.fabric {
        true => util::scaled(FAILURE_LIMIT),
        false => FAILURE_LIMIT,
    }
}

/// What a job of a scenario must end with.
#[derive(Clone, Copy)]
enum Expect {
    /// Every rank prints `ok` and the launcher exits 0.
    Success,
    /// The rank `victim(n)` dies by `signal`: the launcher exits with 128 + `signal` within
    /// [`FAILURE_LIMIT`], names the rank and the signal, and leaves no segment behind. With
    /// `reported`, every other rank must also print that its blocked call failed with
    /// MPI_ERR_PROC_FAILED. The job's stderr must contain `says`.
    Killed {
        signal: i32,
        victim: fn(usize) -> usize,
        reported: bool,
        says: &'static str,
    },
    /// Rank `rank` returns an error saying `says`: the job ends within [`FAILURE_LIMIT`] with
    /// a failure status and leaves no segment behind, whatever the other ranks were doing.
    Fails { rank: usize, says: &'static str },
}

/// A transport configuration the whole suite runs over: one definition of every scenario, run
/// over every transport (as UCX's gtest does), skipping only by capability.
struct Over {
    name: &'static str,
    env: &'static [(&'static str, &'static str)],
    /// Needs the fabric transport (libfabric at build time).
    fabric: bool,
    /// Needs a verbs device (listed only where one is present, or `ONESIDED_REQUIRE_VERBS=1`).
    verbs: bool,
    /// What a program gets with nothing set: the path every process manager runs.
    default: bool,
    /// A rank killed in a job leaves the transport's segments in /dev/shm (libfabric's shm
    /// provider), which the launcher or the next job must remove.
    leaves_segments: bool,
}

static OVERS: &[Over] = &[
    Over {
        name: "shm",
        env: &[("ONESIDED_TRANSPORT", "auto")],
        fabric: false,
        verbs: false,
        default: true,
        leaves_segments: false,
    },
    Over {
        name: "fabric_tcp",
        env: &[
            ("ONESIDED_TRANSPORT", "fabric"),
            ("FI_PROVIDER", "tcp"),
            ("ONESIDED_MR_MODE", "provider"),
            ("ONESIDED_FABRIC_ATOMICS", "auto"),
        ],
        fabric: true,
        verbs: false,
        default: false,
        leaves_segments: false,
    },
    // The paths InfiniBand takes (verbs MR mode and atomics), and progress threads that poll
    // instead of sleeping in a wait object.
    Over {
        name: "fabric_tcp_verbs",
        env: &[
            ("ONESIDED_TRANSPORT", "fabric"),
            ("FI_PROVIDER", "tcp"),
            ("ONESIDED_MR_MODE", "verbs"),
            ("ONESIDED_FABRIC_ATOMICS", "verbs"),
            ("ONESIDED_FABRIC_PROGRESS", "poll"),
        ],
        fabric: true,
        verbs: false,
        default: false,
        leaves_segments: false,
    },
    Over {
        name: "fabric_shm",
        env: &[
            ("ONESIDED_TRANSPORT", "fabric"),
            ("FI_PROVIDER", "shm"),
            ("ONESIDED_MR_MODE", "provider"),
            ("ONESIDED_FABRIC_ATOMICS", "auto"),
        ],
        fabric: true,
        verbs: false,
        default: false,
        leaves_segments: true,
    },
    // Every accumulate served by its target over the shm provider too (over tcp, `auto`
    // serves them).
    Over {
        name: "fabric_shm_served",
        env: &[
            ("ONESIDED_TRANSPORT", "fabric"),
            ("FI_PROVIDER", "shm"),
            ("ONESIDED_MR_MODE", "provider"),
            ("ONESIDED_FABRIC_ATOMICS", "served"),
        ],
        fabric: true,
        verbs: false,
        default: false,
        leaves_segments: true,
    },
    // libfabric's verbs provider under rxm, as InfiniBand and RoCE clusters run it: real memory
    // registration (FI_MR_LOCAL), the atomics the device reports. Nothing set for rxe's small
    // completion queues: onesided sizes what it asks of rxm itself.
    Over {
        name: "fabric_verbs",
        env: &[
            ("ONESIDED_TRANSPORT", "fabric"),
            ("FI_PROVIDER", "verbs;ofi_rxm"),
            ("ONESIDED_MR_MODE", "provider"),
            ("ONESIDED_FABRIC_ATOMICS", "auto"),
        ],
        fabric: true,
        verbs: true,
        default: false,
        leaves_segments: false,
    },
    // The direct verbs transport: RC queue pairs, the NIC's own atomics, no progress thread.
    Over {
        name: "verbs",
        env: &[("ONESIDED_TRANSPORT", "verbs")],
        fabric: false,
        verbs: true,
        default: false,
        leaves_segments: false,
    },
];

/// Whether the verbs transports are tested here: a verbs device with an active port is
/// present, or `ONESIDED_RXE=1` (set in the guest of `rxe/run.sh`) says one must be (then
/// their trials fail without one, instead of being left out).
fn verbs_here() -> bool {
    std::env::var("ONESIDED_RXE").as_deref() == Ok("1") || onesided_verbs::active_device().is_some()
}

/// The window flavors a scenario runs with over `over`: all it lists, but over the verbs
/// transports not `allocate_shared` beside `allocate` (its memory is the node segment's, as
/// `allocate`'s is: the same registered memory to the NIC), which keeps the emulated guest's
/// stage within its time.
fn verbs_flavors(over: &Over, flavors: &'static [Flavor]) -> impl Iterator<Item = Flavor> {
    let shared_as_allocate = over.verbs && flavors.contains(&Flavor::Allocate);
    flavors
        .iter()
        .copied()
        .filter(move |&f| !(shared_as_allocate && f == Flavor::Shared))
}

/// The rank counts the verbs transports run a scenario with: its counts of 2 and 3; else its
/// smallest where that is 4 (a scenario laid out for 4 ranks), else 3 (software RoCE runs under
/// instruction emulation, where every process is slow to start).
fn verbs_counts(counts: &[usize]) -> Vec<usize> {
    let small: Vec<usize> = counts
        .iter()
        .copied()
        .filter(|n| (2..=3).contains(n))
        .collect();
    match (small.is_empty(), counts.iter().min()) {
        (false, _) => small,
        (true, Some(&4)) => vec![4],
        (true, _) => vec![3],
    }
}

impl Over {
    fn apply(&self, cmd: &mut std::process::Command) {
        cmd.env_remove("ONESIDED_FABRIC_PROVIDER");
        for (k, v) in self.env {
            cmd.env(k, v);
        }
    }

    /// Why a scenario cannot run over this transport, if it cannot.
    fn skips(&self, sc: &Scenario) -> Option<&'static str> {
        if self.fabric && onesided_fabric::BUILT_WITH.is_none() {
            return Some("onesided was built without libfabric");
        }
        if self.verbs && onesided_verbs::BUILT_WITH.is_none() {
            return Some("onesided was built without the libibverbs headers");
        }
        if self.fabric && sc.target_may_stop {
            return Some(
                "it stops a rank with SIGSTOP, and libfabric's tcp and shm providers (and rxm's \
                 atomics over verbs) serve a target's memory from the target's own progress \
                 thread",
            );
        }
        None
    }
}

struct Scenario {
    name: &'static str,
    /// The scenario stops a rank (SIGSTOP) and needs its memory reachable meanwhile: true of
    /// shared memory and RDMA hardware, not of software providers.
    target_may_stop: bool,
    run: fn(&World, Flavor) -> Res,
    /// Flavors to run it with; empty: the scenario picks its windows itself.
    flavors: &'static [Flavor],
    /// Rank counts to launch it with.
    ranks: &'static [usize],
    /// Also run it without the launcher, as a world of size 1.
    direct: bool,
    /// Extra launcher arguments.
    launch: &'static [&'static str],
    /// Start each rank under a shell that ignores SIGTERM (`sh -c 'trap "" TERM; ...'`), as
    /// job scripts do, so that the launcher's SIGTERM cannot end the survivors.
    wrapped: bool,
    expect: Expect,
}

const fn scenario(
    name: &'static str,
    run: fn(&World, Flavor) -> Res,
    ranks: &'static [usize],
) -> Scenario {
    Scenario {
        name,
        run,
        target_may_stop: false,
        flavors: &[],
        ranks,
        direct: false,
        launch: &[],
        wrapped: false,
        expect: Expect::Success,
    }
}

const fn flavored(
    name: &'static str,
    run: fn(&World, Flavor) -> Res,
    ranks: &'static [usize],
) -> Scenario {
    Scenario {
        flavors: ALL_FLAVORS,
        ..scenario(name, run, ranks)
    }
}

/// A job in which rank `victim(n)` kills itself with SIGKILL.
const fn killed(victim: fn(usize) -> usize, reported: bool) -> Expect {
    Expect::Killed {
        signal: SIGKILL,
        says: "",
        victim,
        reported,
    }
}

const fn last(n: usize) -> usize {
    n - 1
}

const fn first(_: usize) -> usize {
    0
}

static SCENARIOS: &[Scenario] = &[
    Scenario {
        direct: true,
        ..flavored("fence::put_get", fence::put_get, &[2, 3, 4, 8])
    },
    flavored("fence::asserts", fence::asserts, &[2, 3]),
    flavored("fence::two_windows", fence::two_windows, &[2, 3]),
    flavored("fence::large_transfers", fence::large, &[2, 4]),
    Scenario {
        direct: true,
        ..flavored(
            "passive::exclusive_counter",
            passive::exclusive_counter,
            &[2, 4, 8],
        )
    },
    flavored("passive::shared_locks", passive::shared_locks, &[3, 4]),
    flavored("passive::lock_all_flush", passive::lock_all_flush, &[3, 8]),
    flavored(
        "passive::get_after_local_store",
        passive::get_after_local_store,
        &[2, 4],
    ),
    Scenario {
        target_may_stop: true,
        ..scenario(
            "stress::slow_rank_while_others_exit",
            stress::slow_rank_while_others_exit,
            &[4],
        )
    },
    Scenario {
        flavors: &[Flavor::Allocate],
        ..scenario(
            "stress::exclusive_amid_shared",
            stress::exclusive_amid_shared,
            &[8],
        )
    },
    Scenario {
        flavors: &[Flavor::Allocate],
        ..scenario(
            "stress::stopped_peer_costs_no_cpu",
            stress::stopped_peer_costs_no_cpu,
            &[2],
        )
    },
    scenario(
        "stress::stopped_waiter_source_exits",
        stress::stopped_waiter_source_exits,
        &[2],
    ),
    Scenario {
        expect: Expect::Killed {
            signal: SIGABRT,
            says: "aborting: memory lent to Window::create",
            victim: last,
            reported: false,
        },
        ..scenario(
            "soundness::panic_inside_create_aborts",
            soundness::panic_inside_create_aborts,
            &[2],
        )
    },
    flavored("atomics::counts", atomics::counts, &[2, 4]),
    flavored("atomics::cas_claims", atomics::cas_claims, &[3]),
    flavored("atomics::ops_and_types", atomics::ops_and_types, &[2, 3]),
    flavored("atomics::vectors", atomics::vectors, &[3]),
    flavored("atomics::vector_ops", atomics::vector_ops, &[2, 4]),
    flavored("notify::producers", notify::producers, &[2, 4]),
    flavored("notify::epochs", notify::epochs, &[2, 3]),
    flavored("pscw::ring", pscw::ring, &[2, 3, 8]),
    flavored("pscw::many_to_one", pscw::many_to_one, &[2, 4]),
    flavored("pscw::target_computes", pscw::target_computes, &[2]),
    flavored("pscw::errors", pscw::errors, &[2]),
    scenario("alloc_mem::create_window", alloc::create_window, &[2, 3, 8]),
    scenario("alloc_mem::target_computes", alloc::target_computes, &[2]),
    scenario("alloc_mem::errors", alloc::errors, &[2]),
    scenario("dynamic::put_get", dynamic::put_get, &[2, 3, 8]),
    scenario("dynamic::target_computes", dynamic::target_computes, &[2]),
    scenario("dynamic::errors", dynamic::errors, &[2, 3]),
    scenario("dynamic::lock_all_is_lazy", dynamic::lock_all_is_lazy, &[3]),
    scenario(
        "dynamic::detached_in_epoch",
        dynamic::detached_in_epoch,
        &[2, 3, 4],
    ),
    Scenario {
        launch: &["--simulate-nodes", "2"],
        ..scenario(
            "dynamic::detached_in_epoch_across_nodes",
            dynamic::detached_in_epoch,
            &[3, 4],
        )
    },
    flavored(
        "hints::accumulate_ordering",
        hints::accumulate_ordering,
        &[2, 4],
    ),
    flavored("hints::target_computes", hints::target_computes, &[2]),
    flavored("hints::accumulate_ops", hints::accumulate_ops, &[2, 4]),
    flavored(
        "hints::same_extents_and_bad_values",
        hints::same_extents_and_bad_values,
        &[2],
    ),
    flavored("noncontig::layouts", noncontig::layouts, &[2, 3]),
    flavored("noncontig::single_runs", noncontig::single_runs, &[2, 3]),
    flavored("noncontig::large_runs", noncontig::large_runs, &[2, 3]),
    flavored(
        "noncontig::target_computes",
        noncontig::target_computes,
        &[2],
    ),
    flavored("noncontig::errors", noncontig::errors, &[2]),
    flavored("batches::transfers", batches::transfers, &[2, 3]),
    flavored("batches::errors", batches::errors, &[2]),
    flavored("requests::overlap", requests::overlap, &[2, 3]),
    flavored("requests::accumulate", requests::accumulate, &[3]),
    flavored("requests::errors", requests::errors, &[2]),
    flavored("requests::gathered", requests::gathered, &[3]),
    flavored("requests::awaited", requests::awaited, &[2, 3]),
    scenario("typed::elements", typed::elements, &[2, 3]),
    scenario("typed::mixed_types", typed::mixed_types, &[2, 3]),
    flavored("threads::counts", threads::counts, &[2, 4]),
    flavored("threads::epochs", threads::epochs, &[2, 3]),
    flavored("threads::notified", threads::notified, &[2, 3]),
    flavored("threads::handoff", threads::handoff, &[2, 3]),
    flavored("threads::many_elements", threads::many_elements, &[2, 3]),
    scenario("threads::errors", threads::errors, &[2]),
    Scenario {
        flavors: &[Flavor::Allocate],
        ..scenario("threads::kept_lanes", threads::kept_lanes, &[2])
    },
    flavored("atomics::errors", atomics::errors, &[2]),
    flavored("atomics::target_sleeps", atomics::target_sleeps, &[2]),
    flavored("atomics::target_computes", atomics::target_computes, &[2]),
    scenario("shared::contiguous", shared::contiguous, &[2, 4, 8]),
    scenario("shared::noncontiguous", shared::noncontiguous, &[3, 4]),
    Scenario {
        flavors: &[Flavor::Allocate, Flavor::Create],
        ..scenario(
            "shared::query_other_flavors",
            shared::other_flavors,
            &[2, 3],
        )
    },
    flavored("errors::range", errors::range, &[2, 3]),
    flavored("errors::sync", errors::sync, &[2, 3]),
    flavored("errors::classes", errors::classes, &[2, 4]),
    flavored(
        "edge::unaligned_accumulates",
        edge::unaligned_accumulates,
        &[2, 4],
    ),
    Scenario {
        flavors: &[Flavor::Create],
        ..scenario(
            "edge::create_accumulates",
            edge::create_accumulates,
            &[2, 4],
        )
    },
    scenario("edge::memory_alignment", edge::memory_alignment, &[2, 3]),
    flavored("edge::refused_calls", edge::refused_calls, &[2, 3]),
    scenario("fuzz::random_calls", fuzz::random_calls, &[2, 4]),
    Scenario {
        direct: true,
        ..scenario("world::collectives", world::collectives, &[1, 2, 3, 8])
    },
    Scenario {
        launch: &["--simulate-nodes", "2"],
        ..scenario("world::simulated_nodes", world::nodes, &[3, 4, 8])
    },
    scenario(
        "world::barrier_separates",
        world::barrier_separates,
        &[2, 3, 8],
    ),
    Scenario {
        direct: true,
        ..scenario("world::init_once", world::init_once, &[2, 3])
    },
    scenario(
        "world::children_get_no_tcp_sockets",
        world::children_get_no_tcp_sockets,
        &[2, 3],
    ),
    Scenario {
        direct: true,
        ..scenario(
            "world::signal_handlers_stay",
            world::signal_handlers_stay,
            &[2],
        )
    },
    Scenario {
        launch: &["--simulate-nodes", "2"],
        ..scenario(
            "world::barrier_separates_nodes",
            world::barrier_separates,
            &[3, 4],
        )
    },
    Scenario {
        flavors: &[Flavor::Allocate, Flavor::Create],
        expect: killed(last, false),
        ..scenario("failure::sigkill_in_fence", failure::last_in_fence, &[4])
    },
    Scenario {
        flavors: &[Flavor::Shared],
        expect: killed(first, false),
        ..scenario(
            "failure::sigkill_of_rank_0_in_fence",
            failure::first_in_fence,
            &[3],
        )
    },
    Scenario {
        flavors: &[Flavor::Allocate],
        expect: killed(last, true),
        ..scenario(
            "failure::sigkill_in_fence_every_survivor_told",
            failure::last_in_fence_reported,
            &[4],
        )
    },
    Scenario {
        flavors: &[Flavor::Allocate, Flavor::Create],
        expect: killed(last, true),
        ..scenario(
            "failure::sigkill_holding_exclusive_lock",
            failure::holding_lock,
            &[3],
        )
    },
    Scenario {
        flavors: &[Flavor::Allocate, Flavor::Create],
        expect: killed(last, true),
        ..scenario(
            "failure::sigkill_holding_counter_lock",
            failure::lock_counter_holder_dies,
            &[4],
        )
    },
    // Memory lent by the dead rank (create): allocated memory lives on in the node segment,
    // where shared memory still reads it.
    Scenario {
        flavors: &[Flavor::Create],
        expect: killed(last, true),
        ..scenario(
            "failure::requests_to_dead_rank",
            failure::requests_to_dead_rank,
            &[3],
        )
    },
    Scenario {
        flavors: &[Flavor::Create],
        expect: killed(last, true),
        ..scenario(
            "failure::threads_to_dead_rank",
            failure::threads_to_dead_rank,
            &[3],
        )
    },
    Scenario {
        flavors: &[Flavor::Create],
        expect: killed(last, true),
        ..scenario(
            "failure::batch_to_dead_rank",
            failure::batch_to_dead_rank,
            &[3],
        )
    },
    Scenario {
        flavors: &[Flavor::Allocate],
        expect: killed(last, true),
        ..scenario(
            "failure::pscw_partner_dies",
            failure::pscw_partner_dies,
            &[3],
        )
    },
    Scenario {
        flavors: &[Flavor::Allocate],
        expect: killed(last, true),
        ..scenario("failure::notifier_dies", failure::notifier_dies, &[3])
    },
    Scenario {
        flavors: &[Flavor::Allocate],
        expect: killed(last, true),
        ..scenario("failure::sigkill_in_barrier", failure::in_barrier, &[2, 4])
    },
    Scenario {
        flavors: &[Flavor::Allocate, Flavor::Create],
        expect: Expect::Fails {
            rank: 1,
            says: "early return",
        },
        ..scenario("failure::early_return", failure::early_return, &[2])
    },
    Scenario {
        flavors: &[Flavor::Allocate],
        expect: killed(last, true),
        wrapped: true,
        ..scenario(
            "failure::sigkill_under_wrapper_shell",
            failure::last_in_fence_reported,
            &[4],
        )
    },
];

fn main() {
    if let Ok(name) = std::env::var(ENV_SCENARIO) {
        std::process::exit(rank_main(&name));
    }
    let args = Arguments::from_args();
    let conclusion = libtest_mimic::run(&args, trials());
    slurm::stop_shared();
    conclusion.exit();
}

/// The rank side: run scenario `name` in this process.
fn rank_main(name: &str) -> i32 {
    let Some(sc) = SCENARIOS.iter().find(|s| s.name == name) else {
        eprintln!("no scenario named {name:?}");
        return 2;
    };
    let flavor = match util::flavor_from_env() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    // The program's own handlers, before World::init loads anything.
    if sc.name == "world::signal_handlers_stay" {
        match onesided_shm::process::TerminationSignals::install() {
            Ok(signals) => {
                let _ = world::SIGNALS.set(signals);
            }
            Err(e) => {
                eprintln!("{name}: installing signal handlers: {e}");
                return 1;
            }
        }
    }
    // The scenarios of threads sharing a window (the fuzz test's bursts among them) are
    // MPI_THREAD_MULTIPLE: over direct verbs, their endpoints then have lanes.
    let world = match name.contains("threads") || name.starts_with("fuzz::") {
        true => World::init_thread(ThreadLevel::Multiple).map(|(w, _)| w),
        false => World::init(),
    };
    let world = match world {
        Ok(w) => w,
        Err(e) => {
            eprintln!("{name}: World::init: {e}");
            return 1;
        }
    };
    let (me, n) = (world.rank(), world.size());
    println!("pid {me} {}", std::process::id());
    match (sc.run)(&world, flavor) {
        Ok(()) => {
            println!("ok {name} rank {me}/{n}");
            drop(world);
            0
        }
        Err(msg) => {
            let variant = match std::env::var(ENV_FLAVOR) {
                Ok(_) => format!(" [{}]", flavor_name(flavor)),
                Err(_) => String::new(),
            };
            complain(&format!("FAILED {name}{variant} rank {me}/{n}: {msg}\n"));
            1
        }
    }
}

/// Writes `line` to stderr in one call: `eprintln!` writes the pieces of its format one call
/// at a time, and a process manager that merges the ranks' stderr (mpirun) then mixes the
/// pieces of two ranks' lines.
fn complain(line: &str) {
    let _ = std::io::stderr().write_all(line.as_bytes());
}

fn this_exe() -> PathBuf {
    std::env::current_exe().expect("path of the test executable")
}

/// Environment variable telling a survivor of a failure scenario how long to linger after
/// reporting (see `failure::report`).
const ENV_LINGER_MS: &str = "ONESIDED_TEST_LINGER_MS";

/// Whether scenario `sc` runs over `over` under `pm`: onesided's launcher runs every scenario
/// over every transport; the other process managers run those that need no launcher option
/// over the default path (the transports are the same code whoever started the ranks), the
/// scenarios in which a rank dies also over the first transport whose segments a dead rank
/// leaves, and the stencil examples over every transport.
fn covered(pm: Pm, over: &Over, sc: &Scenario) -> bool {
    let dies = !matches!(sc.expect, Expect::Success);
    pm == Pm::Onesided
        || (sc.launch.is_empty()
            && !sc.wrapped
            && (over.default || (dies && std::ptr::eq(over, leaving_segments()))))
}

/// The path a program gets with nothing set.
fn default_over() -> &'static Over {
    OVERS
        .iter()
        .find(|o| o.default)
        .expect("a default path in OVERS")
}

/// The first transport whose segments a dead rank leaves.
fn leaving_segments() -> &'static Over {
    OVERS
        .iter()
        .find(|o| o.leaves_segments)
        .expect("a transport in OVERS that leaves segments")
}

/// The process manager (except onesided's launcher) and the transport, as trial names start.
fn label(pm: Pm, over: &Over) -> String {
    match pm {
        Pm::Onesided => over.name.to_owned(),
        _ => format!("{}::{}", pm.name(), over.name),
    }
}

/// The trial name: [`label`], then `rest`.
fn trial_name(pm: Pm, over: &Over, rest: &str) -> String {
    format!("{}::{rest}", label(pm, over))
}

/// One trial per process manager, transport, scenario, variant and rank count, then the
/// stencil example's.
fn trials() -> Vec<Trial> {
    let mut trials = Vec::new();
    for &pm in ALL_PMS {
        let missing = pm.missing();
        if let Some(why) = &missing {
            eprintln!("ranks: {} ignored: {why}", pm.name());
        }
        for over in OVERS {
            if over.verbs && !verbs_here() {
                if pm == Pm::Onesided {
                    eprintln!(
                        "ranks: {} not listed: no verbs device here (CI runs it in the software \
                         RoCE guest of rxe/run.sh)",
                        over.name
                    );
                }
                continue;
            }
            let mut skipped = Vec::new();
            for sc in SCENARIOS.iter().filter(|sc| covered(pm, over, sc)) {
                let skip = over.skips(sc);
                if let Some(why) = skip {
                    skipped.push(format!("{}: {why}", sc.name));
                    if over.verbs {
                        // Listed where a device is, so none of them is ignored: a scenario the
                        // transport cannot run is left out, with the reason printed.
                        continue;
                    }
                }
                let variants: Vec<Option<Flavor>> = if sc.flavors.is_empty() {
                    vec![None]
                } else {
                    verbs_flavors(over, sc.flavors).map(Some).collect()
                };
                for flavor in variants {
                    let prefix = match flavor {
                        Some(f) => {
                            trial_name(pm, over, &format!("{}::{}", sc.name, flavor_name(f)))
                        }
                        None => trial_name(pm, over, sc.name),
                    };
                    let counts = match over.verbs {
                        true => verbs_counts(sc.ranks),
                        false => sc.ranks.to_vec(),
                    };
                    let ranks = counts.into_iter().map(|n| (format!("n{n}"), Some(n)));
                    let direct = (sc.direct && pm == Pm::Onesided && !over.verbs)
                        .then(|| ("direct".to_owned(), None));
                    for (suffix, n) in ranks.chain(direct) {
                        let trial = Trial::test(format!("{prefix}::{suffix}"), move || {
                            run_scenario(pm, over, sc, flavor, n)
                        });
                        trials.push(trial.with_ignored_flag(skip.is_some() || missing.is_some()));
                    }
                }
            }
            skipped.dedup();
            for why in skipped {
                let verb = if over.verbs { "leaves out" } else { "ignores" };
                eprintln!("ranks: {} {verb} {why}", label(pm, over));
            }
            let skip = over.fabric && onesided_fabric::BUILT_WITH.is_none()
                || over.verbs && onesided_verbs::BUILT_WITH.is_none();
            let direct = (pm == Pm::Onesided).then_some(None);
            let stencils: Vec<Option<usize>> = match (over.verbs, pm) {
                (true, Pm::Onesided) => vec![Some(2), Some(3)],
                (true, _) => vec![Some(2)],
                (false, _) => [Some(1), Some(3), Some(4), Some(8)]
                    .into_iter()
                    .chain(direct)
                    .collect(),
            };
            for n in stencils {
                let suffix = n.map_or("direct".to_owned(), |n| format!("n{n}"));
                let trial = Trial::test(
                    trial_name(pm, over, &format!("example::stencil::{suffix}")),
                    move || run_example(pm, over, "stencil", n),
                );
                trials.push(trial.with_ignored_flag(skip || missing.is_some()));
            }
            // The chapter's examples (gather and scatter by get and accumulate, the stencils
            // with post/start/complete/wait, the checkerboard, the semaphore, Peterson's lock,
            // the spinlock, load/store with sync, pipelined requests, the linked list), MPICH's
            // linked list, the 2-D stencil of noncontiguous halos and requests awaited as
            // futures.
            // Over verbs (software RoCE, emulated CPU), under onesided's launcher only, at 2
            // or 3 ranks (the 2-D stencil needs a square: 4).
            let examples: [(&str, &[usize]); 16] = [
                ("linked_list", &[2, 8]),
                ("async_gets", &[2, 3]),
                ("example_12_16", &[3, 8]),
                ("stencil2d", &[1, 4, 9]),
                ("example_12_1", &[3]),
                ("example_12_2", &[3]),
                ("example_12_3", &[4]),
                ("example_12_19", &[3, 8]),
                ("example_12_23", &[2]),
                ("example_12_24", &[3]),
                ("example_12_25", &[2, 8]),
                ("example_12_17", &[3, 8]),
                ("example_12_18", &[3, 8]),
                ("example_12_20", &[3, 8]),
                ("example_12_21", &[2]),
                ("example_12_22", &[3, 8]),
            ];
            for (name, sizes) in examples {
                let sizes = match (over.verbs, pm) {
                    (false, _) => sizes.to_vec(),
                    (true, Pm::Onesided) if name == "stencil2d" => vec![4],
                    (true, Pm::Onesided) => verbs_counts(sizes),
                    (true, _) => Vec::new(),
                };
                for n in sizes {
                    let trial = Trial::test(
                        trial_name(pm, over, &format!("example::{name}::n{n}")),
                        move || run_example(pm, over, name, Some(n)),
                    );
                    trials.push(trial.with_ignored_flag(skip || missing.is_some()));
                }
            }
        }
        if pm != Pm::Onesided {
            let trial = Trial::test(format!("{}::bench::put_latency", pm.name()), move || {
                Ok(run_bench(pm)?)
            });
            trials.push(trial.with_ignored_flag(missing.is_some()));
        }
        let name = format!("{}::later_job_removes_dead_fabric_segments", pm.name());
        let trial = Trial::test(name, move || {
            Ok(later_job_removes_dead_fabric_segments(pm)?)
        });
        trials.push(trial.with_ignored_flag(missing.is_some()));
    }
    let over = leaving_segments();
    let trial = Trial::test(
        trial_name(Pm::Onesided, over, "killed_launcher_leaves_nothing"),
        move || Ok(killed_launcher_leaves_nothing(over)?),
    );
    trials.push(trial.with_ignored_flag(onesided_fabric::BUILT_WITH.is_none()));
    let missing = Pm::SrunPmi2.missing();
    let trial = Trial::test("srun::without_pmi_plugin_fails_at_init", move || {
        Ok(without_pmi_plugin()?)
    });
    trials.push(trial.with_ignored_flag(missing.is_some()));
    trials
}

/// `onesided bench put_latency` started by `pm` on 2 ranks measures between the job's ranks:
/// one OSU table with a row for every size.
fn run_bench(pm: Pm) -> Res {
    let onesided = Path::new(env!("CARGO_BIN_EXE_onesided"));
    let mut cmd = pm.command(2, &[], onesided)?;
    cmd.args([
        "bench",
        "put_latency",
        "-m",
        "1:64",
        "-i",
        "200",
        "-x",
        "20",
    ]);
    let out = harness::run(cmd, harness::JOB_TIMEOUT)?;
    let describe = out.describe();
    ensure!(out.status.success(), "bench failed: {describe}");
    ensure!(
        out.stdout.matches("# OSU MPI_Put Latency Test").count() == 1,
        "one table expected: {describe}"
    );
    for size in [1, 2, 4, 8, 16, 32, 64] {
        let row = out
            .stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&size.to_string()));
        let latency = row
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok());
        ensure!(
            latency.is_some_and(|us| us > 0.0),
            "no latency for {size} bytes: {describe}"
        );
    }
    Ok(())
}

/// A libfabric shm segment whose owner is gone (as a rank SIGKILLed by its process manager
/// leaves it) is removed when the next job starts on the node. The owner is a pid above the
/// kernel's `pid_max`, which no process can have.
fn later_job_removes_dead_fabric_segments(pm: Pm) -> Res {
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .map_err(|e| format!("reading pid_max: {e}"))?
        .trim()
        .parse()
        .map_err(|e| format!("pid_max: {e}"))?;
    let dead = format!("/dev/shm/{}:0:{}", pid_max + 1, pm as u32);
    std::fs::write(&dead, b"left by a killed rank").map_err(|e| format!("{dead}: {e}"))?;
    let cmd = job(
        pm,
        default_over(),
        Some(2),
        &[],
        &harness::example_exe("stencil")?,
    )?;
    let out = harness::run(cmd, harness::JOB_TIMEOUT)?;
    let left = Path::new(&dead).exists();
    let _ = std::fs::remove_file(&dead);
    ensure!(out.status.success(), "the job failed: {}", out.describe());
    ensure!(!left, "{dead} outlived the next job: {}", out.describe());
    Ok(())
}

/// SIGKILL of onesided's launcher in the middle of a job over libfabric's shm provider: the
/// ranks end with it, and what they leave in /dev/shm (libfabric's `<pid>:...` segments, the
/// job's own) is gone after the next launch on the node.
fn killed_launcher_leaves_nothing(over: &Over) -> Res {
    let stencil = harness::example_exe("stencil")?;
    let mut cmd = job(Pm::Onesided, over, Some(3), &[], &stencil)?;
    cmd.args(["240", "100000000"]);
    let mut launcher = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("starting the launcher: {e}"))?;
    let children = format!("/proc/{}/task/{}/children", launcher.id(), launcher.id());
    let ranks = |deadline: std::time::Instant| -> Result<Vec<u32>, String> {
        loop {
            let pids: Vec<u32> = std::fs::read_to_string(&children)
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            if pids.len() == 3 && harness::fabric_segments(&pids).len() >= 3 {
                return Ok(pids);
            }
            ensure!(
                std::time::Instant::now() < deadline,
                "the ranks did not open the fabric: {pids:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let pids = ranks(std::time::Instant::now() + harness::JOB_TIMEOUT);
    let _ = launcher.kill();
    let _ = launcher.wait();
    let pids = pids?;
    let deadline = std::time::Instant::now() + FAILURE_LIMIT;
    while pids.iter().any(|&p| onesided_shm::process::pid_running(p)) {
        ensure!(
            std::time::Instant::now() < deadline,
            "ranks {pids:?} outlived their launcher by {FAILURE_LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = harness::run(
        job(Pm::Onesided, over, Some(2), &[], &stencil)?,
        harness::JOB_TIMEOUT,
    )?;
    ensure!(
        out.status.success(),
        "the next job failed: {}",
        out.describe()
    );
    let left = harness::fabric_segments(&pids);
    ensure!(
        left.is_empty(),
        "the killed job's libfabric segments outlived the next launch: {left:?}"
    );
    let ours = harness::leftover_segments(launcher.id());
    ensure!(
        ours.is_empty(),
        "the killed job's segments outlived the next launch: {ours:?}"
    );
    Ok(())
}

/// `srun -n 4` without `--mpi` gives the ranks no PMI: every rank fails at `World::init`,
/// naming `--mpi=pmix`, instead of running as 4 worlds of size 1.
fn without_pmi_plugin() -> Res {
    let mut cmd = slurm::shared()?.srun();
    cmd.args(["-n", "4"]).arg(harness::example_exe("stencil")?);
    let out = harness::run(cmd, harness::JOB_TIMEOUT)?;
    let describe = out.describe();
    ensure!(!out.status.success(), "the job should fail: {describe}");
    ensure!(
        !out.stdout.contains("stencil: ok"),
        "a rank ran as a world of its own: {describe}"
    );
    ensure!(
        out.stderr.matches("--mpi=pmix").count() == 4,
        "every rank must name --mpi=pmix: {describe}"
    );
    Ok(())
}

/// The command of a job of `program` with `n` ranks under `pm` (`None`: run directly), with the
/// transport settings of `over`.
fn job(
    pm: Pm,
    over: &Over,
    n: Option<usize>,
    launch: &[&str],
    program: &Path,
) -> Result<Command, String> {
    let mut cmd = match n {
        Some(n) => pm.command(n, launch, program)?,
        None => harness::direct(program),
    };
    over.apply(&mut cmd);
    if !pm.kills_job() {
        cmd.env(ENV_LINGER_MS, "2000");
    }
    Ok(cmd)
}

/// Runs one job of `sc` (`n: None`: without the launcher) and checks its outcome.
fn run_scenario(
    pm: Pm,
    over: &Over,
    sc: &Scenario,
    flavor: Option<Flavor>,
    n: Option<usize>,
) -> Result<(), Failed> {
    let mut cmd = if sc.wrapped {
        let mut cmd = job(pm, over, n, sc.launch, Path::new("sh"))?;
        cmd.args(["-c", "trap '' TERM; \"$0\" \"$@\""])
            .arg(this_exe());
        cmd
    } else {
        job(pm, over, n, sc.launch, &this_exe())?
    };
    cmd.env(ENV_SCENARIO, sc.name);
    match flavor {
        Some(f) => cmd.env(ENV_FLAVOR, flavor_name(f)),
        None => cmd.env_remove(ENV_FLAVOR),
    };
    let out = harness::run(cmd, harness::JOB_TIMEOUT)?;
    let n = n.unwrap_or(1);
    match sc.expect {
        Expect::Success => {
            if !out.status.success() {
                return Err(format!("job failed: {}", out.describe()).into());
            }
            for r in 0..n {
                let ok = format!("ok {} rank {r}/{n}\n", sc.name);
                if !out.stdout.contains(&ok) {
                    return Err(format!("rank {r} did not report ok: {}", out.describe()).into());
                }
            }
        }
        Expect::Fails { rank, says } => check_failed(&out, n, rank, says, failure_limit(over))?,
        Expect::Killed {
            signal,
            victim,
            reported,
            says,
        } => {
            let limit = failure_limit(over);
            check_killed(pm, &out, n, signal, victim(n), reported, says, limit)?;
            if pm.kills_survivors_at_once() {
                // Nobody outlives the victim long enough to clean up after it: the next job on
                // the node does (`later_job_removes_dead_fabric_segments`).
                return Ok(());
            }
            if pm != Pm::Onesided {
                // The process manager may SIGKILL the survivors (Slurm cancels the step, mpirun
                // kills ranks that linger): what they leave, the next job on the node removes.
                // The victim's segments are the survivors' to remove.
                return Ok(leftovers(pm, &out, Some(victim(n)))?);
            }
        }
    }
    Ok(leftovers(pm, &out, None)?)
}

/// `Err` naming what the job left in /dev/shm: its segments (found by the launcher's pid in
/// their names) and the libfabric shm segments of the ranks (found by the pids they printed),
/// or only of rank `only`.
fn leftovers(pm: Pm, out: &harness::Outcome, only: Option<usize>) -> Res {
    if pm == Pm::Onesided {
        harness::no_leftovers(out)?;
    }
    let pids: Vec<u32> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("pid "))
        .filter_map(|l| l.split_once(' '))
        .filter(|(rank, _)| only.is_none_or(|o| rank.parse() == Ok(o)))
        .filter_map(|(_, pid)| pid.parse().ok())
        .collect();
    let left = harness::fabric_segments(&pids);
    ensure!(
        left.is_empty(),
        "libfabric segments left in /dev/shm: {left:?}\n{}",
        out.describe()
    );
    Ok(())
}

fn check_failed(out: &harness::Outcome, n: usize, rank: usize, says: &str, limit: Duration) -> Res {
    let describe = out.describe();
    ensure!(!out.status.success(), "the job should fail: {describe}");
    ensure!(
        out.elapsed < limit,
        "the job took {:?} to end: {describe}",
        out.elapsed
    );
    let failed = format!("rank {rank}/{n}: {says}");
    ensure!(
        out.stderr.contains(&failed),
        "stderr should say {failed:?}: {describe}"
    );
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn check_killed(
    pm: Pm,
    out: &harness::Outcome,
    n: usize,
    signal: i32,
    victim: usize,
    reported: bool,
    says: &str,
    limit: Duration,
) -> Res {
    let describe = out.describe();
    ensure!(!out.status.success(), "the job should fail: {describe}");
    ensure!(
        out.stderr.contains(says),
        "stderr should say {says:?}: {describe}"
    );
    ensure!(
        out.elapsed < limit,
        "the job took {:?} to end: {describe}",
        out.elapsed
    );
    if pm == Pm::Onesided {
        let name = signal_name(signal).unwrap_or("?");
        ensure!(
            out.status.code() == Some(128 + signal),
            "launcher exit status should be {}: {describe}",
            128 + signal
        );
        // A rank under a wrapper shell: the shell reports its child's death as status 128 + N.
        let named = format!("rank {victim} (pid ");
        let wrapped = format!("status {}", 128 + signal);
        ensure!(
            out.stderr
                .lines()
                .any(|l| l.contains(&named) && (l.contains(name) || l.contains(&wrapped))),
            "the launcher must name rank {victim} and {name} on stderr: {describe}"
        );
    }
    if reported && !pm.kills_survivors_at_once() {
        for r in (0..n).filter(|&r| r != victim) {
            let saw = format!("rank {r} saw MPI_ERR_PROC_FAILED");
            ensure!(
                out.stdout.contains(&saw),
                "rank {r} did not learn of rank {victim}'s death: {describe}"
            );
        }
        let bound = util::scaled(failure::DETECTED_WITHIN);
        for (r, after) in failure::detection_delays(&out.stdout).unwrap_or_default() {
            ensure!(
                after <= bound,
                "rank {r} learnt of rank {victim}'s death {after:?} after it (at most {bound:?}): \
                 {describe}"
            );
        }
    }
    Ok(())
}

/// `examples/NAME.rs` with `n` ranks (or run directly) must print `NAME: ok` once.
fn run_example(pm: Pm, over: &Over, name: &str, n: Option<usize>) -> Result<(), Failed> {
    let cmd = job(pm, over, n, &[], &harness::example_exe(name)?)?;
    let out = harness::run(cmd, harness::JOB_TIMEOUT)?;
    if !out.status.success() || out.stdout.matches(&format!("{name}: ok")).count() != 1 {
        return Err(format!("{name}: {}", out.describe()).into());
    }
    Ok(leftovers(pm, &out, None)?)
}
