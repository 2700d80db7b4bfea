//! Request-based RMA overlapping: rank 0 times one 8-byte `get` from rank 1 against `COUNT`
//! 8-byte `rget`s started together and completed with one `Request::wait_all`, and against one
//! `get_many` of the same `COUNT` words, checks the data, and prints the medians and ratios.
//! Over the fabric the requests of each batch are gathered into one read of the range they
//! cover (`docs/transports.md`), so `COUNT` of them cost less than two gets. Rank 1 waits in a
//! fence meanwhile (polling the fabric, as an MPI library's target does). Then the same requests
//! are awaited as futures on `futures`' executor: one `rget`, against one `rget` + `wait`, and
//! `COUNT` joined (`join_all`), against `wait_all`; that line comes before the last.
//!
//! Run: `onesided run -n 2 -- target/release/examples/request_overlap` (add
//! `ONESIDED_TRANSPORT=fabric` to go through libfabric).

use futures::executor::block_on;
use futures::future::join_all;
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

/// An 8-byte `rget` of rank 1's word `j` into each word `j` of `got`.
fn rgets<'s>(win: &'s Window<'_>, got: &'s mut [u64]) -> onesided::Result<Vec<Request<'s>>> {
    got.chunks_mut(1)
        .enumerate()
        .map(|(j, w)| win.rget(w, 1, j))
        .collect()
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
            let reqs = rgets(&win, &mut got)?;
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
        // The same requests awaited as futures: one, and COUNT joined.
        let mut waited_one = Vec::with_capacity(ITERS);
        let mut awaited_one = Vec::with_capacity(ITERS);
        let mut joined = Vec::with_capacity(ITERS);
        for i in 0..2 * ITERS {
            let t = Instant::now();
            win.rget(&mut one, 1, 0)?.wait()?;
            if i >= ITERS {
                waited_one.push(t.elapsed());
            }
            let t = Instant::now();
            block_on(win.rget(&mut one, 1, 0)?)?;
            if i >= ITERS {
                awaited_one.push(t.elapsed());
            }
            got.fill(0);
            let t = Instant::now();
            let reqs = rgets(&win, &mut got)?;
            block_on(join_all(reqs))
                .into_iter()
                .collect::<onesided::Result<()>>()?;
            if i >= ITERS {
                joined.push(t.elapsed());
            }
            assert_eq!(got, words, "data read by the awaited requests");
        }
        win.unlock(1)?;
        let (get, batch, many) = (median(gets), median(batches), median(many));
        let (waited, one, joined) = (median(waited_one), median(awaited_one), median(joined));
        println!(
            "awaited: one rget {one:.2} us ({:.2}x one rget + wait, {waited:.2} us); {COUNT} rgets \
             joined {joined:.2} us ({:.2}x wait_all)",
            one / waited,
            joined / batch
        );
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
