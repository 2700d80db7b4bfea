//! Notified RMA: the data of a notified put is there when its notification is counted (with
//! every target through the deferred transport, whose puts land only at a flush, a notification
//! sent without completing its put first shows as an old value), notifications are counted and
//! consumed per id, and the misuse refused moves nothing.

use super::*;
use crate::{Assert, LockType};

/// Rounds of the ping-pong tests.
const ROUNDS: usize = 20;
/// The id origins notify their data with.
const DATA: usize = 3;
/// The id the target acknowledges with (the last one).
const ACK: usize = layout::NOTIFY_IDS - 1;

#[test]
fn a_notified_put_is_there_when_its_notification_is_counted() {
    for flavor in FLAVORS {
        let n = 4;
        with_window(n, flavor, n, |_, win| {
            let me = win.rank();
            win.lock_all(Assert::NONE).unwrap();
            for round in 0..ROUNDS {
                if me == 0 {
                    // Every origin's value of this round, counted as one batch of n - 1.
                    win.wait_notify(DATA, n - 1).unwrap();
                    let got = local(win, n);
                    for (origin, &value) in got.iter().enumerate().skip(1) {
                        assert_eq!(value, tag(origin, 0, round), "round {round}");
                    }
                    for origin in 1..n {
                        win.put_notify(&[0u64], origin, 0, ACK).unwrap();
                    }
                } else {
                    win.put_notify(&[tag(me, 0, round)], 0, me, DATA).unwrap();
                    win.wait_notify(ACK, 1).unwrap();
                }
            }
            win.unlock_all().unwrap();
        });
    }
}

#[test]
fn notifications_are_counted_and_consumed_per_id() {
    with_window(2, Flavor::Allocate, 2, |world, win| {
        let id = 5;
        if win.rank() == 1 {
            win.lock(LockType::Shared, 0, Assert::NONE).unwrap();
            for i in 0..3u64 {
                win.put_notify(&[i + 10], 0, 0, id).unwrap();
            }
            win.unlock(0).unwrap();
        }
        world.barrier().unwrap();
        if win.rank() == 0 {
            assert_eq!(local(win, 1), [12], "the last put's value");
            assert!(!win.test_notify(id, 4).unwrap(), "three arrived, not four");
            assert!(!win.test_notify(id + 1, 1).unwrap(), "none of another id");
            assert!(win.test_notify(id, 2).unwrap());
            assert!(
                !win.test_notify(id, 2).unwrap(),
                "one left after two consumed"
            );
            win.wait_notify(id, 1).unwrap();
            win.wait_notify(id, 0).unwrap();
            assert!(!win.test_notify(id, 1).unwrap(), "all three consumed");
        }
    });
}

#[test]
fn a_notified_get_tells_the_target_its_memory_was_read() {
    with_window(2, Flavor::Shared, 1, |world, win| {
        let me = win.rank();
        win.write_local(0, &[tag(me, me, 0)]).unwrap();
        world.barrier().unwrap();
        win.lock_all(Assert::NONE).unwrap();
        let mut got = [0u64];
        for round in 0..ROUNDS {
            if me == 1 {
                win.get_notify(&mut got, 0, 0, DATA).unwrap();
                assert_eq!(got, [tag(0, 0, round)], "round {round}");
                win.wait_notify(ACK, 1).unwrap();
            } else {
                // The memory is overwritten only once the get has read it.
                win.wait_notify(DATA, 1).unwrap();
                win.write_local(0, &[tag(0, 0, round + 1)]).unwrap();
                win.put_notify(&[0u64], 1, 0, ACK).unwrap();
            }
        }
        win.unlock_all().unwrap();
    });
}

#[test]
fn notified_puts_work_in_fence_and_pscw_epochs() {
    let n = 3;
    with_window(n, Flavor::Allocate, 2, |world, win| {
        let me = win.rank();
        let right = (me + 1) % n;
        win.fence(Assert::NOPRECEDE).unwrap();
        win.put_notify(&[tag(me, right, 1)], right, 0, 0).unwrap();
        win.wait_notify(0, 1).unwrap();
        assert_eq!(local(win, 1), [tag((me + n - 1) % n, me, 1)]);
        win.fence(Assert::NOSUCCEED).unwrap();

        let all = world.group();
        let others: Vec<usize> = (0..n).filter(|&r| r != me).collect();
        let others = all.incl(&others).unwrap();
        win.post(&others, Assert::NONE).unwrap();
        win.start(&others, Assert::NONE).unwrap();
        win.put_notify(&[tag(me, right, 2)], right, 1, 1).unwrap();
        win.wait_notify(1, 1).unwrap();
        assert_eq!(local(win, 2)[1], tag((me + n - 1) % n, me, 2));
        win.complete().unwrap();
        win.wait().unwrap();
    });
}

#[test]
fn misuse_is_refused_and_notifies_nothing() {
    with_window(2, Flavor::Allocate, 1, |world, win| {
        let peer = 1 - win.rank();
        let class = |r: Result<()>| r.unwrap_err().class();
        assert_eq!(
            class(win.put_notify(&[1u64], peer, 0, 0)),
            ErrorClass::RmaSync,
            "outside an epoch"
        );
        win.lock_all(Assert::NONE).unwrap();
        assert_eq!(
            class(win.put_notify(&[2u64], peer, 0, layout::NOTIFY_IDS)),
            ErrorClass::Arg
        );
        assert_eq!(
            class(win.put_notify(&[3u64], peer, 1, 0)),
            ErrorClass::RmaRange
        );
        let mut got = [0u64];
        assert_eq!(
            class(win.get_notify(&mut got, peer, 0, usize::MAX)),
            ErrorClass::Arg
        );
        win.unlock_all().unwrap();
        assert_eq!(
            class(win.wait_notify(layout::NOTIFY_IDS, 1)),
            ErrorClass::Arg
        );
        assert_eq!(
            win.test_notify(layout::NOTIFY_IDS, 1).unwrap_err().class(),
            ErrorClass::Arg
        );
        world.barrier().unwrap();
        assert_eq!(local(win, 1), [0], "no refused put wrote");
        assert!(!win.test_notify(0, 1).unwrap(), "no refused put notified");
    });
}
