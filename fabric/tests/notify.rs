//! Writes that carry data to the peer's completion queue (`Endpoint::write_notify`), between
//! two endpoints of one process over the real tcp (tcp;ofi_rxm) and shm providers: the
//! handler gets each write's data exactly once, and when it does, that write's bytes are in the
//! peer's memory, for writes injected, sent whole and through local registrations; a
//! handler is set once.
#![cfg(have_libfabric)]

mod common;

use onesided_fabric::{Endpoint, Idle, MrMode, Remote, Waiting};
use onesided_shm::Mem;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Lengths of the writes: injected, eager, beyond one bounce buffer.
const LENGTHS: [usize; 3] = [8, 4096, 200_000];

fn run(provider: &str, mr: MrMode) {
    let domain = common::domain(provider, mr);
    let a = Endpoint::open(&domain, Idle::Wake).unwrap();
    let b = Endpoint::open(&domain, Idle::Wake).unwrap();
    assert_eq!(a.remote_data_bits(), 64, "{provider}");
    let region = b.register(Mem::alloc(1 << 20, 4096).unwrap()).unwrap();
    let mem = Mutex::new(region.mem().clone());
    // What the handler saw: each write's data, and whether its bytes were there by then.
    let seen: Arc<Mutex<Vec<(u64, bool)>>> = Arc::default();
    let count = Arc::new(AtomicU64::new(0));
    {
        let (seen, count) = (seen.clone(), count.clone());
        b.on_remote_data(Arc::new(move |data| {
            let len = LENGTHS[(data >> 32) as usize];
            let fill = data as u8;
            let mut bytes = vec![0u8; len];
            mem.lock().unwrap().read(0, &mut bytes).unwrap();
            let there = bytes.iter().all(|&x| x == fill);
            seen.lock().unwrap().push((data, there));
            count.fetch_add(1, Ordering::Release);
        }))
        .unwrap();
    }
    assert!(b.on_remote_data(Arc::new(|_| {})).is_err(), "one handler");
    let key = region.key().unwrap();
    let peer = a.insert(&b.name().unwrap()).unwrap();
    let to = Remote {
        peer,
        addr: key.base,
        key: a.map_key(&key).unwrap(),
    };
    let live = || Waiting::Poll;
    let mut want = Vec::new();
    for (i, &len) in LENGTHS.iter().enumerate() {
        for round in 1..=5u64 {
            let fill = (16 * i as u64 + round) as u8;
            let data = ((i as u64) << 32) | u64::from(fill);
            a.write_notify(&vec![fill; len], to, data, &live).unwrap();
            want.push((data, true));
            // The next write waits for this one's data to be counted, so that the handler
            // reads this write's bytes only.
            let deadline = Instant::now() + Duration::from_secs(10);
            while count.load(Ordering::Acquire) < want.len() as u64 {
                assert!(
                    Instant::now() < deadline,
                    "{provider}: data {data:#x} never came"
                );
                a.progress();
                b.progress();
            }
        }
    }
    assert_eq!(*seen.lock().unwrap(), want, "{provider}");
    a.flush(peer, &live).unwrap();
}

#[test]
fn tcp_writes_carry_their_data() {
    run("tcp", MrMode::ALL);
}

#[test]
fn tcp_writes_with_registered_buffers_carry_their_data() {
    run("tcp", MrMode::VERBS);
}

#[test]
fn shm_writes_carry_their_data() {
    run("shm", MrMode::ALL);
}
