//! The OSU accumulate tests: acc_latency (MPI_Accumulate), get_acc_latency
//! (MPI_Get_accumulate), fop_latency (MPI_Fetch_and_op) and cas_latency
//! (MPI_Compare_and_swap), all with MPI_SUM where there is an operation.
//!
//! OSU 7.4 runs them on 1-byte MPI_CHAR elements by default (`-T char`). onesided's accumulate
//! family takes 32- and 64-bit integers and floats ([`onesided::AtomicElem`]), so the elements
//! here are the smallest of those, 32-bit integers, named `MPI_INT` as OSU's `-T int` names
//! them: the numbers compare with `osu_acc_latency -T int` and the like. As OSU does, a size of
//! `size` bytes accumulates `size / 4` elements and sizes below one element are skipped;
//! fetch_and_op and compare_and_swap move one element, so their one row is 4 bytes.
//!
//! Locks follow OSU: the lock mode takes MPI_LOCK_SHARED for accumulate and
//! MPI_LOCK_EXCLUSIVE for the others; the flush modes hold MPI_LOCK_EXCLUSIVE for
//! get_accumulate and MPI_LOCK_SHARED for the others.

use super::Test;
use super::options::{Kind, Plan};
use super::report::{LATENCY, Report};
use super::rma::{Loop, epochs, latency, osu_table, repeat, with_window};
use onesided::{LockType, Op, Result, World};

/// The element type of the accumulate tests.
type Elem = i32;
/// Its size in bytes.
const ELEM: usize = std::mem::size_of::<Elem>();
/// Its name in the header, as OSU's `-T int` prints it.
const DATATYPE: &str = "MPI_INT";

/// Runs one accumulate test over its sizes and reports its rows.
pub(super) fn sweep(world: &World, test: Test, plan: &Plan, report: &mut Report) -> Result<()> {
    report.table(osu_table(test, plan, DATATYPE, LATENCY))?;
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
    };
    let sizes: Vec<usize> = match test {
        Test::FopLatency | Test::CasLatency => vec![ELEM],
        _ => plan.sizes.iter().filter(|s| s / ELEM > 0).collect(),
    };
    for size in sizes {
        let count = size / ELEM;
        let pass = plan.pass(Kind::Latency, size);
        let times = with_window(world, plan.creation, size, |win| {
            let origin: Vec<Elem> = vec![1; count];
            let mut result: Vec<Elem> = vec![0; count];
            repeat(plan.repetitions, pass, |p| match test {
                Test::AccLatency => {
                    epochs(win, how, p, |w, t| w.accumulate(&origin, t, 0, Op::Sum))
                }
                Test::GetAccLatency => epochs(win, how, p, |w, t| {
                    w.get_accumulate(&origin, &mut result, t, 0, Op::Sum)
                }),
                Test::FopLatency => epochs(win, how, p, |w, t| {
                    w.fetch_and_op::<Elem>(1, t, 0, Op::Sum).map(drop)
                }),
                _ => epochs(win, how, p, |w, t| {
                    w.compare_and_swap::<Elem>(1, 0, t, 0).map(drop)
                }),
            })
        })?;
        let values = times.iter().map(|&t| latency(t, sync, pass)).collect();
        report.row(size, pass.iters, &[values])?;
    }
    Ok(())
}
