//! Dynamic windows on every transport: memory attached by each rank is reached at the
//! addresses it hands out, by every RMA call and synchronization; memory attached later is
//! learned by origins that knew the target's table already, detached memory is refused, a
//! target that computes does not hold its origins up, and the misuse MPI names fails with its
//! class.
//!
//! # MPI-4.1: 12.2.4

use crate::util::*;
use onesided::{Address, Assert, ErrorClass, Flavor, Info, LockType, Op, Window, World};

/// Every rank's `mine`, as all ranks see them (rank order).
fn exchange(world: &World, mine: &[Address]) -> Result<Vec<Vec<Address>>, String> {
    let all = world
        .allgather(bytemuck::cast_slice(mine))
        .ctx("allgather addresses")?;
    Ok(all
        .iter()
        .map(|b| {
            b.chunks_exact(8)
                .map(bytemuck::pod_read_unaligned)
                .collect()
        })
        .collect())
}

/// The value rank `from` writes into rank `to`'s memory.
fn tag(from: usize, to: usize) -> u64 {
    (from as u64) << 32 | to as u64 | 0x5a00_0000
}

/// lock_all takes a node peer's lock word only when the epoch reaches that peer, as in the
/// other flavors (a dynamic window maps no peer memory): rank 1 holds an exclusive lock on
/// itself while rank 0 runs a lock_all epoch that puts to rank 2 only, which must complete
/// before rank 1 lets go (it waits for rank 0 at a barrier).
pub fn lock_all_is_lazy(world: &World, _: Flavor) -> Res {
    let me = world.rank();
    ensure!(world.size() == 3, "laid out for 3 ranks");
    let mut word = [0u64];
    Window::create_dynamic(world, &Info::new(), |win| -> Res {
        let a = win.attach(&mut word).ctx("attach")?;
        let at = exchange(world, &[a])?;
        if me == 1 {
            win.lock(LockType::Exclusive, 1, Assert::NONE).ctx("lock")?;
        }
        world.barrier().ctx("barrier")?;
        if me == 0 {
            win.lock_all(Assert::NONE).ctx("lock_all")?;
            win.put(&[7u64], 2, at[2][0].disp()).ctx("put")?;
            win.unlock_all().ctx("unlock_all")?;
        }
        world.barrier().ctx("barrier")?;
        if me == 1 {
            win.unlock(1).ctx("unlock")?;
        }
        world.barrier().ctx("barrier")?;
        let mut got = [0u64];
        win.read_local(a.disp(), &mut got).ctx("read_local")?;
        ensure_eq!(got[0], if me == 2 { 7 } else { 0 }, "word of rank {me}");
        Ok(())
    })
    .ctx("create_dynamic/free")?
}

/// Each rank attaches a slot per rank and a counter. Under fence every rank puts its tag into
/// its slot at every rank and adds to every counter; under lock_all each reads its right
/// neighbour's slots, with get and rget, and swaps and fetch-adds there; then rank 0 attaches
/// more memory, which ranks that read its table before must find, and detaches it, after which
/// every access to it is refused with MPI_ERR_RMA_RANGE and changes nothing.
pub fn put_get(world: &World, _: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let right = (me + 1) % n;
    let mut slots = vec![0u64; n];
    let mut counter = [0u64; 2];
    let mut late = vec![0u64; n];
    Window::create_dynamic(world, &Info::new(), |win| -> Res {
        ensure_eq!(win.flavor(), Flavor::Dynamic, "flavor");
        ensure_eq!(win.size(), 0, "size of a dynamic window");
        let a = win.attach(&mut slots).ctx("attach slots")?;
        let c = win.attach(&mut counter).ctx("attach counter")?;
        let at = exchange(world, &[a, c])?;
        let (slots_of, counter_of) = (|r: usize| at[r][0], |r: usize| at[r][1]);

        win.fence(Assert::NONE).ctx("fence")?;
        for t in 0..n {
            let slot = slots_of(t).offset(8 * me);
            win.put(&[tag(me, t)], t, slot.disp()).ctx("put")?;
            win.accumulate(&[1 + me as u64], t, counter_of(t).disp(), Op::Sum)
                .ctx("accumulate")?;
        }
        win.fence(Assert::NONE).ctx("fence")?;
        let mut seen = vec![0u64; n];
        win.read_local(a.disp(), &mut seen).ctx("read_local")?;
        let want: Vec<u64> = (0..n).map(|r| tag(r, me)).collect();
        ensure_eq!(seen, want, "rank {me}'s slots after the fence");
        let mut count = [0u64];
        win.read_local(c.disp(), &mut count).ctx("read_local")?;
        ensure_eq!(
            count[0],
            (n * (n + 1) / 2) as u64,
            "counter after the fence"
        );
        win.fence(Assert::NOSUCCEED).ctx("fence")?;
        world.barrier().ctx("barrier")?;

        win.lock_all(Assert::NONE).ctx("lock_all")?;
        let mut back = vec![0u64; n];
        win.get(&mut back, right, slots_of(right).disp())
            .ctx("get")?;
        win.flush(right).ctx("flush")?;
        let want: Vec<u64> = (0..n).map(|r| tag(r, right)).collect();
        ensure_eq!(back, want, "rank {right}'s slots read by get");
        let mut one = [0u64];
        let r = win
            .rget(&mut one, right, slots_of(right).offset(8 * me).disp())
            .ctx("rget")?;
        r.wait().ctx("wait")?;
        ensure_eq!(one[0], tag(me, right), "rget of my slot at {right}");
        let second = counter_of(right).offset(8);
        win.fetch_and_op(1u64, right, second.disp(), Op::Sum)
            .ctx("fetch_and_op")?;
        win.unlock_all().ctx("unlock_all")?;
        world.barrier().ctx("barrier")?;
        win.read_local(c.offset(8).disp(), &mut count)
            .ctx("read_local")?;
        ensure_eq!(count[0], 1, "fetch-adds from the left neighbour");

        // Memory attached now, while every rank knows rank 0's table already.
        let l = match me {
            0 => win.attach(&mut late).ctx("attach late")?,
            _ => Address::NULL,
        };
        let l = exchange(world, &[l])?[0][0];
        win.lock(LockType::Shared, 0, Assert::NONE).ctx("lock")?;
        win.put(&[tag(me, 0)], 0, l.offset(8 * me).disp())
            .ctx("put into memory attached late")?;
        win.unlock(0).ctx("unlock")?;
        world.barrier().ctx("barrier")?;
        if me == 0 {
            let mut seen = vec![0u64; n];
            win.read_local(l.disp(), &mut seen).ctx("read_local")?;
            let want: Vec<u64> = (0..n).map(|r| tag(r, 0)).collect();
            ensure_eq!(seen, want, "memory attached late");
            win.detach(l).ctx("detach")?;
        }
        world.barrier().ctx("barrier")?;
        win.lock(LockType::Shared, 0, Assert::NONE).ctx("lock")?;
        expect_class(
            win.put(&[0u64], 0, l.offset(8 * me).disp()),
            ErrorClass::RmaRange,
            "put into detached memory",
        )?;
        win.unlock(0).ctx("unlock")?;
        world.barrier().ctx("barrier")
    })
    .ctx("create_dynamic/free")??;
    ensure_eq!(
        late[me],
        tag(me, 0) * u64::from(me == 0),
        "late memory after free"
    );
    Ok(())
}

/// Memory rank 0 detaches inside its origins' epoch, after each reached it in that epoch (so
/// each holds a copy of rank 0's attach table naming it): every later access to it, by each
/// RMA call that reaches memory, fails at the origin with MPI_ERR_RMA_RANGE and reads and
/// writes nothing; the epoch goes on (the flush succeeds, accesses to rank 0's other memory and
/// to the other ranks land) and free works. The detached memory holds only what was written
/// before the detach.
pub fn detached_in_epoch(world: &World, _: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let mut gone = vec![0u64; n];
    let mut kept = [0u64; 2];
    Window::create_dynamic(world, &Info::new(), |win| -> Res {
        let g = match me {
            0 => win.attach(&mut gone).ctx("attach")?,
            _ => Address::NULL,
        };
        let k = win.attach(&mut kept).ctx("attach")?;
        let at = exchange(world, &[g, k])?;
        let (slot, kept_of) = (at[0][0].offset(8 * me).disp(), |r: usize| at[r][1]);
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        if me != 0 {
            win.put(&[tag(me, 0)], 0, slot)
                .ctx("put before the detach")?;
            win.flush(0).ctx("flush")?;
        }
        world.barrier().ctx("barrier")?;
        if me == 0 {
            win.detach(g).ctx("detach")?;
        }
        world.barrier().ctx("barrier")?;
        let range = ErrorClass::RmaRange;
        expect_class(win.put(&[1u64], 0, slot), range, "put")?;
        let mut back = [0xeeu64];
        expect_class(win.get(&mut back, 0, slot), range, "get")?;
        let mut old = [0xeeu64];
        expect_class(
            win.get_accumulate(&[1u64], &mut old, 0, slot, Op::Sum),
            range,
            "get_accumulate",
        )?;
        ensure_eq!((back, old), ([0xee], [0xee]), "buffers of refused reads");
        expect_class(
            win.accumulate(&[1u64], 0, slot, Op::Sum),
            range,
            "accumulate",
        )?;
        expect_class(
            win.fetch_and_op(1u64, 0, slot, Op::Sum).map(drop),
            range,
            "fetch_and_op",
        )?;
        expect_class(
            win.compare_and_swap(1u64, tag(me, 0), 0, slot).map(drop),
            range,
            "compare_and_swap",
        )?;
        expect_class(win.rput(&[1u64], 0, slot).map(drop), range, "rput")?;
        win.flush(0).ctx("flush after the refused accesses")?;
        for t in 0..n {
            win.accumulate(&[1u64], t, kept_of(t).disp(), Op::Sum)
                .ctx("accumulate after")?;
        }
        win.put(&[tag(me, right)], right, kept_of(right).offset(8).disp())
            .ctx("put after")?;
        win.flush_all().ctx("flush_all")?;
        win.unlock_all().ctx("unlock_all")?;
        world.barrier().ctx("barrier")?;
        let mut mine = [0u64; 2];
        win.read_local(k.disp(), &mut mine).ctx("read_local")?;
        ensure_eq!(mine, [n as u64, tag(left, me)], "rank {me}'s words after");
        Ok(())
    })
    .ctx("create_dynamic/free")??;
    if me == 0 {
        let want: Vec<u64> = (0..n).map(|r| if r == 0 { 0 } else { tag(r, 0) }).collect();
        ensure_eq!(gone, want, "detached memory");
    }
    Ok(())
}

/// Rank 1 computes without calling into onesided while rank 0 locks it, puts, gets,
/// compare-and-swaps and unlocks: rank 0 must not wait for the computation.
pub fn target_computes(world: &World, _: Flavor) -> Res {
    let me = world.rank();
    ensure!(world.size() == 2, "laid out for 2 ranks");
    let mut mem = [0u64; 2];
    Window::create_dynamic(world, &Info::new(), |win| -> Res {
        let mine = match me {
            1 => win.attach(&mut mem).ctx("attach")?,
            _ => Address::NULL,
        };
        let at = exchange(world, &[mine])?[1][0];
        world.barrier().ctx("barrier")?;
        if me == 1 {
            compute_for(busy_for());
        } else {
            beside_busy_target(win, 1, at.disp())?;
        }
        world.barrier().ctx("barrier")
    })
    .ctx("create_dynamic/free")??;
    if me == 1 {
        ensure_eq!(mem, [7, 42], "memory after the origin's epoch");
    }
    Ok(())
}

/// The misuse MPI names: attach and detach on a create window and shared_query on a dynamic
/// window (RMA_FLAVOR), detach of memory not attached (RMA_ATTACH), more regions than the table
/// holds (RMA_ATTACH), accesses outside attached memory (RMA_RANGE, nothing changes), to a rank
/// outside the window (RANK) and outside an epoch (RMA_SYNC).
pub fn errors(world: &World, _: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let other = (me + 1) % n;
    let (mut lent, mut spare) = ([0u64; 1], [0u64; 1]);
    Window::create(world, &mut lent, 8, &Info::new(), |plain| -> Res {
        expect_class(
            plain.attach(&mut spare).map(drop),
            ErrorClass::RmaFlavor,
            "attach to a create window",
        )?;
        expect_class(
            plain.detach(Address::NULL),
            ErrorClass::RmaFlavor,
            "detach from a create window",
        )
    })
    .ctx("create/free")??;

    let mut guarded = [1u64, 2, 3];
    let mut many = vec![[0u8; 8]; onesided::MAX_ATTACH];
    Window::create_dynamic(world, &Info::new(), |win| -> Res {
        expect_class(
            win.shared_query(None).map(drop),
            ErrorClass::RmaFlavor,
            "shared_query on a dynamic window",
        )?;
        let (head, _past) = guarded.split_at_mut(1);
        let g = win.attach(head).ctx("attach")?;
        let at = exchange(world, &[g])?;
        let g_other = at[other][0];
        expect_class(
            win.put(&[9u64], other, g_other.disp()),
            ErrorClass::RmaSync,
            "put outside an epoch",
        )?;
        win.lock(LockType::Shared, other, Assert::NONE)
            .ctx("lock")?;
        for (what, disp) in [
            ("at address 0", 0),
            ("straddling the end", g_other.offset(4).disp()),
            ("just past the end", g_other.offset(8).disp()),
            ("just before the start", g_other.disp() - 8),
        ] {
            expect_class(
                win.put(&[9u64], other, disp),
                ErrorClass::RmaRange,
                &format!("put {what} of attached memory"),
            )?;
        }
        expect_class(
            win.fetch_and_op(1u64, other, g_other.offset(8).disp(), Op::Sum),
            ErrorClass::RmaRange,
            "fetch_and_op past attached memory",
        )?;
        win.unlock(other).ctx("unlock")?;
        expect_class(
            win.put(&[9u64], n, g_other.disp()),
            ErrorClass::Rank,
            "put to a rank outside the window",
        )?;
        expect_class(
            win.detach(g.offset(8)),
            ErrorClass::RmaAttach,
            "detach where nothing attached starts",
        )?;
        // The table holds MAX_ATTACH regions: one is attached, so one of these is refused.
        let mut attached = vec![];
        let mut refused = 0;
        for m in many.iter_mut() {
            match win.attach(m) {
                Ok(a) => attached.push(a),
                Err(e) if e.class() == ErrorClass::RmaAttach => refused += 1,
                Err(e) => return Err(format!("attach: unexpected {e}")),
            }
        }
        ensure_eq!(refused, 1, "attaches refused beyond the table");
        win.detach(attached[0]).ctx("detach")?;
        expect_class(
            win.detach(attached[0]),
            ErrorClass::RmaAttach,
            "detach twice",
        )?;
        world.barrier().ctx("barrier")?;
        Ok(())
    })
    .ctx("create_dynamic/free")??;
    ensure_eq!(guarded, [1, 2, 3], "memory around refused accesses");
    Ok(())
}
