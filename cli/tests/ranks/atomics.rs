//! The accumulate family: exact counts under contention, compare-and-swap claims, every
//! operation on every element type, calls of thousands of elements, the errors MPI names, and origins that finish while their
//! target sleeps or computes.
//!
//! # MPI-4.1: 12.3.4, 12.3.5, 12.7 (progress)

use crate::util::*;
use onesided::{Assert, ErrorClass, Flavor, Info, LockType, Op, World};

/// Fetch-and-adds per rank (each is a round trip over the fabric).
const ITERS: usize = 150;

/// Every rank fetch-adds 1 to one u64 of rank 0, accumulates 2 into an i64 and 0.5 into an
/// f64, under lock_all: the totals are exact and each rank's fetched values increase.
pub fn counts(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    with_window(world, flavor, 64, 8, &Info::new(), |win| {
        world.barrier().ctx("barrier")?;
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        let mut last = None;
        for _ in 0..ITERS {
            let old = win.fetch_and_op(1u64, 0, 0, Op::Sum).ctx("fetch_and_op")?;
            ensure!(last.is_none_or(|l| old > l), "fetched {old} after {last:?}");
            last = Some(old);
            win.accumulate(&[2i64], 0, 1, Op::Sum)
                .ctx("accumulate i64")?;
            win.accumulate(&[0.5f64], 0, 2, Op::Sum)
                .ctx("accumulate f64")?;
        }
        win.unlock_all().ctx("unlock_all")?;
        world.barrier().ctx("barrier")?;
        if me == 0 {
            let mut c = [0u64; 1];
            let mut i = [0i64; 1];
            let mut f = [0f64; 1];
            win.read_local(0, &mut c).ctx("read_local")?;
            win.read_local(1, &mut i).ctx("read_local")?;
            win.read_local(2, &mut f).ctx("read_local")?;
            ensure_eq!(c[0] as usize, n * ITERS, "u64 fetch-add total");
            ensure_eq!(i[0] as usize, 2 * n * ITERS, "i64 accumulate total");
            ensure_eq!(f[0], 0.5 * (n * ITERS) as f64, "f64 accumulate total");
        }
        world.barrier().ctx("barrier")?;
        Ok(())
    })
}

/// 16 slots on rank 0; every rank tries to claim each with compare_and_swap(me + 1, 0). Each
/// slot has exactly one winner, who finds its mark there, and the claims counted by
/// fetch_and_op add up to 16.
pub fn cas_claims(world: &World, flavor: Flavor) -> Res {
    const SLOTS: usize = 16;
    let me = world.rank();
    with_window(world, flavor, 8 * (SLOTS + 1), 8, &Info::new(), |win| {
        world.barrier().ctx("barrier")?;
        win.lock(LockType::Shared, 0, Assert::NONE).ctx("lock")?;
        let mut won = Vec::new();
        for s in 0..SLOTS {
            let slot = (s + me) % SLOTS;
            let old = win
                .compare_and_swap(me as u64 + 1, 0, 0, slot)
                .ctx("compare_and_swap")?;
            if old == 0 {
                won.push(slot);
                win.fetch_and_op(1u64, 0, SLOTS, Op::Sum)
                    .ctx("fetch_and_op")?;
            }
        }
        win.unlock(0).ctx("unlock")?;
        world.barrier().ctx("barrier")?;
        win.lock(LockType::Shared, 0, Assert::NONE).ctx("lock")?;
        let mut all = [0u64; SLOTS + 1];
        win.get(&mut all, 0, 0).ctx("get")?;
        win.unlock(0).ctx("unlock")?;
        for &s in &won {
            ensure_eq!(all[s], me as u64 + 1, "mark in slot {s} won by rank {me}");
        }
        ensure!(
            all[..SLOTS].iter().all(|&v| v != 0),
            "unclaimed slots: {all:?}"
        );
        ensure_eq!(all[SLOTS] as usize, SLOTS, "claims counted");
        world.barrier().ctx("barrier")?;
        Ok(())
    })
}

/// Every operation on every element type, in fence epochs, each rank contributing to rank 0;
/// then get_accumulate with MPI_NO_OP reads them back atomically.
pub fn ops_and_types(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    with_window(world, flavor, 64, 1, &Info::new(), |win| {
        if me == 0 {
            win.write_local(32, &[1.0f64]).ctx("write_local")?;
        }
        win.fence(Assert::NONE).ctx("fence")?;
        win.accumulate(&[me as u64 + 10], 0, 0, Op::Max)
            .ctx("u64 max")?;
        win.accumulate(&[-(me as i64)], 0, 8, Op::Min)
            .ctx("i64 min")?;
        win.accumulate(&[1u32 << me], 0, 16, Op::Bxor)
            .ctx("u32 bxor")?;
        win.accumulate(&[-3i32], 0, 20, Op::Sum).ctx("i32 sum")?;
        win.accumulate(&[0.25f32], 0, 24, Op::Sum).ctx("f32 sum")?;
        win.accumulate(&[2.0f64], 0, 32, Op::Prod).ctx("f64 prod")?;
        win.accumulate(&[0xffu64], 0, 40, Op::Bor).ctx("u64 bor")?;
        if me == n - 1 {
            win.accumulate(&[77u64], 0, 48, Op::Replace)
                .ctx("u64 replace")?;
        }
        win.fence(Assert::NONE).ctx("fence")?;
        let mut u = [0u64; 1];
        win.get_accumulate(&[0u64], &mut u, 0, 0, Op::NoOp)
            .ctx("get_accumulate")?;
        ensure_eq!(u[0], 10 + n as u64 - 1, "u64 max");
        let i = win.fetch_and_op(0i64, 0, 8, Op::NoOp).ctx("fetch i64")?;
        ensure_eq!(i, -(n as i64 - 1), "i64 min");
        let x = win.fetch_and_op(0u32, 0, 16, Op::NoOp).ctx("fetch u32")?;
        ensure_eq!(x, (1u32 << n) - 1, "u32 bxor");
        let s = win.fetch_and_op(0i32, 0, 20, Op::NoOp).ctx("fetch i32")?;
        ensure_eq!(s, -3 * n as i32, "i32 sum");
        let f = win.fetch_and_op(0f32, 0, 24, Op::NoOp).ctx("fetch f32")?;
        ensure_eq!(f, 0.25 * n as f32, "f32 sum");
        let p = win.fetch_and_op(0f64, 0, 32, Op::NoOp).ctx("fetch f64")?;
        ensure_eq!(p, 2f64.powi(n as i32), "f64 prod");
        let b = win.fetch_and_op(0u64, 0, 40, Op::NoOp).ctx("fetch bor")?;
        ensure_eq!(b, 0xff, "u64 bor");
        let mut r = [0u64; 1];
        win.get_accumulate(&[5u64], &mut r, 0, 48, Op::Sum)
            .ctx("get_accumulate sum")?;
        win.fence(Assert::NONE).ctx("fence")?;
        let last = win
            .fetch_and_op(0u64, 0, 48, Op::NoOp)
            .ctx("fetch replace")?;
        ensure_eq!(last, 77 + 5 * n as u64, "replace then every rank's +5");
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        Ok(())
    })
}

/// Elements per call of [`vectors`].
const LEN: usize = 4096;

/// Calls of [`LEN`] elements from every rank into rank 0: f64 and i64 at aligned displacements
/// (the NIC's atomics with a count over the fabric) and i64 at an unaligned one (the
/// accumulate lock, once per call). The sums are exact, and get_accumulate hands every rank the
/// previous values of its own turn on each element: one turn per rank, as gathered.
pub fn vectors(world: &World, flavor: Flavor) -> Res {
    const CALLS: usize = 2;
    let (me, n) = (world.rank(), world.size());
    let f: Vec<f64> = (0..LEN).map(|i| i as f64 + 0.5).collect();
    let v: Vec<i64> = (0..LEN).map(|i| 7 - i as i64).collect();
    let rounds = (n * CALLS) as i64;
    let want_f = |i: usize, turns: usize| rounds as f64 * f[i] + turns as f64;
    let want_v = |i: usize, turns: usize| rounds * v[i] + turns as i64;
    let (aligned, unaligned) = (8 * LEN, 16 * LEN + 4);
    with_window(world, flavor, 24 * LEN + 8, 1, &Info::new(), |win| {
        world.barrier().ctx("barrier")?;
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        for _ in 0..CALLS {
            win.accumulate(&f, 0, 0, Op::Sum).ctx("accumulate f64")?;
            win.accumulate(&v, 0, aligned, Op::Sum)
                .ctx("accumulate i64")?;
            win.accumulate(&v, 0, unaligned, Op::Sum)
                .ctx("accumulate unaligned i64")?;
        }
        win.unlock_all().ctx("unlock_all")?;
        world.barrier().ctx("barrier")?;
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        let mut old_f = vec![0f64; LEN];
        let mut old_v = vec![0i64; 2 * LEN];
        let (old_a, old_u) = old_v.split_at_mut(LEN);
        win.get_accumulate(&[1f64; LEN], &mut old_f, 0, 0, Op::Sum)
            .ctx("get_accumulate f64")?;
        win.get_accumulate(&[1i64; LEN], old_a, 0, aligned, Op::Sum)
            .ctx("get_accumulate i64")?;
        win.get_accumulate(&[1i64; LEN], old_u, 0, unaligned, Op::Sum)
            .ctx("get_accumulate unaligned i64")?;
        win.unlock_all().ctx("unlock_all")?;
        let all_f = world
            .allgather(bytemuck::cast_slice(&old_f))
            .ctx("allgather")?;
        let all_v = world
            .allgather(bytemuck::cast_slice(&old_v))
            .ctx("allgather")?;
        for i in 0..LEN {
            let mut turns: Vec<f64> = all_f
                .iter()
                .map(|b| bytemuck::pod_read_unaligned(&b[8 * i..8 * i + 8]))
                .collect();
            turns.sort_by(f64::total_cmp);
            let every: Vec<f64> = (0..n).map(|t| want_f(i, t)).collect();
            ensure_eq!(turns, every, "fetched turns of f64 element {i}");
            for (at, what) in [(i, "i64"), (LEN + i, "unaligned i64")] {
                let mut turns: Vec<i64> = all_v
                    .iter()
                    .map(|b| bytemuck::pod_read_unaligned(&b[8 * at..8 * at + 8]))
                    .collect();
                turns.sort_unstable();
                let every: Vec<i64> = (0..n).map(|t| want_v(i, t)).collect();
                ensure_eq!(turns, every, "fetched turns of {what} element {i}");
            }
        }
        if me == 0 {
            let mut end_f = vec![0f64; LEN];
            let mut end_v = vec![0i64; LEN];
            win.read_local(0, &mut end_f).ctx("read_local")?;
            let bad = (0..LEN).find(|&i| end_f[i] != want_f(i, n));
            ensure!(bad.is_none(), "f64 sum of element {bad:?}");
            for at in [aligned, unaligned] {
                win.read_local(at, &mut end_v).ctx("read_local")?;
                let bad = (0..LEN).find(|&i| end_v[i] != want_v(i, n));
                ensure!(bad.is_none(), "i64 sum at byte {at}, element {bad:?}");
            }
        }
        world.barrier().ctx("barrier")?;
        Ok(())
    })
}

/// Elements per call of [`vector_ops`].
const RUN: usize = 37;

/// Bytes of one (type, operation) region of [`vector_ops`]: a run of 8-byte elements and room
/// to shift it by one byte.
const REGION: usize = 8 * RUN + 8;

/// One element type's runs in [`vector_ops`]: every rank accumulates a run of [`RUN`] elements
/// with each operation that applies into rank 0, at an aligned displacement and at one byte
/// past it in a region of its own (CPU or NIC atomics per element where they apply; the target's accumulate lock
/// over the whole run otherwise, and over all of a create window's memory). `region` counts
/// the regions used so far, and the macro gives the count after its own; `neg` is subtracted from the operands (5 for the signed types, so
/// that some are negative). Checks the ends at rank 0 and through `get_accumulate` with
/// MPI_NO_OP at every rank.
macro_rules! runs_of {
    ($win:expr, $world:expr, $region:expr, $t:ty, $neg:expr, $ops:expr) => {{
        let (win, world): (&onesided::Window<'_>, &World) = ($win, $world);
        let (me, n) = (world.rank(), world.size());
        let init = |i: usize| (i % 5 + 1) as $t;
        // Small integers (negative for the signed types), exact in every type.
        let operand = |r: usize, i: usize| ((r * 7 + i * 3) % 11) as $t - $neg as $t;
        // Factors whose products over every rank are exact in every type.
        let factor = |r: usize, i: usize| [1 as $t, 2 as $t, 3 as $t][(r + i) % 3];
        let bits = |r: usize, i: usize| (((r + i) % 7) as $t).max(1 as $t) * (3 as $t);
        let ops: &[Op] = $ops;
        let first = $region;
        let at = |k: usize, shift: usize| (first + 2 * k + shift) * REGION + shift;
        if me == 0 {
            for k in 0..ops.len() {
                for shift in [0, 1] {
                    let start: Vec<$t> = (0..RUN).map(init).collect();
                    win.write_local(at(k, shift), &start).ctx("write_local")?;
                }
            }
        }
        world.barrier().ctx("barrier")?;
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        for (k, &op) in ops.iter().enumerate() {
            let mine: Vec<$t> = (0..RUN)
                .map(|i| match op {
                    Op::Prod => factor(me, i),
                    Op::Band | Op::Bor | Op::Bxor => bits(me, i),
                    _ => operand(me, i),
                })
                .collect();
            for shift in [0, 1] {
                win.accumulate(&mine, 0, at(k, shift), op).ctx(&format!(
                    "accumulate {} {op:?} at byte {}",
                    stringify!($t),
                    at(k, shift)
                ))?;
            }
        }
        win.unlock_all().ctx("unlock_all")?;
        world.barrier().ctx("barrier")?;
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        for (k, &op) in ops.iter().enumerate() {
            for shift in [0, 1] {
                let mut end = vec![0 as $t; RUN];
                let what = format!("{} {op:?} at byte {}", stringify!($t), at(k, shift));
                win.get_accumulate(&[0 as $t; RUN], &mut end, 0, at(k, shift), Op::NoOp)
                    .ctx(&what)?;
                for (i, &got) in end.iter().enumerate() {
                    let want = (0..n).fold(init(i), |acc: $t, r| match op {
                        Op::Sum => acc + operand(r, i),
                        Op::Prod => acc * factor(r, i),
                        Op::Min => {
                            if operand(r, i) < acc {
                                operand(r, i)
                            } else {
                                acc
                            }
                        }
                        Op::Max => {
                            if operand(r, i) > acc {
                                operand(r, i)
                            } else {
                                acc
                            }
                        }
                        Op::Replace => operand(r, i),
                        // Integer types only: bits of u64 wide, the bitwise operations keep the low ones.
                        _ => bitwise(op, acc as u64, bits(r, i) as u64) as $t,
                    });
                    if op == Op::Replace {
                        // Each element is one rank's, whichever came last there.
                        ensure!(
                            (0..n).any(|r| operand(r, i) == got),
                            "{what}, element {i}: {got:?} is no rank's operand"
                        );
                    } else {
                        ensure_eq!(got, want, "{what}, element {i}");
                    }
                }
            }
        }
        win.unlock_all().ctx("unlock_all")?;
        world.barrier().ctx("barrier")?;
        first + 2 * ops.len()
    }};
}

/// An integer bitwise operation, for [`vector_ops`]' expected values.
fn bitwise(op: Op, a: u64, b: u64) -> u64 {
    match op {
        Op::Band => a & b,
        Op::Bor => a | b,
        _ => a ^ b,
    }
}

/// Calls of [`RUN`] elements with every operation on every element type, from every rank into
/// rank 0 at once, aligned and one byte off: the ends are exact (MPI_REPLACE: each element is
/// one rank's operand). Where a run is applied under the target's accumulate lock it is
/// combined as one loop (`protocol::reduce::combine_all`); this checks that loop against MPI's
/// definition of each operation.
///
/// # MPI-4.1: 12.3.4 (predefined operations on the elements), 12.7.1 (atomic per element)
pub fn vector_ops(world: &World, flavor: Flavor) -> Res {
    use Op::*;
    const INTEGER: &[Op] = &[Sum, Prod, Min, Max, Band, Bor, Bxor, Replace];
    const FLOAT: &[Op] = &[Sum, Prod, Min, Max, Replace];
    let bytes = 2 * (4 * INTEGER.len() + 2 * FLOAT.len()) * REGION;
    with_window(world, flavor, bytes, 1, &Info::new(), |win| {
        let r = runs_of!(win, world, 0, i32, 5, INTEGER);
        let r = runs_of!(win, world, r, u32, 0, INTEGER);
        let r = runs_of!(win, world, r, i64, 5, INTEGER);
        let r = runs_of!(win, world, r, u64, 0, INTEGER);
        let r = runs_of!(win, world, r, f32, 5, FLOAT);
        let _ = runs_of!(win, world, r, f64, 5, FLOAT);
        Ok(())
    })
}

/// What MPI names: MPI_NO_OP in accumulate and bitwise ops on floats (MPI_ERR_OP), float
/// compare-and-swap (MPI_ERR_TYPE), a short result buffer (MPI_ERR_COUNT), out of range
/// (MPI_ERR_RMA_RANGE, nothing written), outside an epoch (MPI_ERR_RMA_SYNC).
pub fn errors(world: &World, flavor: Flavor) -> Res {
    with_window(world, flavor, 16, 8, &Info::new(), |win| {
        let peer = (world.rank() + 1) % world.size();
        expect_class(
            win.fetch_and_op(1u64, peer, 0, Op::Sum),
            ErrorClass::RmaSync,
            "no epoch",
        )?;
        win.lock(LockType::Shared, peer, Assert::NONE).ctx("lock")?;
        expect_class(
            win.accumulate(&[1u64], peer, 0, Op::NoOp),
            ErrorClass::Op,
            "accumulate NO_OP",
        )?;
        expect_class(
            win.accumulate(&[1f64], peer, 0, Op::Band),
            ErrorClass::Op,
            "f64 band",
        )?;
        expect_class(
            win.compare_and_swap(1f64, 0.0, peer, 0),
            ErrorClass::Type,
            "f64 cas",
        )?;
        let mut short = [0u64; 1];
        expect_class(
            win.get_accumulate(&[1u64, 2], &mut short, peer, 0, Op::Sum),
            ErrorClass::Count,
            "short result",
        )?;
        expect_class(
            win.accumulate(&[1u64, 2, 3], peer, 0, Op::Sum),
            ErrorClass::RmaRange,
            "past the end",
        )?;
        expect_class(
            win.fetch_and_op(1u64, peer, 2, Op::Sum),
            ErrorClass::RmaRange,
            "element past the end",
        )?;
        win.unlock(peer).ctx("unlock")?;
        world.barrier().ctx("barrier")?;
        ensure_eq!(
            local_u64(win, 2)?,
            vec![0, 0],
            "memory after refused accumulates"
        );
        world.barrier().ctx("barrier")
    })
}

/// How the target spends the 2 s while rank 0 works on its memory.
#[derive(Clone, Copy)]
enum Busy {
    Sleep,
    Compute,
}

/// Rank 1 holds a shared lock on rank 0 (a passive epoch) and sleeps or computes for 2 s,
/// without a call into onesided; rank 0 meanwhile locks rank 1 exclusively, puts, flushes, gets,
/// compare-and-swaps and unlocks. All of that must finish long before rank 1 is back: its
/// memory is served by shared memory or by the fabric's progress thread, not by rank 1's calls.
fn busy_target(world: &World, flavor: Flavor, busy: Busy) -> Res {
    let me = world.rank();
    ensure!(
        world.size() == 2,
        "laid out for 2 ranks, not {}",
        world.size()
    );
    with_window(world, flavor, 64, 8, &Info::new(), |win| {
        world.barrier().ctx("barrier")?;
        if me == 1 {
            win.lock(LockType::Shared, 0, Assert::NONE).ctx("lock")?;
            match busy {
                Busy::Sleep => std::thread::sleep(busy_for()),
                Busy::Compute => compute_for(busy_for()),
            }
            win.unlock(0).ctx("unlock")?;
        } else {
            beside_busy_target(win, 1, 0)?;
        }
        world.barrier().ctx("barrier")?;
        if me == 1 {
            ensure_eq!(
                local_u64(win, 2)?,
                [7, 42],
                "target memory after the origin's epoch"
            );
        }
        world.barrier().ctx("barrier")
    })
}

/// [`busy_target`] with a sleeping target.
pub fn target_sleeps(world: &World, flavor: Flavor) -> Res {
    busy_target(world, flavor, Busy::Sleep)
}

/// [`busy_target`] with a target in a compute loop.
pub fn target_computes(world: &World, flavor: Flavor) -> Res {
    busy_target(world, flavor, Busy::Compute)
}
