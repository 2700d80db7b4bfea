//! The critical region of the lock examples (Peterson's lock, the spinlock): a counter at rank 0
//! that every entry increments by a plain get and put, which only mutual exclusion keeps exact,
//! and the check of its final value.

use crate::region::Res;
use onesided::{Window, World};

/// Increment the counter at `disp` of rank 0 by a get and a put, each completed at rank 0: a
/// read-modify-write that is not atomic by itself.
pub fn increment(win: &Window<'_>, disp: usize) -> onesided::Result<()> {
    let mut c = [0u64];
    win.get(&mut c, 0, disp)?;
    win.flush(0)?;
    win.put(&[c[0] + 1], 0, disp)?;
    win.flush(0)
}

/// Once every rank is done: end the `lock_all` epoch, free the window, and fail unless the
/// counter at `disp` of rank 0 is `want`.
pub fn finish(world: &World, win: Window<'static>, disp: usize, want: u64) -> Res {
    world.barrier()?;
    let mut count = [0u64];
    win.get(&mut count, 0, disp)?;
    win.unlock_all()?;
    win.free()?;
    if count[0] != want {
        return Err(format!(
            "the counter is {}, not {want}: the region was shared",
            count[0]
        )
        .into());
    }
    Ok(())
}
