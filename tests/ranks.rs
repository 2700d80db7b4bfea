//! Multi-process tests: every scenario runs as real ranks started by the real launcher.
//!
//! This one executable plays two parts. Started by `cargo test`, it is a libtest-mimic harness
//! with one trial per (scenario, variant, rank count); each trial starts
//! `onesided run -n N -- <this executable>` with `ONESIDED_SCENARIO=<scenario>` (and the window
//! flavor of the variant in `ONESIDED_TEST_FLAVOR`), within a time limit, and checks the exit
//! status and output. Started with `ONESIDED_SCENARIO` set, it is a rank: it joins the world,
//! runs the scenario, prints `ok <scenario> rank R/N` and exits 0, or prints what broke and
//! exits 1.
//!
//! A scenario is a `fn(&World, Flavor) -> Result<(), String>` that uses only the public API, so
//! the same scenarios run over any transport the environment selects (the whole environment of
//! `cargo test` reaches the ranks).

#[macro_use]
#[path = "ranks/util.rs"]
mod util;
#[path = "ranks/errors.rs"]
mod errors;
#[path = "ranks/failure.rs"]
mod failure;
#[path = "ranks/fence.rs"]
mod fence;
#[path = "ranks/harness.rs"]
mod harness;
#[path = "ranks/passive.rs"]
mod passive;
#[path = "ranks/shared.rs"]
mod shared;
#[path = "ranks/soundness.rs"]
mod soundness;
#[path = "ranks/stress.rs"]
mod stress;
#[path = "ranks/world.rs"]
mod world;

use libtest_mimic::{Arguments, Failed, Trial};
use onesided::{Flavor, World};
use onesided_shm::process::{SIGKILL, signal_name};

const SIGABRT: i32 = 6;
use std::path::PathBuf;
use std::time::Duration;
use util::{ALL_FLAVORS, ENV_FLAVOR, Res, flavor_name};

/// Environment variable that turns this executable into a rank of the named scenario.
const ENV_SCENARIO: &str = "ONESIDED_SCENARIO";

/// How fast the launcher must end a job after a rank was killed.
const FAILURE_LIMIT: Duration = Duration::from_secs(10);

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
}

struct Scenario {
    name: &'static str,
    run: fn(&World, Flavor) -> Res,
    /// Flavors to run it with; empty: the scenario picks its windows itself.
    flavors: &'static [Flavor],
    /// Rank counts to launch it with.
    ranks: &'static [usize],
    /// Also run it without the launcher, as a world of size 1.
    direct: bool,
    /// Extra launcher arguments.
    launch: &'static [&'static str],
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
        flavors: &[],
        ranks,
        direct: false,
        launch: &[],
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
    scenario(
        "stress::slow_rank_while_others_exit",
        stress::slow_rank_while_others_exit,
        &[4],
    ),
    Scenario {
        flavors: &[Flavor::Allocate],
        ..scenario(
            "stress::exclusive_amid_shared",
            stress::exclusive_amid_shared,
            &[8],
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
    Scenario {
        direct: true,
        ..scenario("world::collectives", world::collectives, &[1, 2, 3, 8])
    },
    Scenario {
        launch: &["--simulate-nodes", "2"],
        ..scenario("world::simulated_nodes", world::nodes, &[3, 4, 8])
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
];

fn main() {
    if let Ok(name) = std::env::var(ENV_SCENARIO) {
        std::process::exit(rank_main(&name));
    }
    let args = Arguments::from_args();
    libtest_mimic::run(&args, trials()).exit();
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
    let world = match World::init() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("{name}: World::init: {e}");
            return 1;
        }
    };
    let (me, n) = (world.rank(), world.size());
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
            eprintln!("FAILED {name}{variant} rank {me}/{n}: {msg}");
            1
        }
    }
}

fn this_exe() -> PathBuf {
    std::env::current_exe().expect("path of the test executable")
}

/// One trial per scenario, variant and rank count, then the stencil example's.
fn trials() -> Vec<Trial> {
    let mut trials = Vec::new();
    for sc in SCENARIOS {
        let variants: Vec<Option<Flavor>> = if sc.flavors.is_empty() {
            vec![None]
        } else {
            sc.flavors.iter().copied().map(Some).collect()
        };
        for flavor in variants {
            let prefix = match flavor {
                Some(f) => format!("{}::{}", sc.name, flavor_name(f)),
                None => sc.name.to_owned(),
            };
            for &n in sc.ranks {
                trials.push(Trial::test(format!("{prefix}::n{n}"), move || {
                    run_scenario(sc, flavor, Some(n))
                }));
            }
            if sc.direct {
                trials.push(Trial::test(format!("{prefix}::direct"), move || {
                    run_scenario(sc, flavor, None)
                }));
            }
        }
    }
    for n in [1, 3, 4, 8] {
        trials.push(Trial::test(format!("example::stencil::n{n}"), move || {
            run_stencil(Some(n))
        }));
    }
    trials.push(Trial::test("example::stencil::direct", || {
        run_stencil(None)
    }));
    trials
}

/// Runs one job of `sc` (`n: None`: without the launcher) and checks its outcome.
fn run_scenario(sc: &Scenario, flavor: Option<Flavor>, n: Option<usize>) -> Result<(), Failed> {
    let exe = this_exe();
    let mut cmd = match n {
        Some(n) => harness::launcher(n, sc.launch, &exe),
        None => harness::direct(&exe),
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
        Expect::Killed {
            signal,
            victim,
            reported,
            says,
        } => check_killed(&out, n, signal, victim(n), reported, says)?,
    }
    Ok(harness::no_leftovers(&out)?)
}

fn check_killed(
    out: &harness::Outcome,
    n: usize,
    signal: i32,
    victim: usize,
    reported: bool,
    says: &str,
) -> Res {
    let describe = out.describe();
    let name = signal_name(signal).unwrap_or("?");
    ensure!(
        out.status.code() == Some(128 + signal),
        "launcher exit status should be {}: {describe}",
        128 + signal
    );
    ensure!(
        out.stderr.contains(says),
        "stderr should say {says:?}: {describe}"
    );
    ensure!(
        out.elapsed < FAILURE_LIMIT,
        "the job took {:?} to end: {describe}",
        out.elapsed
    );
    let named = format!("rank {victim} (pid ");
    ensure!(
        out.stderr
            .lines()
            .any(|l| l.contains(&named) && l.contains(name)),
        "the launcher must name rank {victim} and {name} on stderr: {describe}"
    );
    if reported {
        for r in (0..n).filter(|&r| r != victim) {
            let saw = format!("rank {r} saw MPI_ERR_PROC_FAILED");
            ensure!(
                out.stdout.contains(&saw),
                "rank {r} did not learn of rank {victim}'s death: {describe}"
            );
        }
    }
    Ok(())
}

/// `examples/stencil.rs` with `n` ranks (or run directly) must print `stencil: ok` once.
fn run_stencil(n: Option<usize>) -> Result<(), Failed> {
    let exe = harness::stencil_exe()?;
    let cmd = match n {
        Some(n) => harness::launcher(n, &[], &exe),
        None => harness::direct(&exe),
    };
    let out = harness::run(cmd, harness::JOB_TIMEOUT)?;
    if !out.status.success() || out.stdout.matches("stencil: ok").count() != 1 {
        return Err(format!("stencil: {}", out.describe()).into());
    }
    Ok(harness::no_leftovers(&out)?)
}
