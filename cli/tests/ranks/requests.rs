//! Request-based RMA (rput, rget, raccumulate, rget_accumulate) on every transport: many
//! requests in flight at once land where they should, a buffer is reused after `wait`, a request
//! dropped before completion completes (its buffer holds the data afterwards), `test` and
//! `wait_any` hand out each request once, counts are exact, requests awaited as futures
//! complete (the executor's thread parked until woken), and the misuse MPI names fails with its
//! class.
//!
//! # MPI-4.1: 12.3.5

use crate::util::*;
use onesided::{Assert, ErrorClass, Flavor, Info, LockType, Op, Request, Window, World};

/// Requests of 8 bytes in flight at once.
const MANY: usize = 64;
/// Bytes of the large transfer (above every provider's inject size and the bounce buffer).
const BIG: usize = 300_000;
/// Bytes of the large request awaited as a future: long enough over the fabric (milliseconds
/// over tcp) that the future stops polling and its task is woken by the progress thread.
const AWAITED: usize = 8 << 20;

/// An rput of each of `words` to its own 8 bytes of `target`'s window, from displacement 0 on,
/// and one of `block` right after them.
fn rputs<'s>(
    win: &'s Window<'_>,
    words: &'s [u64],
    block: &'s [u8],
    target: usize,
) -> Result<Vec<Request<'s>>, String> {
    let mut puts = Vec::with_capacity(words.len() + 1);
    for (i, w) in words.iter().enumerate() {
        puts.push(
            win.rput(std::slice::from_ref(w), target, 8 * i)
                .ctx("rput")?,
        );
    }
    puts.push(win.rput(block, target, 8 * words.len()).ctx("rput large")?);
    Ok(puts)
}

/// Every rank writes MANY tagged words into its right neighbour's window with rput (each
/// request waited for only at the end, with wait_all), and one large block; after a flush and a
/// barrier it reads back with rget what its left neighbour received (some tested, some waited for
/// with wait_any, one dropped unfinished), and checks every value.
pub fn overlap(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    // The left neighbour's window holds what its own left neighbour wrote.
    let writer = (left + n - 1) % n;
    let big_at = 8 * MANY;
    let byte = |writer: usize, i: usize| (writer * 31 + i % 251) as u8;
    with_window(world, flavor, big_at + BIG, 1, &Info::new(), |win| {
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        let words: Vec<u64> = (0..MANY).map(|i| tag(me, right, i)).collect();
        let block: Vec<u8> = (0..BIG).map(|i| byte(me, i)).collect();
        Request::wait_all(rputs(win, &words, &block, right)?).ctx("wait_all")?;
        // A buffer reused after its request completed: the second value is the one that lands.
        let mut reused = [0u64];
        reused[0] = 1;
        win.rput(&reused, right, 0)
            .ctx("rput first")?
            .wait()
            .ctx("wait")?;
        reused[0] = tag(me, right, 0);
        win.rput(&reused, right, 0)
            .ctx("rput again")?
            .wait()
            .ctx("wait")?;
        win.flush_all().ctx("flush_all")?;
        world.barrier().ctx("barrier")?;

        let mut got = vec![0u64; MANY];
        let mut reqs: Vec<Request<'_>> = Vec::with_capacity(MANY);
        for (i, slot) in got.chunks_mut(1).enumerate() {
            reqs.push(win.rget(slot, left, 8 * i).ctx("rget")?);
        }
        let mut handed = [false; MANY];
        if let Some(first) = reqs.first_mut() {
            while !first.test().ctx("test")? {}
            ensure!(
                first.test().ctx("test again")?,
                "a complete request stays complete"
            );
            handed[0] = true;
        }
        while let Some(i) = Request::wait_any(&mut reqs).ctx("wait_any")? {
            ensure!(!handed[i], "wait_any handed out request {i} twice");
            handed[i] = true;
        }
        ensure!(handed.iter().all(|&h| h), "every request completed once");
        drop(reqs);
        let want: Vec<u64> = (0..MANY).map(|i| tag(writer, left, i)).collect();
        ensure_eq!(got, want, "words read back with rget");

        let mut large = vec![0u8; BIG];
        drop(win.rget(&mut large, left, big_at).ctx("rget large")?);
        ensure!(
            large.iter().enumerate().all(|(i, &b)| b == byte(writer, i)),
            "a dropped rget completed: its buffer holds the block"
        );
        win.unlock_all().ctx("unlock_all")?;
        world.barrier().ctx("barrier")?;
        Ok(())
    })
}

/// Requests as futures, on `futures`' executor, which parks the thread until the task is woken
/// (over the fabric by the endpoint's progress thread): every rank writes MANY tagged words to
/// its right neighbour with rputs joined in one future, then after a flush and a barrier reads
/// back what its left neighbour received with MANY rgets joined, and one large rget awaited on
/// its own (8 MiB: over the fabric it outlasts the task's own polls, and the progress thread
/// wakes the task) and polled again once complete. Values and outcomes are checked.
pub fn awaited(world: &World, flavor: Flavor) -> Res {
    use futures::executor::block_on;
    use futures::future::join_all;
    let (me, n) = (world.rank(), world.size());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let writer = (left + n - 1) % n;
    let big_at = 8 * MANY;
    let byte = |writer: usize, i: usize| (writer * 17 + i % 241) as u8;
    with_window(world, flavor, big_at + AWAITED, 1, &Info::new(), |win| {
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        let words: Vec<u64> = (0..MANY).map(|i| tag(me, right, i)).collect();
        let block: Vec<u8> = (0..AWAITED).map(|i| byte(me, i)).collect();
        let puts = rputs(win, &words, &block, right)?;
        for (i, done) in block_on(join_all(puts)).into_iter().enumerate() {
            done.ctx(&format!("awaited rput {i}"))?;
        }
        win.flush_all().ctx("flush_all")?;
        world.barrier().ctx("barrier")?;

        let mut got = vec![0u64; MANY];
        let mut reqs = Vec::with_capacity(MANY);
        for (i, slot) in got.chunks_mut(1).enumerate() {
            reqs.push(win.rget(slot, left, 8 * i).ctx("rget")?);
        }
        for (i, done) in block_on(join_all(reqs)).into_iter().enumerate() {
            done.ctx(&format!("awaited rget {i}"))?;
        }
        let want: Vec<u64> = (0..MANY).map(|i| tag(writer, left, i)).collect();
        ensure_eq!(got, want, "words read back with awaited rgets");

        let mut large = vec![0u8; AWAITED];
        let mut req = win.rget(&mut large, left, big_at).ctx("rget large")?;
        block_on(&mut req).ctx("awaited large rget")?;
        ensure!(req.is_complete(), "an awaited request is complete");
        block_on(&mut req).ctx("a complete request awaited again")?;
        drop(req);
        ensure!(
            large.iter().enumerate().all(|(i, &b)| b == byte(writer, i)),
            "the block read by an awaited rget"
        );
        win.unlock_all().ctx("unlock_all")?;
        world.barrier().ctx("barrier")?;
        Ok(())
    })
}

/// Elements per raccumulate.
const LEN: usize = 1024;

/// Every rank raccumulates ROUNDS vectors of ones into rank 0 (f64 and i64, requests in flight
/// together), then rget_accumulate with MPI_NO_OP reads the sums: exact counts. An exclusive
/// lock then carries an rget_accumulate whose fetched values are the sums before it.
pub fn accumulate(world: &World, flavor: Flavor) -> Res {
    const ROUNDS: usize = 4;
    let n = world.size();
    let ones_f = vec![1f64; LEN];
    let ones_i: Vec<i64> = (0..LEN as i64).collect();
    with_window(world, flavor, 16 * LEN, 8, &Info::new(), |win| {
        world.barrier().ctx("barrier")?;
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        let mut reqs = Vec::new();
        for _ in 0..ROUNDS {
            reqs.push(
                win.raccumulate(&ones_f, 0, 0, Op::Sum)
                    .ctx("raccumulate f64")?,
            );
            reqs.push(
                win.raccumulate(&ones_i, 0, LEN, Op::Sum)
                    .ctx("raccumulate i64")?,
            );
        }
        Request::wait_all(reqs).ctx("wait_all")?;
        win.unlock_all().ctx("unlock_all")?;
        world.barrier().ctx("barrier")?;

        let total = (ROUNDS * n) as f64;
        let mut sums_f = vec![0f64; LEN];
        let mut sums_i = vec![0i64; LEN];
        win.lock(LockType::Shared, 0, Assert::NONE).ctx("lock")?;
        let a = win
            .rget_accumulate(&ones_f, &mut sums_f, 0, 0, Op::NoOp)
            .ctx("rget_accumulate f64")?;
        let b = win
            .rget_accumulate(&ones_i, &mut sums_i, 0, LEN, Op::NoOp)
            .ctx("rget_accumulate i64")?;
        Request::wait_all([a, b]).ctx("wait_all")?;
        win.unlock(0).ctx("unlock")?;
        ensure!(
            sums_f.iter().all(|&s| s == total),
            "f64 sums: {:?}",
            &sums_f[..4]
        );
        let want_i: Vec<i64> = (0..LEN as i64).map(|i| i * total as i64).collect();
        ensure_eq!(sums_i, want_i, "i64 sums");
        world.barrier().ctx("barrier")?;

        // One rank at a time adds 1 under an exclusive lock and sees the previous sums.
        let mut before = vec![0i64; LEN];
        win.lock(LockType::Exclusive, 0, Assert::NONE).ctx("lock")?;
        win.rget_accumulate(&vec![1i64; LEN], &mut before, 0, LEN, Op::Sum)
            .ctx("rget_accumulate sum")?
            .wait()
            .ctx("wait")?;
        win.unlock(0).ctx("unlock")?;
        let turn = before[0];
        ensure!(
            (0..n as i64).contains(&turn),
            "element 0 before this rank's turn: {turn}"
        );
        let want: Vec<i64> = (0..LEN as i64).map(|i| i * total as i64 + turn).collect();
        ensure_eq!(before, want, "previous values, all from one turn");
        world.barrier().ctx("barrier")?;
        Ok(())
    })
}

/// Misuse: request-based calls outside a passive-target epoch (none, and a fence epoch) are
/// RMA_SYNC; past the window's end RMA_RANGE; a result buffer of another length COUNT; MPI_NO_OP
/// for raccumulate OP. None moves data, and the window stays usable.
pub fn errors(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let right = (me + 1) % n;
    with_window(world, flavor, 64, 8, &Info::new(), |win| {
        let w = [tag(me, right, 1)];
        expect_class(
            win.rput(&w, right, 0),
            ErrorClass::RmaSync,
            "rput, no epoch",
        )?;
        win.fence(Assert::NOPRECEDE).ctx("fence")?;
        expect_class(
            win.rput(&w, right, 0),
            ErrorClass::RmaSync,
            "rput in a fence epoch",
        )?;
        let mut r = [0u64];
        expect_class(
            win.rget(&mut r, right, 0),
            ErrorClass::RmaSync,
            "rget in a fence epoch",
        )?;
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        expect_class(
            win.rput(&w, right, 8),
            ErrorClass::RmaRange,
            "rput past the end",
        )?;
        expect_class(win.rget(&mut r, n, 0), ErrorClass::Rank, "rget of rank n")?;
        let mut short = [0u64; 1];
        expect_class(
            win.rget_accumulate(&[1u64, 2], &mut short, right, 0, Op::Sum),
            ErrorClass::Count,
            "rget_accumulate, short result",
        )?;
        expect_class(
            win.raccumulate(&[1u64], right, 0, Op::NoOp),
            ErrorClass::Op,
            "raccumulate MPI_NO_OP",
        )?;
        win.rput(&w, right, 0).ctx("rput")?.wait().ctx("wait")?;
        win.unlock_all().ctx("unlock_all")?;
        world.barrier().ctx("barrier")?;
        ensure_eq!(
            local_u64(win, 1)?,
            vec![tag((me + n - 1) % n, me, 1)],
            "the one rput"
        );
        Ok(())
    })
}

/// Words of the window `gathered` reads from.
const WORDS: usize = 4096;

/// Many small rgets in a row, as a fabric endpoint gathers them into one read while the target
/// has operations in flight: offsets in descending order and overlapping, reads too large to
/// gather, reads too far apart for one batch, two targets in turn, rputs in between, one request
/// tested until complete and one dropped unfinished; every word read is the target's own.
pub fn gathered(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let own: Vec<u64> = (0..WORDS).map(|i| tag(me, me, i)).collect();
    with_window(world, flavor, 8 * WORDS, 8, &Info::new(), |win| {
        win.write_local(0, &own).ctx("write_local")?;
        win.fence(Assert::NOPRECEDE).ctx("fence")?;
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        // (target, first word, words): the order the requests are started in.
        let mut reads: Vec<(usize, usize, usize)> = (0..40).map(|i| (left, 200 - i, 1)).collect();
        reads.extend([
            (left, 180, 2),
            (left, 150, 40),
            (left, 170, 32),
            (left, 2000, 1),
        ]);
        reads.extend([(left, 2, 3), (left, 2001, 1)]);
        reads.extend((0..12).map(|i| ([left, right][i % 2], 300 + i, 1)));
        reads.extend((0..20).map(|i| (right, 600 + 3 * i, 1)));
        let mut bufs: Vec<Vec<u64>> = reads.iter().map(|&(_, _, k)| vec![0; k]).collect();
        let (tested, dropped) = (45, 30);
        let mut reqs = Vec::new();
        let mut test_me = None;
        for (i, (buf, &(t, at, _))) in bufs.iter_mut().zip(&reads).enumerate() {
            let r = win.rget(buf, t, at).ctx("rget")?;
            match i {
                _ if i == dropped => drop(r),
                _ if i == tested => test_me = Some(r),
                _ => reqs.push(r),
            }
            if i % 25 == 0 {
                let w = [tag(me, right, i)];
                win.rput(&w, right, WORDS - 1 - i / 25)
                    .ctx("rput")?
                    .wait()
                    .ctx("rput wait")?;
            }
        }
        if let Some(mut r) = test_me.take() {
            while !r.test().ctx("test")? {}
        }
        drop(test_me);
        Request::wait_all(reqs).ctx("wait_all")?;
        for (buf, &(t, at, k)) in bufs.iter().zip(&reads) {
            let want: Vec<u64> = (at..at + k).map(|i| tag(t, t, i)).collect();
            ensure_eq!(*buf, want, "{k} words at {at} of rank {t}");
        }
        win.unlock_all().ctx("unlock_all")?;
        world.barrier().ctx("barrier")?;
        let rput: Vec<u64> = (0..reads.len().div_ceil(25))
            .map(|j| tag(left, me, 25 * j))
            .collect();
        let tail = local_u64(win, WORDS)?;
        let got: Vec<u64> = (0..rput.len()).map(|j| tail[WORDS - 1 - j]).collect();
        ensure_eq!(got, rput, "the rputs between the rgets");
        Ok(())
    })
}
