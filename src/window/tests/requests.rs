//! Request-based RMA over shared memory: many requests at once land, `wait_any` hands each out
//! once, a dropped `rget` has filled its buffer, accumulates count exactly, and the calls are
//! refused outside passive-target epochs.
//!
//! # MPI-4.1: 12.3.5

use super::*;
use crate::window::Request;
use crate::{Assert, Op};

const N: usize = 3;
const SLOTS: usize = 16;

#[test]
fn requests_land_and_complete_once() {
    for flavor in FLAVORS {
        with_window(N, flavor, SLOTS + 1, |world, win| {
            let (me, right, left) = (win.rank(), (win.rank() + 1) % N, (win.rank() + N - 1) % N);
            win.lock_all(Assert::NONE).unwrap();
            let words: Vec<u64> = (0..SLOTS).map(|i| tag(me, right, i)).collect();
            let puts: Vec<Request<'_>> = words
                .iter()
                .enumerate()
                .map(|(i, w)| win.rput(std::slice::from_ref(w), right, i).unwrap())
                .collect();
            Request::wait_all(puts).unwrap();
            win.raccumulate(&[1u64], 0, SLOTS, Op::Sum)
                .unwrap()
                .wait()
                .unwrap();
            win.flush_all().unwrap();
            world.barrier().unwrap();
            let mut got = vec![0u64; SLOTS];
            let mut reqs: Vec<Request<'_>> = got
                .chunks_mut(1)
                .enumerate()
                .map(|(i, w)| win.rget(w, left, i).unwrap())
                .collect();
            let mut seen = [false; SLOTS];
            while let Some(i) = Request::wait_any(&mut reqs).unwrap() {
                assert!(!seen[i], "request {i} handed out twice");
                seen[i] = true;
            }
            assert!(seen.iter().all(|&s| s));
            drop(reqs);
            // The left neighbour's window holds what its own left neighbour wrote.
            let writer = (left + N - 1) % N;
            let want: Vec<u64> = (0..SLOTS).map(|i| tag(writer, left, i)).collect();
            assert_eq!(got, want);
            let mut dropped = vec![0u64; SLOTS];
            drop(win.rget(&mut dropped, left, 0).unwrap());
            assert_eq!(dropped, want, "a dropped rget filled its buffer");
            let mut count = [0u64];
            win.rget_accumulate(&[0u64], &mut count, 0, SLOTS, Op::NoOp)
                .unwrap()
                .wait()
                .unwrap();
            win.unlock_all().unwrap();
            assert!(count[0] >= 1 && count[0] <= N as u64);
            world.barrier().unwrap();
            if me == 0 {
                assert_eq!(local(win, SLOTS + 1)[SLOTS], N as u64, "every raccumulate");
            }
        });
    }
}

#[test]
fn requests_outside_passive_epochs_are_rma_sync() {
    with_window(2, Flavor::Allocate, 1, |_, win| {
        let one = [1u64];
        let class = |r: Result<Request<'_>>| r.map(drop).unwrap_err().class();
        assert_eq!(class(win.rput(&one, 1, 0)), ErrorClass::RmaSync);
        win.fence(Assert::NOPRECEDE).unwrap();
        assert_eq!(
            class(win.rput(&one, 1, 0)),
            ErrorClass::RmaSync,
            "fence epoch"
        );
        win.fence(Assert::NOSUCCEED).unwrap();
        win.lock(crate::LockType::Shared, 1, Assert::NONE).unwrap();
        assert_eq!(class(win.rput(&one, 1, 1)), ErrorClass::RmaRange);
        assert_eq!(
            class(win.rput(&one, 0, 0)),
            ErrorClass::RmaSync,
            "rank 0 not locked"
        );
        win.rput(&one, 1, 0).unwrap().wait().unwrap();
        win.unlock(1).unwrap();
    });
}
