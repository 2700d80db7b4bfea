//! What the linked-list examples share (MPICH's `linked_list` and MPI-4.1 Example 12.25): the
//! element and pointer types, the head shared by rank 0, the walk every rank makes at the end
//! and the check that every rank saw every element exactly once.

use onesided::{Address, Assert, Pod, Window, World, Zeroable};

#[path = "../outcome/mod.rs"]
mod outcome;
pub use outcome::{Res, exit};

/// The rank of no element: the next pointer of the tail.
pub const NIL: u64 = u64::MAX;
/// Byte offsets of the next pointer's rank and address in an element.
pub const NEXT_RANK: usize = 8;
pub const NEXT_ADDR: usize = 16;

/// One list element: its value and the rank and address of the next element.
#[derive(Clone, Copy, Pod)]
#[repr(C)]
pub struct Elem {
    pub value: u64,
    pub next_rank: u64,
    pub next_addr: Address,
}

impl Elem {
    /// An element holding `value`, pointing nowhere.
    pub fn new(value: u64) -> Elem {
        Elem {
            value,
            next_rank: NIL,
            next_addr: Address::NULL,
        }
    }
}

/// Where an element is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Ptr {
    pub rank: usize,
    pub addr: Address,
}

/// Elements each rank appends: the first argument, or `default`.
pub fn elems(default: usize) -> usize {
    std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The head element, at address `at` of rank 0 (what rank 0 attached), on every rank.
pub fn share_head(world: &World, at: Address) -> Res<Ptr> {
    let shared = world.broadcast(0, bytemuck::bytes_of(&at))?;
    let addr = bytemuck::try_pod_read_unaligned(&shared).map_err(|e| format!("{e:?}"))?;
    Ok(Ptr { rank: 0, addr })
}

/// Walk the list from `head` inside a lock_all epoch and count each value seen in `seen`.
pub fn walk(win: &Window<'_>, head: Ptr, seen: &mut [u32]) -> Res {
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

/// Whether every rank counted every one of the `n * elems` values exactly once; rank 0 prints
/// `NAME: ok` if so.
pub fn verdict(world: &World, name: &str, seen: &[u32]) -> Res {
    let (me, n) = (world.rank(), world.size());
    let wrong = seen.iter().enumerate().find(|(_, c)| **c != 1);
    if let Some((value, count)) = wrong {
        eprintln!("{name}: rank {me} saw element {value} {count} times");
    }
    let verdicts = world.allgather(&[u8::from(wrong.is_none())])?;
    let failed: Vec<usize> = (0..n).filter(|&r| verdicts[r] != [1]).collect();
    if !failed.is_empty() {
        return Err(format!("ranks {failed:?} did not see every element exactly once").into());
    }
    if me == 0 {
        println!(
            "{name}: ok (each of {n} ranks saw all {} elements once)",
            seen.len()
        );
    }
    Ok(())
}
