//! Two endpoints of one process, each with its own progress thread, over the real tcp
//! (tcp;ofi_rxm) and shm providers, with the provider's own MR mode and with the verbs-style
//! mode requested, and with progress threads that sleep in the completion queue's wait object
//! or poll (the target endpoint is served by its thread alone): writes and reads land, atomics
//! count exactly, compare-and-swap swaps once, request forms complete with their data, also
//! when many are in flight or gathered into one read, or one is dropped; scatter-gather writes
//! and reads reach their runs and nothing between them.
#![cfg(have_libfabric)]

mod common;

use onesided_fabric::{AtomicOp, Datatype, Endpoint, Idle, MrMode, Remote, Waiting};
use onesided_shm::Mem;

fn run(provider: &str, mr_mode: MrMode, idle: Idle) {
    let domain = common::domain(provider, mr_mode);
    let a = Endpoint::open(&domain, idle).unwrap();
    assert_eq!(
        a.local_mr(),
        mr_mode == MrMode::VERBS,
        "{provider}: registered local buffers"
    );
    let b = Endpoint::open(&domain, idle).unwrap();
    let mem = Mem::alloc(1 << 20, 4096).unwrap();
    let region = b.register(mem).unwrap();
    let peer = a.insert(&b.name().unwrap()).unwrap();
    let key = region.key().unwrap();
    let rkey = a.map_key(&key).unwrap();
    let live = || Waiting::Poll;
    let at = |offset: u64| Remote {
        peer,
        addr: key.base + offset,
        key: rkey,
    };

    let small = [7u8; 8];
    a.write(&small, at(8), &live).unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    a.write(&big, at(4096), &live).unwrap();
    a.flush(peer, &live).unwrap();
    let mut back = [0u8; 8];
    region.mem().read(8, &mut back).unwrap();
    assert_eq!(back, small);
    let mut got = vec![0u8; big.len()];
    a.read(&mut got, at(4096), &live).unwrap();
    assert_eq!(got, big);

    // Request forms: 64 reads in flight together, a write, and a dropped read.
    let tickets: Vec<_> = (0..64u64)
        .map(|i| a.start_read(8, at(4096 + 8 * i), &live).unwrap())
        .collect();
    for (i, t) in tickets.into_iter().enumerate() {
        let mut got = [0u8; 8];
        a.finish(t, Some(&mut got), &live).unwrap();
        assert_eq!(got[..], big[8 * i..8 * i + 8], "read {i}");
    }
    // After the burst above, reads are gathered into one from the first: one of them dropped
    // unfinished.
    let first = a.start_read(8, at(4096), &live).unwrap();
    let second = a.start_read(8, at(4104), &live).unwrap();
    let third = a.start_read(8, at(4112), &live).unwrap();
    drop(second);
    let mut got = [0u8; 8];
    a.finish(third, Some(&mut got), &live).unwrap();
    assert_eq!(got[..], big[16..24], "gathered read");
    a.finish(first, Some(&mut got), &live).unwrap();
    assert_eq!(got[..], big[..8], "first gathered read");
    let dropped = a.start_read(big.len(), at(4096), &live).unwrap();
    drop(dropped);
    let w = a.start_write(&big[..70_000], at(400_000), &live).unwrap();
    a.finish(w, None, &live).unwrap();
    a.flush(peer, &live).unwrap();
    let mut landed = vec![0u8; 70_000];
    region.mem().read(400_000, &mut landed).unwrap();
    assert_eq!(landed[..], big[..70_000]);
    // The staging buffers of settled requests are reused: the next write and read of that
    // size carry their own bytes.
    let w = a
        .start_write(&big[70_000..140_000], at(400_000), &live)
        .unwrap();
    a.finish(w, None, &live).unwrap();
    a.flush(peer, &live).unwrap();
    region.mem().read(400_000, &mut landed).unwrap();
    assert_eq!(
        landed[..],
        big[70_000..140_000],
        "write from a reused buffer"
    );
    let t = a.start_read(70_000, at(4096 + 1000), &live).unwrap();
    a.finish(t, Some(&mut landed), &live).unwrap();
    assert_eq!(landed[..], big[1000..71_000], "read into a reused buffer");

    // Buffers inside memory registered on the origin's endpoint go with that registration.
    let own = a.register(Mem::alloc(1 << 18, 4096).unwrap()).unwrap();
    own.mem().write(0, &big[..200_000]).unwrap();
    // SAFETY: the registered memory is this test's, not otherwise in use.
    let from_region = unsafe { std::slice::from_raw_parts(own.mem().addr() as *const u8, 200_000) };
    a.write(from_region, at(800_000), &live).unwrap();
    a.flush(peer, &live).unwrap();
    let mut landed = vec![0u8; 200_000];
    region.mem().read(800_000, &mut landed).unwrap();
    assert_eq!(landed[..], big[..200_000], "written from registered memory");
    // SAFETY: as above; nothing else reads or writes it meanwhile.
    let into_region =
        unsafe { std::slice::from_raw_parts_mut((own.mem().addr() + 4096) as *mut u8, 100) };
    a.read(into_region, at(4096), &live).unwrap();
    assert_eq!(into_region[..], big[..100], "read into registered memory");

    // Scatter-gather: 10 runs of 8 bytes at a stride of 24 (4 runs per operation where the
    // provider allows), and a run longer than the others; read back the same way.
    assert!(a.rma_iov_limit() >= 1);
    let pieces: Vec<(usize, Vec<u8>)> = (0..10u8)
        .map(|i| (24 * i as usize, vec![i + 1; 8]))
        .chain([(300, vec![99u8; 5000])])
        .collect();
    let runs: Vec<(usize, &[u8])> = pieces.iter().map(|(o, b)| (*o, &b[..])).collect();
    drop(a.start_write_runs(&runs, at(700_000), &live).unwrap());
    a.flush(peer, &live).unwrap();
    for (o, b) in &pieces {
        let mut landed = vec![0u8; b.len()];
        region.mem().read(700_000 + o, &mut landed).unwrap();
        assert_eq!(&landed, b, "run at {o}");
    }
    let mut gap = [1u8; 16];
    region.mem().read(700_008, &mut gap).unwrap();
    assert_eq!(gap, [0; 16], "nothing between runs");
    let ranges: Vec<(usize, usize)> = pieces.iter().map(|(o, b)| (*o, b.len())).collect();
    let t = a.start_read_runs(&ranges, at(700_000), &live).unwrap();
    let mut packed = vec![0u8; ranges.iter().map(|r| r.1).sum()];
    a.finish(t, Some(&mut packed), &live).unwrap();
    let expect: Vec<u8> = pieces.iter().flat_map(|(_, b)| b.clone()).collect();
    assert_eq!(packed, expect, "runs read back in order");

    // Batches: a word, a block inside the bounce buffer's size and two above it, written and
    // read back in one call each.
    let blocks: Vec<(u64, &[u8])> = vec![
        (470_000, &big[..8]),
        (470_100, &big[8..30_008]),
        (305_000, &big[..90_000]),
        (505_000, &big[90_000..170_000]),
    ];
    let mut writes: Vec<(&[u8], Remote)> = blocks.iter().map(|&(o, b)| (b, at(o))).collect();
    writes.push((&[], at(0)));
    a.write_all(&writes, &live).unwrap();
    a.flush(peer, &live).unwrap();
    let mut backs: Vec<Vec<u8>> = blocks.iter().map(|(_, b)| vec![0u8; b.len()]).collect();
    for ((o, b), back) in blocks.iter().zip(&mut backs) {
        region.mem().read(*o as usize, back).unwrap();
        assert_eq!(back[..], b[..], "batch write at {o}");
        back.fill(0);
    }
    let mut reads: Vec<(&mut [u8], Remote)> = backs
        .iter_mut()
        .zip(&blocks)
        .map(|(back, &(o, _))| (&mut back[..], at(o)))
        .collect();
    a.read_all(&mut reads, &live).unwrap();
    for ((o, b), back) in blocks.iter().zip(&backs) {
        assert_eq!(back[..], b[..], "batch read at {o}");
    }
    // 64 words in one batch, gathered into few reads, and a large read beside them.
    let mut words = vec![[0u8; 8]; 64];
    let mut large = vec![0u8; 90_000];
    let mut reads: Vec<(&mut [u8], Remote)> = words
        .iter_mut()
        .enumerate()
        .map(|(i, w)| (&mut w[..], at(4096 + 16 * i as u64)))
        .chain([(&mut large[..], at(305_000)), (&mut [][..], at(0))])
        .collect();
    a.read_all(&mut reads, &live).unwrap();
    for (i, w) in words.iter().enumerate() {
        assert_eq!(w[..], big[16 * i..16 * i + 8], "word {i} of a batch");
    }
    assert_eq!(large[..], big[..90_000], "the large read of a batch");
    // Six blocks of 12,000 bytes to separate ranges, read in one batch into plain memory and
    // into memory registered on the origin's endpoint. Over tcp the reads share operations,
    // four to one and two to the next; in the verbs MR mode those into plain memory start as
    // requests instead, and those into registered memory share with its descriptor.
    let apart = |i: usize| 710_000 + 13_000 * i as u64;
    let blocks: Vec<(&[u8], Remote)> = (0..6)
        .map(|i| (&big[12_000 * i..][..12_000], at(apart(i))))
        .collect();
    a.write_all(&blocks, &live).unwrap();
    a.flush(peer, &live).unwrap();
    let read_shared = |into: &mut [&mut [u8]], what: &str| {
        let mut reads: Vec<(&mut [u8], Remote)> = into
            .iter_mut()
            .enumerate()
            .map(|(i, d)| (&mut d[..], at(apart(i))))
            .collect();
        a.read_all(&mut reads, &live).unwrap();
        for (i, d) in into.iter().enumerate() {
            assert_eq!(
                d[..],
                big[12_000 * i..][..12_000],
                "shared read {i} into {what}"
            );
        }
    };
    let mut plain = vec![[0u8; 12_000]; 6];
    let mut plain: Vec<&mut [u8]> = plain.iter_mut().map(|p| &mut p[..]).collect();
    read_shared(&mut plain, "plain memory");
    own.mem().write(0, &vec![0u8; 1 << 18]).unwrap();
    // SAFETY: the registered memory is this test's, not otherwise in use; the slices are
    // disjoint, 12,288 bytes apart.
    let mut registered: Vec<&mut [u8]> = (0..6)
        .map(|i| unsafe {
            std::slice::from_raw_parts_mut(
                (own.mem().addr() + 8192 + 12_288 * i) as *mut u8,
                12_000,
            )
        })
        .collect();
    read_shared(&mut registered, "registered memory");

    let fetch = |op: AtomicOp, v: u64, offset: u64| {
        let mut old = [0u8; 8];
        a.fetch_atomic(
            Datatype::U64,
            op,
            &v.to_le_bytes(),
            &mut old,
            at(offset),
            &live,
        )
        .unwrap();
        u64::from_le_bytes(old)
    };
    let cas = |compare: u64, swap: u64| {
        let mut old = [0u8; 8];
        let (c, s) = (compare.to_le_bytes(), swap.to_le_bytes());
        a.compare_swap(Datatype::U64, &c, &s, &mut old, at(0), &live)
            .unwrap();
        u64::from_le_bytes(old)
    };
    for i in 0..100 {
        assert_eq!(fetch(AtomicOp::Sum, 3, 0), 3 * i);
    }
    assert_eq!(fetch(AtomicOp::Read, 0, 0), 300);
    assert_eq!(cas(300, 9), 300);
    assert_eq!(cas(300, 11), 9);
    for i in 0..5 {
        assert_eq!(fetch(AtomicOp::Sum, 1, 64), i, "fetch-add at offset 64");
    }
    // A vector of 3000 u64 sums without fetching where the provider allows it (tcp), refused
    // where it does not (shm); with fetching everywhere, the old values come back.
    let ones: Vec<u8> = (0..3000u64).flat_map(|_| 1u64.to_le_bytes()).collect();
    let plain = a.start_atomic_many(
        Datatype::U64,
        AtomicOp::Sum,
        &ones,
        false,
        at(600_000),
        &live,
    );
    assert_eq!(
        plain.is_ok(),
        a.plain_atomics(),
        "{provider}: fi_atomic offered"
    );
    if let Ok(t) = plain {
        a.finish(t, None, &live).unwrap();
    }
    let mut old = vec![0u8; ones.len()];
    a.fetch_atomic_many(
        Datatype::U64,
        AtomicOp::Sum,
        &ones,
        &mut old,
        at(600_000),
        &live,
    )
    .unwrap();
    let before = u64::from(a.plain_atomics());
    assert!(
        old.chunks(8)
            .all(|c| u64::from_le_bytes(c.try_into().unwrap()) == before)
    );
    let mut after = vec![0u8; ones.len()];
    region.mem().read(600_000, &mut after).unwrap();
    assert!(
        after
            .chunks(8)
            .all(|c| u64::from_le_bytes(c.try_into().unwrap()) == before + 1)
    );

    let word = |at: usize| {
        let w = region.mem().atomic_u64(at).unwrap();
        w.load(std::sync::atomic::Ordering::SeqCst)
    };
    assert_eq!((word(0), word(64)), (9, 5), "words at offsets 0 and 64");
}

#[test]
fn tcp_provider_mode() {
    run("tcp", MrMode::ALL, Idle::Wake);
}

#[test]
fn tcp_verbs_mode() {
    run("tcp", MrMode::VERBS, Idle::Wake);
}

#[test]
fn shm_provider_mode() {
    run("shm", MrMode::ALL, Idle::Wake);
}

#[test]
fn shm_verbs_mode() {
    run("shm", MrMode::VERBS, Idle::Wake);
}

#[test]
fn tcp_polling_progress() {
    run("tcp", MrMode::ALL, Idle::Poll);
}

#[test]
fn shm_polling_progress() {
    run("shm", MrMode::VERBS, Idle::Poll);
}
