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

mod outcome;

use onesided::{Address, Assert, Info, LockType, Pod, Window, World, Zeroable};
use outcome::Res;
use std::process::ExitCode;

const NAME: &str = "linked_list";
/// The rank of no element: the next pointer of the tail.
const NIL: u64 = u64::MAX;
/// Byte offsets of the next pointer's rank and address in an element.
const NEXT_RANK: usize = 8;
const NEXT_ADDR: usize = 16;

/// One list element: its value and the rank and address of the next element.
#[derive(Clone, Copy, Pod)]
#[repr(C)]
struct Elem {
    value: u64,
    next_rank: u64,
    next_addr: Address,
}

impl Elem {
    fn new(value: u64) -> Elem {
        Elem {
            value,
            next_rank: NIL,
            next_addr: Address::NULL,
        }
    }
}

/// Where an element is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Ptr {
    rank: usize,
    addr: Address,
}

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

/// Walk the list from `head` and count each value seen.
fn walk(win: &Window<'_>, head: Ptr, seen: &mut [u32]) -> Res {
    win.lock_all(Assert::NONE)?;
    let mut at = head;
    loop {
        let mut e = [Elem::zeroed()];
        win.get(&mut e, at.rank, at.addr.disp())?;
        win.flush(at.rank)?;
        let e = e[0];
        if at != head {
            let slot = seen
                .get_mut(e.value as usize)
                .ok_or_else(|| format!("element value {} out of range", e.value))?;
            *slot += 1;
        }
        if e.next_rank == NIL {
            break;
        }
        at = Ptr {
            rank: e.next_rank as usize,
            addr: e.next_addr,
        };
    }
    win.unlock_all()?;
    Ok(())
}

fn run() -> Res {
    let world = World::init()?;
    let (me, n) = (world.rank(), world.size());
    let elems: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(32);
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
        let shared = world.broadcast(0, bytemuck::bytes_of(&head_addr))?;
        let head = Ptr {
            rank: 0,
            addr: bytemuck::try_pod_read_unaligned(&shared).map_err(|e| format!("{e:?}"))?,
        };
        let mut tail = head;
        for elem in pool.iter_mut() {
            let new = Ptr {
                rank: me,
                addr: win.attach(std::slice::from_mut(elem))?,
            };
            tail = append(win, tail, new)?;
        }
        world.barrier()?;
        walk(win, head, &mut seen)?;
        world.barrier()?;
        Ok(())
    })??;
    let wrong = seen.iter().enumerate().find(|(_, c)| **c != 1);
    if let Some((value, count)) = wrong {
        eprintln!("{NAME}: rank {me} saw element {value} {count} times");
    }
    let verdicts = world.allgather(&[u8::from(wrong.is_none())])?;
    let failed: Vec<usize> = (0..n).filter(|&r| verdicts[r] != [1]).collect();
    if !failed.is_empty() {
        return Err(format!("ranks {failed:?} did not see every element exactly once").into());
    }
    if me == 0 {
        println!(
            "{NAME}: ok (each of {n} ranks saw all {} elements once)",
            n * elems
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    outcome::exit(NAME, run())
}
