//! The transport the window tests run over a second time (`transport::deferred`) holds data
//! until a flush, as a NIC's operations are in flight until then: without that, the second run
//! of every test would prove nothing about what the window flushes.

use super::*;
use crate::{Assert, LockType, Op};

/// Whether `win` reaches its targets through the deferred transport (the second run).
fn deferred(win: &Window<'_>) -> bool {
    win.transport_name(0).unwrap() == "deferred"
}

#[test]
fn puts_and_accumulates_wait_for_a_flush() {
    with_window(2, Flavor::Allocate, 3, |world, win| {
        let me = win.rank();
        win.lock_all(Assert::NONE).unwrap();
        if me == 0 {
            win.put(&[7u64], 1, 0).unwrap();
            win.accumulate(&[5u64, 6], 1, 1, Op::Sum).unwrap();
        }
        world.barrier().unwrap();
        if me == 1 {
            let want = match deferred(win) {
                true => [0, 0, 0],
                false => [7, 5, 6],
            };
            assert_eq!(local(win, 3), want, "before the flush");
        }
        world.barrier().unwrap();
        if me == 0 {
            win.flush(1).unwrap();
        }
        world.barrier().unwrap();
        if me == 1 {
            assert_eq!(local(win, 3), [7, 5, 6], "after the flush");
        }
        win.unlock_all().unwrap();
    });
}

#[test]
fn a_fetching_call_sees_the_accumulates_before_it() {
    with_window(2, Flavor::Allocate, 2, |_, win| {
        win.lock(LockType::Exclusive, 1, Assert::NONE).unwrap();
        if win.rank() == 0 {
            win.accumulate(&[3u64, 4], 1, 0, Op::Sum).unwrap();
            let old = win.fetch_and_op(10u64, 1, 1, Op::Sum).unwrap();
            assert_eq!(old, 4, "accumulate ordering: the earlier accumulate first");
        }
        win.unlock(1).unwrap();
    });
}
