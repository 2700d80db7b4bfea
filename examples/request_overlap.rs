//! Request-based RMA overlapping: rank 0 times one 8-byte `get` from rank 1 against `COUNT`
//! 8-byte `rget`s started together and completed with one `Request::wait_all`, and against one
//! `get_many` of the same `COUNT` words, checks the data, and prints the medians and ratios. Over the fabric the requests of each batch are
//! gathered into one read of the range they cover (`docs/transports.md`), so `COUNT` of them
//! cost less than two gets. Rank 1 waits in a fence meanwhile (polling the fabric, as an MPI
//! library's target does).
//!
//! Run: `onesided run -n 2 -- target/release/examples/request_overlap` (add
//! `ONESIDED_TRANSPORT=fabric` to go through libfabric).

use onesided::{Assert, Info, LockType, Request, Window, World};
use std::time::{Duration, Instant};

/// Requests started together.
const COUNT: usize = 64;
/// Timed iterations of each loop, after as many untimed ones.
const ITERS: usize = 2000;

fn median(mut t: Vec<Duration>) -> f64 {
    t.sort_unstable();
    t[t.len() / 2].as_secs_f64() * 1e6
}

fn main() -> onesided::Result<()> {
    let world = World::init()?;
    if world.size() != 2 {
        eprintln!("request_overlap runs on 2 ranks");
        std::process::exit(2);
    }
    let win = Window::allocate(&world, 8 * COUNT, 8, &Info::new())?;
    let words: Vec<u64> = (0..COUNT as u64).map(|i| 1000 + i).collect();
    win.write_local(0, &words)?;
    win.fence(Assert::NOPRECEDE)?;
    if world.rank() == 0 {
        win.lock(LockType::Shared, 1, Assert::NONE)?;
        let mut one = [0u64];
        let mut gets = Vec::with_capacity(ITERS);
        for i in 0..2 * ITERS {
            let t = Instant::now();
            win.get(&mut one, 1, 0)?;
            if i >= ITERS {
                gets.push(t.elapsed());
            }
        }
        let mut got = vec![0u64; COUNT];
        let mut batches = Vec::with_capacity(ITERS);
        for i in 0..2 * ITERS {
            got.fill(0);
            let t = Instant::now();
            let reqs = got
                .chunks_mut(1)
                .enumerate()
                .map(|(j, w)| win.rget(w, 1, j))
                .collect::<onesided::Result<Vec<_>>>()?;
            Request::wait_all(reqs)?;
            if i >= ITERS {
                batches.push(t.elapsed());
            }
            assert_eq!(got, words, "data read by the requests");
        }
        let mut many = Vec::with_capacity(ITERS);
        for i in 0..2 * ITERS {
            got.fill(0);
            let t = Instant::now();
            win.get_many(got.chunks_mut(1).enumerate().map(|(j, w)| (w, 1, j)))?;
            if i >= ITERS {
                many.push(t.elapsed());
            }
            assert_eq!(got, words, "data read by get_many");
        }
        win.unlock(1)?;
        let (get, batch, many) = (median(gets), median(batches), median(many));
        println!(
            "transport {}: get 8 B {get:.2} us; {COUNT} rgets of 8 B + wait_all {batch:.2} us \
             ({:.2}x one get); one get_many of {COUNT} {many:.2} us ({:.2}x)",
            win.transport_name(1)?,
            batch / get,
            many / get
        );
    }
    win.fence(Assert::NOSUCCEED)?;
    win.free()
}
