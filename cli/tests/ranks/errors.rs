//! Misuse: every error class onesided names, produced on purpose and checked. No misuse may
//! panic or hang, and a failed call must leave the window usable and the target memory as it was.
//!
//! # MPI-4.1: 9.4, 12.8 (error classes)

use crate::util::*;
use onesided::{Assert, ErrorClass, Flavor, Info, LockType, Window, World};

const SLOTS: usize = 4;

fn pattern(r: usize) -> Vec<u64> {
    (0..SLOTS).map(|i| tag(r, r, 100 + i)).collect()
}

/// RMA_RANGE: puts and gets past the end (also overflowing displacements) fail, move nothing,
/// and leave the target memory unchanged; the ranges count in the target's disp_unit.
pub fn range(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    with_window(world, flavor, 8 * SLOTS, 8, &Info::new(), |win| {
        win.write_local(0, &pattern(me)).ctx("write_local")?;
        win.fence(Assert::NOPRECEDE).ctx("fence")?;
        let bad: [(&str, usize, usize); 4] = [
            ("one past the end", SLOTS, 1),
            ("straddling the end", SLOTS - 1, 2),
            ("at disp usize::MAX", usize::MAX, 1),
            (
                "at a disp whose byte offset overflows",
                usize::MAX / 8 + 1,
                1,
            ),
        ];
        for (what, disp, len) in bad {
            let data = vec![0xffff_ffff_ffff_ffffu64; len];
            expect_class(
                win.put(&data, right, disp),
                ErrorClass::RmaRange,
                &format!("put {what}"),
            )?;
            let mut buf = vec![0x1234u64; len];
            expect_class(
                win.get(&mut buf, right, disp),
                ErrorClass::RmaRange,
                &format!("get {what}"),
            )?;
            ensure!(
                buf.iter().all(|&x| x == 0x1234),
                "failed get {what} changed the origin buffer: {buf:x?}"
            );
        }
        let mut big = vec![0u64; SLOTS + 1];
        expect_class(
            win.get(&mut big, right, 0),
            ErrorClass::RmaRange,
            "get of more than the window",
        )?;
        win.put(&[tag(me, right, 10)], right, SLOTS - 1)
            .ctx("put into the last slot")?;
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        let mut want = pattern(me);
        want[SLOTS - 1] = tag(left, me, 10);
        ensure_eq!(
            local_u64(win, SLOTS)?,
            want,
            "window of rank {me} after failed and valid puts"
        );

        win.lock(LockType::Exclusive, right, Assert::NONE)
            .ctx("lock")?;
        expect_class(
            win.put(&[0u64; 3], right, 2),
            ErrorClass::RmaRange,
            "put past the end under a lock",
        )?;
        win.unlock(right).ctx("unlock after an RMA_RANGE put")?;
        expect_class(
            win.write_local(SLOTS - 1, &[0u64; 2]),
            ErrorClass::RmaRange,
            "write_local past the end",
        )?;
        let mut two = [0u64; 2];
        expect_class(
            win.read_local(SLOTS - 1, &mut two),
            ErrorClass::RmaRange,
            "read_local past the end",
        )?;
        world.barrier().ctx("barrier")?;
        ensure_eq!(
            local_u64(win, SLOTS)?,
            want,
            "window of rank {me} after failed puts under lock"
        );
        Ok(())
    })?;
    // disp_unit 4, 10 bytes: a u16 at disp 2 (bytes 8..10) fits, a u32 there does not.
    with_window(world, flavor, 10, 4, &Info::new(), |win| {
        win.fence(Assert::NONE).ctx("fence")?;
        expect_class(
            win.put(&[7u32], right, 2),
            ErrorClass::RmaRange,
            "u32 at disp 2 of 10 bytes, unit 4",
        )?;
        win.put(&[0xabcdu16], right, 2)
            .ctx("u16 at disp 2 of 10 bytes, unit 4")?;
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        let mut mem = [0u8; 10];
        win.read_local(0, &mut mem).ctx("read_local")?;
        let mut want = [0u8; 10];
        want[8..].copy_from_slice(&0xabcdu16.to_ne_bytes());
        ensure_eq!(mem, want, "bytes of rank {me}");
        Ok(())
    })
}

/// RMA_SYNC: RMA and synchronization calls outside the epochs that allow them.
pub fn sync(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let right = (me + 1) % n;
    let other = (me + 2) % n;
    let sync = ErrorClass::RmaSync;
    with_window(world, flavor, 8 * n, 8, &Info::new(), |win| {
        let mut x = [0u64];
        expect_class(win.put(&[1u64], right, 0), sync, "put outside any epoch")?;
        expect_class(win.get(&mut x, right, 0), sync, "get outside any epoch")?;
        expect_class(win.unlock(right), sync, "unlock without lock")?;
        expect_class(win.unlock_all(), sync, "unlock_all without lock_all")?;
        expect_class(win.flush(right), sync, "flush outside passive target")?;
        expect_class(win.flush_all(), sync, "flush_all outside passive target")?;
        expect_class(
            win.flush_local(right),
            sync,
            "flush_local outside passive target",
        )?;
        expect_class(
            win.flush_local_all(),
            sync,
            "flush_local_all outside passive target",
        )?;
        expect_class(win.sync(), sync, "sync outside passive target")?;

        win.fence(Assert::NONE).ctx("fence")?;
        win.put(&[tag(me, right, 1)], right, me)
            .ctx("put in a fence epoch")?;
        expect_class(win.flush(right), sync, "flush in a fence epoch")?;
        expect_class(win.flush_all(), sync, "flush_all in a fence epoch")?;
        expect_class(
            win.lock(LockType::Shared, right, Assert::NONE),
            sync,
            "lock in a used fence epoch",
        )?;
        win.fence(Assert::NOSUCCEED).ctx("fence(NOSUCCEED)")?;
        expect_class(
            win.put(&[1u64], right, 0),
            sync,
            "put after fence(NOSUCCEED)",
        )?;

        win.lock(LockType::Shared, right, Assert::NONE)
            .ctx("lock")?;
        if other != right {
            expect_class(
                win.put(&[1u64], other, 0),
                sync,
                "put to a rank the lock does not cover",
            )?;
        }
        expect_class(win.fence(Assert::NONE), sync, "fence inside a lock epoch")?;
        expect_class(
            win.lock(LockType::Shared, right, Assert::NONE),
            sync,
            "second lock of one target",
        )?;
        expect_class(
            win.lock_all(Assert::NONE),
            sync,
            "lock_all inside a lock epoch",
        )?;
        expect_class(win.unlock_all(), sync, "unlock_all inside a lock epoch")?;
        win.unlock(right).ctx("unlock")?;
        expect_class(win.unlock(right), sync, "second unlock")?;

        win.lock_all(Assert::NONE).ctx("lock_all")?;
        expect_class(win.fence(Assert::NONE), sync, "fence inside lock_all")?;
        expect_class(
            win.lock(LockType::Exclusive, right, Assert::NONE),
            sync,
            "lock inside lock_all",
        )?;
        expect_class(win.unlock(right), sync, "unlock inside lock_all")?;
        expect_class(win.lock_all(Assert::NONE), sync, "second lock_all")?;
        win.unlock_all().ctx("unlock_all")?;
        world.barrier().ctx("barrier")?;
        let mem = local_u64(win, n)?;
        ensure_eq!(
            mem[(me + n - 1) % n],
            tag((me + n - 1) % n, me, 1),
            "the one valid put"
        );
        Ok(())
    })?;

    // no_locks=true: lock and lock_all are RMA_SYNC; fences still work.
    let no_locks = Info::new().set("no_locks", "true");
    with_window(world, flavor, 8, 8, &no_locks, |win| {
        ensure_eq!(win.info().get("no_locks"), Some("true"), "info no_locks");
        expect_class(
            win.lock(LockType::Shared, right, Assert::NONE),
            sync,
            "lock with no_locks=true",
        )?;
        expect_class(
            win.lock_all(Assert::NONE),
            sync,
            "lock_all with no_locks=true",
        )?;
        win.fence(Assert::NOPRECEDE).ctx("fence")?;
        win.put(&[5u64], right, 0).ctx("put")?;
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        ensure_eq!(
            local_u64(win, 1)?,
            vec![5],
            "put under fence with no_locks=true"
        );
        Ok(())
    })?;

    // Freeing a window inside a lock epoch: RMA_SYNC on every rank, the lock is released and
    // nobody waits forever; the next window works.
    let win = Window::allocate(world, 8, 8, &Info::new()).ctx("allocate")?;
    win.lock(LockType::Shared, right, Assert::NONE)
        .ctx("lock")?;
    expect_class(win.free(), sync, "free inside a lock epoch")?;
    with_window(world, flavor, 8, 8, &Info::new(), |win| {
        win.lock(LockType::Exclusive, right, Assert::NONE)
            .ctx("exclusive lock after the free")?;
        win.unlock(right).ctx("unlock")
    })
}

/// LOCKTYPE, DISP, RANK, ASSERT and INFO.
pub fn classes(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let right = (me + 1) % n;
    for raw in [0, -1, 7, LockType::MPI_LOCK_SHARED + 2] {
        expect_class(
            LockType::try_from(raw),
            ErrorClass::LockType,
            &format!("lock type {raw}"),
        )?;
    }
    ensure_eq!(
        LockType::try_from(LockType::MPI_LOCK_SHARED).ok(),
        Some(LockType::Shared),
        "MPI_LOCK_SHARED"
    );
    ensure_eq!(
        LockType::try_from(LockType::MPI_LOCK_EXCLUSIVE).ok(),
        Some(LockType::Exclusive),
        "MPI_LOCK_EXCLUSIVE"
    );

    // DISP: disp_unit 0 on the last rank only, then on all: every rank gets the error.
    for bad in [vec![n - 1], (0..n).collect()] {
        let du = if bad.contains(&me) { 0 } else { 8 };
        let r = match flavor {
            Flavor::Allocate => Window::allocate(world, 16, du, &Info::new()).map(drop),
            Flavor::Shared => Window::allocate_shared(world, 16, du, &Info::new()).map(drop),
            Flavor::Create => {
                let mut mem = [0u64; 2];
                Window::create(world, &mut mem, du, &Info::new(), |_| ())
            }
            Flavor::Dynamic => return Err("dynamic windows take no disp_unit".into()),
        };
        expect_class(
            r,
            ErrorClass::Disp,
            &format!("window with disp_unit 0 on ranks {bad:?}"),
        )?;
    }

    // SIZE: more than isize::MAX bytes; and an allocation the machine cannot map. Collective:
    // every rank gets the error, nobody hangs, the next window works.
    if flavor != Flavor::Create {
        let alloc = |bytes: usize| match flavor {
            Flavor::Shared => Window::allocate_shared(world, bytes, 8, &Info::new()).map(drop),
            _ => Window::allocate(world, bytes, 8, &Info::new()).map(drop),
        };
        expect_class(
            alloc(usize::MAX),
            ErrorClass::Size,
            "window of usize::MAX bytes",
        )?;
        let huge = if me == n - 1 { 1 << 60 } else { 8 };
        expect_class(
            alloc(huge),
            ErrorClass::NoMem,
            "window of 2^60 bytes on the last rank",
        )?;
    }

    // INFO: a value a key does not take (a non-boolean value of a boolean key, an unknown
    // ordering or ops value, a granularity that is no byte count), on one rank or on all.
    for (key, value) in [
        ("alloc_shared_noncontig", "yes"),
        ("no_locks", "1"),
        ("accumulate_ordering", "rar,wow"),
        ("accumulate_ops", "different_ops"),
        ("mpi_accumulate_granularity", "lots"),
    ] {
        for everywhere in [false, true] {
            let info = if everywhere || me == 0 {
                Info::new().set(key, value)
            } else {
                Info::new()
            };
            let r = match flavor {
                Flavor::Create => {
                    let mut mem = [0u64; 2];
                    Window::create(world, &mut mem, 8, &info, |_| ())
                }
                Flavor::Allocate => Window::allocate(world, 16, 8, &info).map(drop),
                Flavor::Shared => Window::allocate_shared(world, 16, 8, &info).map(drop),
                Flavor::Dynamic => Window::create_dynamic(world, &info, |_| ()),
            };
            expect_class(
                r,
                ErrorClass::Info,
                &format!("info {key}={value:?} (all ranks: {everywhere})"),
            )?;
        }
    }
    let info = Info::new().set("alloc_shared_noncontig", "yes");
    expect_class(
        Window::allocate_shared(world, 8, 8, &info).map(drop),
        ErrorClass::Info,
        "allocate_shared",
    )?;

    // RANK: targets and roots outside the group.
    expect_class(
        world.broadcast(n, b"x"),
        ErrorClass::Rank,
        "broadcast from root = size",
    )?;
    expect_class(world.world_rank(n), ErrorClass::Rank, "world_rank(size)")?;
    with_window(world, flavor, 16, 8, &Info::new(), |win| {
        let mut x = [0u64];
        let rank = ErrorClass::Rank;
        expect_class(
            win.lock(LockType::Shared, n, Assert::NONE),
            rank,
            "lock of rank size",
        )?;
        expect_class(win.unlock(n), rank, "unlock of rank size")?;
        expect_class(win.shared_query(Some(n)), rank, "shared_query(size)")?;
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        for t in [n, n + 1, usize::MAX] {
            expect_class(win.put(&[1u64], t, 0), rank, &format!("put to rank {t}"))?;
            expect_class(win.get(&mut x, t, 0), rank, &format!("get from rank {t}"))?;
            expect_class(win.flush(t), rank, &format!("flush of rank {t}"))?;
            expect_class(
                win.flush_local(t),
                rank,
                &format!("flush_local of rank {t}"),
            )?;
        }
        win.unlock_all().ctx("unlock_all")?;

        // ASSERT: bits the call does not accept; the epoch state is unchanged by the failure.
        let assert = ErrorClass::Assert;
        expect_class(win.fence(Assert::NOCHECK), assert, "fence(NOCHECK)")?;
        expect_class(
            win.fence(Assert::from_bits(1 << 20)),
            assert,
            "fence with an unknown bit",
        )?;
        expect_class(
            win.lock(LockType::Shared, right, Assert::NOPRECEDE),
            assert,
            "lock(NOPRECEDE)",
        )?;
        expect_class(
            win.lock(LockType::Exclusive, right, Assert::NOSTORE),
            assert,
            "lock(NOSTORE)",
        )?;
        expect_class(
            win.lock_all(Assert::NOSUCCEED),
            assert,
            "lock_all(NOSUCCEED)",
        )?;
        expect_class(
            win.unlock(right),
            ErrorClass::RmaSync,
            "unlock after a lock refused for its assert",
        )?;
        expect_class(
            win.put(&[1u64], right, 0),
            ErrorClass::RmaSync,
            "put after refused sync calls",
        )?;
        win.fence(Assert::NOPRECEDE)
            .ctx("fence after refused asserts")?;
        win.put(&[tag(me, right, 2)], right, 1).ctx("put")?;
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        let left = (me + n - 1) % n;
        ensure_eq!(
            local_u64(win, 2)?,
            vec![0, tag(left, me, 2)],
            "window after the assert errors"
        );
        Ok(())
    })
}
