//! Batches of puts and gets (`put_many`, `get_many`) on every transport: small, medium and large
//! transfers of one call, to one neighbour or to both, land where they should and read back;
//! one refused transfer refuses the call before anything moves.
//!
//! # MPI-4.1: 12.3.1, 12.3.2, 12.5.4

use crate::util::*;
use onesided::{Assert, ErrorClass, Flavor, Info, Window, World};

/// Words written one by one into the front of each window (injected over the fabric).
const WORDS: usize = 32;
/// Bytes of each of the two large transfers (above every provider's inject size and the
/// fabric's bounce buffer).
const BIG: usize = 300_000;
/// Bytes of the medium transfers (above the inject sizes, inside the bounce buffer).
const MEDIUM: usize = 20_000;

/// Where the parts of one rank's batch go in a window: the words, two medium blocks, two large
/// blocks, back to back.
fn layout() -> Vec<(usize, usize)> {
    let mut parts: Vec<(usize, usize)> = (0..WORDS).map(|i| (8 * i, 8)).collect();
    let mut at = 8 * WORDS;
    for len in [MEDIUM, MEDIUM, BIG, BIG] {
        parts.push((at, len));
        at += len;
    }
    parts
}

fn window_bytes() -> usize {
    layout()
        .iter()
        .map(|&(at, len)| at + len)
        .max()
        .unwrap_or(0)
}

/// The byte `writer` puts at `at` of its target's window.
fn byte(writer: usize, at: usize) -> u8 {
    (writer * 37 + at % 253) as u8
}

/// Every rank writes its whole layout into its right neighbour with one `put_many` (one buffer
/// per part), then, after a flush and a barrier, reads what its left neighbour received with
/// one `get_many`, and on 3 ranks or more reads its own window's two neighbours in one call.
pub fn transfers(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let parts = layout();
    with_window(world, flavor, window_bytes(), 1, &Info::new(), |win| {
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        let sources: Vec<Vec<u8>> = parts
            .iter()
            .map(|&(at, len)| (at..at + len).map(|b| byte(me, b)).collect())
            .collect();
        let puts = sources
            .iter()
            .zip(&parts)
            .map(|(src, &(at, _))| (&src[..], right, at));
        win.put_many(puts).ctx("put_many")?;
        win.flush_all().ctx("flush_all")?;
        world.barrier().ctx("barrier")?;

        // What the left neighbour holds was written by its own left neighbour.
        let writer = (left + n - 1) % n;
        let mut back: Vec<Vec<u8>> = parts.iter().map(|&(_, len)| vec![0u8; len]).collect();
        let gets = back
            .iter_mut()
            .zip(&parts)
            .map(|(dst, &(at, _))| (&mut dst[..], left, at));
        win.get_many(gets).ctx("get_many")?;
        for (got, &(at, len)) in back.iter().zip(&parts) {
            let want: Vec<u8> = (at..at + len).map(|b| byte(writer, b)).collect();
            ensure!(
                *got == want,
                "{len} bytes at {at} of rank {left}, written by rank {writer}"
            );
        }
        if n >= 3 {
            both_neighbours(win, me, left, right)?;
        }
        win.unlock_all().ctx("unlock_all")?;
        world.barrier().ctx("barrier")?;
        Ok(())
    })
}

/// One `get_many` whose large blocks come from two targets: each holds what its own left
/// neighbour wrote.
fn both_neighbours(win: &Window<'_>, me: usize, left: usize, right: usize) -> Res {
    let n = win.size_of_group();
    let at = 8 * WORDS + 2 * MEDIUM;
    let (mut from_left, mut from_right) = (vec![0u8; BIG], vec![0u8; BIG]);
    win.get_many([
        (&mut from_left[..], left, at),
        (&mut from_right[..], right, at),
    ])
    .ctx("get_many of two targets")?;
    for (got, target) in [(&from_left, left), (&from_right, right)] {
        let writer = (target + n - 1) % n;
        let want: Vec<u8> = (at..at + BIG).map(|b| byte(writer, b)).collect();
        ensure!(
            *got == want,
            "rank {me}: the large block of rank {target}, written by rank {writer}"
        );
    }
    Ok(())
}

/// A batch with one transfer out of range fails with MPI_ERR_RMA_RANGE and moves nothing: the
/// target's memory and the other buffers keep their values. A batch outside an epoch fails with
/// MPI_ERR_RMA_SYNC; an empty batch does nothing.
pub fn errors(world: &World, flavor: Flavor) -> Res {
    let me = world.rank();
    let bytes = 4 * BIG;
    with_window(world, flavor, bytes, 1, &Info::new(), |win| {
        world.barrier().ctx("barrier")?;
        if me == 0 {
            let big = vec![0xabu8; BIG];
            let word = [0xcdu8; 8];
            expect_class(
                win.put_many([(&big[..], 1, 0), (&word[..], 1, bytes - 4)]),
                ErrorClass::RmaSync,
                "put_many outside an epoch",
            )?;
            win.lock_all(Assert::NONE).ctx("lock_all")?;
            expect_class(
                win.put_many([(&big[..], 1, 0), (&word[..], 1, bytes - 4)]),
                ErrorClass::RmaRange,
                "put_many with its second transfer past the end",
            )?;
            let mut sentinel = vec![0x11u8; BIG];
            let mut tail = [0x22u8; 8];
            expect_class(
                win.get_many([(&mut sentinel[..], 1, 0), (&mut tail[..], 1, bytes)]),
                ErrorClass::RmaRange,
                "get_many with its second transfer past the end",
            )?;
            ensure!(
                sentinel.iter().all(|&b| b == 0x11) && tail == [0x22; 8],
                "a refused get_many left the origin buffers as they were"
            );
            win.put_many(std::iter::empty::<(&[u8], usize, usize)>())
                .ctx("empty put_many")?;
            win.get_many(std::iter::empty::<(&mut [u8], usize, usize)>())
                .ctx("empty get_many")?;
            win.get_many([(&mut sentinel[..], 1, 0)])
                .ctx("get_many of the target's memory")?;
            ensure!(
                sentinel.iter().all(|&b| b == 0),
                "a refused put_many moved nothing: the target's memory is still zero"
            );
            win.unlock_all().ctx("unlock_all")?;
        }
        world.barrier().ctx("barrier")?;
        Ok(())
    })
}
