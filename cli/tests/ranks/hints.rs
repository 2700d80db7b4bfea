//! Window info hints in effect on every transport and flavor: `accumulate_ordering=none` leaves
//! accumulates in flight and the next flush still completes every one of them exactly (and
//! `set_info` can ask for ordering again), `accumulate_ops` and `mpi_accumulate_granularity`
//! are reported as set, accumulates that `accumulate_ops` splits between the NIC and the
//! emulation (the `fabric_tcp_verbs` transport runs only what verbs hardware runs natively)
//! stay exact while they meet, `same_size` with `same_disp_unit` skip the exchange of extents and the
//! range checks still hold, and `set_info` refuses values a key does not take (MPI_ERR_INFO).
//!
//! # MPI-4.1: 12.2.7 (window info), 12.7.1 (accumulate ordering)

use crate::util::*;
use onesided::{Assert, ErrorClass, Flavor, Info, LockType, Op, World};

/// Accumulates each rank adds to each counter per round.
const ADDS: u64 = 50;
/// Elements of the vector every rank adds to every rank.
const VECTOR: usize = 16;

/// Every rank adds 1 to a counter of every rank `ADDS` times under lock_all with
/// `accumulate_ordering=none`, and a vector of ones to a vector of every rank with
/// `mpi_accumulate_granularity=8`, flushes and checks after a barrier that every add arrived; then
/// asks for ordering again with `set_info` and repeats, with REPLACE and a fetch of the value
/// it just wrote.
pub fn accumulate_ordering(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let info = Info::new()
        .set("accumulate_ordering", "none")
        .set("accumulate_ops", "same_op")
        .set("mpi_accumulate_granularity", "8");
    with_window(world, flavor, 8 * (2 + VECTOR), 8, &info, |win| {
        let got = win.info();
        ensure_eq!(
            got.get("accumulate_ordering"),
            Some("none"),
            "ordering in effect"
        );
        ensure_eq!(got.get("accumulate_ops"), Some("same_op"), "ops in effect");
        ensure_eq!(
            got.get("mpi_accumulate_granularity"),
            Some("8"),
            "granularity"
        );
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        for _ in 0..ADDS {
            for t in 0..n {
                win.accumulate(&[1u64], t, 0, Op::Sum).ctx("accumulate")?;
            }
        }
        // A vector: with granularity 8, one element per hold of the lock where accumulates
        // are emulated (create memory over shared memory).
        for t in 0..n {
            win.accumulate(&[1u64; VECTOR], t, 2, Op::Sum)
                .ctx("accumulate of a vector")?;
        }
        win.flush_all().ctx("flush_all")?;
        world.barrier().ctx("barrier")?;
        let mut count = [0u64];
        win.get_accumulate(&[0u64], &mut count, me, 0, Op::NoOp)
            .ctx("get_accumulate")?;
        ensure_eq!(count[0], ADDS * n as u64, "adds that arrived at rank {me}");
        let mut vector = [0u64; VECTOR];
        win.get_accumulate(&[0u64; VECTOR], &mut vector, me, 2, Op::NoOp)
            .ctx("get_accumulate of the vector")?;
        ensure_eq!(vector, [n as u64; VECTOR], "vector adds at rank {me}");
        win.unlock_all().ctx("unlock_all")?;
        world.barrier().ctx("barrier")?;

        win.set_info(&Info::new().set("accumulate_ordering", "rar,raw,war,waw"))
            .ctx("set_info")?;
        ensure_eq!(
            win.info().get("accumulate_ordering"),
            Some("rar,raw,war,waw"),
            "ordering after set_info"
        );
        let right = (me + 1) % n;
        win.lock(LockType::Exclusive, right, Assert::NONE)
            .ctx("lock")?;
        for v in 1..=ADDS {
            win.accumulate(&[v], right, 1, Op::Replace)
                .ctx("accumulate")?;
            let mut seen = [0u64];
            win.get_accumulate(&[0u64], &mut seen, right, 1, Op::NoOp)
                .ctx("get_accumulate")?;
            ensure_eq!(seen[0], v, "read after write, ordered");
        }
        win.unlock(right).ctx("unlock")?;
        world.barrier().ctx("barrier")
    })
}

/// Rounds of [`accumulate_ops`].
const ROUNDS: u64 = 40;

/// Under each `accumulate_ops`, every rank hits rank 0's words at once: fetch-adds on a u64
/// (on the NIC under verbs), compare-and-swap increments of another u64 (NIC), u64 max and i32
/// and f64 sums (emulated under verbs); under `same_op_no_op` (MPI's default) it also reads the
/// fetch-add counter with MPI_NO_OP meanwhile (the read on a type whose operations are split:
/// NIC read under the lock). Every fetched value moves forward and the totals are exact. A
/// window where only rank 0 asks for `same_op` gets `same_op_no_op`, and keeps it through
/// `set_info`.
pub fn accumulate_ops(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    for ops in ["same_op_no_op", "same_op"] {
        let info = Info::new().set("accumulate_ops", ops);
        with_window(world, flavor, 40, 8, &info, |win| {
            ensure_eq!(win.info().get("accumulate_ops"), Some(ops), "in effect");
            world.barrier().ctx("barrier")?;
            win.lock_all(Assert::NONE).ctx("lock_all")?;
            let (mut last_add, mut last_read) = (None, 0u64);
            for round in 1..=ROUNDS {
                let old = win.fetch_and_op(1u64, 0, 0, Op::Sum).ctx("fetch-add")?;
                ensure!(
                    last_add.is_none_or(|l| old > l),
                    "fetched {old} after {last_add:?}"
                );
                last_add = Some(old);
                let mut seen = 0u64;
                loop {
                    let got = win.compare_and_swap(seen + 1, seen, 0, 1).ctx("cas")?;
                    if got == seen {
                        break;
                    }
                    seen = got;
                }
                win.accumulate(&[round * (me as u64 + 1)], 0, 2, Op::Max)
                    .ctx("max")?;
                win.accumulate(&[3i32, -1], 0, 3, Op::Sum).ctx("i32 sum")?;
                win.accumulate(&[0.25f64], 0, 4, Op::Sum).ctx("f64 sum")?;
                if ops == "same_op_no_op" {
                    let mut now = [0u64];
                    win.get_accumulate(&[0u64], &mut now, 0, 0, Op::NoOp)
                        .ctx("no_op read")?;
                    ensure!(
                        now[0] > old && now[0] >= last_read,
                        "read {} after {old}",
                        now[0]
                    );
                    last_read = now[0];
                }
            }
            win.flush_all().ctx("flush_all")?;
            win.unlock_all().ctx("unlock_all")?;
            world.barrier().ctx("barrier")?;
            if me == 0 {
                let total = ROUNDS * n as u64;
                ensure_eq!(
                    local_u64(win, 3)?,
                    [total, total, ROUNDS * n as u64],
                    "u64 words"
                );
                let mut ints = [0i32; 2];
                win.read_local(3, &mut ints).ctx("read_local")?;
                ensure_eq!(ints, [3 * total as i32, -(total as i32)], "i32 sums");
                let mut f = [0f64];
                win.read_local(4, &mut f).ctx("read_local")?;
                ensure_eq!(f[0], 0.25 * total as f64, "f64 sum");
            }
            world.barrier().ctx("barrier")
        })?;
    }
    // `same_op` takes effect only where every rank asks for it, and stays as created.
    let only_rank_0 = match me {
        0 => Info::new().set("accumulate_ops", "same_op"),
        _ => Info::new(),
    };
    with_window(world, flavor, 8, 8, &only_rank_0, |win| {
        let ops = || win.info().get("accumulate_ops").map(str::to_owned);
        ensure_eq!(ops().as_deref(), Some("same_op_no_op"), "asked by one rank");
        win.set_info(&Info::new().set("accumulate_ops", "same_op"))
            .ctx("set_info")?;
        ensure_eq!(ops().as_deref(), Some("same_op_no_op"), "after set_info");
        Ok(())
    })
}

/// `same_size` and `same_disp_unit`: the last element of a neighbour is reachable and one past
/// it is not; a value `accumulate_ordering` does not take fails at `set_info`, which changes
/// nothing then (creation with such values is in `errors::classes`).
pub fn same_extents_and_bad_values(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let right = (me + 1) % n;
    let same = Info::new()
        .set("same_size", "true")
        .set("same_disp_unit", "true");
    with_window(world, flavor, 32, 8, &same, |win| {
        win.fence(Assert::NONE).ctx("fence")?;
        win.put(&[me as u64 + 1], right, 3)
            .ctx("put at the last element")?;
        expect_class(
            win.put(&[0u64], right, 4),
            ErrorClass::RmaRange,
            "put one past the last element",
        )?;
        win.fence(Assert::NONE).ctx("fence")?;
        let left = (me + n - 1) % n;
        ensure_eq!(
            local_u64(win, 4)?,
            [0, 0, 0, left as u64 + 1],
            "memory after the fence"
        );
        expect_class(
            win.set_info(&Info::new().set("accumulate_ordering", "sometimes")),
            ErrorClass::Info,
            "set_info with a bad ordering",
        )?;
        ensure_eq!(
            win.info().get("accumulate_ordering"),
            Some("rar,raw,war,waw"),
            "ordering after a refused set_info"
        );
        Ok(())
    })?;
    Ok(())
}

/// Rank 1 computes while rank 0, under `accumulate_ordering=none`, adds to its counter `ADDS`
/// times with accumulates left in flight, flushes, reads the count and unlocks: the count is
/// exact and rank 0 does not wait for the computation.
pub fn target_computes(world: &World, flavor: Flavor) -> Res {
    let me = world.rank();
    ensure!(world.size() == 2, "laid out for 2 ranks");
    let info = Info::new().set("accumulate_ordering", "none");
    with_window(world, flavor, 8, 8, &info, |win| {
        world.barrier().ctx("barrier")?;
        if me == 1 {
            compute_for(busy_for());
        } else {
            let start = std::time::Instant::now();
            win.lock(LockType::Exclusive, 1, Assert::NONE).ctx("lock")?;
            for _ in 0..ADDS {
                win.accumulate(&[1u64], 1, 0, Op::Sum).ctx("accumulate")?;
            }
            win.flush(1).ctx("flush")?;
            let mut count = [0u64];
            win.get_accumulate(&[0u64], &mut count, 1, 0, Op::NoOp)
                .ctx("get_accumulate")?;
            win.unlock(1).ctx("unlock")?;
            ensure_eq!(count[0], ADDS, "adds that arrived");
            not_held_up(start, "lock/accumulates/flush/unlock")?;
        }
        world.barrier().ctx("barrier")
    })
}
