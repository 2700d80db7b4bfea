//! Calls between two endpoints of one process over the real tcp (tcp;ofi_rxm) and shm
//! providers: the callee's handler reaches its registered memory by key and range and answers;
//! small calls (injected) and large ones (tracked) both come back, several at once in order, a range no region holds is
//! refused without touching memory, and a provider that demands registered local buffers
//! refuses to serve calls.
#![cfg(have_libfabric)]

#[path = "common/adder.rs"]
mod adder;
mod common;

use adder::Adder;
use onesided_fabric::{CALL_MAX, Endpoint, Idle, MrMode, Waiting};
use onesided_shm::Mem;
use std::sync::Arc;

fn run(provider: &str) {
    let domain = common::domain(provider, MrMode::ALL);
    let a = Endpoint::open(&domain, Idle::Wake).unwrap();
    let b = Endpoint::open(&domain, Idle::Wake).unwrap();
    a.serve_calls(Arc::new(Adder)).unwrap();
    b.serve_calls(Arc::new(Adder)).unwrap();
    let region = b.register(Mem::alloc(1 << 16, 4096).unwrap()).unwrap();
    let key = region.key().unwrap();
    let rkey = a.map_key(&key).unwrap();
    let to_b = a.insert(&b.name().unwrap()).unwrap();
    let to_a = b.insert(&a.name().unwrap()).unwrap();
    b.know_rank(0, to_a);
    let live = || Waiting::Poll;
    let head = |offset: u64| [rkey.to_le_bytes(), (key.base + offset).to_le_bytes()].concat();

    // 100 small calls to one word: each sees the sum of those before it.
    for i in 0..100u64 {
        let old = a
            .call(to_b, 0, &[&head(8), &3u64.to_le_bytes()], &live)
            .unwrap();
        assert_eq!(old, (3 * i).to_le_bytes(), "{provider}: call {i}");
    }
    let mut word = [0u8; 8];
    region.mem().read(8, &mut word).unwrap();
    assert_eq!(u64::from_le_bytes(word), 300);

    // One call of the most operands a call carries.
    let n = (CALL_MAX - 16) / 8;
    let ones: Vec<u8> = (0..n).flat_map(|_| 1u64.to_le_bytes()).collect();
    let old = a.call(to_b, 0, &[&head(1024), &ones], &live).unwrap();
    assert_eq!(old, vec![0u8; ones.len()], "{provider}: large call");
    let old = a.call(to_b, 0, &[&head(1024), &ones], &live).unwrap();
    assert_eq!(old, ones, "{provider}: large call, again");
    let too_long = vec![0u8; CALL_MAX];
    assert!(a.call(to_b, 0, &[&head(0), &too_long], &live).is_err());

    // Ten calls at once (more than are kept in flight), to words of their own and twice to
    // one word: the answers come in the order of the bodies, and the shared word saw both.
    let three = 3u64.to_le_bytes();
    let heads: Vec<Vec<u8>> = (0..10u64)
        .map(|i| head(40_000 + 8 * if i == 9 { 0 } else { i }))
        .collect();
    let parts: Vec<[&[u8]; 2]> = heads.iter().map(|h| [&h[..], &three[..]]).collect();
    let bodies: Vec<&[&[u8]]> = parts.iter().map(|p| &p[..]).collect();
    let answers = a.calls(to_b, 0, &bodies, 4, &live).unwrap();
    assert_eq!(answers.len(), 10);
    for (i, old) in answers.iter().take(9).enumerate() {
        assert_eq!(old, &0u64.to_le_bytes(), "{provider}: call {i} of ten");
    }
    assert_eq!(
        answers[9],
        3u64.to_le_bytes(),
        "{provider}: served after the first"
    );
    region.mem().read(40_000, &mut word).unwrap();
    assert_eq!(u64::from_le_bytes(word), 6);
    let start = head(0);
    let long = [&[&start[..], &too_long[..]][..]];
    assert!(a.calls(to_b, 0, &long, 4, &live).is_err());

    // Past the region's end: refused, nothing written.
    let past = a.call(to_b, 0, &[&head((1 << 16) - 8), &[1u8; 16]], &live);
    assert_eq!(past.unwrap(), Vec::<u8>::new(), "{provider}: out of range");
    region.mem().read((1 << 16) - 8, &mut word).unwrap();
    assert_eq!(word, [0u8; 8]);
}

#[test]
fn tcp_calls() {
    run("tcp");
}

#[test]
fn shm_calls() {
    run("shm");
}

#[test]
fn registered_local_buffers_serve_no_calls() {
    let domain = common::domain("tcp", MrMode::VERBS);
    let a = Endpoint::open(&domain, Idle::Poll).unwrap();
    let e = a.serve_calls(Arc::new(Adder)).unwrap_err();
    assert!(e.to_string().contains("FI_MR_LOCAL"), "{e}");
}
