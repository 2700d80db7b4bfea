//! Noncontiguous transfers on every transport and flavor: columns (vectors), boxes (subarrays),
//! scattered blocks (indexed) and runs of 128 KiB land exactly where the target layout puts
//! them and nowhere else, gets scatter into the origin layout, accumulates count exactly, a
//! target that computes does not hold its origins up, and mismatched or out-of-range layouts
//! fail with their class before anything moves.
//!
//! # MPI-4.1: 12.3 (origin and target datatypes)

use crate::util::*;
use onesided::{Assert, ErrorClass, Flavor, Info, Layout, LockType, Op, World};
use std::time::Instant;

/// The grid every rank exposes: `ROWS` x `COLS` words in C order.
const ROWS: usize = 6;
const COLS: usize = 8;

/// The value rank `from` writes at element `i` of a layout.
fn tag(from: usize, i: usize) -> u64 {
    0xc0_0000 | (from as u64) << 8 | i as u64
}

fn layout(r: onesided::Result<Layout>) -> Result<Layout, String> {
    r.ctx("building a layout")
}

/// One side a single run: each rank puts every other element of a buffer into 6 consecutive
/// elements of its right neighbour, reads them back into every other element and straight into
/// a contiguous buffer, and the neighbour finds the left rank's elements in place.
pub fn single_runs(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let spread = layout(Layout::vector(6, 1, 2))?;
    let six = Layout::contiguous(6);
    with_window(world, flavor, 16 * 8, 8, &Info::new(), |win| {
        win.fence(Assert::NONE).ctx("fence")?;
        let src: Vec<u64> = (0..12).map(|i| tag(me, i)).collect();
        win.put_layout(&src, &spread, right, 10, &six)
            .ctx("put into one run")?;
        win.fence(Assert::NONE).ctx("fence")?;
        let mine = local_u64(win, 16)?;
        let want: Vec<u64> = (0..6).map(|i| tag(left, 2 * i)).collect();
        ensure_eq!(mine[10..16], want[..], "the run at rank {me}");
        ensure!(
            mine[..10].iter().all(|&v| v == 0),
            "before the run: {mine:?}"
        );
        let mut back = vec![0u64; 12];
        win.get_layout(&mut back, &spread, right, 10, &six)
            .ctx("get of one run into every other element")?;
        let mut straight = vec![0u64; 6];
        win.get_layout(&mut straight, &six, right, 10, &six)
            .ctx("get of one run into one run")?;
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        for (i, &v) in back.iter().enumerate() {
            let want = if i % 2 == 0 { tag(me, i) } else { 0 };
            ensure_eq!(v, want, "element {i} read back");
        }
        let sent: Vec<u64> = (0..6).map(|i| tag(me, 2 * i)).collect();
        ensure_eq!(straight, sent, "one run read into one run");
        Ok(())
    })
}

/// Elements of each run of [`large_runs`] (128 KiB of words, above the fabric's bounce buffer)
/// and the stride between runs.
const RUN: usize = 16_384;
const STRIDE: usize = 20_000;

/// Two runs of 128 KiB with a gap between them: each rank puts them into its right neighbour
/// from a contiguous buffer and reads them back into one; the neighbour finds the left rank's
/// elements in the runs and nothing in the gap.
pub fn large_runs(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let runs = layout(Layout::vector(2, RUN, STRIDE))?;
    let flat = Layout::contiguous(2 * RUN);
    with_window(world, flavor, 2 * STRIDE * 8, 8, &Info::new(), |win| {
        win.fence(Assert::NONE).ctx("fence")?;
        let src: Vec<u64> = (0..2 * RUN).map(|i| tag(me, i)).collect();
        win.put_layout(&src, &flat, right, 0, &runs)
            .ctx("put of two large runs")?;
        win.fence(Assert::NONE).ctx("fence")?;
        let mine = local_u64(win, 2 * STRIDE)?;
        for (i, &v) in mine.iter().enumerate() {
            let want = match (i / STRIDE, i % STRIDE) {
                (r, j) if j < RUN => tag(left, r * RUN + j),
                _ => 0,
            };
            ensure_eq!(v, want, "element {i} at rank {me}");
        }
        let mut back = vec![0u64; 2 * RUN];
        win.get_layout(&mut back, &flat, right, 0, &runs)
            .ctx("get of two large runs")?;
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        ensure!(back == src, "two large runs read back from rank {right}");
        Ok(())
    })
}

/// Each rank writes its right neighbour's column `me % COLS` from a contiguous buffer and a
/// 2 x 3 box at row 3, column 4 from every other element of a buffer; under the next fence it
/// reads its left neighbour's column back into every other element. Every rank adds 1 under
/// fence to three scattered blocks of rank 0 and reads them with get_accumulate(NO_OP).
pub fn layouts(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let column = layout(Layout::vector(ROWS, 1, COLS))?;
    let boxed = layout(Layout::subarray(&[ROWS, COLS], &[2, 3], &[3, 4]))?;
    let spread = layout(Layout::vector(6, 1, 2))?;
    let scattered = layout(Layout::indexed(&[(40, 1), (1, 2), (47, 1)]))?;
    with_window(world, flavor, ROWS * COLS * 8, 8, &Info::new(), |win| {
        win.fence(Assert::NONE).ctx("fence")?;
        let col: Vec<u64> = (0..ROWS).map(|i| tag(me, i)).collect();
        let c = me % COLS;
        win.put_layout(&col, &Layout::contiguous(ROWS), right, c, &column)
            .ctx("put of a column")?;
        let src: Vec<u64> = (0..12).map(|i| tag(me, 100 + i)).collect();
        win.put_layout(&src, &spread, right, 0, &boxed)
            .ctx("put of a box")?;
        win.fence(Assert::NONE).ctx("fence")?;
        let grid = local_u64(win, ROWS * COLS)?;
        let lc = left % COLS;
        for (k, &v) in grid.iter().enumerate() {
            let (r, c) = (k / COLS, k % COLS);
            let want = if c == lc {
                tag(left, r)
            } else if (3..5).contains(&r) && (4..7).contains(&c) {
                tag(left, 100 + 2 * ((r - 3) * 3 + (c - 4)))
            } else {
                0
            };
            ensure_eq!(v, want, "rank {me} element ({r}, {c})");
        }
        let mut back = vec![0u64; 2 * ROWS];
        win.get_layout(&mut back, &spread, right, c, &column)
            .ctx("get of a column")?;
        win.fence(Assert::NONE).ctx("fence")?;
        for (i, &v) in back.iter().enumerate() {
            let want = if i % 2 == 0 { tag(me, i / 2) } else { 0 };
            ensure_eq!(
                v,
                want,
                "element {i} of my column at rank {right}, read back"
            );
        }
        // Rank 0's grid now: the box and column are not in the scattered blocks for n <= 3.
        win.accumulate_layout(
            &[1u64; 4],
            &Layout::contiguous(4),
            0,
            0,
            &scattered,
            Op::Sum,
        )
        .ctx("accumulate_layout")?;
        win.fence(Assert::NONE).ctx("fence")?;
        let mut seen = [0u64; 4];
        win.get_accumulate_layout(
            &[0u64; 4],
            &Layout::contiguous(4),
            &mut seen,
            0,
            0,
            &scattered,
            Op::NoOp,
        )
        .ctx("get_accumulate_layout")?;
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        let base = |k: usize| -> u64 {
            // What the put of rank n - 1 left at rank 0's element k before the accumulates.
            let (r, c) = (k / COLS, k % COLS);
            let from = n - 1;
            if c == from % COLS { tag(from, r) } else { 0 }
        };
        let want: Vec<u64> = [40, 1, 2, 47].iter().map(|&k| base(k) + n as u64).collect();
        ensure_eq!(seen.to_vec(), want, "scattered counters at rank 0");
        Ok(())
    })
}

/// Rank 1 computes while rank 0 locks it, puts a column and reads it back strided, and
/// unlocks: rank 0 must not wait for the computation.
pub fn target_computes(world: &World, flavor: Flavor) -> Res {
    let me = world.rank();
    ensure!(world.size() == 2, "laid out for 2 ranks");
    let column = layout(Layout::vector(ROWS, 1, COLS))?;
    with_window(world, flavor, ROWS * COLS * 8, 8, &Info::new(), |win| {
        world.barrier().ctx("barrier")?;
        if me == 1 {
            compute_for(busy_for());
        } else {
            let start = Instant::now();
            win.lock(LockType::Exclusive, 1, Assert::NONE).ctx("lock")?;
            let col: Vec<u64> = (0..ROWS).map(|i| tag(0, i)).collect();
            win.put_layout(&col, &Layout::contiguous(ROWS), 1, 2, &column)
                .ctx("put_layout")?;
            win.flush(1).ctx("flush")?;
            let mut back = vec![0u64; ROWS];
            win.get_layout(&mut back, &Layout::contiguous(ROWS), 1, 2, &column)
                .ctx("get_layout")?;
            win.unlock(1).ctx("unlock")?;
            ensure_eq!(back, col, "column read back");
            not_held_up(start, "lock/put_layout/get_layout/unlock")?;
        }
        world.barrier().ctx("barrier")
    })
}

/// Layouts that move different counts (COUNT), reach past the origin buffer (COUNT) or past the
/// target's memory (RMA_RANGE, nothing written), and a malformed subarray (ARG); outside an
/// epoch, RMA_SYNC.
pub fn errors(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let other = (me + 1) % n;
    let column = layout(Layout::vector(ROWS, 1, COLS))?;
    let six = Layout::contiguous(ROWS);
    with_window(world, flavor, ROWS * COLS * 8, 8, &Info::new(), |win| {
        let ones = [1u64; ROWS];
        expect_class(
            win.put_layout(&ones, &six, other, 0, &column),
            ErrorClass::RmaSync,
            "put_layout outside an epoch",
        )?;
        win.fence(Assert::NONE).ctx("fence")?;
        expect_class(
            win.put_layout(&ones, &Layout::contiguous(5), other, 0, &column),
            ErrorClass::Count,
            "layouts of 5 and 6 elements",
        )?;
        expect_class(
            win.put_layout(&ones[..5], &six, other, 0, &column),
            ErrorClass::Count,
            "origin layout past the buffer",
        )?;
        // The column from element COLS reaches one row past the grid.
        expect_class(
            win.put_layout(&ones, &six, other, COLS, &column),
            ErrorClass::RmaRange,
            "target layout past the window",
        )?;
        let mut back = [0u64; ROWS];
        expect_class(
            win.get_layout(
                &mut back,
                &six,
                other,
                3,
                &Layout::vector(ROWS, 1, COLS + 1).ctx("vector")?,
            ),
            ErrorClass::RmaRange,
            "get_layout past the window",
        )?;
        expect_class(
            win.accumulate_layout(&ones, &six, other, 0, &column, Op::NoOp),
            ErrorClass::Op,
            "accumulate_layout with NO_OP",
        )?;
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        ensure_eq!(
            local_u64(win, ROWS * COLS)?,
            vec![0u64; ROWS * COLS],
            "memory after refused calls"
        );
        expect_class(
            Layout::subarray(&[ROWS, COLS], &[2, 3], &[5, 0]),
            ErrorClass::Arg,
            "subarray leaving the array",
        )
    })
}
