//! In-process microbenchmarks of the user-visible costs of a window, on a world of one rank (no
//! process manager: `World::init` makes a singleton) whose window is reached over shared
//! memory, target = the rank itself. Every call runs the real path: argument and epoch checks,
//! the lock word's atomics, the shared-memory transport's copies and CPU atomics.
//!
//! - `sync/*`: lock/unlock (exclusive and shared) on self, lock_all/unlock_all, flush, fence:
//!   the lock word and the epoch state machine;
//! - `rma/*`: put and get of 8 B, 4 KiB and 64 KiB inside a lock_all epoch;
//! - `atomic/*`: compare_and_swap, fetch_and_op and accumulate on one element.
//!
//! `shm/benches/mem.rs` measures the raw segment copies and atomics beneath them, with the memcpy
//! floor. Run: `cargo bench -p onesided --bench window`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use onesided::{Assert, Info, LockType, Op, Window, World};
use std::hint::black_box;

/// The transfer sizes of `rma/*`, in bytes.
const SIZES: [usize; 3] = [8, 4096, 65536];

fn window(c: &mut Criterion) {
    let world = World::init().expect("a world of one rank");
    assert_eq!(
        world.size(),
        1,
        "run outside any launcher: a world of one rank"
    );
    let win = Window::allocate(&world, SIZES[2], 1, &Info::new()).expect("a window");
    assert_eq!(win.transport_name(0).expect("a route to self"), "shm");
    sync(c, &win);
    win.lock_all(Assert::NONE).expect("lock_all");
    rma(c, &win);
    atomic(c, &win);
    win.unlock_all().expect("unlock_all");
    win.free().expect("free");
}

fn sync(c: &mut Criterion, win: &Window<'_>) {
    let mut g = c.benchmark_group("sync");
    for (name, kind) in [
        ("lock_unlock_exclusive", LockType::Exclusive),
        ("lock_unlock_shared", LockType::Shared),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                win.lock(kind, 0, Assert::NONE).expect("lock");
                win.unlock(0).expect("unlock");
            })
        });
    }
    g.bench_function("lock_all_unlock_all", |b| {
        b.iter(|| {
            win.lock_all(Assert::NONE).expect("lock_all");
            win.unlock_all().expect("unlock_all");
        })
    });
    win.lock_all(Assert::NONE).expect("lock_all");
    g.bench_function("flush", |b| b.iter(|| win.flush(0).expect("flush")));
    win.unlock_all().expect("unlock_all");
    win.fence(Assert::NOPRECEDE).expect("fence");
    g.bench_function("fence", |b| {
        b.iter(|| win.fence(Assert::NONE).expect("fence"))
    });
    win.fence(Assert::NOSUCCEED).expect("fence");
    g.finish();
}

fn rma(c: &mut Criterion, win: &Window<'_>) {
    let mut g = c.benchmark_group("rma");
    for size in SIZES {
        let mut buf = vec![1u8; size];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(format!("put/{size}"), |b| {
            b.iter(|| win.put(black_box(&buf[..]), 0, 0).expect("put"))
        });
        g.bench_function(format!("get/{size}"), |b| {
            b.iter(|| win.get(black_box(&mut buf[..]), 0, 0).expect("get"))
        });
    }
    g.finish();
}

fn atomic(c: &mut Criterion, win: &Window<'_>) {
    let mut g = c.benchmark_group("atomic");
    g.bench_function("compare_and_swap_u64", |b| {
        let mut cur = win.fetch_and_op(0u64, 0, 0, Op::NoOp).expect("read");
        b.iter(|| {
            let next = cur.wrapping_add(1);
            let old = win
                .compare_and_swap(next, black_box(cur), 0, 0)
                .expect("compare_and_swap");
            assert_eq!(old, cur, "every swap succeeds");
            cur = next;
        })
    });
    g.bench_function("fetch_and_op_sum_u64", |b| {
        b.iter(|| {
            win.fetch_and_op(black_box(1u64), 0, 8, Op::Sum)
                .expect("fetch_and_op")
        })
    });
    g.bench_function("accumulate_sum_u64", |b| {
        b.iter(|| {
            win.accumulate(black_box(&[1u64]), 0, 16, Op::Sum)
                .expect("accumulate")
        })
    });
    g.bench_function("accumulate_sum_f64", |b| {
        b.iter(|| {
            win.accumulate(black_box(&[1.0f64]), 0, 24, Op::Sum)
                .expect("accumulate")
        })
    });
    g.finish();
}

criterion_group!(benches, window);
criterion_main!(benches);
