//! The OSU accumulate tests: acc_latency (MPI_Accumulate), get_acc_latency
//! (MPI_Get_accumulate), fop_latency (MPI_Fetch_and_op) and cas_latency
//! (MPI_Compare_and_swap), all with MPI_SUM where there is an operation.
//!
//! OSU 7.4 runs them on 1-byte MPI_CHAR elements by default (`-T char`). onesided's accumulate
//! family takes 32- and 64-bit integers and floats ([`onesided::AtomicElem`]), so the elements
//! here are the smallest of those, 32-bit integers, named `MPI_INT` as OSU's `-T int` names
//! them: the numbers compare with `osu_acc_latency -T int` and the like. `-T long`, `-T float`
//! and `-T double` take the other types, as OSU's option does. As OSU does, a size of `size`
//! bytes accumulates `size / element size` elements and sizes below one element are skipped;
//! fetch_and_op and compare_and_swap move one element, so their one row is its size.
//!
//! Locks follow OSU: the lock mode takes MPI_LOCK_SHARED for accumulate and
//! MPI_LOCK_EXCLUSIVE for the others; the flush modes hold MPI_LOCK_EXCLUSIVE for
//! get_accumulate and MPI_LOCK_SHARED for the others.

use super::args::{Datatype, Test};
use super::options::{Kind, Plan};
use super::pages::Pages;
use super::report::{LATENCY, Report};
use super::rma::{Loop, epochs, latency, osu_table, repeat, with_window};
use onesided::{AtomicElem, LockType, Op, Result, World};

/// An element type of the accumulate tests: the values they add and compare with.
trait Element: AtomicElem {
    const ZERO: Self;
    const ONE: Self;
}

macro_rules! element {
    ($($t:ty => $zero:expr, $one:expr);*) => {$(
        impl Element for $t {
            const ZERO: Self = $zero;
            const ONE: Self = $one;
        }
    )*};
}
element!(i32 => 0, 1; i64 => 0, 1; f32 => 0.0, 1.0; f64 => 0.0, 1.0);

/// Runs one accumulate test over its sizes and reports its rows.
pub(super) fn sweep(world: &World, test: Test, plan: &Plan, report: &mut Report) -> Result<()> {
    match plan.datatype {
        Datatype::Int => sweep_of::<i32>(world, test, plan, report),
        Datatype::Long => sweep_of::<i64>(world, test, plan, report),
        Datatype::Float => sweep_of::<f32>(world, test, plan, report),
        Datatype::Double => sweep_of::<f64>(world, test, plan, report),
    }
}

/// [`sweep`] over elements of type `E`.
fn sweep_of<E: Element>(world: &World, test: Test, plan: &Plan, report: &mut Report) -> Result<()> {
    let elem = std::mem::size_of::<E>();
    report.table(osu_table(test, plan, plan.datatype.mpi_name(), LATENCY))?;
    let sync = plan.sync(test);
    let how = Loop {
        sync,
        kind: Kind::Latency,
        lock: match test {
            Test::AccLatency => LockType::Shared,
            _ => LockType::Exclusive,
        },
        hold: match test {
            Test::GetAccLatency => LockType::Exclusive,
            _ => LockType::Shared,
        },
        both: false,
        target: plan.target,
    };
    let sizes: Vec<usize> = match test {
        Test::FopLatency | Test::CasLatency => vec![elem],
        _ => plan.sizes.iter().filter(|s| s / elem > 0).collect(),
    };
    for size in sizes {
        let count = size / elem;
        let pass = plan.pass(Kind::Latency, size);
        let times = with_window(world, plan.creation, size, |win, at| {
            let origin = Pages::filled(count, E::ONE);
            let mut result = Pages::filled(count, E::ZERO);
            repeat(plan.repetitions, pass, |p| match test {
                Test::AccLatency => {
                    epochs(win, how, p, |w, t| w.accumulate(&origin, t, at, Op::Sum))
                }
                Test::GetAccLatency => epochs(win, how, p, |w, t| {
                    w.get_accumulate(&origin, &mut result, t, at, Op::Sum)
                }),
                Test::FopLatency => epochs(win, how, p, |w, t| {
                    w.fetch_and_op(E::ONE, t, at, Op::Sum).map(drop)
                }),
                _ => epochs(win, how, p, |w, t| {
                    w.compare_and_swap(E::ONE, E::ZERO, t, at).map(drop)
                }),
            })
        })?;
        let values = times.iter().map(|&t| latency(t, sync, pass)).collect();
        report.row(size, pass.iters, &[values])?;
    }
    Ok(())
}
