//! Microbenchmarks of the raw shared-memory primitives beneath onesided's shm transport: copies
//! into and out of a mapped segment through [`Mem`], and 64-bit atomics on one of its words,
//! beside the floor of a plain memcpy between two heap buffers of the same sizes.
//!
//! - `copy/memcpy/N`: `copy_from_slice` from a private buffer into a page-aligned one (the
//!   floor);
//! - `copy/write/N`, `copy/read/N`: [`Mem::write`] / [`Mem::read`] on a segment (a range check
//!   and a copy);
//! - `atomic/*`: fetch_add, compare_exchange and load on a word of a segment, and
//!   `checked_fetch_add`, which looks the word up through [`Mem::atomic_u64`] (range and
//!   alignment checks) each time, as the transport does.
//!
//! Compare with `benches/window.rs` of the onesided crate, which measures the same operations
//! through a window. Run: `cargo bench -p onesided-shm --bench mem`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use onesided_shm::{Mem, Segment};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The transfer sizes, in bytes: those of the window benchmark's `rma/*`.
const SIZES: [usize; 3] = [8, 4096, 65536];

/// A fresh segment of `len` bytes, already unlinked: nothing is left in /dev/shm.
fn segment(len: usize) -> Mem<'static> {
    let name = format!("onesided-bench-mem-{}", std::process::id());
    let seg = Segment::create(&name, len, 4096).expect("a shared-memory segment");
    Segment::unlink(&name).expect("unlink");
    Mem::from_segment(Arc::new(seg))
}

/// A private buffer that starts on a page, as a segment does, so that the floor copies between
/// the same alignments as [`Mem::write`] (memcpy's speed depends on them).
#[repr(C, align(4096))]
struct Page([u8; SIZES[2]]);

fn copy(c: &mut Criterion) {
    let mem = segment(SIZES[2]);
    let mut page = Box::new(Page([0; SIZES[2]]));
    let mut g = c.benchmark_group("copy");
    for size in SIZES {
        let src = vec![1u8; size];
        let mut dst = vec![0u8; size];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(format!("memcpy/{size}"), |b| {
            b.iter(|| black_box(&mut page.0[..size]).copy_from_slice(black_box(&src[..])))
        });
        g.bench_function(format!("write/{size}"), |b| {
            b.iter(|| mem.write(0, black_box(&src[..])).expect("write"))
        });
        g.bench_function(format!("read/{size}"), |b| {
            b.iter(|| mem.read(0, black_box(&mut dst[..])).expect("read"))
        });
    }
    g.finish();
}

fn atomic(c: &mut Criterion) {
    let mem = segment(4096);
    let word = mem.atomic_u64(0).expect("an aligned word");
    let mut g = c.benchmark_group("atomic");
    g.bench_function("fetch_add", |b| {
        b.iter(|| word.fetch_add(black_box(1), Ordering::SeqCst))
    });
    g.bench_function("compare_exchange", |b| {
        let mut cur = word.load(Ordering::SeqCst);
        b.iter(|| {
            let next = cur.wrapping_add(1);
            let old = word
                .compare_exchange(black_box(cur), next, Ordering::SeqCst, Ordering::SeqCst)
                .unwrap_or_else(|old| old);
            assert_eq!(old, cur, "every exchange succeeds");
            cur = next;
        })
    });
    g.bench_function("load", |b| b.iter(|| word.load(Ordering::SeqCst)));
    g.bench_function("checked_fetch_add", |b| {
        b.iter(|| {
            mem.atomic_u64(black_box(0))
                .expect("an aligned word")
                .fetch_add(1, Ordering::SeqCst)
        })
    });
    g.finish();
}

criterion_group!(benches, copy, atomic);
criterion_main!(benches);
