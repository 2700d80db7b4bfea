//! Fence epochs: what lands when, and the synchronization misuse a fence refuses.
//!
//! # MPI-4.1: 12.5.1 (MPI_WIN_FENCE)

use super::*;
use crate::Assert;
use crate::LockType;

const SLOTS: usize = 4;

/// Rank `r`'s window before any RMA: its own tags.
fn pattern(r: usize) -> Vec<u64> {
    (0..SLOTS).map(|i| tag(r, r, 100 + i)).collect()
}

#[test]
fn puts_and_gets_land_at_the_fence() {
    for flavor in FLAVORS {
        let n = 4;
        with_window(n, flavor, SLOTS + 1, |_, win| {
            let me = win.rank();
            let (left, right) = ((me + n - 1) % n, (me + 1) % n);
            win.write_local(0, &pattern(me)).unwrap();
            win.fence(Assert::NOPRECEDE).unwrap();
            let put: Vec<u64> = (0..3).map(|i| tag(me, right, i)).collect();
            win.put(&put, right, 0).unwrap();
            let mut got = [0u64; 1];
            win.get(&mut got, left, 3).unwrap();
            win.fence(Assert::NONE).unwrap();
            assert_eq!(
                got[0],
                tag(left, left, 103),
                "get of the left rank's last slot"
            );
            let mut want: Vec<u64> = (0..3).map(|i| tag(left, me, i)).collect();
            want.push(tag(me, me, 103));
            assert_eq!(
                local(win, SLOTS),
                want,
                "window of rank {me} after the first epoch"
            );

            // The others may put in the next epoch already: into a slot not read above.
            win.put(&[tag(me, right, 7)], right, SLOTS).unwrap();
            win.fence(Assert::NOSUCCEED).unwrap();
            want.push(tag(left, me, 7));
            assert_eq!(
                local(win, SLOTS + 1),
                want,
                "window of rank {me} after the second epoch"
            );
        });
    }
}

#[test]
fn rma_outside_an_epoch_is_refused_and_moves_nothing() {
    let n = 3;
    with_window(n, Flavor::Allocate, SLOTS, |world, win| {
        let right = (win.rank() + 1) % n;
        refused(win.put(&[1u64], right, 0), ErrorClass::RmaSync);
        let mut buf = [0x1234u64];
        refused(win.get(&mut buf, right, 0), ErrorClass::RmaSync);
        assert_eq!(buf, [0x1234], "a refused get left the buffer alone");
        refused(
            win.accumulate(&[1u64], right, 1, crate::Op::Sum),
            ErrorClass::RmaSync,
        );
        refused(
            win.fetch_and_op(1u64, right, 1, crate::Op::Sum),
            ErrorClass::RmaSync,
        );
        world.barrier().unwrap();
        assert_eq!(local(win, SLOTS), vec![0; SLOTS]);

        // After an epoch closed with NOSUCCEED, RMA is refused again.
        win.fence(Assert::NOPRECEDE).unwrap();
        win.put(&[5u64], right, 2).unwrap();
        win.fence(Assert::NOSUCCEED).unwrap();
        refused(win.put(&[9u64], right, 2), ErrorClass::RmaSync);
        world.barrier().unwrap();
        assert_eq!(local(win, SLOTS), vec![0, 0, 5, 0]);
    });
}

#[test]
fn a_refused_fence_changes_no_epoch() {
    let n = 2;
    with_window(n, Flavor::Shared, SLOTS, |_, win| {
        let right = (win.rank() + 1) % n;
        refused(win.fence(Assert::NOCHECK), ErrorClass::Assert);
        win.fence(Assert::NONE).unwrap();
        win.put(&[tag(win.rank(), right, 0)], right, 0).unwrap();
        // NOPRECEDE is a lie now: refused before the barrier, so no rank waits for the others.
        refused(win.fence(Assert::NOPRECEDE), ErrorClass::RmaSync);
        refused(
            win.lock(LockType::Shared, right, Assert::NONE),
            ErrorClass::RmaSync,
        );
        refused(win.lock_all(Assert::NONE), ErrorClass::RmaSync);
        // The epoch is still open and still has its put to complete.
        win.fence(Assert::NOSUCCEED).unwrap();
        assert_eq!(local(win, 1), vec![tag(right, win.rank(), 0)]);
    });
}

#[test]
fn fence_inside_a_lock_epoch_is_refused() {
    with_window(2, Flavor::Allocate, SLOTS, |_, win| {
        let me = win.rank();
        win.lock(LockType::Exclusive, me, Assert::NONE).unwrap();
        refused(win.fence(Assert::NONE), ErrorClass::RmaSync);
        win.unlock(me).unwrap();
        win.lock_all(Assert::NONE).unwrap();
        refused(win.fence(Assert::NONE), ErrorClass::RmaSync);
        win.unlock_all().unwrap();
        // Unused, the fence epoch gives way to a lock: fence, lock, unlock, fence.
        win.fence(Assert::NONE).unwrap();
        win.lock(LockType::Shared, me, Assert::NONE).unwrap();
        win.unlock(me).unwrap();
        win.fence(Assert::NONE).unwrap();
    });
}

#[test]
fn free_with_rma_not_closed_by_a_fence_fails_on_every_rank() {
    let n = 3;
    let freed = inproc::run(n, |world| {
        let win = window(&world, Flavor::Allocate, 8, 8, &Info::new()).unwrap();
        win.fence(Assert::NONE).unwrap();
        win.put(&[1u64], (world.rank() + 1) % n, 0).unwrap();
        win.free()
    });
    for f in freed {
        let e = f.unwrap_err();
        assert_eq!(e.class(), ErrorClass::RmaSync, "{e}");
        assert!(e.message().contains("not closed by a fence"), "{e}");
    }
}

#[test]
fn a_rank_that_frees_early_ends_the_others_fence() {
    let fences = inproc::run(3, |world| {
        let win = window(&world, Flavor::Allocate, 8, 8, &Info::new()).unwrap();
        win.fence(Assert::NONE).unwrap();
        if world.rank() == 1 {
            return win.free();
        }
        let fence = win.fence(Assert::NONE);
        drop(win);
        fence
    });
    assert!(fences[1].is_ok());
    for r in [0, 2] {
        let e = fences[r].as_ref().unwrap_err();
        assert_eq!(e.class(), ErrorClass::RmaSync, "rank {r}: {e}");
        assert!(
            e.message().contains("freed the window after 1 fences"),
            "rank {r}: {e}"
        );
    }
}
