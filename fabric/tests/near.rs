//! An endpoint whose progress thread sleeps in a wait object (`Idle::Wake`) and holds the
//! process's doorbell offers peers on its node a second address, its issuing port, whose queue
//! has no wait object. A peer that inserts that address reaches the same memory, and the
//! target is served by its progress thread alone (its owner never calls in), woken by the
//! origin's knocks. Its own test binary: one doorbell per process, so which endpoint holds it
//! must not depend on other tests.
#![cfg(have_libfabric)]

mod common;

use onesided_fabric::{AtomicOp, Datatype, Endpoint, Idle, MrMode, Remote, Waiting};
use onesided_shm::Mem;

#[test]
fn peers_on_the_node_reach_the_issuing_port() {
    for mr_mode in [MrMode::ALL, MrMode::VERBS] {
        let domain = common::domain("tcp", mr_mode);
        // The target first: it takes the doorbell, so it alone offers a near address.
        let b = Endpoint::open(&domain, Idle::Wake).unwrap();
        let a = Endpoint::open(&domain, Idle::Wake).unwrap();
        let near = b
            .near_name()
            .unwrap()
            .expect("tcp's waking queue: a near address");
        assert_ne!(
            near,
            b.name().unwrap(),
            "the issuing port, not the serving one"
        );
        assert_eq!(a.near_name().unwrap(), None, "the doorbell is b's");

        let region = b.register(Mem::alloc(1 << 16, 4096).unwrap()).unwrap();
        let peer = a.insert(&near).unwrap();
        // b runs in this process: a's knocks ring the doorbell b's progress thread sleeps on.
        a.set_pid(peer, std::process::id());
        let key = region.key().unwrap();
        let rkey = a.map_key(&key).unwrap();
        let at = |offset: u64| Remote {
            peer,
            addr: key.base + offset,
            key: rkey,
        };
        let live = || Waiting::Poll;

        let data: Vec<u8> = (0..5000u32).map(|i| (i % 253) as u8).collect();
        for round in 0..20u64 {
            a.write(&data, at(1024), &live).unwrap();
            a.flush(peer, &live).unwrap();
            let mut back = vec![0u8; data.len()];
            a.read(&mut back, at(1024), &live).unwrap();
            assert_eq!(back, data, "{mr_mode:?}: round {round}");
            let mut old = [0u8; 8];
            let one = 1u64.to_le_bytes();
            a.fetch_atomic(Datatype::U64, AtomicOp::Sum, &one, &mut old, at(0), &live)
                .unwrap();
            assert_eq!(u64::from_le_bytes(old), round, "{mr_mode:?}: fetch-add");
        }
        let mut landed = vec![0u8; data.len()];
        region.mem().read(1024, &mut landed).unwrap();
        assert_eq!(landed, data, "{mr_mode:?}: the writes landed in b's memory");
        let count = region.mem().atomic_u64(0).unwrap();
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 20);
        drop((a, region, b));
    }
}
