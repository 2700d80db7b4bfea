//! Soundness of the safe API across processes.
//!
//! # MPI-4.1: 12.2.1 (MPI_WIN_CREATE: the memory stays exposed until MPI_WIN_FREE)

use crate::util::*;
use onesided::{Assert, Info, LockType, Window, World};

/// `Window::create` lends the caller's memory only for the duration of its closure, so the
/// window cannot be forgotten; and if the closure panics, the process must abort rather than
/// hand the memory back while other ranks may still write into it. Rank 1 panics inside the
/// closure after a fence, while rank 0 goes on putting into rank 1's memory: the launcher must
/// report rank 1 dead by SIGABRT, with the library's reason on stderr. Rank 0 then aborts too
/// (its own memory is lent as well), so nobody is left to clean up after rank 1: under every
/// process manager, an aborting rank removes its libfabric shm segments itself.
pub fn panic_inside_create_aborts(world: &World, _: onesided::Flavor) -> Res {
    let me = world.rank();
    ensure!(
        world.size() == 2,
        "laid out for 2 ranks, not {}",
        world.size()
    );
    let mut buf = vec![0u64; 4];
    Window::create(world, &mut buf, 8, &Info::new(), |win| -> Res {
        win.fence(Assert::NONE).ctx("fence")?;
        if me == 1 {
            panic!("rank 1 panics while its memory is exposed");
        }
        loop {
            win.lock(LockType::Exclusive, 1, Assert::NONE).ctx("lock")?;
            win.put(&[0xbad_u64; 4], 1, 0).ctx("put")?;
            win.unlock(1).ctx("unlock")?;
        }
    })
    .ctx("create")?
}
