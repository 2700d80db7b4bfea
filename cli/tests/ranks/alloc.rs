//! Memory from alloc_mem under a create window, on every transport: node peers map it (their
//! shared_query sees it, they load and store it), every RMA call and atomic lands and counts
//! exactly, memory outside the lent part is untouched, a target that computes does not hold
//! its origins up, and bad arguments fail with their class.
//!
//! # MPI-4.1: 9.2, 12.2.1

use crate::util::*;
use onesided::{Assert, ErrorClass, Flavor, Info, Op, Window, World};

/// The value rank `from` puts into rank `to`'s slot.
fn tag(from: usize, to: usize) -> u64 {
    0xa110_0000_0000 | (from as u64) << 16 | to as u64
}

/// Each rank lends all but the first element of its alloc_mem memory to a create window: a
/// slot per rank, a counter and a claim word. Under fence every rank puts its tag into its slot
/// everywhere and adds to every counter; under lock_all every rank tries to claim rank 0's word
/// with compare_and_swap (exactly one wins); a node peer's memory is loaded and stored through
/// shared_query. After the window is freed the owner reads it all through the slice.
pub fn create_window(world: &World, _: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let (counter, claim) = (n, n + 1);
    let mut mem = world
        .alloc_mem::<u64>(n + 3, &Info::new())
        .ctx("alloc_mem")?;
    mem[0] = 0xfeed;
    let claimed = Window::create(
        world,
        &mut mem[1..],
        8,
        &Info::new(),
        |win| -> Result<u64, String> {
            win.fence(Assert::NONE).ctx("fence")?;
            for t in 0..n {
                win.put(&[tag(me, t)], t, me).ctx("put")?;
                win.accumulate(&[1u64], t, counter, Op::Sum)
                    .ctx("accumulate")?;
            }
            win.fence(Assert::NONE).ctx("fence")?;
            let right = (me + 1) % n;
            let region = win.shared_query(Some(right)).ctx("shared_query")?;
            ensure_eq!(
                region.size(),
                (n + 2) * 8,
                "size of rank {right}'s memory as mapped here"
            );
            let mut seen = [0u64];
            region.read(me, &mut seen).ctx("load")?;
            ensure_eq!(seen[0], tag(me, right), "my slot at rank {right}, loaded");
            win.fence(Assert::NOSUCCEED).ctx("fence")?;
            win.lock_all(Assert::NONE).ctx("lock_all")?;
            let old = win
                .compare_and_swap(me as u64 + 1, 0, 0, claim)
                .ctx("compare_and_swap")?;
            win.unlock_all().ctx("unlock_all")?;
            world.barrier().ctx("barrier")?;
            Ok(old)
        },
    )
    .ctx("create/free")??;
    let winners = world
        .allgather(&[u8::from(claimed == 0)])
        .ctx("allgather")?
        .iter()
        .filter(|v| v[..] == [1])
        .count();
    ensure_eq!(
        winners,
        1,
        "ranks whose compare_and_swap claimed rank 0's word"
    );
    ensure_eq!(mem[0], 0xfeed, "memory before the lent part");
    let want: Vec<u64> = (0..n).map(|r| tag(r, me)).collect();
    ensure_eq!(mem[1..=n].to_vec(), want, "slots, read through the slice");
    ensure_eq!(mem[1 + counter], n as u64, "counter");
    Ok(())
}

/// Rank 1 computes while rank 0 works on its alloc_mem memory (see `beside_busy_target`).
pub fn target_computes(world: &World, _: Flavor) -> Res {
    let me = world.rank();
    ensure!(world.size() == 2, "laid out for 2 ranks");
    let mut mem = world.alloc_mem::<u64>(2, &Info::new()).ctx("alloc_mem")?;
    Window::create(world, &mut mem[..], 8, &Info::new(), |win| -> Res {
        world.barrier().ctx("barrier")?;
        match me {
            1 => compute_for(busy_for()),
            _ => beside_busy_target(win, 1, 0)?,
        }
        world.barrier().ctx("barrier")
    })
    .ctx("create/free")??;
    if me == 1 {
        ensure_eq!(mem[..], [7, 42], "memory after the origin's epoch");
    }
    Ok(())
}

/// An alignment that is not a power of two (INFO), a non-boolean `alloc_shared_noncontig`
/// (INFO), more elements than memory can hold (SIZE); a large alignment is honoured.
pub fn errors(world: &World, _: Flavor) -> Res {
    for (key, value) in [
        ("mpi_minimum_memory_alignment", "3"),
        ("mpi_minimum_memory_alignment", "lots"),
        ("alloc_shared_noncontig", "maybe"),
    ] {
        expect_class(
            world
                .alloc_mem::<u8>(8, &Info::new().set(key, value))
                .map(drop),
            ErrorClass::Info,
            &format!("alloc_mem with {key}={value}"),
        )?;
    }
    expect_class(
        world
            .alloc_mem::<u64>(usize::MAX / 2, &Info::new())
            .map(drop),
        ErrorClass::Size,
        "alloc_mem of usize::MAX / 2 words",
    )?;
    let big = Info::new().set("mpi_minimum_memory_alignment", "2097152");
    let m = world.alloc_mem::<u8>(100, &big).ctx("alloc_mem aligned")?;
    ensure_eq!(
        m.as_ptr() as usize % 2097152,
        0,
        "alignment of alloc_mem memory"
    );
    Ok(())
}
