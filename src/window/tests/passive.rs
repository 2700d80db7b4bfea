//! Passive target: the lock words under several ranks, lock_all and the flushes, and the
//! synchronization misuse they refuse (a refused call leaves the lock word as it was).
//!
//! # MPI-4.1: 12.5.3 (MPI_WIN_LOCK, MPI_WIN_LOCK_ALL), 12.5.4 (flush, sync)

use super::*;
use crate::protocol::lockword::{EXCLUSIVE, PAST};
use crate::{Assert, LockType};
use std::time::Duration;

/// Every rank increments a counter on rank 0, and one on rank `round % n`, by get, +1 and put
/// under an exclusive lock: a lost update (two holders at once) would show as a short count.
#[test]
fn exclusive_locks_lose_no_update() {
    const ROUNDS: usize = 25;
    let n = 4;
    for flavor in FLAVORS {
        with_window(n, flavor, 2, |world, win| {
            for round in 0..ROUNDS {
                for (target, slot) in [(0, 0), (round % n, 1)] {
                    win.lock(LockType::Exclusive, target, Assert::NONE).unwrap();
                    let mut x = [0u64];
                    win.get(&mut x, target, slot).unwrap();
                    std::thread::yield_now();
                    win.put(&[x[0] + 1], target, slot).unwrap();
                    win.unlock(target).unwrap();
                }
            }
            world.barrier().unwrap();
            let me = win.rank();
            let mine = (0..ROUNDS).filter(|r| r % n == me).count();
            let want0 = if me == 0 { n * ROUNDS } else { 0 };
            assert_eq!(local(win, 2), vec![want0 as u64, (n * mine) as u64]);
            assert_eq!(lock_word(win, me), 0, "every lock was released");
        });
    }
}

/// Shared locks are held by every rank at once, and the lock word counts them exactly; an
/// exclusive lock is one claim; a shared lock waits for the exclusive holder to release.
#[test]
fn lock_words_count_holders() {
    let n = 4;
    with_window(n, Flavor::Allocate, 1, |world, win| {
        let me = win.rank();
        win.lock(LockType::Shared, 0, Assert::NONE).unwrap();
        world.barrier().unwrap();
        assert_eq!(lock_word(win, 0), n as u64, "{n} shared holders");
        world.barrier().unwrap();
        win.unlock(0).unwrap();
        world.barrier().unwrap();
        assert_eq!(lock_word(win, 0), 0);
        world.barrier().unwrap();

        if me == 1 {
            win.lock(LockType::Exclusive, 0, Assert::NONE).unwrap();
        }
        world.barrier().unwrap();
        assert_eq!(lock_word(win, 0), EXCLUSIVE, "one exclusive claim");
        world.barrier().unwrap();
        match me {
            1 => {
                // The others are waiting for the lock meanwhile; they must see this put.
                std::thread::sleep(Duration::from_millis(20));
                win.put(&[7u64], 0, 0).unwrap();
                win.unlock(0).unwrap();
            }
            _ => {
                win.lock(LockType::Shared, 0, Assert::NONE).unwrap();
                let mut x = [0u64];
                win.get(&mut x, 0, 0).unwrap();
                win.unlock(0).unwrap();
                assert_eq!(
                    x,
                    [7],
                    "rank {me} got the shared lock only after the release"
                );
            }
        }
        world.barrier().unwrap();
        assert_eq!(lock_word(win, 0), 0);
    });
}

/// Under lock_all every rank puts into its own slot of every target; a flush completes them.
#[test]
fn lock_all_reaches_every_target() {
    let n = 4;
    with_window(n, Flavor::Shared, n, |world, win| {
        let me = win.rank();
        win.lock_all(Assert::NONE).unwrap();
        for t in 0..n {
            win.put(&[tag(me, t, me)], t, me).unwrap();
        }
        win.flush_all().unwrap();
        win.flush(0).unwrap();
        win.flush_local_all().unwrap();
        win.sync().unwrap();
        world.barrier().unwrap();
        assert_eq!(
            lock_word(win, me),
            n as u64,
            "every rank holds a shared lock"
        );
        world.barrier().unwrap();
        win.unlock_all().unwrap();
        world.barrier().unwrap();
        let want: Vec<u64> = (0..n).map(|o| tag(o, me, o)).collect();
        assert_eq!(local(win, n), want);
    });
}

/// Nested locks, unlocks without a lock and flushes outside an epoch are MPI_ERR_RMA_SYNC, and
/// leave the lock words as they were.
#[test]
fn lock_misuse_is_refused_and_leaves_the_word() {
    with_window(2, Flavor::Allocate, 1, |world, win| {
        if win.rank() == 0 {
            refused(win.unlock(1), ErrorClass::RmaSync);
            refused(win.unlock_all(), ErrorClass::RmaSync);
            refused(win.flush(1), ErrorClass::RmaSync);
            refused(win.flush_local(1), ErrorClass::RmaSync);
            refused(win.flush_all(), ErrorClass::RmaSync);
            refused(win.sync(), ErrorClass::RmaSync);
            refused(
                win.lock(LockType::Shared, 2, Assert::NONE),
                ErrorClass::Rank,
            );
            refused(
                win.lock(LockType::Shared, 1, Assert::NOPRECEDE),
                ErrorClass::Assert,
            );
            assert_eq!(lock_word(win, 1), 0);

            win.lock(LockType::Exclusive, 1, Assert::NONE).unwrap();
            refused(
                win.lock(LockType::Shared, 1, Assert::NONE),
                ErrorClass::RmaSync,
            );
            refused(
                win.lock(LockType::Exclusive, 1, Assert::NONE),
                ErrorClass::RmaSync,
            );
            refused(win.lock_all(Assert::NONE), ErrorClass::RmaSync);
            refused(win.put(&[1u64], 0, 0), ErrorClass::RmaSync);
            assert_eq!(lock_word(win, 1), EXCLUSIVE, "still exactly one claim");
            win.unlock(1).unwrap();
            refused(win.unlock(1), ErrorClass::RmaSync);
            assert_eq!(lock_word(win, 1), 0);

            // NOCHECK takes no lock word.
            win.lock_all(Assert::NOCHECK).unwrap();
            refused(
                win.lock(LockType::Shared, 0, Assert::NONE),
                ErrorClass::RmaSync,
            );
            refused(win.lock_all(Assert::NONE), ErrorClass::RmaSync);
            win.put(&[5u64], 1, 0).unwrap();
            assert_eq!([lock_word(win, 0), lock_word(win, 1)], [0, 0]);
            win.unlock_all().unwrap();
            win.lock(LockType::Exclusive, 1, Assert::NOCHECK).unwrap();
            assert_eq!(lock_word(win, 1), 0);
            win.unlock(1).unwrap();
            // Both ranks' memory is mapped here (shared_query reaches it): lock_all takes
            // both words at once.
            win.lock_all(Assert::NONE).unwrap();
            assert_eq!([lock_word(win, 0), lock_word(win, 1)], [1, 1]);
            win.unlock_all().unwrap();
            assert_eq!([lock_word(win, 0), lock_word(win, 1)], [0, 0]);
        }
        world.barrier().unwrap();
    });
}

#[test]
fn no_locks_windows_refuse_locks() {
    inproc::run(2, |world| {
        let info = Info::new().set("no_locks", "true");
        let win = window(&world, Flavor::Allocate, 8, 8, &info).unwrap();
        refused(
            win.lock(LockType::Shared, 0, Assert::NONE),
            ErrorClass::RmaSync,
        );
        refused(win.lock_all(Assert::NONE), ErrorClass::RmaSync);
        assert_eq!(win.info().get("no_locks"), Some("true"));
        win.free().unwrap();
    });
}

/// A rank that frees a window while it holds a lock gets MPI_ERR_RMA_SYNC, and the lock is
/// released, so that the others are not blocked by it.
#[test]
fn free_releases_forgotten_locks() {
    let freed = inproc::run(2, |world| {
        let win = window(&world, Flavor::Allocate, 8, 8, &Info::new()).unwrap();
        if world.rank() == 0 {
            win.lock(LockType::Exclusive, 1, Assert::NONE).unwrap();
            win.lock(LockType::Shared, 0, Assert::NONE).unwrap();
        }
        world.barrier().unwrap();
        let held = (lock_word(&win, 0), lock_word(&win, 1));
        world.barrier().unwrap();
        if world.rank() == 0 {
            refused(win.free(), ErrorClass::RmaSync);
            return held;
        }
        // Rank 1 locks its own window while rank 0 frees: only the release lets it through.
        win.lock(LockType::Exclusive, 1, Assert::NONE).unwrap();
        win.unlock(1).unwrap();
        win.free().unwrap();
        held
    });
    // The shared lock, taken while the exclusive one was held, passes standing claims.
    assert_eq!(freed, vec![(PAST, EXCLUSIVE), (PAST, EXCLUSIVE)]);
}
