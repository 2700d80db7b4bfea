//! MPI edge cases: accumulates at displacements not aligned to the element size, accumulates
//! into MPI_Win_create memory from every rank, `mpi_minimum_memory_alignment`, and refused calls
//! that must leave the epoch as it was.
//!
//! # MPI-4.1: 12.2.2, 12.2.3 (alignment), 12.3.4, 12.3.5, 12.7.1 (atomicity), 12.5.1 (fence)

use crate::util::*;
use onesided::{Assert, ErrorClass, Flavor, Info, LockType, Op, Window, World};

/// Rounds of accumulates per origin and target (each one a few round trips over the fabric when
/// it takes the target's accumulate lock).
const ITERS: usize = 40;

/// Byte offsets of the elements of [`unaligned_accumulates`] (displacement unit 1): none is
/// aligned to its size, and the u64s straddle an 8-byte boundary.
const U64_SUM: usize = 3;
const I32_SUM: usize = 13;
const F64_SUM: usize = 21;
const U64_FETCH: usize = 33;
const U64_CAS: usize = 45;
const U32_BXOR: usize = 55;
/// What every byte outside those elements holds, and must still hold at the end.
const FILL: u8 = 0xa5;
const BYTES: usize = 64;

/// The elements of [`unaligned_accumulates`] as (offset, length).
const ELEMENTS: [(usize, usize); 6] = [
    (U64_SUM, 8),
    (I32_SUM, 4),
    (F64_SUM, 8),
    (U64_FETCH, 8),
    (U64_CAS, 8),
    (U32_BXOR, 4),
];

/// `v` from every rank, in rank order.
fn allgather_u64(world: &World, v: &[u64]) -> Result<Vec<Vec<u64>>, String> {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let all = world.allgather(&bytes).ctx("allgather")?;
    Ok(all
        .iter()
        .map(|b| {
            b.chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect()
        })
        .collect())
}

/// `fetched[r][t * ITERS + i]` is the i-th value rank r fetched from rank t's counter: per
/// origin the values rise, and together they are exactly 0..n * ITERS for every target.
fn check_fetched(fetched: &[Vec<u64>], n: usize, what: &str) -> Res {
    for t in 0..n {
        let mut all = Vec::with_capacity(n * ITERS);
        for (r, mine) in fetched.iter().enumerate() {
            let got = mine.get(t * ITERS..(t + 1) * ITERS).unwrap_or_default();
            ensure!(
                got.windows(2).all(|w| w[0] < w[1]),
                "{what}: rank {r} fetched {got:?} from rank {t}: not rising"
            );
            all.extend_from_slice(got);
        }
        all.sort_unstable();
        let want: Vec<u64> = (0..(n * ITERS) as u64).collect();
        ensure!(
            all == want,
            "{what}: values fetched from rank {t} are not each of 0..{}: {all:?}",
            n * ITERS
        );
    }
    Ok(())
}

/// Every rank accumulates into every rank's window (itself included), all at once under
/// lock_all, at byte displacements not aligned to the element size: u64, i32 and f64 sums,
/// fetch-and-add, a compare-and-swap increment loop and u32 xor. The totals are exact, every
/// fetched value is seen once, and no byte around the elements changes. MPI allows any
/// displacement, and accumulates on one location with one type are atomic.
pub fn unaligned_accumulates(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    with_window(world, flavor, BYTES, 1, &Info::new(), |win| {
        let mut init = [FILL; BYTES];
        for (off, len) in ELEMENTS {
            init[off..off + len].fill(0);
        }
        win.write_local(0, &init).ctx("write_local")?;
        win.fence(Assert::NOPRECEDE).ctx("fence")?;
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        let mut fetched = vec![0u64; n * ITERS];
        for t in 0..n {
            let t = (me + t) % n;
            for i in 0..ITERS {
                win.accumulate(&[3u64], t, U64_SUM, Op::Sum)
                    .ctx("u64 sum")?;
                win.accumulate(&[-5i32], t, I32_SUM, Op::Sum)
                    .ctx("i32 sum")?;
                win.accumulate(&[0.5f64], t, F64_SUM, Op::Sum)
                    .ctx("f64 sum")?;
                fetched[t * ITERS + i] = win
                    .fetch_and_op(1u64, t, U64_FETCH, Op::Sum)
                    .ctx("fetch_and_op")?;
                let mut seen = [0u64];
                win.get_accumulate(&[0u64], &mut seen, t, U64_CAS, Op::NoOp)
                    .ctx("get_accumulate")?;
                let mut old = seen[0];
                loop {
                    let was = win
                        .compare_and_swap(old + 1, old, t, U64_CAS)
                        .ctx("compare_and_swap")?;
                    if was == old {
                        break;
                    }
                    old = was;
                }
                win.accumulate(&[1u32 << me], t, U32_BXOR, Op::Bxor)
                    .ctx("u32 bxor")?;
            }
        }
        win.unlock_all().ctx("unlock_all")?;
        world.barrier().ctx("barrier")?;

        let mut mem = [0u8; BYTES];
        win.read_local(0, &mut mem).ctx("read_local")?;
        let at = |off: usize, len: usize| {
            let mut b = [0u8; 8];
            b[..len].copy_from_slice(&mem[off..off + len]);
            u64::from_le_bytes(b)
        };
        let total = (n * ITERS) as u64;
        ensure_eq!(at(U64_SUM, 8), 3 * total, "u64 sum at byte {U64_SUM}");
        ensure_eq!(
            at(I32_SUM, 4) as u32 as i32,
            -5 * total as i32,
            "i32 sum at byte {I32_SUM}"
        );
        ensure_eq!(
            f64::from_bits(at(F64_SUM, 8)),
            0.5 * total as f64,
            "f64 sum at byte {F64_SUM}"
        );
        ensure_eq!(at(U64_FETCH, 8), total, "fetch-and-add count");
        ensure_eq!(at(U64_CAS, 8), total, "compare-and-swap increments");
        // Each rank xors its bit an even (ITERS) number of times.
        ensure_eq!(at(U32_BXOR, 4), 0, "u32 bxor at byte {U32_BXOR}");
        for (i, &b) in mem.iter().enumerate() {
            let inside = ELEMENTS
                .iter()
                .any(|&(off, len)| (off..off + len).contains(&i));
            ensure!(
                inside || b == FILL,
                "byte {i} outside the elements changed to {b:#x}: {mem:x?}"
            );
        }
        let all = allgather_u64(world, &fetched)?;
        check_fetched(&all, n, "unaligned fetch_and_op")?;
        world.barrier().ctx("barrier")
    })
}

/// Every rank accumulates into every rank's MPI_Win_create memory at once (the owner into its
/// own too): fetch-and-add, u64/i64/f64 sums, and compare-and-swap claims of four slots, under
/// lock_all. Over shared memory the peers reach that memory only by cross-memory copies; the
/// counts must still be exact and each slot claimed once.
pub fn create_accumulates(world: &World, _: Flavor) -> Res {
    const CLAIMS: usize = 4;
    let (me, n) = (world.rank(), world.size());
    with_window(
        world,
        Flavor::Create,
        8 * (4 + CLAIMS),
        8,
        &Info::new(),
        |win| {
            world.barrier().ctx("barrier")?;
            win.lock_all(Assert::NONE).ctx("lock_all")?;
            let mut fetched = vec![0u64; n * ITERS];
            let mut won = vec![Vec::new(); n];
            for t in 0..n {
                let t = (me + t) % n;
                for i in 0..ITERS {
                    fetched[t * ITERS + i] = win.fetch_and_op(1u64, t, 0, Op::Sum).ctx("fetch")?;
                    win.accumulate(&[-2i64], t, 1, Op::Sum).ctx("i64 sum")?;
                    win.accumulate(&[0.25f64], t, 2, Op::Sum).ctx("f64 sum")?;
                }
                for s in 0..CLAIMS {
                    let slot = 4 + (s + me) % CLAIMS;
                    let old = win
                        .compare_and_swap(me as u64 + 1, 0, t, slot)
                        .ctx("compare_and_swap")?;
                    if old == 0 {
                        won[t].push(slot);
                        win.accumulate(&[1u64], t, 3, Op::Sum).ctx("claims")?;
                    }
                }
            }
            win.unlock_all().ctx("unlock_all")?;
            world.barrier().ctx("barrier")?;
            let mem = local_u64(win, 4 + CLAIMS)?;
            let total = (n * ITERS) as u64;
            ensure_eq!(mem[0], total, "fetch-and-add count in create memory");
            ensure_eq!(mem[1] as i64, -2 * total as i64, "i64 sum in create memory");
            ensure_eq!(
                f64::from_bits(mem[2]),
                0.25 * total as f64,
                "f64 sum in create memory"
            );
            ensure_eq!(mem[3], CLAIMS as u64, "claims counted in create memory");
            for (s, &v) in mem[4..].iter().enumerate() {
                ensure!(
                    (1..=n as u64).contains(&v),
                    "slot {} of rank {me} unclaimed or garbled: {v:#x}",
                    4 + s
                );
            }
            // Every rank's wins, as (target, slot) pairs, must match the marks in the targets.
            let mine: Vec<u64> = won
                .iter()
                .enumerate()
                .flat_map(|(t, slots)| slots.iter().map(move |&s| (t * 64 + s) as u64))
                .collect();
            let wins = allgather_u64(world, &mine)?;
            for (r, w) in wins.iter().enumerate() {
                for &ts in w.iter().filter(|&&ts| ts as usize / 64 == me) {
                    let slot = ts as usize % 64;
                    ensure_eq!(
                        mem[slot],
                        r as u64 + 1,
                        "mark in slot {slot} won by rank {r}"
                    );
                }
            }
            let all = allgather_u64(world, &fetched)?;
            check_fetched(&all, n, "fetch_and_op on create memory")?;
            world.barrier().ctx("barrier")
        },
    )
}

const K64: usize = 1 << 16;
const M2: usize = 1 << 21;
const ALIGN_KEY: &str = "mpi_minimum_memory_alignment";

/// A window of `flavor` (allocate or shared) with `sizes[r]` bytes on rank r, which asked for
/// `aligns[r]` in `info`, checked: the alignment the info reports, the base of every rank with
/// memory whose base the key covers as this rank sees it (every rank's, but in contiguous shared
/// memory only the first's: the others follow it without a gap; this rank's own base is its
/// shared_query base, as `with_window` checks), and a put to the right neighbour that lands.
fn aligned_window(
    world: &World,
    flavor: Flavor,
    info: &Info,
    sizes: &[usize],
    aligns: &[usize],
) -> Res {
    let (me, n) = (world.rank(), world.size());
    let contiguous = flavor == Flavor::Shared && info.get("alloc_shared_noncontig") != Some("true");
    with_window(world, flavor, sizes[me], 8, info, |win| {
        ensure_eq!(
            win.info().get(ALIGN_KEY),
            Some(aligns[me].to_string().as_str()),
            "info {ALIGN_KEY}"
        );
        let first = (0..n).find(|&r| sizes[r] > 0);
        let mut prev: Option<(usize, usize)> = None;
        for r in 0..n {
            let q = win.shared_query(Some(r)).ctx("shared_query")?;
            ensure_eq!(q.size(), sizes[r], "size of rank {r}'s region");
            if sizes[r] == 0 {
                continue;
            }
            let covered = !contiguous || Some(r) == first;
            ensure!(
                !covered || q.base_addr() % aligns[r] == 0,
                "rank {r}'s memory at {:#x} is not aligned to {}",
                q.base_addr(),
                aligns[r]
            );
            if let (true, Some((base, size))) = (contiguous, prev) {
                ensure_eq!(
                    q.base_addr(),
                    base + size,
                    "rank {r}'s memory follows the last"
                );
            }
            prev = Some((q.base_addr(), q.size()));
        }
        let right = (me + 1) % n;
        win.fence(Assert::NOPRECEDE).ctx("fence")?;
        if sizes[right] > 0 {
            win.put(&[tag(me, right, 1)], right, 0).ctx("put")?;
        }
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        if sizes[me] > 0 {
            let left = (me + n - 1) % n;
            ensure_eq!(
                local_u64(win, 1)?,
                vec![tag(left, me, 1)],
                "put into aligned memory"
            );
        }
        Ok(())
    })
}

/// `mpi_minimum_memory_alignment` on allocate and allocate_shared (contiguous and not): the
/// memory starts on the alignment asked for (64 KiB, 2 MiB, or a different one per rank), on
/// every rank's view; contiguous memory stays contiguous; a value that is not a power of two up
/// to 1 GiB on any rank fails the creation on every rank with MPI_ERR_INFO.
pub fn memory_alignment(world: &World, _: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    // Sizes not a multiple of any alignment; with 3 ranks or more rank 0 has no memory.
    let sizes: Vec<usize> = (0..n)
        .map(|r| if r == 0 && n > 2 { 0 } else { 24 })
        .collect();
    let shapes = [
        (Flavor::Allocate, Info::new()),
        (Flavor::Shared, Info::new()),
        (
            Flavor::Shared,
            Info::new().set("alloc_shared_noncontig", "true"),
        ),
    ];
    for (flavor, base) in &shapes {
        for align in [K64, M2] {
            let info = base.clone().set(ALIGN_KEY, &align.to_string());
            aligned_window(world, *flavor, &info, &sizes, &vec![align; n])
                .map_err(|e| format!("{} aligned to {align}: {e}", flavor_name(*flavor)))?;
        }
        if *flavor == Flavor::Shared && base.get("alloc_shared_noncontig").is_none() {
            continue;
        }
        // A different alignment on every rank: 4 KiB, 64 KiB, 1 MiB, ...
        let aligns: Vec<usize> = (0..n).map(|r| 4096 << (4 * r).min(18)).collect();
        let info = base.clone().set(ALIGN_KEY, &aligns[me].to_string());
        aligned_window(world, *flavor, &info, &sizes, &aligns)
            .map_err(|e| format!("{} aligned per rank: {e}", flavor_name(*flavor)))?;
    }
    for bad in ["3000", "0", "-65536", "64k", "2147483648"] {
        for flavor in [Flavor::Allocate, Flavor::Shared] {
            let value = if me == n - 1 { bad } else { "65536" };
            let info = Info::new().set(ALIGN_KEY, value);
            let r = match flavor {
                Flavor::Shared => Window::allocate_shared(world, 64, 8, &info),
                _ => Window::allocate(world, 64, 8, &info),
            };
            expect_class(
                r.map(drop),
                ErrorClass::Info,
                &format!(
                    "{} with {ALIGN_KEY}={bad:?} on rank {}",
                    flavor_name(flavor),
                    n - 1
                ),
            )?;
        }
    }
    // The failed creations left nothing behind: the next window works.
    aligned_window(
        world,
        Flavor::Allocate,
        &Info::new(),
        &sizes,
        &vec![4096; n],
    )
}

/// Calls refused with an error (range, rank, operation, type, count, assert, epoch) inside a
/// fence epoch are not RMA calls of the epoch: a fence asserting NOPRECEDE still succeeds, a
/// refused lock leaves the fence epoch open, and nothing was written. A call that succeeded, an
/// accumulate at an unaligned displacement among them, is remembered: NOPRECEDE is then refused.
pub fn refused_calls(world: &World, flavor: Flavor) -> Res {
    const SLOTS: usize = 8;
    let (me, n) = (world.rank(), world.size());
    let right = (me + 1) % n;
    let sync = ErrorClass::RmaSync;
    with_window(world, flavor, 8 * SLOTS, 8, &Info::new(), |win| {
        win.fence(Assert::NOPRECEDE).ctx("fence")?;
        let mut buf = [0x77u64; 2];
        let mut one = [0u64];
        expect_class(
            win.put(&[1u64; SLOTS + 1], right, 0),
            ErrorClass::RmaRange,
            "put past the end",
        )?;
        expect_class(
            win.get(&mut buf, right, SLOTS - 1),
            ErrorClass::RmaRange,
            "get past the end",
        )?;
        expect_class(win.put(&[1u64], n, 0), ErrorClass::Rank, "put to rank n")?;
        expect_class(
            win.accumulate(&[1u64], right, 0, Op::NoOp),
            ErrorClass::Op,
            "accumulate NO_OP",
        )?;
        expect_class(
            win.accumulate(&[1f64], right, 0, Op::Bor),
            ErrorClass::Op,
            "f64 bor",
        )?;
        expect_class(
            win.accumulate(&[1u64, 2], right, SLOTS - 1, Op::Sum),
            ErrorClass::RmaRange,
            "accumulate straddling the end",
        )?;
        expect_class(
            win.compare_and_swap(1f64, 0.0, right, 0),
            ErrorClass::Type,
            "f64 cas",
        )?;
        expect_class(
            win.get_accumulate(&[1u64, 2], &mut one, right, 0, Op::Sum),
            ErrorClass::Count,
            "short result",
        )?;
        expect_class(
            win.fetch_and_op(1u64, right, SLOTS, Op::Sum),
            ErrorClass::RmaRange,
            "fetch past the end",
        )?;
        expect_class(win.flush(right), sync, "flush in a fence epoch")?;
        expect_class(win.unlock(right), sync, "unlock without lock")?;
        ensure_eq!(buf, [0x77; 2], "origin buffer of the refused get");
        win.fence(Assert::NOPRECEDE)
            .ctx("fence(NOPRECEDE) after refused calls only")?;

        // Refused locks do not close the (unused) fence epoch they were tried in.
        expect_class(
            win.lock(LockType::Shared, n, Assert::NONE),
            ErrorClass::Rank,
            "lock rank n",
        )?;
        expect_class(
            win.lock(LockType::Exclusive, right, Assert::NOPRECEDE),
            ErrorClass::Assert,
            "lock asserting NOPRECEDE",
        )?;
        expect_class(
            win.lock_all(Assert::NOSUCCEED),
            ErrorClass::Assert,
            "lock_all asserting NOSUCCEED",
        )?;
        win.put(&[tag(me, right, 1)], right, me % SLOTS)
            .ctx("put after refused locks")?;
        expect_class(
            win.fence(Assert::NOPRECEDE),
            sync,
            "fence(NOPRECEDE) after a put",
        )?;
        win.fence(Assert::NONE).ctx("fence")?;
        let left = (me + n - 1) % n;
        let mut want = vec![0u64; SLOTS];
        want[left % SLOTS] = tag(left, me, 1);
        ensure_eq!(
            local_u64(win, SLOTS)?,
            want,
            "window after refused calls and one put"
        );
        Ok(())
    })?;
    // An accumulate at a displacement not aligned to its element (unit 1) is an RMA call like
    // any other: it lands, and the epoch knows it.
    with_window(world, flavor, 16, 1, &Info::new(), |win| {
        win.fence(Assert::NOPRECEDE).ctx("fence")?;
        win.accumulate(&[me as u64 + 1], right, 5, Op::Sum)
            .ctx("unaligned accumulate")?;
        expect_class(
            win.fence(Assert::NOPRECEDE),
            sync,
            "fence(NOPRECEDE) after an unaligned accumulate",
        )?;
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        let mut b = [0u8; 8];
        win.read_local(5, &mut b).ctx("read_local")?;
        let left = (me + n - 1) % n;
        ensure_eq!(
            u64::from_le_bytes(b),
            left as u64 + 1,
            "unaligned accumulate from the left"
        );
        Ok(())
    })
}
