//! A distributed linked list in a dynamic window, as MPICH's `test/mpi/rma/linked_list.c`
//! builds it: every rank appends `ELEMS` elements (first argument, default 32) held in its own
//! memory, each attached on its own, to one list. An append swings the tail element's next
//! pointer with `compare_and_swap` under an exclusive lock on the tail's owner; a rank that
//! loses the race follows the pointer the winner wrote to the new tail. Then every rank walks
//! the whole list with gets and checks that it saw every element of every rank exactly once.
//! Rank 0 prints `linked_list: ok` once every rank has.
//!
//! Run: `onesided run -n 4 -- target/debug/examples/linked_list [ELEMS]`.
//!
//! # MPI-4.1: 12.2.4 (MPI_WIN_CREATE_DYNAMIC, MPI_WIN_ATTACH), 12.3.5 (MPI_COMPARE_AND_SWAP)

mod list;

use list::{Elem, NEXT_ADDR, NEXT_RANK, NIL, Ptr, Res};
use onesided::{Address, Assert, Info, LockType, Window, World};
use std::process::ExitCode;

const NAME: &str = "linked_list";

/// Append the element at `new` after the list's tail, which `tail` points at or precedes;
/// returns the new tail.
fn append(win: &Window<'_>, mut tail: Ptr, new: Ptr) -> Res<Ptr> {
    loop {
        win.lock(LockType::Exclusive, tail.rank, Assert::NONE)?;
        let next_rank = win.compare_and_swap(
            new.rank as u64,
            NIL,
            tail.rank,
            tail.addr.offset(NEXT_RANK).disp(),
        )?;
        win.unlock(tail.rank)?;
        if next_rank == NIL {
            win.lock(LockType::Exclusive, tail.rank, Assert::NONE)?;
            win.put(&[new.addr], tail.rank, tail.addr.offset(NEXT_ADDR).disp())?;
            win.unlock(tail.rank)?;
            return Ok(new);
        }
        // Another rank appended first: its element is the tail now, once it wrote the address.
        let next_addr = loop {
            let mut addr = [Address::NULL];
            win.lock(LockType::Exclusive, tail.rank, Assert::NONE)?;
            win.get(&mut addr, tail.rank, tail.addr.offset(NEXT_ADDR).disp())?;
            win.unlock(tail.rank)?;
            if !addr[0].is_null() {
                break addr[0];
            }
        };
        tail = Ptr {
            rank: next_rank as usize,
            addr: next_addr,
        };
    }
}

fn run() -> Res {
    let world = World::init()?;
    let (me, n) = (world.rank(), world.size());
    let elems = list::elems(32);
    // Element i of this rank holds value me * elems + i; rank 0's extra one is the head.
    let mut pool: Vec<Elem> = (0..elems)
        .map(|i| Elem::new((me * elems + i) as u64))
        .collect();
    let mut head = [Elem::new(u64::MAX)];
    let mut seen = vec![0u32; n * elems];
    Window::create_dynamic(&world, &Info::new(), |win| -> Res {
        let head_addr = match me {
            0 => win.attach(&mut head)?,
            _ => Address::NULL,
        };
        let head = list::share_head(&world, head_addr)?;
        let mut tail = head;
        for elem in pool.iter_mut() {
            let new = Ptr {
                rank: me,
                addr: win.attach(std::slice::from_mut(elem))?,
            };
            tail = append(win, tail, new)?;
        }
        world.barrier()?;
        list::walk(win, head, &mut seen)?;
        world.barrier()?;
        Ok(())
    })??;
    list::verdict(&world, NAME, &seen)
}

fn main() -> ExitCode {
    list::exit(NAME, run())
}
