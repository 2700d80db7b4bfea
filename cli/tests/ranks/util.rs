//! Helpers of the rank side: error context, expected-error checks, windows of every flavor.

use onesided::{Assert, Comm, ErrorClass, Flavor, Info, LockType, Model, Window};

/// What a scenario returns on every rank: `Err` explains the first broken expectation.
pub type Res = Result<(), String>;

/// `ensure!(cond, "fmt", args...)`: return `Err(message)` from the scenario unless `cond`.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

/// `ensure_eq!(left, right, "what")`: return `Err` naming both values unless they are equal.
macro_rules! ensure_eq {
    ($left:expr, $right:expr, $($fmt:tt)+) => {
        match (&$left, &$right) {
            (l, r) => {
                if l != r {
                    return Err(format!("{}: got {:?}, expected {:?}", format!($($fmt)+), l, r));
                }
            }
        }
    };
}

/// Environment variable naming the window flavor of a trial's variant.
pub const ENV_FLAVOR: &str = "ONESIDED_TEST_FLAVOR";

/// Every window flavor, in the order trials list them.
pub const ALL_FLAVORS: &[Flavor] = &[Flavor::Allocate, Flavor::Shared, Flavor::Create];

/// The name of a flavor in trial names and in [`ENV_FLAVOR`].
pub fn flavor_name(f: Flavor) -> &'static str {
    match f {
        Flavor::Allocate => "allocate",
        Flavor::Shared => "shared",
        Flavor::Create => "create",
        Flavor::Dynamic => "dynamic",
    }
}

/// The flavor named by [`ENV_FLAVOR`] (allocate when unset).
pub fn flavor_from_env() -> Result<Flavor, String> {
    match std::env::var(ENV_FLAVOR).as_deref() {
        Err(_) | Ok("allocate") => Ok(Flavor::Allocate),
        Ok("shared") => Ok(Flavor::Shared),
        Ok("create") => Ok(Flavor::Create),
        Ok(other) => Err(format!("unknown flavor {other:?} in {ENV_FLAVOR}")),
    }
}

/// Adds what was being done to a library error.
pub trait Ctx<T> {
    fn ctx(self, what: &str) -> Result<T, String>;
}

impl<T> Ctx<T> for onesided::Result<T> {
    fn ctx(self, what: &str) -> Result<T, String> {
        self.map_err(|e| format!("{what}: unexpected error {e}"))
    }
}

/// `Ok` if `r` failed with `class`; otherwise an error saying what `what` did instead.
pub fn expect_class<T: std::fmt::Debug>(
    r: onesided::Result<T>,
    class: ErrorClass,
    what: &str,
) -> Res {
    match r {
        Err(e) if e.class() == class => Ok(()),
        Err(e) => Err(format!("{what}: expected {class}, got {e}")),
        Ok(v) => Err(format!(
            "{what}: expected {class}, but it succeeded ({v:?})"
        )),
    }
}

/// Create a window of `flavor` over `comm` with `bytes` bytes on this rank (memory lent by this
/// function for create windows, 8-aligned), check its attributes, run `f` on it and free it
/// (checking that free succeeds). When `f` fails on an allocated window, the window is leaked
/// instead of freed, so that the failing rank leaves at once rather than waiting in free for
/// ranks that went on (a create window is always freed: its memory is only lent).
pub fn with_window<R>(
    comm: &Comm,
    flavor: Flavor,
    bytes: usize,
    disp_unit: usize,
    info: &Info,
    f: impl FnOnce(&Window<'_>) -> Result<R, String>,
) -> Result<R, String> {
    let what = format!("creating a {} window of {bytes} bytes", flavor_name(flavor));
    let win = match flavor {
        Flavor::Allocate => Window::allocate(comm, bytes, disp_unit, info),
        Flavor::Shared => Window::allocate_shared(comm, bytes, disp_unit, info),
        Flavor::Dynamic => return Err(format!("{what}: dynamic windows have no size")),
        Flavor::Create => {
            let mut backing = vec![0u64; bytes.div_ceil(8)];
            let lent = backing.as_ptr() as usize;
            let mem = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut backing)[..bytes];
            let body = |win: &Window<'_>| -> Result<R, String> {
                check_attributes(win, comm, flavor, bytes, disp_unit)?;
                ensure_eq!(
                    win.base_addr(),
                    lent,
                    "create window base vs the memory lent"
                );
                f(win)
            };
            // The body's failure first: the free after it may fail only because of it (an
            // epoch the body left open).
            let failed = std::cell::RefCell::new(None);
            let made = Window::create(comm, mem, disp_unit, info, |win| {
                let out = body(win);
                if let Err(e) = &out {
                    *failed.borrow_mut() = Some(e.clone());
                }
                out
            });
            if let Some(e) = failed.into_inner() {
                return Err(e);
            }
            return made.ctx("create/free")?;
        }
    }
    .ctx(&what)?;
    match check_attributes(&win, comm, flavor, bytes, disp_unit).and_then(|()| f(&win)) {
        Ok(v) => {
            win.free().ctx("free")?;
            Ok(v)
        }
        Err(e) => {
            std::mem::forget(win);
            Err(e)
        }
    }
}

fn check_attributes(win: &Window<'_>, comm: &Comm, flavor: Flavor, bytes: usize, du: usize) -> Res {
    ensure_eq!(win.size(), bytes, "win.size()");
    ensure_eq!(win.disp_unit(), du, "win.disp_unit()");
    ensure_eq!(win.flavor(), flavor, "win.flavor()");
    ensure_eq!(win.model(), Model::Unified, "win.model()");
    ensure_eq!(win.rank(), comm.rank(), "win.rank()");
    ensure_eq!(win.size_of_group(), comm.size(), "win.size_of_group()");
    ensure_eq!(win.group(), comm.group(), "win.group()");
    ensure_eq!(
        win.shared_query(Some(comm.rank()))
            .ctx("own shared_query")?
            .base_addr(),
        win.base_addr(),
        "own shared_query base_addr"
    );
    Ok(())
}

/// A value that names (writer, target, round), so a misplaced value says where it came from.
pub fn tag(writer: usize, target: usize, round: usize) -> u64 {
    0x5a00_0000_0000_0000 | (writer as u64) << 32 | (target as u64) << 16 | round as u64
}

/// This rank's window memory as `n` u64 (disp unit 8 assumed by the caller).
pub fn local_u64(win: &Window<'_>, n: usize) -> Result<Vec<u64>, String> {
    let mut v = vec![0u64; n];
    win.read_local(0, &mut v).ctx("read_local")?;
    Ok(v)
}

/// Whether the ranks run in the software RoCE guest of `rxe/run.sh` (`ONESIDED_RXE=1`), whose
/// CPU is emulated: every instruction several times slower than on the host.
pub fn emulated() -> bool {
    std::env::var("ONESIDED_RXE").as_deref() == Ok("1")
}

/// `d`, three times as long in the emulated guest: bounds on how long a rank's own work takes.
pub fn scaled(d: std::time::Duration) -> std::time::Duration {
    match emulated() {
        true => d * 3,
        false => d,
    }
}

/// How long a target computes or sleeps in the tests that check it holds no origin up (2 s;
/// scaled in the emulated guest, so that the origin's own calls fit well inside it there too).
pub fn busy_for() -> std::time::Duration {
    scaled(std::time::Duration::from_secs(2))
}

/// An error unless the calls `what` since `start` took well under [`busy_for`]: an origin
/// whose target computes or sleeps that long must not wait for it.
pub fn not_held_up(start: std::time::Instant, what: &str) -> Res {
    let took = start.elapsed();
    ensure!(
        took < busy_for() * 3 / 4,
        "{what} took {took:?}: the origin waited for its busy target"
    );
    Ok(())
}

/// What an origin does while `target` computes or sleeps for [`busy_for`]: lock it
/// exclusively, put `[41, 42]` at `disp`, flush, get them back, swap 41 for 7, unlock; all of
/// it well before the target is back. The target's memory at `disp` holds `[7, 42]` after.
pub fn beside_busy_target(win: &Window<'_>, target: usize, disp: usize) -> Res {
    let start = std::time::Instant::now();
    win.lock(LockType::Exclusive, target, Assert::NONE)
        .ctx("lock")?;
    win.put(&[41u64, 42], target, disp).ctx("put")?;
    win.flush(target).ctx("flush")?;
    let mut back = [0u64; 2];
    win.get(&mut back, target, disp).ctx("get")?;
    win.flush(target).ctx("flush")?;
    ensure_eq!(back, [41, 42], "get after put");
    let old = win
        .compare_and_swap(7u64, 41, target, disp)
        .ctx("compare_and_swap")?;
    ensure_eq!(old, 41, "compare_and_swap old value");
    win.unlock(target).ctx("unlock")?;
    not_held_up(start, "lock/put/get/CAS/unlock")
}

/// Keep this CPU busy for `d` without a call into onesided (a target that computes).
pub fn compute_for(d: std::time::Duration) {
    let start = std::time::Instant::now();
    let mut x = 1u64;
    while start.elapsed() < d {
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
}
