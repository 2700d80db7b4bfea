//! Random API calls, valid and not, checked against a model of MPI's rules: every call returns
//! what the model predicts (success, or the error class MPI names for the misuse), nothing
//! panics, and nothing is written outside the windows (guard words around the memory lent to
//! `Window::create` stay as they were).
//!
//! The ranks agree on a seed (rank 0's; `ONESIDED_TEST_FUZZ_SEED` fixes it) and run the same
//! sequence of phases: fence phases (a fence, random calls, a closing fence, sometimes first
//! refused for a NOPRECEDE that the calls made false) and passive phases (random lock, unlock,
//! lock_all, unlock_all, flush and RMA calls, rgets among them, each rank on its own, then a
//! barrier). Within a phase every rank draws its calls from its own generator. Now and then,
//! inside a phase, the window is shared with 1, 2, 4 or 16 threads ([`Window::share`]), each of
//! which makes random RMA calls and flushes of its own at once with the others, checked against
//! the same model. A failure names the seed.
//!
//! # MPI-4.1: 12.3 (RMA calls), 12.5 (synchronization), 12.8 (error classes)

use crate::util::*;
use onesided::{
    Assert, ErrorClass, Flavor, Info, LockType, Op, Request, Window, WindowHandle, World,
};

/// Window size in u64 elements.
const SLOTS: usize = 8;
/// Guard words on each side of the lent memory.
const GUARD: usize = 16;
const GUARD_WORD: u64 = 0x6a09_e667_f3bc_c908;
const PHASES: usize = 24;
const CALLS_PER_PHASE: usize = 40;
/// Thread counts of a shared burst.
const THREADS: [usize; 4] = [1, 2, 4, 16];
/// Calls of each thread of a shared burst.
const CALLS_PER_THREAD: usize = 12;

/// xorshift64*: a small generator, the same on every platform.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

/// This origin's epoch as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Epoch {
    None,
    Fence { used: bool },
    Lock(usize),
    LockAll,
}

/// The model: what a call should return in the current epoch.
struct Model {
    n: usize,
    epoch: Epoch,
}

type Want = Option<ErrorClass>;

impl Model {
    /// An RMA call to `target` of `len` elements at `disp`.
    fn rma(&self, target: usize, disp: usize, len: usize) -> Want {
        if target >= self.n {
            return Some(ErrorClass::Rank);
        }
        if disp + len > SLOTS {
            return Some(ErrorClass::RmaRange);
        }
        match self.epoch {
            Epoch::Fence { .. } | Epoch::LockAll => None,
            Epoch::Lock(t) if t == target => None,
            _ => Some(ErrorClass::RmaSync),
        }
    }

    /// A request-based RMA call: as [`Model::rma`], but only a passive-target epoch covers it.
    fn request(&self, target: usize, disp: usize, len: usize) -> Want {
        match (self.rma(target, disp, len), self.epoch) {
            (None, Epoch::Fence { .. }) => Some(ErrorClass::RmaSync),
            (want, _) => want,
        }
    }

    fn lock(&self, target: usize) -> Want {
        if target >= self.n {
            return Some(ErrorClass::Rank);
        }
        match self.epoch {
            Epoch::None | Epoch::Fence { used: false } => None,
            _ => Some(ErrorClass::RmaSync),
        }
    }

    fn unlock(&self, target: usize) -> Want {
        if target >= self.n {
            return Some(ErrorClass::Rank);
        }
        (self.epoch != Epoch::Lock(target)).then_some(ErrorClass::RmaSync)
    }

    fn flush(&self, target: usize) -> Want {
        if target >= self.n {
            return Some(ErrorClass::Rank);
        }
        match self.epoch {
            Epoch::LockAll => None,
            Epoch::Lock(t) if t == target => None,
            _ => Some(ErrorClass::RmaSync),
        }
    }

    fn lock_all(&self) -> Want {
        self.lock(0)
    }

    fn unlock_all(&self) -> Want {
        (self.epoch != Epoch::LockAll).then_some(ErrorClass::RmaSync)
    }
}

/// Compare a call's outcome with the model's prediction.
fn check<T>(got: onesided::Result<T>, want: Want, what: &str) -> Result<bool, String> {
    match (got, want) {
        (Ok(_), None) => Ok(true),
        (Err(e), Some(class)) if e.class() == class => Ok(false),
        (Ok(_), Some(class)) => Err(format!("{what}: succeeded, MPI says {class:?}")),
        (Err(e), want) => Err(format!("{what}: {e}, expected {want:?}")),
    }
}

/// The seed every rank uses: `ONESIDED_TEST_FUZZ_SEED`, else rank 0's clock.
fn agreed_seed(world: &World) -> Result<u64, String> {
    let mine = std::env::var("ONESIDED_TEST_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let all = world
        .allgather(&mine.to_le_bytes())
        .ctx("allgather of seeds")?;
    let first: [u8; 8] = all[0]
        .as_slice()
        .try_into()
        .map_err(|_| "a seed of the wrong size".to_string())?;
    Ok(u64::from_le_bytes(first))
}

/// Random RMA calls over a `create` window whose lent memory has guard words around it.
pub fn random_calls(world: &World, _: Flavor) -> Res {
    let seed = agreed_seed(world)?;
    let me = world.rank();
    let mut backing = vec![GUARD_WORD; GUARD + SLOTS + GUARD];
    let lent = &mut backing[GUARD..GUARD + SLOTS];
    lent.fill(0);
    let outcome = Window::create(world, lent, 8, &Info::new(), |win| -> Res {
        let mut shared = Rng::new(seed);
        let mut own = Rng::new(seed ^ (me as u64 + 1) << 32);
        let mut model = Model {
            n: world.size(),
            epoch: Epoch::None,
        };
        let mut calls = 0usize;
        for phase in 0..PHASES {
            let passive = shared.one_in(2);
            let r = if passive {
                passive_phase(win, &mut model, &mut own, &mut calls)
            } else {
                fence_phase(win, &mut model, &mut own, &mut calls)
            };
            r.map_err(|e| format!("seed {seed}, phase {phase}: {e}"))?;
            world.barrier().ctx("barrier between phases")?;
        }
        println!("fuzz rank {me}: {calls} calls, seed {seed}");
        Ok(())
    });
    outcome.ctx("create/free")??;
    let guards = backing[..GUARD].iter().chain(&backing[GUARD + SLOTS..]);
    ensure!(
        guards.into_iter().all(|&w| w == GUARD_WORD),
        "seed {seed}: memory around the window was written: {backing:x?}"
    );
    Ok(())
}

fn fence_phase(win: &Window<'_>, model: &mut Model, rng: &mut Rng, calls: &mut usize) -> Res {
    win.fence(Assert::NONE).ctx("opening fence")?;
    model.epoch = Epoch::Fence { used: false };
    for _ in 0..CALLS_PER_PHASE {
        random_rma(win, model, rng, calls)?;
    }
    if rng.one_in(2) {
        shared_burst(win, model, rng, calls)?;
    }
    if let Epoch::Lock(t) = model.epoch {
        win.unlock(t).ctx("unlock before the closing fence")?;
        model.epoch = Epoch::None;
    }
    if model.epoch == Epoch::LockAll {
        win.unlock_all()
            .ctx("unlock_all before the closing fence")?;
        model.epoch = Epoch::None;
    }
    if model.epoch == (Epoch::Fence { used: true }) && rng.one_in(2) {
        check(
            win.fence(Assert::NOPRECEDE | Assert::NOSUCCEED),
            Some(ErrorClass::RmaSync),
            "fence(NOPRECEDE) after RMA calls",
        )?;
    }
    win.fence(Assert::NOSUCCEED).ctx("closing fence")?;
    model.epoch = Epoch::None;
    let want = model.rma(0, 0, 1);
    check(win.put(&[1u64], 0, 0), want, "put after the closing fence")?;
    Ok(())
}

fn passive_phase(win: &Window<'_>, model: &mut Model, rng: &mut Rng, calls: &mut usize) -> Res {
    for _ in 0..CALLS_PER_PHASE {
        random_rma(win, model, rng, calls)?;
    }
    if rng.one_in(2) {
        shared_burst(win, model, rng, calls)?;
    }
    match model.epoch {
        Epoch::Lock(t) => win.unlock(t).ctx("closing unlock")?,
        Epoch::LockAll => win.unlock_all().ctx("closing unlock_all")?,
        _ => {}
    }
    model.epoch = Epoch::None;
    Ok(())
}

/// The arguments of one random RMA call among `n` ranks: target, length, displacement and
/// value; mostly valid targets and displacements, now and then one past the end.
fn draw(rng: &mut Rng, n: usize) -> (usize, usize, usize, u64) {
    let target = if rng.one_in(12) { n } else { rng.below(n) };
    let len = 1 + rng.below(3);
    let disp = if rng.one_in(8) {
        SLOTS + 1 - len + rng.below(2)
    } else {
        rng.below(SLOTS + 1 - len)
    };
    (target, len, disp, rng.next())
}

/// One random call (synchronization or RMA, valid or not), checked against the model, which
/// it then advances.
fn random_rma(win: &Window<'_>, model: &mut Model, rng: &mut Rng, calls: &mut usize) -> Res {
    *calls += 1;
    let (target, len, disp, value) = draw(rng, model.n);
    let rma = model.rma(target, disp, len);
    let moved = match rng.below(12) {
        0 | 1 => check(win.put(&vec![value; len], target, disp), rma, "put")?,
        2 => {
            let mut buf = vec![0u64; len];
            check(win.get(&mut buf, target, disp), rma, "get")?
        }
        3 => check(
            win.accumulate(&vec![value; len], target, disp, Op::Sum),
            rma,
            "accumulate",
        )?,
        4 => {
            let want = model.rma(target, disp, 1);
            check(
                win.fetch_and_op(value, target, disp, Op::Bxor),
                want,
                "fetch_and_op",
            )?
        }
        5 => {
            let want = model.rma(target, disp, 1);
            check(
                win.compare_and_swap(value, 0, target, disp),
                want,
                "compare_and_swap",
            )?
        }
        6 => {
            let kind = if rng.one_in(2) {
                LockType::Shared
            } else {
                LockType::Exclusive
            };
            // Hold at most one lock at a time: waits for locks can then never form a cycle.
            if matches!(model.epoch, Epoch::Lock(t) if t != target) {
                return Ok(());
            }
            let want = model.lock(target);
            if check(win.lock(kind, target, Assert::NONE), want, "lock")? {
                model.epoch = Epoch::Lock(target);
            }
            return Ok(());
        }
        7 => {
            let want = model.unlock(target);
            if check(win.unlock(target), want, "unlock")? {
                model.epoch = Epoch::None;
            }
            return Ok(());
        }
        8 => {
            let want = model.flush(target);
            check(win.flush(target), want, "flush")?;
            return Ok(());
        }
        9 => {
            // A few rgets in a row, completed together (gathered into one read over the
            // fabric).
            let want = model.request(target, disp, len);
            let mut bufs = vec![vec![0u64; len]; 1 + rng.below(4)];
            let mut reqs = Vec::new();
            for b in bufs.iter_mut() {
                match (win.rget(b, target, disp), want) {
                    (Ok(r), None) => reqs.push(r),
                    (got, want) => {
                        check(got, want, "rget")?;
                    }
                }
            }
            Request::wait_all(reqs).ctx("wait_all of rgets")?;
            return Ok(());
        }
        10 => {
            let want = model.lock_all();
            if check(win.lock_all(Assert::NONE), want, "lock_all")? {
                model.epoch = Epoch::LockAll;
            }
            return Ok(());
        }
        _ => {
            let want = model.unlock_all();
            if check(win.unlock_all(), want, "unlock_all")? {
                model.epoch = Epoch::None;
            }
            return Ok(());
        }
    };
    if moved && let Epoch::Fence { used } = &mut model.epoch {
        *used = true;
    }
    Ok(())
}

/// Share the window with a random number of threads, each making random RMA calls and flushes
/// (valid and not) checked against the model, which no call of a handle changes but for a
/// fence epoch's first RMA call.
fn shared_burst(win: &Window<'_>, model: &mut Model, rng: &mut Rng, calls: &mut usize) -> Res {
    let threads = THREADS[rng.below(THREADS.len())];
    let seeds: Vec<u64> = (0..threads).map(|_| rng.next()).collect();
    let view: &Model = model;
    let moved = win.share(|h| {
        std::thread::scope(|s| {
            let running: Vec<_> = seeds
                .iter()
                .map(|&seed| s.spawn(move || thread_calls(h, view, &mut Rng::new(seed))))
                .collect();
            let mut moved = false;
            for (i, t) in running.into_iter().enumerate() {
                let r = t.join().map_err(|_| format!("thread {i} panicked"))?;
                moved |= r.map_err(|e| format!("thread {i} of {threads}: {e}"))?;
            }
            Ok::<bool, String>(moved)
        })
    })?;
    *calls += threads * CALLS_PER_THREAD;
    if moved && let Epoch::Fence { used } = &mut model.epoch {
        *used = true;
    }
    Ok(())
}

/// One thread's random calls of a shared burst; whether any moved data.
fn thread_calls(h: &WindowHandle, model: &Model, rng: &mut Rng) -> Result<bool, String> {
    let mut moved = false;
    for _ in 0..CALLS_PER_THREAD {
        let (target, len, disp, value) = draw(rng, model.n);
        let rma = model.rma(target, disp, len);
        moved |= match rng.below(7) {
            0 | 1 => check(h.put(&vec![value; len], target, disp), rma, "put")?,
            2 => check(h.get(&mut vec![0u64; len], target, disp), rma, "get")?,
            3 => check(
                h.accumulate(&vec![value; len], target, disp, Op::Sum),
                rma,
                "accumulate",
            )?,
            4 => check(
                h.fetch_and_op(value, target, disp, Op::Bxor),
                model.rma(target, disp, 1),
                "fetch_and_op",
            )?,
            5 => check(
                h.compare_and_swap(value, 0, target, disp),
                model.rma(target, disp, 1),
                "compare_and_swap",
            )?,
            _ => {
                check(h.flush(target), model.flush(target), "flush")?;
                false
            }
        };
    }
    Ok(moved)
}
