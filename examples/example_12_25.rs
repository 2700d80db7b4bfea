//! MPI-4.1 Example 12.25: a distributed linked list in a dynamic window, as the chapter writes
//! it. Rank 0 allocates the head with `alloc_mem`, attaches it and broadcasts its address.
//! Inside one `lock_all` epoch every rank appends `ELEMS` elements (first argument, default
//! 10), each allocated with `alloc_mem` and attached on its own: `compare_and_swap` on the
//! tail's next rank plus `flush`; the winner writes the next address with
//! `accumulate(REPLACE)`, a loser chases the new tail by polling that address with
//! `get_accumulate(NO_OP)` plus `flush` until it is written. Then every rank walks the list and
//! checks that it saw every element exactly once; the elements are detached and freed.
//! Rank 0 prints `example_12_25: ok`.
//!
//! Run: `onesided run -n 4 -- target/debug/examples/example_12_25 [ELEMS]`.
//!
//! # MPI-4.1: 12.2.4 (Example 12.25), 9.2 (MPI_ALLOC_MEM)

mod list;

use list::{Elem, NEXT_ADDR, NEXT_RANK, NIL, Ptr, Res};
use onesided::{Address, AllocMem, Assert, Info, Op, Window, World};
use std::process::ExitCode;

const NAME: &str = "example_12_25";

/// One element from alloc_mem, holding `value` and pointing nowhere.
fn alloc_elem(world: &World, value: u64) -> Res<AllocMem<Elem>> {
    let mut e = world.alloc_mem::<Elem>(1, &Info::new())?;
    e[0] = Elem::new(value);
    Ok(e)
}

/// Append the element at `new` after the tail that `tail` points at or precedes, inside the
/// lock_all epoch; returns the new tail.
fn append(win: &Window<'_>, mut tail: Ptr, new: Ptr) -> Res<Ptr> {
    loop {
        let next_rank_at = tail.addr.offset(NEXT_RANK).disp();
        let next_addr_at = tail.addr.offset(NEXT_ADDR).disp();
        let old = win.compare_and_swap(new.rank as u64, NIL, tail.rank, next_rank_at)?;
        win.flush(tail.rank)?;
        if old == NIL {
            let addr: u64 = bytemuck::cast(new.addr);
            win.accumulate(&[addr], tail.rank, next_addr_at, Op::Replace)?;
            win.flush(tail.rank)?;
            return Ok(new);
        }
        // The tail pointer is stale: wait for the winner's address, then go on from there.
        let next_addr = loop {
            let mut got = [0u64];
            win.get_accumulate(&[0u64], &mut got, tail.rank, next_addr_at, Op::NoOp)?;
            win.flush(tail.rank)?;
            let addr: Address = bytemuck::cast(got[0]);
            if !addr.is_null() {
                break addr;
            }
        };
        tail = Ptr {
            rank: old as usize,
            addr: next_addr,
        };
    }
}

fn run() -> Res {
    let world = World::init()?;
    let (me, n) = (world.rank(), world.size());
    let elems = list::elems(10);
    let mut head = alloc_elem(&world, u64::MAX)?;
    let mut mine = (0..elems)
        .map(|i| alloc_elem(&world, (me * elems + i) as u64))
        .collect::<Res<Vec<_>>>()?;
    let mut seen = vec![0u32; n * elems];
    Window::create_dynamic(&world, &Info::new(), |win| -> Res {
        let head_addr = match me {
            0 => win.attach(&mut head[..])?,
            _ => Address::NULL,
        };
        let head = list::share_head(&world, head_addr)?;
        let mut tail = head;
        let mut attached = Vec::with_capacity(elems);
        win.lock_all(Assert::NONE)?;
        for elem in mine.iter_mut() {
            let new = Ptr {
                rank: me,
                addr: win.attach(&mut elem[..])?,
            };
            attached.push(new.addr);
            tail = append(win, tail, new)?;
        }
        win.unlock_all()?;
        world.barrier()?;
        list::walk(win, head, &mut seen)?;
        world.barrier()?;
        for addr in attached {
            win.detach(addr)?;
        }
        if me == 0 {
            win.detach(head_addr)?;
        }
        Ok(())
    })??;
    drop(mine);
    list::verdict(&world, NAME, &seen)
}

fn main() -> ExitCode {
    list::exit(NAME, run())
}
