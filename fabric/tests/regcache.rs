//! The registration cache over the real tcp provider (tcp;ofi_rxm) with registered local
//! buffers demanded (`FI_MR_LOCAL`, as verbs does): a buffer's registration serves every later
//! transfer from or into it, and it is gone from the cache as soon as the call that takes its
//! memory away returns (`munmap`, `madvise(MADV_DONTNEED)`, `mremap`), so new memory at the
//! same address is registered again; the cache keeps at most 64 registrations. Where this
//! kernel gives the process no `userfaultfd`, each test says so and checks the data only.
#![cfg(have_libfabric)]

mod common;

use onesided_fabric::{Endpoint, Idle, MrMode, Region, Remote, Waiting, memory_monitor};
use onesided_shm::Mem;

/// Larger than the bounce buffer, so it is registered (not copied).
const LEN: usize = 256 << 10;

struct Pair {
    a: Endpoint,
    _b: Endpoint,
    region: Region<'static>,
    at: Remote,
}

fn pair() -> Pair {
    let domain = common::domain("tcp", MrMode::VERBS);
    let a = Endpoint::open(&domain, Idle::Poll).unwrap();
    assert!(a.local_mr());
    let b = Endpoint::open(&domain, Idle::Poll).unwrap();
    let region = b.register(Mem::alloc(LEN, 4096).unwrap()).unwrap();
    let peer = a.insert(&b.name().unwrap()).unwrap();
    let key = region.key().unwrap();
    let at = Remote {
        peer,
        addr: key.base,
        key: a.map_key(&key).unwrap(),
    };
    Pair {
        a,
        _b: b,
        region,
        at,
    }
}

impl Pair {
    /// Write `src` to the region and check that it landed.
    fn put(&self, src: &[u8]) {
        self.a.write(src, self.at, &|| Waiting::Poll).unwrap();
        self.a.flush(self.at.peer, &|| Waiting::Poll).unwrap();
        let mut back = vec![0u8; src.len()];
        self.region.mem().read(0, &mut back).unwrap();
        assert!(back == src, "the write landed");
    }

    /// Whether the cache watches memory here, as `memory_monitor` says; says why not where it
    /// does not.
    fn watching(&self) -> bool {
        let watching = self.a.registration_cache().watching;
        assert_eq!(
            watching,
            Some(memory_monitor()),
            "what the cache found is what info says"
        );
        match watching {
            Some(Ok(())) => true,
            Some(Err(why)) => {
                eprintln!("registration cache off on this machine ({why}): data checked only");
                false
            }
            None => panic!("a registered transfer opened no cache"),
        }
    }
}

/// `len` bytes of fresh anonymous memory, at `hint` where that is free.
fn map(len: usize, hint: usize) -> *mut u8 {
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    let flags = match hint {
        0 => flags,
        _ => flags | libc::MAP_FIXED_NOREPLACE,
    };
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: a new private mapping; nothing else is at the address (MAP_FIXED_NOREPLACE).
    let p = unsafe { libc::mmap(hint as *mut libc::c_void, len, prot, flags, -1, 0) };
    assert_ne!(p, libc::MAP_FAILED, "mmap");
    p.cast()
}

/// The `len` bytes at `p`, filled with `byte`.
fn filled<'m>(p: *mut u8, len: usize, byte: u8) -> &'m mut [u8] {
    // SAFETY: `p` is a mapping of at least `len` bytes made by `map`, not yet unmapped, and
    // each test drops the slice before it unmaps the memory.
    let s = unsafe { std::slice::from_raw_parts_mut(p, len) };
    s.fill(byte);
    s
}

#[test]
fn a_registration_serves_later_transfers() {
    let p = pair();
    let mut buf = vec![1u8; LEN];
    p.put(&buf);
    buf.fill(2);
    p.put(&buf);
    buf.fill(0);
    p.a.read(&mut buf, p.at, &|| Waiting::Poll).unwrap();
    assert!(buf.iter().all(|&b| b == 2), "the read brought the data");
    // A part of the buffer, small enough for the bounce buffer, goes in the registration too.
    p.put(&buf[100..4196]);
    if !p.watching() {
        return;
    }
    let r = p.a.registration_cache();
    assert_eq!(
        (r.misses, r.hits, r.entries, r.dropped),
        (1, 3, 1, 0),
        "{r:?}"
    );
}

#[test]
fn unmapped_memory_leaves_the_cache_before_munmap_returns() {
    let p = pair();
    let m = map(LEN, 0);
    p.put(filled(m, LEN, 3));
    p.put(filled(m, LEN, 4));
    // SAFETY: the mapping of `map`, no slice of it alive.
    assert_eq!(unsafe { libc::munmap(m.cast(), LEN) }, 0);
    if p.watching() {
        let r = p.a.registration_cache();
        assert_eq!(
            (r.misses, r.hits, r.entries, r.dropped),
            (1, 1, 0, 1),
            "{r:?}"
        );
    }
    // New memory at the same address is registered anew.
    let n = map(LEN, m as usize);
    assert_eq!(n, m, "the address is free again");
    p.put(filled(n, LEN, 5));
    if p.watching() {
        let r = p.a.registration_cache();
        assert_eq!((r.misses, r.hits, r.entries), (2, 1, 1), "{r:?}");
    }
    // SAFETY: as above.
    assert_eq!(unsafe { libc::munmap(n.cast(), LEN) }, 0);
}

#[test]
fn memory_given_back_or_moved_leaves_the_cache() {
    let p = pair();
    let m = map(LEN, 0);
    p.put(filled(m, LEN, 6));
    // SAFETY: the mapping of `map`, no slice of it alive; its pages read as zero afterwards.
    let given = unsafe { libc::madvise(m.cast(), 4096, libc::MADV_DONTNEED) };
    assert_eq!(given, 0);
    if p.watching() {
        assert_eq!(p.a.registration_cache().dropped, 1);
    }
    p.put(filled(m, LEN, 7));
    // SAFETY: as above; the mapping moves wherever the kernel puts it.
    let moved = unsafe { libc::mremap(m.cast(), LEN, 2 * LEN, libc::MREMAP_MAYMOVE) };
    assert_ne!(moved, libc::MAP_FAILED, "mremap");
    if p.watching() {
        let r = p.a.registration_cache();
        assert_eq!((r.misses, r.entries, r.dropped), (2, 0, 2), "{r:?}");
    }
    // SAFETY: the moved mapping, no slice of it alive.
    assert_eq!(unsafe { libc::munmap(moved, 2 * LEN) }, 0);
}

#[test]
fn the_cache_keeps_64_registrations() {
    let p = pair();
    let maps: Vec<*mut u8> = (0..65).map(|_| map(LEN, 0)).collect();
    for (i, &m) in maps.iter().enumerate() {
        p.put(filled(m, LEN, i as u8));
    }
    // The first went for the 65th; the second is still there.
    p.put(filled(maps[1], LEN, 1));
    p.put(filled(maps[0], LEN, 0));
    if p.watching() {
        let r = p.a.registration_cache();
        assert_eq!((r.misses, r.hits, r.entries), (66, 1, 64), "{r:?}");
    }
    for m in maps {
        // SAFETY: mappings of `map`, no slice of them alive.
        assert_eq!(unsafe { libc::munmap(m.cast(), LEN) }, 0);
    }
}
