//! Typed windows on every transport: displacements and lengths count elements (element `i` of
//! an f64 window is bytes 8i..8i+8 of the target's memory), the RMA calls take `&[T]`, a range
//! past a target's last element is MPI_ERR_RMA_RANGE and writes nothing, and ranks that create
//! one window with different element types all get MPI_ERR_DISP, after which windows work.
//!
//! # MPI-4.1: 12.2.1-12.2.3 (the displacement unit)

use crate::util::*;
use onesided::{Assert, ErrorClass, Flavor, Info, Op, TypedWindow, World};

/// Elements on rank `r`: ranks hold different counts, so a length mixed up between ranks shows.
fn count(r: usize) -> usize {
    8 + r
}

/// Every constructor of a typed f64 window (allocate, allocate_shared, create), then a u64
/// window for the integer atomics: lengths in elements, puts at an element index land at that
/// element (and nowhere else), gets and rgets read elements, fetch_and_op and compare_and_swap
/// address elements, and ranges past a target's last element fail.
pub fn elements(world: &World, _: Flavor) -> Res {
    let me = world.rank();
    let info = Info::new();
    let win = TypedWindow::<f64>::allocate(world, count(me), &info).ctx("allocate")?;
    floats(world, &win).map_err(|e| format!("allocate: {e}"))?;
    win.free().ctx("free")?;
    let win =
        TypedWindow::<f64>::allocate_shared(world, count(me), &info).ctx("allocate_shared")?;
    floats(world, &win).map_err(|e| format!("allocate_shared: {e}"))?;
    win.free().ctx("free")?;
    let mut lent = vec![0f64; count(me)];
    TypedWindow::create(world, &mut lent, &info, |win| floats(world, win))
        .ctx("create")?
        .map_err(|e| format!("create: {e}"))?;

    let win = TypedWindow::<u64>::allocate(world, count(me), &info).ctx("allocate u64")?;
    win.lock_all(Assert::NONE).ctx("lock_all")?;
    // Every rank adds 1 to element 5 of rank 0, then claims element 6 of rank 0 with a CAS.
    win.fetch_and_op(1, 0, 5, Op::Sum).ctx("fetch_and_op")?;
    let was = win
        .compare_and_swap(me as u64 + 1, 0, 0, 6)
        .ctx("compare_and_swap")?;
    win.flush_all().ctx("flush_all")?;
    win.unlock_all().ctx("unlock_all")?;
    world.barrier().ctx("barrier")?;
    let claimed = world.allgather(&[u8::from(was == 0)]).ctx("allgather")?;
    ensure_eq!(
        claimed.iter().filter(|c| c[0] == 1).count(),
        1,
        "ranks whose compare_and_swap found element 6 free"
    );
    if me == 0 {
        let mut mine = vec![0u64; count(0)];
        win.read_local(0, &mut mine).ctx("read_local")?;
        ensure_eq!(mine[5], world.size() as u64, "sum at element 5");
        ensure!(
            (1..=world.size() as u64).contains(&mine[6]),
            "element 6 holds a claimant: {}",
            mine[6]
        );
        ensure!(
            mine.iter()
                .enumerate()
                .all(|(i, &v)| i == 5 || i == 6 || v == 0),
            "only elements 5 and 6 written: {mine:?}"
        );
    }
    win.free().ctx("free u64")
}

/// One typed f64 window: rank `me` puts two elements at index 3 of its right neighbour and
/// reads them back with get, and its left neighbour's with rget.
fn floats(world: &World, win: &TypedWindow<'_, f64>) -> Res {
    let (me, n) = (world.rank(), world.size());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    ensure_eq!(win.len(), count(me), "len");
    ensure_eq!(
        win.len_of(right).ctx("len_of")?,
        count(right),
        "len_of(right)"
    );
    ensure_eq!(win.disp_unit(), 8, "disp_unit");
    ensure_eq!(win.size(), 8 * count(me), "size in bytes");
    expect_class(win.len_of(n), ErrorClass::Rank, "len_of(n)")?;

    win.fence(Assert::NOPRECEDE).ctx("fence")?;
    let value = |r: usize| [r as f64 + 0.5, r as f64 + 0.25];
    win.put(&value(me), right, 3).ctx("put")?;
    let last = count(right) - 1;
    expect_class(
        win.put(&[1.0], right, count(right)),
        ErrorClass::RmaRange,
        "put at the element past the end",
    )?;
    expect_class(
        win.put(&[1.0, 2.0], right, last),
        ErrorClass::RmaRange,
        "put of two elements at the last one",
    )?;
    win.fence(Assert::NONE).ctx("fence")?;

    let mut mine = vec![0f64; count(me)];
    win.read_local(0, &mut mine).ctx("read_local")?;
    let mut want = vec![0f64; count(me)];
    want[3..5].copy_from_slice(&value(left));
    ensure_eq!(
        mine,
        want,
        "this rank's elements after the left neighbour's put"
    );
    let mut bytes = vec![0u8; 8 * count(me)];
    win.window()
        .read_local(0, &mut bytes)
        .ctx("read_local bytes")?;
    ensure_eq!(
        &bytes[24..40],
        bytemuck::cast_slice::<f64, u8>(&value(left)),
        "bytes 24..40 hold elements 3 and 4"
    );

    let mut got = [0f64; 2];
    win.get(&mut got, right, 3).ctx("get")?;
    win.fence(Assert::NOSUCCEED).ctx("fence")?;
    ensure_eq!(got, value(me), "get of the elements this rank put");

    win.lock_all(Assert::NONE).ctx("lock_all")?;
    let mut again = [0f64; 2];
    win.rget(&mut again, left, 3)
        .ctx("rget")?
        .wait()
        .ctx("wait")?;
    let writer = (left + n - 1) % n;
    ensure_eq!(
        again,
        value(writer),
        "rget of the left neighbour's elements"
    );
    win.unlock_all().ctx("unlock_all")?;
    world.barrier().ctx("barrier")
}

/// Rank 0 creates its part of a window with u32 elements, the others with u64: every rank gets
/// MPI_ERR_DISP (allocate, then create, whose body never runs), and a window made afterwards
/// works.
pub fn mixed_types(world: &World, _: Flavor) -> Res {
    let me = world.rank();
    let info = Info::new();
    let made = if me == 0 {
        TypedWindow::<u32>::allocate(world, 4, &info).map(drop)
    } else {
        TypedWindow::<u64>::allocate(world, 4, &info).map(drop)
    };
    expect_class(made, ErrorClass::Disp, "allocate with mixed element types")?;
    let (mut a, mut b) = ([0u32; 4], [0u64; 4]);
    let mut ran = false;
    let created = if me == 0 {
        TypedWindow::create(world, &mut a, &info, |_| ran = true)
    } else {
        TypedWindow::create(world, &mut b, &info, |_| ran = true)
    };
    expect_class(created, ErrorClass::Disp, "create with mixed element types")?;
    ensure!(!ran, "the body of a refused create ran");

    let win = TypedWindow::<u64>::allocate(world, 4, &info).ctx("allocate afterwards")?;
    win.fence(Assert::NOPRECEDE).ctx("fence")?;
    win.put(&[me as u64 + 7], (me + 1) % world.size(), 2)
        .ctx("put")?;
    win.fence(Assert::NOSUCCEED).ctx("fence")?;
    let mut mine = [0u64; 4];
    win.read_local(0, &mut mine).ctx("read_local")?;
    let left = (me + world.size() - 1) % world.size();
    ensure_eq!(mine, [0, 0, left as u64 + 7, 0], "elements after the put");
    win.free().ctx("free")
}
