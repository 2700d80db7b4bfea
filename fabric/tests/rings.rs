//! A call to a peer on this node whose owner never calls in is served by the peer's progress
//! thread, which the caller's ring of its doorbell wakes: a delivered request leaves nothing
//! of the caller in flight to the peer, so the caller rings the peer it calls, not only those
//! its operations are in flight to. Without the ring the progress thread serves the call only
//! when it looks by itself (every 20 ms where every peer rings), and counts no ring. Over the
//! shm provider (no wait object: the thread dozes on the doorbell) and tcp (the thread sleeps
//! in its serving queue's wait object and on the doorbell; the caller reaches the issuing
//! port). Its own test binary: one doorbell per process, so which endpoint holds it must not
//! depend on other tests.
#![cfg(have_libfabric)]

#[path = "common/adder.rs"]
mod adder;
mod common;

use adder::Adder;
use onesided_fabric::{Endpoint, Idle, MrMode, Waiting};
use onesided_shm::Mem;
use std::sync::Arc;
use std::sync::atomic::Ordering;

#[test]
fn a_call_rings_the_peer_it_waits_for() {
    for provider in ["shm", "tcp"] {
        let domain = common::domain(provider, MrMode::ALL);
        // The callee first: it takes the doorbell.
        let b = Endpoint::open(&domain, Idle::Wake).unwrap();
        let a = Endpoint::open(&domain, Idle::Wake).unwrap();
        a.serve_calls(Arc::new(Adder)).unwrap();
        b.serve_calls(Arc::new(Adder)).unwrap();
        let region = b.register(Mem::alloc(1 << 12, 4096).unwrap()).unwrap();
        let key = region.key().unwrap();
        let rkey = a.map_key(&key).unwrap();
        let near = b.near_name().unwrap();
        let to_b = a
            .insert(near.as_deref().unwrap_or(&b.name().unwrap()))
            .unwrap();
        let to_a = b
            .insert(&a.near_name().unwrap().unwrap_or(a.name().unwrap()))
            .unwrap();
        b.know_rank(0, to_a);
        // b runs in this process: a's rings reach the doorbell b's progress thread sleeps on.
        a.set_pid(to_b, std::process::id());
        let live = || Waiting::Poll;
        let head = [rkey.to_le_bytes(), key.base.to_le_bytes()].concat();

        for i in 0..20u64 {
            let old = a
                .call(to_b, 0, &[&head, &1u64.to_le_bytes()], &live)
                .unwrap();
            assert_eq!(old, i.to_le_bytes(), "{provider}: call {i}");
        }
        let word = region.mem().atomic_u64(0).unwrap();
        assert_eq!(
            word.load(Ordering::SeqCst),
            20,
            "{provider}: the calls landed"
        );
        assert!(
            b.rings() >= 1,
            "{provider}: the calls rang the doorbell of b's progress thread"
        );
        drop((a, region, b));
    }
}
