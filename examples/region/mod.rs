//! What the synchronization examples of MPI-4.1 chapter 12 share (the semaphore, Peterson's
//! lock, the spinlock): their argument, their window inside one `lock_all` epoch, and how they
//! end.

use onesided::{Assert, Info, Window, World};

#[path = "../outcome/mod.rs"]
mod outcome;
pub use outcome::{Res, exit};

/// The first argument as a count, or `default`.
pub fn rounds(default: u64) -> u64 {
    std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// A window of `words` 64-bit words per rank, zeroed on every rank before any rank goes on,
/// inside a `lock_all` epoch.
pub fn locked_window(world: &World, words: usize) -> onesided::Result<Window<'static>> {
    let win = Window::allocate(world, 8 * words, 8, &Info::new())?;
    win.write_local(0, &vec![0u64; words])?;
    world.barrier()?;
    win.lock_all(Assert::NONE)?;
    Ok(win)
}
