//! Notified RMA on every transport: the data of a notified put is in the target's memory when
//! its notification is counted, with every other rank notifying the same target at once, for
//! transfers from one element to beyond the providers' inject and eager sizes; a notified get's
//! notification comes after it read; notifications work in fence, PSCW and lock epochs, are
//! counted per id, and a bad id is refused without moving anything.

use crate::util::*;
use onesided::{Assert, ErrorClass, Flavor, Info, LockType, World};

/// Rounds of the producer scenario, per transfer size.
const ROUNDS: usize = 12;
/// Elements (u64) of each producer's transfer: one, beyond an inject (64 bytes over tcp), and
/// beyond rxm's eager messages and the shm provider's inline sends (128 KiB).
const LENGTHS: [usize; 3] = [1, 100, 16_384];
/// The id data is notified with.
const DATA: usize = 7;
/// The id the target acknowledges each round with (the last one).
const ACK: usize = 255;

/// Every rank but 0 puts a vector tagged with (itself, round) into its own part of rank 0's
/// window with one notification each; rank 0 waits for all of them as one count, checks every
/// element of every part, then acknowledges each producer with a notification of its own, and
/// the producers wait for it before the next round (a put that came before its notification
/// would show as the previous round's values).
pub fn producers(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let longest = LENGTHS[LENGTHS.len() - 1];
    let bytes = 8 * longest * n;
    with_window(world, flavor, bytes, 8, &Info::new(), |win| {
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        for len in LENGTHS {
            for round in 0..ROUNDS {
                if me == 0 {
                    win.wait_notify(DATA, n - 1).ctx("wait_notify")?;
                    let mut part = vec![0u64; len];
                    for origin in 1..n {
                        win.read_local(origin * longest, &mut part)
                            .ctx("read_local")?;
                        let want = tag(origin, len, round);
                        let wrong = part.iter().position(|&v| v != want);
                        ensure!(
                            wrong.is_none(),
                            "{len} elements from rank {origin}, round {round}: element {:?} \
                             is {:#x} when its notification was counted, expected {want:#x}",
                            wrong,
                            part[wrong.unwrap_or(0)]
                        );
                    }
                    for origin in 1..n {
                        win.put_notify(&[0u64], origin, 0, ACK)
                            .ctx("put_notify ack")?;
                    }
                } else {
                    let data = vec![tag(me, len, round); len];
                    win.put_notify(&data, 0, me * longest, DATA)
                        .ctx("put_notify")?;
                    win.wait_notify(ACK, 1).ctx("wait_notify ack")?;
                }
            }
        }
        win.unlock_all().ctx("unlock_all")
    })
}

/// Rank 1 reads rank 0's word with a notified get; rank 0 overwrites it only once notified,
/// so every get sees the value of its own round. Then notified puts in a fence epoch, in a
/// PSCW epoch and under a lock, each to the right neighbour, and the counting and misuse
/// checks of an id.
pub fn epochs(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    with_window(world, flavor, 64, 8, &Info::new(), |win| {
        win.write_local(0, &[tag(0, 0, 0)]).ctx("write_local")?;
        world.barrier().ctx("barrier")?;
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        for round in 0..ROUNDS {
            match me {
                0 => {
                    win.wait_notify(DATA, 1).ctx("wait_notify get")?;
                    win.write_local(0, &[tag(0, 0, round + 1)])
                        .ctx("write_local")?;
                    win.put_notify(&[0u64], 1, 7, ACK).ctx("put_notify ack")?;
                }
                1 => {
                    let mut got = [0u64];
                    win.get_notify(&mut got, 0, 0, DATA).ctx("get_notify")?;
                    ensure_eq!(got, [tag(0, 0, round)], "get_notify, round {round}");
                    win.wait_notify(ACK, 1).ctx("wait_notify ack")?;
                }
                _ => {}
            }
        }
        win.unlock_all().ctx("unlock_all")?;

        win.fence(Assert::NOPRECEDE).ctx("fence")?;
        win.put_notify(&[tag(me, right, 1)], right, 1, 1)
            .ctx("put_notify in a fence epoch")?;
        win.wait_notify(1, 1).ctx("wait_notify in a fence epoch")?;
        ensure_eq!(
            local_u64(win, 2)?[1],
            tag(left, me, 1),
            "after the fence notification"
        );
        win.fence(Assert::NOSUCCEED).ctx("fence")?;

        let others: Vec<usize> = (0..n).filter(|&r| r != me).collect();
        let others = world.group().incl(&others).ctx("group")?;
        win.post(&others, Assert::NONE).ctx("post")?;
        win.start(&others, Assert::NONE).ctx("start")?;
        win.put_notify(&[tag(me, right, 2)], right, 2, 2)
            .ctx("put_notify in a PSCW epoch")?;
        win.wait_notify(2, 1).ctx("wait_notify in a PSCW epoch")?;
        ensure_eq!(
            local_u64(win, 3)?[2],
            tag(left, me, 2),
            "after the PSCW notification"
        );
        win.complete().ctx("complete")?;
        win.wait().ctx("wait")?;

        win.lock(LockType::Exclusive, right, Assert::NONE)
            .ctx("lock")?;
        for i in 0..3 {
            win.put_notify(&[tag(me, right, 3 + i)], right, 3, 3)
                .ctx("put_notify under a lock")?;
        }
        expect_class(
            win.put_notify(&[0u64], right, 4, 256),
            ErrorClass::Arg,
            "put_notify with id 256",
        )?;
        expect_class(
            win.put_notify(&[0u64], right, 8, 3),
            ErrorClass::RmaRange,
            "put_notify past the window",
        )?;
        win.unlock(right).ctx("unlock")?;
        // Every unlock has completed its puts, notifications included.
        world.barrier().ctx("barrier")?;
        win.wait_notify(3, 2).ctx("wait_notify 2 of 3")?;
        ensure!(
            !win.test_notify(3, 2).ctx("test_notify")?,
            "only one is left"
        );
        ensure!(win.test_notify(3, 1).ctx("test_notify")?, "the third one");
        ensure_eq!(
            local_u64(win, 5)?[3..],
            [tag(left, me, 5), 0],
            "under the lock"
        );
        expect_class(
            win.wait_notify(256, 1),
            ErrorClass::Arg,
            "wait_notify id 256",
        )?;
        ensure!(
            !win.test_notify(3, 1).ctx("test_notify")?,
            "no refused put notified"
        );
        Ok(())
    })
}
