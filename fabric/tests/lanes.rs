//! A lane (an endpoint one thread uses, which may move to another) over the real tcp and shm
//! providers: another thread's flush of it ([`Flusher::flush`]) returns only once every write
//! the lane had posted is in the target's memory, while the lane's own thread is blocked and
//! drives nothing (a lane has no progress thread); the lane is then sent to the flushing
//! thread and closed there.
#![cfg(have_libfabric)]

mod common;

use onesided_fabric::{Endpoint, Flusher, Idle, Lane, MrMode, Peer, Remote, Waiting};
use onesided_shm::Mem;
use std::sync::mpsc;

/// Writes of one word the lane posts, each small enough to be injected (left in flight).
const WRITES: usize = 20_000;

fn run(provider: &str) {
    let domain = common::domain(provider, MrMode::ALL);
    let target = Endpoint::open(&domain, Idle::Wake).unwrap();
    let mem = Mem::alloc(8 * WRITES, 4096).unwrap();
    let region = target.register(mem).unwrap();
    let (name, key) = (target.name().unwrap(), region.key().unwrap());
    let rkey = target.map_key(&key).unwrap();
    let live = || Waiting::Poll;

    let (posted, flushing) = mpsc::channel::<(Flusher, Peer)>();
    let (flushed, resume) = mpsc::channel::<()>();
    let (hand, lanes) = mpsc::channel::<Lane>();
    let owner = std::thread::spawn(move || {
        let lane = Lane::open(&domain).unwrap();
        let peer = lane.insert(&name).unwrap();
        // The target is this process: its progress thread dozes on this process's doorbell.
        lane.set_pid(peer, std::process::id());
        for w in 0..WRITES {
            let to = Remote {
                peer,
                addr: key.base + 8 * w as u64,
                key: rkey,
            };
            lane.write(&(w as u64 + 1).to_le_bytes(), to, &|| Waiting::Poll)
                .unwrap();
        }
        posted.send((lane.flusher(), peer)).unwrap();
        // Blocked, driving nothing, until the other thread has flushed.
        resume.recv().unwrap();
        hand.send(lane).unwrap();
    });
    let (flusher, peer) = flushing.recv().unwrap();
    flusher.flush(peer, &live).unwrap();
    let mut words = vec![0u8; 8 * WRITES];
    region.mem().read(0, &mut words).unwrap();
    let missing = words
        .chunks_exact(8)
        .enumerate()
        .filter(|(w, b)| u64::from_le_bytes((*b).try_into().unwrap()) != *w as u64 + 1)
        .count();
    assert_eq!(missing, 0, "{provider}: writes not there after the flush");
    flushed.send(()).unwrap();
    let lane = lanes.recv().unwrap();
    owner.join().unwrap();
    lane.flush(peer, &live).unwrap();
    drop(lane);
}

#[test]
fn tcp_flush_from_another_thread() {
    run("tcp");
}

#[test]
fn shm_flush_from_another_thread() {
    run("shm");
}
