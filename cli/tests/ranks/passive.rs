//! Passive-target scenarios: exclusive locks, shared locks, lock_all and the flushes.
//!
//! # MPI-4.1: 12.5.3 (lock, lock_all), 12.5.4 (flush, sync)

use crate::util::*;
use onesided::{Assert, Flavor, Info, LockType, World};

/// Rounds of the lock counter per rank (8 ranks share 2 cores: keep it modest).
const ROUNDS: usize = 60;

/// Every rank does ROUNDS of lock(Exclusive, 0); get; +1; put; unlock on rank 0's counter, and
/// as many on the counter of rank `round % n`: a lost update would show as a short count.
pub fn exclusive_counter(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    with_window(world, flavor, 16, 8, &Info::new(), |win| {
        world.barrier().ctx("barrier")?;
        for round in 0..ROUNDS {
            for (target, slot) in [(0, 0), (round % n, 1)] {
                win.lock(LockType::Exclusive, target, Assert::NONE)
                    .ctx("lock(Exclusive)")?;
                let mut x = [0u64];
                win.get(&mut x, target, slot).ctx("get of the counter")?;
                // Let the others run while the lock is held: without mutual exclusion they would
                // read the same value and an increment would be lost.
                std::thread::yield_now();
                win.put(&[x[0] + 1], target, slot)
                    .ctx("put of the counter")?;
                win.unlock(target).ctx("unlock")?;
            }
        }
        world.barrier().ctx("barrier")?;
        let hits = |t: usize| (0..ROUNDS).filter(|r| r % n == t).count();
        let mut total = 0;
        for t in 0..n {
            let mut c = [0u64; 2];
            win.lock(LockType::Shared, t, Assert::NONE)
                .ctx("lock(Shared)")?;
            win.get(&mut c, t, 0).ctx("get of the counters")?;
            win.unlock(t).ctx("unlock")?;
            let want0 = if t == 0 { n * ROUNDS } else { 0 };
            ensure_eq!(
                c[0] as usize,
                want0,
                "counter 0 of rank {t} after {ROUNDS} rounds on {n} ranks"
            );
            ensure_eq!(c[1] as usize, n * hits(t), "counter 1 of rank {t}");
            total += c[1] as usize;
        }
        ensure_eq!(total, n * ROUNDS, "sum of the per-rank counters");
        let own = local_u64(win, 2)?;
        ensure_eq!(
            own[1] as usize,
            n * hits(me),
            "own counter read by read_local"
        );
        Ok(())
    })
}

/// Shared locks on every target held together; each rank puts into its own slot of every
/// target and flushes; while the locks are still held, each target finds every slot filled.
pub fn shared_locks(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    with_window(world, flavor, 8 * (n + 1), 8, &Info::new(), |win| {
        for t in 0..n {
            win.lock(LockType::Shared, t, Assert::NONE)
                .ctx("lock(Shared)")?;
        }
        for t in 0..n {
            win.put(&[tag(me, t, 7)], t, me).ctx("put")?;
            win.flush(t).ctx("flush")?;
        }
        world.barrier().ctx("barrier")?;
        let mem = local_u64(win, n + 1)?;
        for (w, &got) in mem.iter().enumerate().take(n) {
            ensure_eq!(
                got,
                tag(w, me, 7),
                "slot {w} of rank {me} after flush, locks held"
            );
        }
        ensure_eq!(mem[n], 0, "slot {n} of rank {me} (never a target)");
        // Read back the slot of the left neighbour's rank at the right neighbour.
        let right = (me + 1) % n;
        let mut x = [0u64];
        win.get(&mut x, right, (me + n - 1) % n).ctx("get")?;
        win.flush_local(right).ctx("flush_local")?;
        ensure_eq!(
            x[0],
            tag((me + n - 1) % n, right, 7),
            "get under a shared lock"
        );
        world.barrier().ctx("barrier")?;
        for t in (0..n).rev() {
            win.unlock(t).ctx("unlock")?;
        }
        Ok(())
    })
}

/// lock_all; puts to every rank; flush_all makes them visible at the targets while the epoch is
/// open; a second round completes with flush_local / flush_local_all and then unlock_all.
pub fn lock_all_flush(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let check = |win: &onesided::Window<'_>, round: usize| -> Res {
        let mem = local_u64(win, n)?;
        for (w, &got) in mem.iter().enumerate() {
            ensure_eq!(
                got,
                tag(w, me, round),
                "slot {w} of rank {me}, round {round}"
            );
        }
        Ok(())
    };
    with_window(world, flavor, 8 * n, 8, &Info::new(), |win| {
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        for t in 0..n {
            win.put(&[tag(me, t, 1)], t, me).ctx("put")?;
        }
        win.flush_all().ctx("flush_all")?;
        world.barrier().ctx("barrier")?;
        win.sync().ctx("sync")?;
        check(win, 1)?;
        for t in 0..n {
            let mut x = [0u64];
            win.get(&mut x, t, (me + 1) % n).ctx("get")?;
            win.flush_local(t).ctx("flush_local")?;
            ensure_eq!(
                x[0],
                tag((me + 1) % n, t, 1),
                "get from rank {t} under lock_all"
            );
        }
        world.barrier().ctx("barrier")?;
        for t in 0..n {
            win.put(&[tag(me, t, 2)], t, me).ctx("put")?;
            win.flush_local(t).ctx("flush_local")?;
        }
        win.flush_local_all().ctx("flush_local_all")?;
        win.unlock_all().ctx("unlock_all")?;
        world.barrier().ctx("barrier")?;
        check(win, 2)
    })
}

/// The owner stores with write_local; after a barrier the others read it by get under a lock.
/// Then the owner changes it inside its own exclusive lock epoch, and the others see that too.
pub fn get_after_local_store(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    const LEN: usize = 5;
    let pattern = |owner: usize, round: usize| -> Vec<u64> {
        (0..LEN).map(|i| tag(owner, i, round)).collect()
    };
    with_window(world, flavor, 8 * LEN, 8, &Info::new(), |win| {
        win.write_local(0, &pattern(me, 1)).ctx("write_local")?;
        world.barrier().ctx("barrier")?;
        for t in 0..n {
            let kind = if t % 2 == 0 {
                LockType::Shared
            } else {
                LockType::Exclusive
            };
            let mut got = vec![0u64; LEN];
            win.lock(kind, t, Assert::NONE).ctx("lock")?;
            win.get(&mut got, t, 0).ctx("get")?;
            win.unlock(t).ctx("unlock")?;
            ensure_eq!(
                got,
                pattern(t, 1),
                "window of rank {t} (written by write_local) read by get"
            );
        }
        world.barrier().ctx("barrier")?;
        win.lock(LockType::Exclusive, me, Assert::NONE)
            .ctx("lock of self")?;
        win.write_local(0, &pattern(me, 2)).ctx("write_local")?;
        win.unlock(me).ctx("unlock of self")?;
        world.barrier().ctx("barrier")?;
        let t = (me + 1) % n;
        let mut got = vec![0u64; LEN];
        win.lock(LockType::Shared, t, Assert::NOCHECK)
            .ctx("lock with NOCHECK")?;
        win.get(&mut got, t, 0).ctx("get")?;
        win.unlock(t).ctx("unlock")?;
        ensure_eq!(
            got,
            pattern(t, 2),
            "window of rank {t} after its locked local store"
        );
        world.barrier().ctx("barrier")
    })
}
