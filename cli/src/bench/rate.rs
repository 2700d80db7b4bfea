//! The rate tests, after Sandia's RMA-MT: the message rate of T threads of one rank sharing one
//! window ([`Window::share`]).
//!
//! - `put_rate`: each thread puts 8 bytes and flushes its target, again and again.
//! - `get_rate`: the same with an 8-byte get.
//! - `fop_rate`: the same with fetch_and_op (MPI_SUM of one u64).
//! - `acc_rate`: the same with an accumulate of [`ACC`] u64 (MPI_SUM), one message each.
//! - `notify_rate`: the same with an 8-byte `put_notify`, thread `i` with notification id `i`
//!   (modulo [`IDS`]).
//!
//! Rank 0's threads are the origins; thread `i` targets rank `1 + i % (N - 1)`, word `i` of its
//! window, inside one lock_all epoch. The other ranks wait. A repetition times, at rank 0,
//! from before the window is shared until every thread has made `-i` calls (thread start
//! included), and reports messages per second: T * iterations / time. `-t 0` is the baseline
//! without threads: rank 0's own thread makes the calls on the window itself. Afterwards the
//! targets check that fop_rate's and acc_rate's counters hold every thread's additions.
//! notify_rate's targets wait for their notifications during each repetition, each id as many
//! times as its threads call, and check afterwards that none is left over.
//!
//! With `-s fence` the calls are made in a fence epoch instead, without flushes: a repetition
//! opens the epoch with a fence on every rank and times, at rank 0, the calls and the fence
//! that closes the epoch (which completes them).

use super::args::{SyncMode, Test};
use super::options::{Kind, Pass, Plan};
use super::report::{MESSAGE_RATE, Report, Table};
use super::rma::repeat;
use onesided::{Assert, Error, ErrorClass, Info, Op, Result, Window, WindowHandle, World};
use std::time::{Duration, Instant};

/// The calls a rate test makes: one call of its kind to `target`'s word `disp`, then a flush.
#[derive(Clone, Copy)]
enum Call {
    Put,
    Get,
    Fop,
    Acc,
    Notify,
}

/// Elements of one acc_rate accumulate.
const ACC: usize = 4;

/// Notification ids notify_rate's threads use in turn (all that a window has).
const IDS: usize = 256;

impl Call {
    fn of(test: Test) -> Result<Call> {
        match test {
            Test::PutRate => Ok(Call::Put),
            Test::GetRate => Ok(Call::Get),
            Test::FopRate => Ok(Call::Fop),
            Test::AccRate => Ok(Call::Acc),
            Test::NotifyRate => Ok(Call::Notify),
            t => Err(Error::new(
                ErrorClass::Intern,
                format!("{} is not a rate test", t.name()),
            )),
        }
    }

    /// The call through the window itself, and its flush where `flush`.
    fn on_window(self, win: &Window<'_>, target: usize, disp: usize, flush: bool) -> Result<()> {
        match self {
            Call::Put => win.put(&[disp as u64], target, disp)?,
            Call::Get => win.get(&mut [0u64], target, disp)?,
            Call::Fop => drop(win.fetch_and_op(1u64, target, disp, Op::Sum)?),
            Call::Acc => win.accumulate(&[1u64; ACC], target, disp, Op::Sum)?,
            Call::Notify => win.put_notify(&[disp as u64], target, disp, id_of(disp))?,
        }
        match flush {
            true => win.flush(target),
            false => Ok(()),
        }
    }

    /// The call through a handle of the shared window, and its flush where `flush`.
    fn on_handle(self, h: &WindowHandle, target: usize, disp: usize, flush: bool) -> Result<()> {
        match self {
            Call::Put => h.put(&[disp as u64], target, disp)?,
            Call::Get => h.get(&mut [0u64], target, disp)?,
            Call::Fop => drop(h.fetch_and_op(1u64, target, disp, Op::Sum)?),
            Call::Acc => h.accumulate(&[1u64; ACC], target, disp, Op::Sum)?,
            Call::Notify => h.put_notify(&[disp as u64], target, disp, id_of(disp))?,
        }
        match flush {
            true => h.flush(target),
            false => Ok(()),
        }
    }
}

/// Window words (u64) between the words of two threads: one cache line each, so that threads
/// writing next to each other do not share a line.
const STRIDE: usize = 8;

/// The threads (among `threads`, or rank 0's own thread where 0) that target rank `me` of `n`.
fn aiming_at(me: usize, n: usize, threads: usize) -> impl Iterator<Item = usize> {
    (0..threads.max(1)).filter(move |&i| target_of(i, n) == me)
}

/// The notification id of the thread whose word is at `disp`.
fn id_of(disp: usize) -> usize {
    (disp / STRIDE) % IDS
}

/// The target of thread `i` among `n` ranks: the others than rank 0, in turn.
fn target_of(i: usize, n: usize) -> usize {
    1 + i % (n - 1)
}

/// `iters` calls from each of `threads` threads sharing `win` (from this thread itself where
/// `threads` is 0), each flushed where `flush`.
fn calls(win: &Window<'_>, call: Call, threads: usize, iters: usize, flush: bool) -> Result<()> {
    let n = win.size_of_group();
    if threads == 0 {
        let target = target_of(0, n);
        return (0..iters).try_for_each(|_| call.on_window(win, target, 0, flush));
    }
    win.share(|h| {
        std::thread::scope(|s| {
            let running: Vec<_> = (0..threads)
                .map(|i| {
                    s.spawn(move || {
                        let (target, disp) = (target_of(i, n), STRIDE * i);
                        (0..iters).try_for_each(|_| call.on_handle(h, target, disp, flush))
                    })
                })
                .collect();
            running.into_iter().try_for_each(|t| {
                t.join().map_err(|_| {
                    Error::new(ErrorClass::Intern, "a thread of the rate test panicked")
                })?
            })
        })
    })
}

/// A rate test: its table, one row of messages per second.
pub(super) fn rate(world: &World, test: Test, plan: &Plan, report: &mut Report) -> Result<()> {
    let call = Call::of(test)?;
    let (n, threads) = (world.size(), plan.threads);
    let fenced = plan.sync(test) == SyncMode::Fence;
    let title = match call {
        Call::Put => "Put Message Rate",
        Call::Get => "Get Message Rate",
        Call::Fop => "Fetch_and_op Message Rate",
        Call::Acc => "Accumulate Message Rate",
        Call::Notify => "Notified Put Message Rate",
    };
    report.table(Table {
        name: test.name(),
        title: format!("onesided {title} Test"),
        notes: vec![match threads {
            0 => "Rank 0's own thread calls the window (no sharing)".to_owned(),
            t => format!("{t} threads of rank 0 share the window (Window::share)"),
        }],
        window: Some("MPI_Win_allocate"),
        sync: Some(match fenced {
            true => "MPI_Win_fence around the calls",
            false => "MPI_Win_lock_all, MPI_Win_flush after each call",
        }),
        datatype: Some(match call {
            Call::Acc => "MPI_UINT64_T, 4 per accumulate",
            _ => "MPI_UINT64_T",
        }),
        ranks: n,
        show_ranks: true,
        columns: vec![MESSAGE_RATE],
        imb: None,
        threads: Some(threads),
    })?;
    // The bytes one call moves: the row's size.
    let size = match call {
        Call::Acc => 8 * ACC,
        _ => 8,
    };
    let pass = plan.pass(Kind::Latency, size);
    let words = STRIDE * threads.max(1);
    let win = Window::allocate(world, 8 * words, 8, &Info::new())?;
    let times = timed_calls(world, &win, call, threads, fenced, plan.repetitions, pass);
    let checked = times.and_then(|t| check(world, &win, call, threads, plan, pass).map(|()| t));
    win.free()?;
    let times = checked?;
    let messages = (threads.max(1) * pass.iters) as f64;
    let rates: Vec<f64> = times.iter().map(|t| messages / t.as_secs_f64()).collect();
    report.row(size, pass.iters, &[rates])
}

/// The repetitions of a rate test: rank 0's times; the others wait at barriers. In one
/// lock_all epoch with each call flushed, or where `fenced` in a fence epoch per repetition
/// without flushes, timed with the fence that closes it (the other ranks only fence).
fn timed_calls(
    world: &World,
    win: &Window<'_>,
    call: Call,
    threads: usize,
    fenced: bool,
    reps: usize,
    pass: Pass,
) -> Result<Vec<Duration>> {
    let fence = |assert| match fenced {
        true => win.fence(assert),
        false => Ok(()),
    };
    let mine = |iters| match world.rank() {
        0 => calls(win, call, threads, iters, !fenced),
        me => consume(win, call, threads, me, iters),
    };
    if !fenced {
        win.lock_all(Assert::NONE)?;
    }
    let times = repeat(reps, pass, |p| {
        if p.warmup > 0 {
            fence(Assert::NOPRECEDE)?;
            mine(p.warmup)?;
            fence(Assert::NOSUCCEED)?;
        }
        world.barrier()?;
        fence(Assert::NOPRECEDE)?;
        let start = Instant::now();
        mine(p.iters)?;
        fence(Assert::NOSUCCEED)?;
        let spent = start.elapsed();
        world.barrier()?;
        Ok(spent)
    })?;
    if !fenced {
        win.unlock_all()?;
    }
    world.barrier()?;
    Ok(times)
}

/// notify_rate at target `me`, while rank 0's threads make `iters` calls each: wait for their
/// notifications to this rank, each id as many times as its threads call. A target consumes
/// them as they come, as a consumer of notifications does: over direct verbs a target that does
/// not call into the window holds back an origin's writes past the 16 it keeps receives posted
/// for (`docs/transports.md`), and one waiting in the barrier instead held rank 0's for good.
fn consume(win: &Window<'_>, call: Call, threads: usize, me: usize, iters: usize) -> Result<()> {
    if !matches!(call, Call::Notify) {
        return Ok(());
    }
    let mut due = vec![0usize; IDS];
    for i in aiming_at(me, win.size_of_group(), threads) {
        due[id_of(STRIDE * i)] += iters;
    }
    due.iter()
        .enumerate()
        .filter(|(_, count)| **count > 0)
        .try_for_each(|(id, &count)| win.wait_notify(id, count))
}

/// What the targets check once the calls are done: fop_rate's and acc_rate's words hold the
/// additions of the threads that targeted them (acc_rate's [`ACC`] words from each thread's
/// first); notify_rate's targets, which consumed every notification their threads called for
/// as they came ([`consume`]), have no more.
fn check(
    world: &World,
    win: &Window<'_>,
    call: Call,
    threads: usize,
    plan: &Plan,
    pass: Pass,
) -> Result<()> {
    let me = world.rank();
    if me == 0 {
        return Ok(());
    }
    let (counted, name) = match call {
        Call::Fop => (1, "fop_rate"),
        Call::Acc => (ACC, "acc_rate"),
        Call::Notify => return check_notified(win, me),
        _ => return Ok(()),
    };
    let per_thread = pass.warmup + pass.iters * plan.repetitions;
    let mine: Vec<usize> = aiming_at(me, world.size(), threads).collect();
    let mut words = vec![0u64; STRIDE * threads.max(1)];
    win.read_local(0, &mut words)?;
    for (i, line) in words.chunks(STRIDE).enumerate() {
        for (k, &got) in line.iter().enumerate() {
            let want = match mine.contains(&i) && k < counted {
                true => per_thread as u64,
                false => 0,
            };
            if got != want {
                let w = STRIDE * i + k;
                return Err(Error::new(
                    ErrorClass::Other,
                    format!("{name}: word {w} of rank {me} holds {got} additions, not {want}"),
                ));
            }
        }
    }
    Ok(())
}

/// notify_rate at rank `me`, after [`consume`]: no notification of any id is left.
fn check_notified(win: &Window<'_>, me: usize) -> Result<()> {
    for id in 0..IDS {
        if win.test_notify(id, 1)? {
            return Err(Error::new(
                ErrorClass::Other,
                format!("notify_rate: rank {me} got more notifications of id {id} than calls"),
            ));
        }
    }
    Ok(())
}
