//! The accumulate family from several ranks at once: exact results, every fetched value
//! handed out once, one winner per compare-and-swap, at aligned and unaligned displacements.
//!
//! # MPI-4.1: 12.3.4, 12.3.5, 12.7.1 (atomicity of accumulates)

use super::*;
use crate::{Assert, Op};

const N: usize = 4;
/// Calls per rank on one element.
const K: usize = 30;

#[test]
fn accumulates_from_every_rank_combine_exactly() {
    for flavor in FLAVORS {
        with_window(N, flavor, 6, |_, win| {
            let me = win.rank();
            win.fence(Assert::NOPRECEDE).unwrap();
            for _ in 0..K {
                win.accumulate(&[1u64], 0, 0, Op::Sum).unwrap();
                win.accumulate(&[0.5f64], 0, 1, Op::Sum).unwrap();
                win.accumulate(&[-1i32], 0, 2, Op::Sum).unwrap();
            }
            win.accumulate(&[(me as u64 + 1) * 10], 0, 3, Op::Max)
                .unwrap();
            win.accumulate(&[-(me as i64)], 0, 4, Op::Min).unwrap();
            win.accumulate(&[1u64 << me], 0, 5, Op::Bor).unwrap();
            win.fence(Assert::NOSUCCEED).unwrap();
            if me != 0 {
                assert_eq!(local(win, 6), vec![0; 6], "rank {me} was no target");
                return;
            }
            assert_eq!(local(win, 1), vec![(N * K) as u64]);
            let mut half = [0f64];
            win.read_local(1, &mut half).unwrap();
            assert_eq!(half, [(N * K) as f64 / 2.0]);
            let mut minus = [0i32; 2];
            win.read_local(2, &mut minus).unwrap();
            assert_eq!(
                minus,
                [-((N * K) as i32), 0],
                "the i32 and the bytes after it"
            );
            let mut rest = [0u64; 3];
            win.read_local(3, &mut rest).unwrap();
            let min = -(N as i64 - 1);
            assert_eq!(rest, [N as u64 * 10, min as u64, (1 << N) - 1]);
        });
    }
}

/// Tickets: every value a fetching call returns is handed out exactly once.
#[test]
fn fetching_calls_hand_out_every_ticket_once() {
    let fetched = with_window(N, Flavor::Allocate, 1, |world, win| {
        win.lock_all(Assert::NONE).unwrap();
        let mut olds = Vec::new();
        for _ in 0..K {
            olds.push(win.fetch_and_op(1u64, 0, 0, Op::Sum).unwrap());
            let mut old = [0i32];
            win.get_accumulate(&[1i32], &mut old, N - 1, 0, Op::Sum)
                .unwrap();
            olds.push(old[0] as u64);
        }
        win.unlock_all().unwrap();
        world.barrier().unwrap();
        let mut own = [0u64];
        win.read_local(0, &mut own).unwrap();
        (olds, own[0])
    });
    let mut from_0: Vec<u64> = fetched
        .iter()
        .flat_map(|(o, _)| o.iter().step_by(2))
        .copied()
        .collect();
    let mut from_last: Vec<u64> = fetched
        .iter()
        .flat_map(|(o, _)| o.iter().skip(1).step_by(2))
        .copied()
        .collect();
    from_0.sort_unstable();
    from_last.sort_unstable();
    let every: Vec<u64> = (0..(N * K) as u64).collect();
    assert_eq!(from_0, every, "tickets of fetch_and_op on rank 0");
    assert_eq!(
        from_last,
        every,
        "tickets of get_accumulate on rank {}",
        N - 1
    );
    let finals: Vec<u64> = fetched.iter().map(|(_, own)| *own).collect();
    assert_eq!(finals, vec![(N * K) as u64, 0, 0, (N * K) as u64]);
}

/// Every rank tries to claim every slot of rank 0 with compare_and_swap(me + 1, 0): each slot
/// has exactly one winner, the losers fetched the winner's value, and the slot holds it.
#[test]
fn compare_and_swap_elects_one_winner_per_slot() {
    const SLOTS: usize = 16;
    let seen = with_window(N, Flavor::Shared, SLOTS, |world, win| {
        let me = win.rank() as u64;
        win.lock_all(Assert::NONE).unwrap();
        let olds: Vec<u64> = (0..SLOTS)
            .map(|s| win.compare_and_swap(me + 1, 0, 0, s).unwrap())
            .collect();
        win.unlock_all().unwrap();
        world.barrier().unwrap();
        (olds, local(win, SLOTS))
    });
    let held = &seen[0].1;
    for s in 0..SLOTS {
        let winners: Vec<usize> = (0..N).filter(|&r| seen[r].0[s] == 0).collect();
        assert_eq!(winners.len(), 1, "slot {s}: winners {winners:?}");
        assert_eq!(held[s], winners[0] as u64 + 1, "slot {s} holds its winner");
        for (r, (olds, _)) in seen.iter().enumerate() {
            if r != winners[0] {
                assert_eq!(olds[s], held[s], "rank {r} lost slot {s} to its holder");
            }
        }
    }
}

/// Elements at any displacement (unit 1): unaligned ones go through the target's accumulate
/// lock, aligned ones through CPU atomics, and the counts are exact either way; the bytes
/// around them stay untouched and the accumulate lock is free afterwards.
#[test]
fn unaligned_accumulates_are_atomic() {
    let olds = inproc::run(N, |world| {
        let win = window(&world, Flavor::Allocate, 64, 1, &Info::new()).unwrap();
        win.lock_all(Assert::NONE).unwrap();
        let mut olds = Vec::new();
        for _ in 0..K {
            win.accumulate(&[1u32], 0, 1, Op::Sum).unwrap();
            win.accumulate(&[2u64], 0, 13, Op::Sum).unwrap();
            win.accumulate(&[3u32], 0, 32, Op::Sum).unwrap();
            olds.push(win.fetch_and_op(1i64, 0, 41, Op::Sum).unwrap());
        }
        win.unlock_all().unwrap();
        world.barrier().unwrap();
        let acc_lock = win
            .atomic_route()
            .amo(0, Space::Control, layout::ACC_LOCK, Amo::Load)
            .unwrap();
        assert_eq!(acc_lock, 0, "the accumulate lock was released");
        if world.rank() == 0 {
            let mut bytes = [0u8; 64];
            win.read_local(0, &mut bytes).unwrap();
            let total = (N * K) as u64;
            let mut want = [0u8; 64];
            want[1..5].copy_from_slice(&(total as u32).to_le_bytes());
            want[13..21].copy_from_slice(&(2 * total).to_le_bytes());
            want[32..36].copy_from_slice(&(3 * total as u32).to_le_bytes());
            want[41..49].copy_from_slice(&total.to_le_bytes());
            assert_eq!(bytes, want);
        }
        win.free().unwrap();
        olds
    });
    let mut all: Vec<i64> = olds.concat();
    all.sort_unstable();
    assert_eq!(all, (0..(N * K) as i64).collect::<Vec<_>>());
}

/// Calls of 4096 elements from every rank into rank 0, f64 at an aligned displacement (CPU
/// atomics element by element) and i64 at an unaligned one (the accumulate lock, once per
/// call, or once per 104 bytes with `mpi_accumulate_granularity=100`, the last piece shorter):
/// the sums are exact, and get_accumulate hands each rank the previous values of its own turn
/// on every element.
#[test]
fn vector_accumulates_combine_exactly() {
    for info in [
        Info::new(),
        Info::new().set("mpi_accumulate_granularity", "100"),
    ] {
        vector_accumulates(&info);
    }
}

fn vector_accumulates(info: &Info) {
    const LEN: usize = 4096;
    const CALLS: usize = 3;
    let unaligned = 8 * LEN + 4;
    let f: Vec<f64> = (0..LEN).map(|i| i as f64 + 0.5).collect();
    let v: Vec<i64> = (0..LEN).map(|i| i as i64 - 7).collect();
    let want_f = |i: usize, turns: usize| (N * CALLS) as f64 * f[i] + turns as f64;
    let want_v = |i: usize, turns: usize| (N * CALLS) as i64 * v[i] + turns as i64;
    let fetched = inproc::run(N, |world| {
        let win = window(&world, Flavor::Allocate, 16 * LEN + 8, 1, info).unwrap();
        win.lock_all(Assert::NONE).unwrap();
        for _ in 0..CALLS {
            win.accumulate(&f, 0, 0, Op::Sum).unwrap();
            win.accumulate(&v, 0, unaligned, Op::Sum).unwrap();
        }
        win.unlock_all().unwrap();
        world.barrier().unwrap();
        win.lock_all(Assert::NONE).unwrap();
        let (mut old_f, mut old_v) = (vec![0f64; LEN], vec![0i64; LEN]);
        win.get_accumulate(&[1f64; LEN], &mut old_f, 0, 0, Op::Sum)
            .unwrap();
        win.get_accumulate(&[1i64; LEN], &mut old_v, 0, unaligned, Op::Sum)
            .unwrap();
        win.unlock_all().unwrap();
        world.barrier().unwrap();
        if world.rank() == 0 {
            let (mut end_f, mut end_v) = (vec![0f64; LEN], vec![0i64; LEN]);
            win.read_local(0, &mut end_f).unwrap();
            win.read_local(unaligned, &mut end_v).unwrap();
            assert!((0..LEN).all(|i| end_f[i] == want_f(i, N)), "f64 sums");
            assert!((0..LEN).all(|i| end_v[i] == want_v(i, N)), "i64 sums");
        }
        win.free().unwrap();
        (old_f, old_v)
    });
    for i in 0..LEN {
        let mut turns_f: Vec<f64> = fetched.iter().map(|(f, _)| f[i]).collect();
        let mut turns_v: Vec<i64> = fetched.iter().map(|(_, v)| v[i]).collect();
        turns_f.sort_by(f64::total_cmp);
        turns_v.sort_unstable();
        let every_f: Vec<f64> = (0..N).map(|t| want_f(i, t)).collect();
        let every_v: Vec<i64> = (0..N).map(|t| want_v(i, t)).collect();
        assert_eq!(turns_f, every_f, "f64 element {i}: one turn per rank");
        assert_eq!(turns_v, every_v, "i64 element {i}: one turn per rank");
    }
}

/// Fetched values, replacement, no-op reads and compare-and-swap, one call at a time.
#[test]
fn fetching_calls_return_the_previous_values() {
    with_window(2, Flavor::Allocate, 2, |world, win| {
        win.write_local(0, &[10u64, 20]).unwrap();
        world.barrier().unwrap();
        if win.rank() == 0 {
            win.lock(crate::LockType::Exclusive, 1, Assert::NONE)
                .unwrap();
            let mut old = [0u64; 2];
            win.get_accumulate(&[5u64, 6], &mut old, 1, 0, Op::Sum)
                .unwrap();
            assert_eq!(old, [10, 20]);
            win.get_accumulate(&[0u64, 0], &mut old, 1, 0, Op::NoOp)
                .unwrap();
            assert_eq!(old, [15, 26], "MPI_NO_OP reads");
            win.get_accumulate(&[1u64, 2], &mut old, 1, 0, Op::Replace)
                .unwrap();
            assert_eq!(old, [15, 26], "MPI_NO_OP changed nothing");
            assert_eq!(win.compare_and_swap(9u64, 1, 1, 0).unwrap(), 1);
            assert_eq!(win.compare_and_swap(8u64, 1, 1, 0).unwrap(), 9, "no swap");
            assert_eq!(win.fetch_and_op(3u64, 1, 1, Op::Prod).unwrap(), 2);
            win.unlock(1).unwrap();
        }
        world.barrier().unwrap();
        let want = if win.rank() == 1 { [9, 6] } else { [10, 20] };
        assert_eq!(local(win, 2), want);
    });
}

/// Calls the accumulate family refuses, each before any element changed: the target memory is
/// untouched and the epoch has no RMA call to complete (NOPRECEDE holds at the next fence).
#[test]
fn refused_accumulates_change_nothing() {
    with_window(2, Flavor::Shared, 2, |world, win| {
        let other = 1 - win.rank();
        win.fence(Assert::NOPRECEDE).unwrap();
        refused(win.accumulate(&[1u64], other, 0, Op::NoOp), ErrorClass::Op);
        refused(
            win.accumulate(&[1.0f64], other, 0, Op::Band),
            ErrorClass::Op,
        );
        refused(win.fetch_and_op(1.0f32, other, 0, Op::Bxor), ErrorClass::Op);
        refused(
            win.compare_and_swap(1.0f64, 0.0, other, 0),
            ErrorClass::Type,
        );
        let mut short = [0u64; 1];
        refused(
            win.get_accumulate(&[1u64, 2], &mut short, other, 0, Op::Sum),
            ErrorClass::Count,
        );
        refused(
            win.accumulate(&[1u64, 2, 3], other, 0, Op::Sum),
            ErrorClass::RmaRange,
        );
        refused(
            win.fetch_and_op(1u64, other, 2, Op::Sum),
            ErrorClass::RmaRange,
        );
        refused(
            win.compare_and_swap(1u32, 0, other, usize::MAX),
            ErrorClass::RmaRange,
        );
        refused(win.accumulate(&[1u64], 2, 0, Op::Sum), ErrorClass::Rank);
        win.fence(Assert::NOPRECEDE | Assert::NOSUCCEED).unwrap();
        world.barrier().unwrap();
        assert_eq!(local(win, 2), vec![0, 0]);
    });
}
