//! Failure scenarios: one rank kills itself with SIGKILL in the middle of an epoch.
//!
//! The launcher must report it and end the job; the harness checks that. Survivors that are
//! asked to (`report`) keep the launcher's SIGTERM from killing them (it is only recorded), say
//! what their blocked call returned (`rank R saw CLASS: ...`) and then stay alive until the
//! launcher's SIGKILL, so that no survivor's exit can unblock another one: each must learn of
//! the dead rank by itself, within bounded time.
//!
//! # MPI-4.1: 12.5.1 (fence), 12.5.2 (post/start/complete/wait), 12.5.3 (lock); ULFM's
//! MPI_ERR_PROC_FAILED

use crate::util::*;
use onesided::{Assert, ErrorClass, Flavor, Info, LockType, Request, Window, World};
use onesided_shm::process::{SIGKILL, TerminationSignals, kill};
use std::time::Duration;

/// How long the victim waits before dying, so that the others are blocked by then.
const BEFORE_DEATH: Duration = Duration::from_millis(300);

fn die() -> ! {
    let _ = kill(std::process::id(), SIGKILL);
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Print what the blocked call returned and linger until the launcher kills this rank (exiting
/// at once could be seen by the launcher before the victim's death and change its verdict).
/// Under a process manager that does not end the job when a rank dies (`srun` without
/// `--kill-on-bad-exit`), the harness shortens the stay with `ONESIDED_TEST_LINGER_MS`.
fn report(me: usize, what: &str, r: onesided::Result<()>) -> Res {
    match r {
        Ok(()) => Err(format!("{what} succeeded although a rank was killed")),
        Err(e) => {
            println!("rank {me} saw {e}");
            let linger = std::env::var("ONESIDED_TEST_LINGER_MS")
                .ok()
                .and_then(|ms| ms.parse().ok())
                .map_or(Duration::from_secs(10), Duration::from_millis);
            std::thread::sleep(linger);
            Err(format!(
                "still alive {linger:?} after the failure ({what}: {e})"
            ))
        }
    }
}

/// Victim `victim` dies while every other rank is blocked in a fence that closes an epoch
/// with a put to the victim.
fn in_fence(world: &World, flavor: Flavor, victim: usize, survivors_report: bool) -> Res {
    let (me, n) = (world.rank(), world.size());
    with_window(world, flavor, 8 * n, 8, &Info::new(), |win| {
        win.fence(Assert::NOPRECEDE).ctx("fence")?;
        if me == victim {
            std::thread::sleep(BEFORE_DEATH);
            die();
        }
        win.put(&[tag(me, victim, 0)], victim, me)
            .ctx("put to the victim")?;
        let _guard = if survivors_report {
            Some(TerminationSignals::install().map_err(|e| format!("catching SIGTERM: {e}"))?)
        } else {
            None
        };
        report(me, "fence", win.fence(Assert::NOSUCCEED))
    })
}

/// The last rank dies while the others wait in a fence.
pub fn last_in_fence(world: &World, flavor: Flavor) -> Res {
    in_fence(world, flavor, world.size() - 1, false)
}

/// Rank 0 (which created the node segment) dies while the others wait in a fence.
pub fn first_in_fence(world: &World, flavor: Flavor) -> Res {
    in_fence(world, flavor, 0, false)
}

/// The last rank dies while the others wait in a fence; every survivor's fence must fail with
/// MPI_ERR_PROC_FAILED (none may wait forever for a survivor that is itself stuck).
pub fn last_in_fence_reported(world: &World, flavor: Flavor) -> Res {
    in_fence(world, flavor, world.size() - 1, true)
}

/// The last rank dies holding an exclusive lock on rank 0 that every other rank waits for:
/// their lock calls must fail with MPI_ERR_PROC_FAILED.
pub fn holding_lock(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let victim = n - 1;
    with_window(world, flavor, 8, 8, &Info::new(), |win| {
        if me == victim {
            win.lock(LockType::Exclusive, 0, Assert::NONE)
                .ctx("victim's lock")?;
            win.put(&[1u64], 0, 0).ctx("victim's put")?;
            world.barrier().ctx("barrier")?;
            std::thread::sleep(BEFORE_DEATH);
            die();
        }
        world.barrier().ctx("barrier")?;
        let _guard = TerminationSignals::install().map_err(|e| format!("catching SIGTERM: {e}"))?;
        let r = win.lock(LockType::Exclusive, 0, Assert::NONE);
        report(me, "lock of a target locked by a dead rank", r)
    })
}

/// How soon after a lock holder's death the ranks waiting for its lock must have learnt of it:
/// five times the 100 ms they are meant to take (as waits in fence do; 2-50 ms on this
/// project's 2-core machine at 4 ranks, up to 410 ms with a software RoCE guest busy beside
/// them), for a loaded CI machine, and half the launcher's second between stopping a job and
/// killing its ranks.
pub const DETECTED_WITHIN: Duration = Duration::from_millis(500);

/// Microseconds since the Unix epoch: the one clock every rank of a job on this machine shares.
fn unix_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// From the output of a job whose victim printed when it died (`rank V dies at T us`) and whose
/// survivors printed when they learnt of it (`rank R learnt at T us`): each survivor's rank and
/// how long after the death it learnt of it; `None` when the victim printed nothing.
pub fn detection_delays(stdout: &str) -> Option<Vec<(usize, Duration)>> {
    let at = |line: &str, word: &str| -> Option<(usize, u64)> {
        let rest = line.strip_prefix("rank ")?;
        let (rank, rest) = rest.split_once(' ')?;
        let us = rest.strip_prefix(word)?.strip_suffix(" us")?;
        Some((rank.parse().ok()?, us.parse().ok()?))
    };
    let (_, death) = stdout.lines().find_map(|l| at(l, "dies at "))?;
    let learnt = stdout.lines().filter_map(|l| at(l, "learnt at "));
    Some(
        learnt
            .map(|(r, t)| (r, Duration::from_micros(t.saturating_sub(death))))
            .collect(),
    )
}

/// Every rank adds to a counter at rank 0 under an exclusive lock, over and over; the last rank
/// takes the lock once more after a few rounds and dies holding it, while the others wait for
/// it (or are about to). Each of them must leave its lock call with MPI_ERR_PROC_FAILED; the
/// victim prints when it died and each survivor when it learnt of it
/// (`check_killed` holds them to [`DETECTED_WITHIN`]).
pub fn lock_counter_holder_dies(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let victim = n - 1;
    with_window(world, flavor, 8, 8, &Info::new(), |win| {
        let add = || -> onesided::Result<()> {
            win.lock(LockType::Exclusive, 0, Assert::NONE)?;
            let mut v = [0u64];
            win.get(&mut v, 0, 0)?;
            win.flush(0)?;
            win.put(&[v[0] + 1], 0, 0)?;
            win.unlock(0)
        };
        world.barrier().ctx("barrier")?;
        if me == victim {
            for _ in 0..20 {
                add().ctx("add")?;
            }
            win.lock(LockType::Exclusive, 0, Assert::NONE)
                .ctx("victim's lock")?;
            std::thread::sleep(BEFORE_DEATH);
            println!("rank {me} dies at {} us", unix_us());
            die();
        }
        let _guard = TerminationSignals::install().map_err(|e| format!("catching SIGTERM: {e}"))?;
        loop {
            if let Err(e) = add() {
                println!("rank {me} learnt at {} us", unix_us());
                return report(me, "lock of a counter whose holder died", Err(e));
            }
        }
    })
}

/// A window of `bytes` bytes whose last rank dies inside a lock_all epoch of every rank; each
/// other rank then runs `f` with the window and the dead rank, once the death is known, and
/// reports what `f` returns (which must be a failure).
fn after_death(
    world: &World,
    flavor: Flavor,
    bytes: usize,
    f: impl FnOnce(&Window<'_>, usize) -> (&'static str, onesided::Result<()>),
) -> Res {
    after_death_covered(world, flavor, bytes, false, f)
}

/// [`after_death`]; with `covered`, every rank reads from the victim first, so that the epoch
/// covers it (a lazy lock_all has taken its lock word).
fn after_death_covered(
    world: &World,
    flavor: Flavor,
    bytes: usize,
    covered: bool,
    f: impl FnOnce(&Window<'_>, usize) -> (&'static str, onesided::Result<()>),
) -> Res {
    let (me, n) = (world.rank(), world.size());
    let victim = n - 1;
    with_window(world, flavor, bytes, 8, &Info::new(), |win| {
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        if covered {
            let mut one = [0u64];
            win.get(&mut one, victim, 0).ctx("get before the death")?;
            win.flush(victim).ctx("flush")?;
        }
        world.barrier().ctx("barrier")?;
        if me == victim {
            std::thread::sleep(BEFORE_DEATH);
            die();
        }
        let _guard = TerminationSignals::install().map_err(|e| format!("catching SIGTERM: {e}"))?;
        std::thread::sleep(2 * BEFORE_DEATH);
        let (what, r) = f(win, victim);
        report(me, what, r)
    })
}

/// The last rank dies inside a lock_all epoch of every rank; the others then read the memory it
/// lent (create windows) with `rget`s and wait for them: the requests (or the calls that start
/// them) must fail with MPI_ERR_PROC_FAILED within bounded time, never wait forever on
/// operations a dead rank will not serve.
pub fn requests_to_dead_rank(world: &World, flavor: Flavor) -> Res {
    after_death(world, flavor, 64, |win, victim| {
        let mut got = [0u64; 8];
        let r = (|| {
            let mut reqs = got
                .chunks_mut(1)
                .enumerate()
                .map(|(i, w)| win.rget(w, victim, i))
                .collect::<onesided::Result<Vec<Request<'_>>>>()?;
            while Request::wait_any(&mut reqs)?.is_some() {}
            Ok(())
        })();
        ("rgets from a dead rank", r)
    })
}

/// The last rank dies inside a lock_all epoch of every rank, after every rank read from it
/// (so the epoch covers it); the others then share their window with two threads, each of
/// which puts words to it one by one and reads one back (over the fabric, once the job has a
/// failure, through the window's thread rather than endpoints of their own), and close the
/// epoch: a thread's call, or the unlock_all that completes what the threads left in flight,
/// must fail with MPI_ERR_PROC_FAILED within bounded time.
pub fn threads_to_dead_rank(world: &World, flavor: Flavor) -> Res {
    after_death_covered(world, flavor, 64, true, |win, victim| {
        let shared = win.share(|h| {
            std::thread::scope(|s| {
                let threads: Vec<_> = (0..2)
                    .map(|i| {
                        s.spawn(move || {
                            for w in 0..4 {
                                h.put(&[1u64], victim, 4 * i + w)?;
                            }
                            let mut one = [0u64];
                            h.get(&mut one, victim, 4 * i)
                        })
                    })
                    .collect();
                let done: Vec<onesided::Result<()>> = threads
                    .into_iter()
                    .map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                    .collect();
                done.into_iter().collect::<onesided::Result<()>>()
            })
        });
        let closed = win.unlock_all();
        ("threads' calls to a dead rank", shared.and(closed))
    })
}

/// The last rank dies inside a lock_all epoch of every rank; then rank 0 reads from it with one
/// `get_many` (words, which the fabric gathers, and a block read zero-copy) and the others write
/// to it with one `put_many`: the calls must fail with MPI_ERR_PROC_FAILED within bounded time.
pub fn batch_to_dead_rank(world: &World, flavor: Flavor) -> Res {
    let me = world.rank();
    after_death(world, flavor, 4096, |win, victim| {
        let (mut words, mut block) = ([0u64; 8], [0u64; 256]);
        if me == 0 {
            let gets = words.chunks_mut(1).enumerate().map(|(i, w)| (w, victim, i));
            let r = win.get_many(gets.chain([(&mut block[..], victim, 256)]));
            return ("get_many from a dead rank", r);
        }
        let r = win.put_many([(&words[..], victim, 0), (&block[..], victim, 256)]);
        ("put_many to a dead rank", r)
    })
}

/// The last of 3 ranks dies before it posts or starts: rank 0 waits in start for its post and
/// rank 1, which posted to it, waits in wait for its complete; both must fail with
/// MPI_ERR_PROC_FAILED.
pub fn pscw_partner_dies(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let victim = n - 1;
    let dead = world.group().incl(&[victim]).ctx("group")?;
    with_window(world, flavor, 64, 8, &Info::new(), |win| {
        world.barrier().ctx("barrier")?;
        if me == victim {
            std::thread::sleep(BEFORE_DEATH);
            die();
        }
        let _guard = TerminationSignals::install().map_err(|e| format!("catching SIGTERM: {e}"))?;
        match me {
            0 => report(me, "start", win.start(&dead, Assert::NONE)),
            // Post signals the dead rank: a transport that connects at first use (rxm) finds it
            // unreachable there already, which is as good a report as the wait's.
            _ => match win.post(&dead, Assert::NONE) {
                Err(e) if e.class() == ErrorClass::ProcFailed => report(me, "post", Err(e)),
                posted => {
                    posted.ctx("post")?;
                    report(me, "wait", win.wait())
                }
            },
        }
    })
}

/// The last of 3 ranks dies before it sends the notification the others wait for: both must
/// leave `wait_notify` with MPI_ERR_PROC_FAILED.
pub fn notifier_dies(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    with_window(world, flavor, 64, 8, &Info::new(), |win| {
        world.barrier().ctx("barrier")?;
        if me == n - 1 {
            std::thread::sleep(BEFORE_DEATH);
            die();
        }
        let _guard = TerminationSignals::install().map_err(|e| format!("catching SIGTERM: {e}"))?;
        report(me, "wait_notify", win.wait_notify(0, 1))
    })
}

/// The last rank dies while the others wait in a world barrier (over shared memory on a node,
/// with the node's lowest rank meeting other nodes over the network): every survivor's barrier
/// must fail with MPI_ERR_PROC_FAILED.
pub fn in_barrier(world: &World, _flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    // The first barrier sets the shared page up; the second uses it.
    world.barrier().ctx("barrier")?;
    world.barrier().ctx("barrier")?;
    if me == n - 1 {
        std::thread::sleep(BEFORE_DEATH);
        die();
    }
    let _guard = TerminationSignals::install().map_err(|e| format!("catching SIGTERM: {e}"))?;
    report(me, "barrier", world.barrier())
}

/// Rank 1 leaves with an error right after creating the window (as `?` does: the window is
/// dropped, or `Window::create` frees it, on the way out), while rank 0 calls fence, fence and
/// frees the window. Rank 1's free must not pass for one of rank 0's fences: rank 0 must learn
/// that the window is being freed, and the job must end with an error instead of waiting for a
/// rank that will never call again.
pub fn early_return(world: &World, flavor: Flavor) -> Res {
    let me = world.rank();
    let body = |win: &Window<'_>| -> Res {
        if me == 1 {
            return Err("early return".into());
        }
        win.fence(Assert::NONE).ctx("first fence")?;
        win.fence(Assert::NONE).ctx("second fence")?;
        Ok(())
    };
    match flavor {
        Flavor::Create => {
            let mut memory = [0u64; 8];
            Window::create(world, &mut memory, 8, &Info::new(), body).ctx("create/free")?
        }
        _ => {
            let win = Window::allocate(world, 64, 8, &Info::new()).ctx("allocate")?;
            body(&win)
        }
    }
}
