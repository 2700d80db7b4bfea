//! Active-target scenarios: put and get under fence, and the fence asserts of the MPI stencil.
//!
//! # MPI-4.1: 12.3 (put, get), 12.5.1 (fence), 12.5.5 (asserts)

use crate::util::*;
use onesided::{Assert, ErrorClass, Flavor, Info, World};

const SENTINEL: u64 = 0xdead_beef_0000_0000;
const FILL: u8 = 0xee;

/// u64 elements with disp_unit 8, bytes at odd offsets with disp_unit 1, and a rank whose
/// window is empty.
pub fn put_get(world: &World, flavor: Flavor) -> Res {
    put_get_u64(world, flavor)?;
    put_get_bytes(world, flavor)?;
    mixed_disp_units(world, flavor)?;
    zero_size_target(world, flavor)
}

/// Ranks with different displacement units: a displacement counts in the target's unit.
fn mixed_disp_units(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let unit = |r: usize| 4 * (1 + r % 2);
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    with_window(world, flavor, 32, unit(me), &Info::new(), |win| {
        win.fence(Assert::NOPRECEDE).ctx("fence")?;
        win.put(&[0x1000_0000u32 + me as u32], right, 3)
            .ctx("put at disp 3")?;
        win.fence(Assert::NONE).ctx("fence")?;
        let mut got = [0u32];
        win.get(&mut got, left, 3).ctx("get at disp 3")?;
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        let mut mem = [0u32; 8];
        win.read_local(0, &mut mem).ctx("read_local")?;
        let mut want = [0u32; 8];
        want[3 * unit(me) / 4] = 0x1000_0000 + left as u32;
        ensure_eq!(mem, want, "window of rank {me} (disp_unit {})", unit(me));
        let from = (left + n - 1) % n;
        ensure_eq!(
            got[0],
            0x1000_0000 + from as u32,
            "get at disp 3 of rank {left}"
        );
        Ok(())
    })
}

/// Every rank puts two u64 into slots 1 + 2r, 2 + 2r of every rank; slot 0 and the two last
/// slots stay untouched. Then gets read them back.
fn put_get_u64(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let slots = 2 * n + 3;
    with_window(world, flavor, 8 * slots, 8, &Info::new(), |win| {
        let init: Vec<u64> = (0..slots as u64).map(|i| SENTINEL | i).collect();
        win.write_local(0, &init).ctx("write_local")?;
        win.fence(Assert::NOPRECEDE).ctx("first fence")?;
        for t in 0..n {
            let v = tag(me, t, 1);
            win.put(&[v, !v], t, 1 + 2 * me)
                .ctx(&format!("put to {t}"))?;
        }
        win.fence(Assert::NONE).ctx("fence after puts")?;
        let mem = local_u64(win, slots)?;
        for (i, &got) in mem.iter().enumerate() {
            let want = match i {
                0 => SENTINEL,
                i if i > 2 * n => SENTINEL | i as u64,
                i if i % 2 == 1 => tag((i - 1) / 2, me, 1),
                i => !tag((i - 2) / 2, me, 1),
            };
            ensure!(
                got == want,
                "slot {i} of rank {me}: got {got:#x}, expected {want:#x}"
            );
        }
        // Gets: two elements put by this rank at the right neighbour, and the whole window of
        // the left neighbour.
        let right = (me + 1) % n;
        let left = (me + n - 1) % n;
        let mut mine = [0u64; 2];
        win.get(&mut mine, right, 1 + 2 * me)
            .ctx("get from right")?;
        let mut whole = vec![0u64; slots];
        win.get(&mut whole, left, 0).ctx("get from left")?;
        win.fence(Assert::NOSUCCEED).ctx("closing fence")?;
        let v = tag(me, right, 1);
        ensure!(
            mine == [v, !v],
            "get from rank {right}: {mine:x?}, expected {:x?}",
            [v, !v]
        );
        ensure_eq!(whole[0], SENTINEL, "slot 0 of rank {left} read by get");
        for w in 0..n {
            ensure_eq!(
                whole[1 + 2 * w],
                tag(w, left, 1),
                "slot {} of rank {left} read by get",
                1 + 2 * w
            );
        }
        ensure_eq!(
            whole[slots - 1],
            SENTINEL | (slots as u64 - 1),
            "last slot of rank {left}"
        );
        Ok(())
    })
}

/// A byte window of odd size, disp_unit 1: every rank puts 3 bytes at odd offset 1 + 4r.
fn put_get_bytes(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let len = 4 * n + 5;
    let chunk = |r: usize| [(3 * r + 1) as u8, (3 * r + 2) as u8, (3 * r + 3) as u8];
    with_window(world, flavor, len, 1, &Info::new(), |win| {
        win.write_local(0, &vec![FILL; len]).ctx("write_local")?;
        win.fence(Assert::NONE).ctx("fence")?;
        for t in 0..n {
            win.put(&chunk(me), t, 1 + 4 * me)
                .ctx(&format!("byte put to {t}"))?;
        }
        win.fence(Assert::NONE).ctx("fence after byte puts")?;
        let mut mem = vec![0u8; len];
        win.read_local(0, &mut mem).ctx("read_local")?;
        let mut want = vec![FILL; len];
        for r in 0..n {
            want[1 + 4 * r..4 + 4 * r].copy_from_slice(&chunk(r));
        }
        ensure!(
            mem == want,
            "byte window of rank {me}: {mem:?}, expected {want:?}"
        );
        let right = (me + 1) % n;
        let mut two = [0u8; 2];
        win.get(&mut two, right, 2 + 4 * me).ctx("byte get")?;
        let mut tail = [0u8; 2];
        win.get(&mut tail, right, len - 2)
            .ctx("byte get of the tail")?;
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        ensure_eq!(
            two,
            [chunk(me)[1], chunk(me)[2]],
            "bytes at odd offset {} of rank {right}",
            2 + 4 * me
        );
        ensure_eq!(tail, [FILL, FILL], "the last two bytes of rank {right}");
        Ok(())
    })
}

/// Rank 0 exposes no memory: valid. A put of one element to it is RMA_RANGE, an empty put is
/// fine, and the other ranks' windows still work.
fn zero_size_target(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let slots = n + 1;
    let bytes = if me == 0 { 0 } else { 8 * slots };
    let target_of = |w: usize| 1 + w % (n - 1).max(1);
    with_window(world, flavor, bytes, 8, &Info::new(), |win| {
        win.fence(Assert::NOPRECEDE).ctx("fence")?;
        expect_class(
            win.put(&[1u64], 0, 0),
            ErrorClass::RmaRange,
            "put to a zero-size window",
        )?;
        let mut x = [0u64];
        expect_class(
            win.get(&mut x, 0, 0),
            ErrorClass::RmaRange,
            "get from a zero-size window",
        )?;
        win.put::<u64>(&[], 0, 0)
            .ctx("empty put to a zero-size window")?;
        if n > 1 {
            let t = target_of(me);
            win.put(&[tag(me, t, 0)], t, 1 + me)
                .ctx("put next to the zero-size window")?;
        }
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        if me > 0 {
            let mem = local_u64(win, slots)?;
            ensure_eq!(mem[0], 0, "untouched slot 0 of rank {me}");
            for w in 0..n {
                let want = if target_of(w) == me { tag(w, me, 0) } else { 0 };
                ensure_eq!(mem[1 + w], want, "slot {} of rank {me}", 1 + w);
            }
        }
        Ok(())
    })
}

/// The stencil's fence sequence: fence(NOPRECEDE), puts to both neighbours,
/// fence(NOSTORE | NOSUCCEED), local update; outside those epochs put and get are RMA_SYNC.
/// Then a fence with NOPUT before an epoch of gets, and recovery from a NOPRECEDE misuse.
pub fn asserts(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let value = |r: usize, it: usize| tag(r, r, it + 1);
    with_window(world, flavor, 8 * 4, 8, &Info::new(), |win| {
        for it in 0..6 {
            // Local update between the epochs (no RMA is allowed here).
            win.write_local(0, &[value(me, it)]).ctx("local update")?;
            expect_class(
                win.put(&[0u64], right, 3),
                ErrorClass::RmaSync,
                "put between epochs",
            )?;
            let mut x = [0u64];
            expect_class(
                win.get(&mut x, left, 0),
                ErrorClass::RmaSync,
                "get between epochs",
            )?;
            win.fence(Assert::NOPRECEDE).ctx("fence(NOPRECEDE)")?;
            win.put(&[value(me, it)], right, 1)
                .ctx("put to the right halo")?;
            win.put(&[value(me, it)], left, 2)
                .ctx("put to the left halo")?;
            win.fence(Assert::NOSTORE | Assert::NOSUCCEED)
                .ctx("fence(NOSTORE|NOSUCCEED)")?;
            let mem = local_u64(win, 4)?;
            ensure_eq!(mem[0], value(me, it), "own value, iteration {it}");
            ensure_eq!(
                mem[1],
                value(left, it),
                "halo from the left, iteration {it}"
            );
            ensure_eq!(
                mem[2],
                value(right, it),
                "halo from the right, iteration {it}"
            );
            ensure_eq!(mem[3], 0, "slot 3 (never a target), iteration {it}");
        }
        // An epoch of gets only: every rank may assert NOPUT on the fence that opens it.
        win.fence(Assert::NOPRECEDE | Assert::NOPUT)
            .ctx("fence(NOPRECEDE|NOPUT)")?;
        let mut got = [0u64; 3];
        win.get(&mut got, right, 0).ctx("get under NOPUT")?;
        win.fence(Assert::NOSUCCEED).ctx("fence(NOSUCCEED)")?;
        let want = [value(right, 5), value(me, 5), value((right + 1) % n, 5)];
        ensure_eq!(got, want, "window of rank {right} read by get");
        // Misuse: rank 0 puts, then asserts NOPRECEDE on the fence that must complete the put:
        // RMA_SYNC, locally, and the same fence called correctly afterwards still matches the
        // other ranks' fence.
        win.fence(Assert::NOPRECEDE).ctx("fence")?;
        if me == 0 {
            win.put(&[0x77u64], right, 3).ctx("put")?;
            expect_class(
                win.fence(Assert::NOPRECEDE),
                ErrorClass::RmaSync,
                "fence(NOPRECEDE) after a put",
            )?;
        }
        win.fence(Assert::NOSUCCEED)
            .ctx("fence completing the put")?;
        let mem = local_u64(win, 4)?;
        let want = if me == right_of(0, n) { 0x77 } else { 0 };
        ensure_eq!(mem[3], want, "slot 3 of rank {me} after rank 0's put");
        expect_class(
            win.put(&[1u64], right, 3),
            ErrorClass::RmaSync,
            "put after fence(NOSUCCEED)",
        )?;
        Ok(())
    })
}

fn right_of(r: usize, n: usize) -> usize {
    (r + 1) % n
}

/// Two windows at once: their epochs are independent (a lock epoch on one while the other has
/// a fence epoch with RMA calls), and fences of one do not complete the other's epoch.
pub fn two_windows(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let other = match flavor {
        Flavor::Allocate => Flavor::Create,
        _ => Flavor::Allocate,
    };
    with_window(world, flavor, 8 * n, 8, &Info::new(), |a| {
        with_window(world, other, 8 * n, 8, &Info::new(), |b| {
            a.fence(Assert::NOPRECEDE).ctx("fence of a")?;
            a.put(&[tag(me, right, 1)], right, me).ctx("put to a")?;
            expect_class(
                b.put(&[0u64], right, me),
                ErrorClass::RmaSync,
                "put to b during a's epoch",
            )?;
            b.lock(onesided::LockType::Exclusive, right, Assert::NONE)
                .ctx("lock of b")?;
            b.put(&[tag(me, right, 2)], right, me).ctx("put to b")?;
            b.unlock(right).ctx("unlock of b")?;
            a.fence(Assert::NOSUCCEED).ctx("fence of a")?;
            ensure_eq!(
                local_u64(a, n)?[left],
                tag(left, me, 1),
                "window a, slot {left}"
            );
            world.barrier().ctx("barrier")?;
            ensure_eq!(
                local_u64(b, n)?[left],
                tag(left, me, 2),
                "window b, slot {left}"
            );
            // Interleaved fence epochs of both windows.
            a.fence(Assert::NONE).ctx("fence of a")?;
            b.fence(Assert::NONE).ctx("fence of b")?;
            a.put(&[tag(me, right, 3)], right, me).ctx("put to a")?;
            b.put(&[tag(me, left, 4)], left, me).ctx("put to b")?;
            b.fence(Assert::NOSUCCEED).ctx("fence of b")?;
            ensure_eq!(
                local_u64(b, n)?[right],
                tag(right, me, 4),
                "window b after its fence"
            );
            expect_class(
                b.put(&[0u64], left, me),
                ErrorClass::RmaSync,
                "put to b after NOSUCCEED",
            )?;
            a.put(&[tag(me, right, 5)], right, me)
                .ctx("put to a, epoch still open")?;
            a.fence(Assert::NOSUCCEED).ctx("fence of a")?;
            ensure_eq!(
                local_u64(a, n)?[left],
                tag(left, me, 5),
                "window a after its fence"
            );
            Ok(())
        })
    })
}

/// Large transfers: each rank puts its whole 192 KiB pattern into the right neighbour's window
/// and gets the left neighbour's back.
pub fn large(world: &World, flavor: Flavor) -> Res {
    const LEN: usize = 192 * 1024;
    let (me, n) = (world.rank(), world.size());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let pattern =
        |r: usize| -> Vec<u8> { (0..LEN).map(|i| (i * 7 + r * 13 + i / 251) as u8).collect() };
    with_window(world, flavor, LEN, 1, &Info::new(), |win| {
        win.fence(Assert::NOPRECEDE).ctx("fence")?;
        win.put(&pattern(me), right, 0).ctx("large put")?;
        win.fence(Assert::NONE).ctx("fence")?;
        let mut got = vec![0u8; LEN];
        win.get(&mut got, left, 0).ctx("large get")?;
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        let second = (left + n - 1) % n;
        ensure!(
            got == pattern(second),
            "large get from rank {left} (holding rank {second}'s pattern)"
        );
        let mut mine = vec![0u8; LEN];
        win.read_local(0, &mut mine).ctx("read_local")?;
        ensure!(mine == pattern(left), "large put from rank {left}");
        Ok(())
    })
}
