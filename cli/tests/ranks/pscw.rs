//! General active-target synchronization (post/start/complete/wait/test) on every transport:
//! no origin touches a target before its post, the data is there when wait returns, epochs
//! match per pair of ranks as groups change from epoch to epoch, accumulates are counted
//! exactly, a target that computes after its post does not hold its origins up, and the misuse
//! MPI names fails with its class.
//!
//! # MPI-4.1: 12.5.2

use crate::util::*;
use onesided::{Assert, ErrorClass, Flavor, Group, Info, LockType, Op, World};
use std::time::{Duration, Instant};

/// Epochs of the ring and many-to-one scenarios.
const ROUNDS: usize = 30;

/// The group of the window's ranks `ranks`.
fn group_of(world: &World, ranks: &[usize]) -> Result<Group, String> {
    world.group().incl(ranks).ctx("group incl")
}

/// Each rank exposes its memory to its two ring neighbours and accesses theirs, every round:
/// before posting it overwrites its two slots with a round sentinel, so a put that came before
/// the post would be lost and seen; after wait both slots must hold the neighbours' values of
/// this round. Odd rounds end the exposure epoch with a test loop instead of wait.
pub fn ring(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let mut near = vec![left, right];
    near.sort_unstable();
    near.dedup();
    let near = group_of(world, &near)?;
    with_window(world, flavor, 16, 8, &Info::new(), |win| {
        for round in 0..ROUNDS {
            let sentinel = 0xdead_0000 + round as u64;
            win.write_local(0, &[sentinel, sentinel])
                .ctx("write_local")?;
            win.post(&near, Assert::NONE).ctx("post")?;
            win.start(&near, Assert::NONE).ctx("start")?;
            // Slot 0 is written by the left neighbour, slot 1 by the right one.
            win.put(&[tag(me, right, round)], right, 0)
                .ctx("put right")?;
            win.put(&[tag(me, left, round)], left, 1).ctx("put left")?;
            win.complete().ctx("complete")?;
            if round % 2 == 0 {
                win.wait().ctx("wait")?;
            } else {
                let give_up = Instant::now() + Duration::from_secs(30);
                while !win.test().ctx("test")? {
                    ensure!(
                        Instant::now() < give_up,
                        "test never completed, round {round}"
                    );
                    std::thread::yield_now();
                }
            }
            ensure_eq!(
                local_u64(win, 2)?,
                [tag(left, me, round), tag(right, me, round)],
                "rank {me} after wait, round {round}"
            );
        }
        Ok(())
    })
}

/// Rank 0 exposes a counter to a group that changes every round (every other rank in even
/// rounds, the odd ranks in odd ones); each origin of the round adds 1 to it `ADDS` times with
/// accumulate and once with fetch_and_op. After wait the count is exact, so every origin's
/// epoch matched rank 0's epoch of its round, not an earlier or later one.
pub fn many_to_one(world: &World, flavor: Flavor) -> Res {
    const ADDS: u64 = 20;
    let (me, n) = (world.rank(), world.size());
    let origins = |round: usize| -> Vec<usize> {
        (1..n)
            .filter(|r| round.is_multiple_of(2) || r % 2 == 1)
            .collect()
    };
    let zero = group_of(world, &[0])?;
    with_window(world, flavor, 8, 8, &Info::new(), |win| {
        let mut expected = 0u64;
        for round in 0..ROUNDS {
            let members = origins(round);
            if me == 0 {
                win.post(&group_of(world, &members)?, Assert::NOSTORE)
                    .ctx("post")?;
                win.wait().ctx("wait")?;
                expected += members.len() as u64 * (ADDS + 1);
                ensure_eq!(local_u64(win, 1)?[0], expected, "count after round {round}");
            } else if members.contains(&me) {
                win.start(&zero, Assert::NONE).ctx("start")?;
                for _ in 0..ADDS {
                    win.accumulate(&[1u64], 0, 0, Op::Sum).ctx("accumulate")?;
                }
                let before = win.fetch_and_op(1u64, 0, 0, Op::Sum).ctx("fetch_and_op")?;
                ensure!(
                    before >= expected && before < expected + members.len() as u64 * (ADDS + 1),
                    "fetch_and_op read {before} in round {round}: outside the round's counts"
                );
                win.complete().ctx("complete")?;
            }
            expected = match me {
                0 => expected,
                _ => expected + members.len() as u64 * (ADDS + 1),
            };
        }
        Ok(())
    })
}

/// Rank 1 posts to rank 0 and computes for 2 s without a call into onesided, then waits; rank 0
/// meanwhile starts, puts, gets, compare-and-swaps and completes, which must finish long before
/// rank 1 is back.
pub fn target_computes(world: &World, flavor: Flavor) -> Res {
    let me = world.rank();
    ensure!(
        world.size() == 2,
        "laid out for 2 ranks, not {}",
        world.size()
    );
    let other = group_of(world, &[1 - me])?;
    with_window(world, flavor, 16, 8, &Info::new(), |win| {
        if me == 1 {
            win.post(&other, Assert::NONE).ctx("post")?;
            compute_for(busy_for());
            win.wait().ctx("wait")?;
            ensure_eq!(
                local_u64(win, 2)?,
                [7, 42],
                "memory after the origin's epoch"
            );
        } else {
            let start = Instant::now();
            win.start(&other, Assert::NONE).ctx("start")?;
            win.put(&[41u64, 42], 1, 0).ctx("put")?;
            let mut back = [0u64; 2];
            win.get(&mut back, 1, 0).ctx("get")?;
            win.complete().ctx("complete")?;
            ensure_eq!(back, [41, 42], "get after put, completed by complete");
            win.start(&other, Assert::NOCHECK)
                .ctx("start without check")?;
            let old = win
                .compare_and_swap(7u64, 41, 1, 0)
                .ctx("compare_and_swap")?;
            win.complete().ctx("complete")?;
            ensure_eq!(old, 41, "compare_and_swap old value");
            not_held_up(start, "start/put/get/complete/CAS")?;
        }
        world.barrier().ctx("barrier")
    })
}

/// The misuse MPI names: complete, wait and test outside their epochs, nested epochs, RMA to a
/// rank outside the access group, other synchronization inside an epoch, and wrong asserts;
/// then a NOCHECK epoch (the post known to be done by a barrier) that moves data.
pub fn errors(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    ensure!(n == 2, "laid out for 2 ranks, not {n}");
    let other = 1 - me;
    let them = group_of(world, &[other])?;
    with_window(world, flavor, 16, 8, &Info::new(), |win| {
        expect_class(
            win.complete(),
            ErrorClass::RmaSync,
            "complete without start",
        )?;
        expect_class(win.wait(), ErrorClass::RmaSync, "wait without post")?;
        expect_class(win.test(), ErrorClass::RmaSync, "test without post")?;
        expect_class(
            win.post(&them, Assert::NOPRECEDE),
            ErrorClass::Assert,
            "post with NOPRECEDE",
        )?;
        expect_class(
            win.start(&them, Assert::NOPUT),
            ErrorClass::Assert,
            "start with NOPUT",
        )?;
        win.post(&them, Assert::NONE).ctx("post")?;
        expect_class(
            win.post(&them, Assert::NONE),
            ErrorClass::RmaSync,
            "nested post",
        )?;
        win.start(&them, Assert::NONE).ctx("start")?;
        expect_class(
            win.start(&them, Assert::NONE),
            ErrorClass::RmaSync,
            "nested start",
        )?;
        expect_class(
            win.put(&[1u64], me, 0),
            ErrorClass::RmaSync,
            "put to a rank outside the access group",
        )?;
        expect_class(
            win.lock(LockType::Shared, other, Assert::NONE),
            ErrorClass::RmaSync,
            "lock inside an access epoch",
        )?;
        expect_class(
            win.lock_all(Assert::NONE),
            ErrorClass::RmaSync,
            "lock_all inside it",
        )?;
        expect_class(
            win.fence(Assert::NONE),
            ErrorClass::RmaSync,
            "fence inside it",
        )?;
        expect_class(win.flush(other), ErrorClass::RmaSync, "flush inside it")?;
        expect_class(
            win.rput(&[1u64], other, 0).map(drop),
            ErrorClass::RmaSync,
            "rput inside it",
        )?;
        win.put(&[tag(me, other, 0)], other, 0).ctx("put")?;
        win.complete().ctx("complete")?;
        win.wait().ctx("wait")?;
        ensure_eq!(local_u64(win, 1)?, [tag(other, me, 0)], "after the epoch");

        win.post(&them, Assert::NOCHECK | Assert::NOSTORE)
            .ctx("post NOCHECK")?;
        world.barrier().ctx("barrier")?;
        win.start(&them, Assert::NOCHECK).ctx("start NOCHECK")?;
        win.put(&[tag(me, other, 1)], other, 1).ctx("put")?;
        win.complete().ctx("complete")?;
        win.wait().ctx("wait")?;
        ensure_eq!(
            local_u64(win, 2)?[1],
            tag(other, me, 1),
            "after the NOCHECK epoch"
        );
        win.fence(Assert::NOPRECEDE | Assert::NOSUCCEED)
            .ctx("fence after the epochs")?;
        Ok(())
    })
}
