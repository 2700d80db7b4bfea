//! Cross-process futex wait/wake on a 32-bit word in shared memory.
//!
//! The non-private futex operations are used, so that waiters and wakers may be different
//! processes that map the same segment.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

use rustix::thread::futex::{self, Flags, Timespec};

/// Sleep while `*word == expected`, at most `timeout`. Returns early on a wake-up, a signal, a
/// value change, or the timeout; the caller re-checks its condition in every case.
pub fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    // A timeout beyond the range of `Timespec` (292 billion years) is no timeout.
    let ts = Timespec::try_from(timeout).ok();
    // Every outcome (woken, EAGAIN for a changed value, EINTR, ETIMEDOUT) sends the caller back
    // to its condition.
    let _ = futex::wait(word, Flags::empty(), expected, ts.as_ref());
}

/// Wake every process sleeping on `word`.
pub fn wake_all(word: &AtomicU32) {
    let _ = futex::wake(word, Flags::empty(), i32::MAX as u32);
}

#[cfg(test)]
mod tests {
    use super::{wait, wake_all};
    use crate::Mem;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    #[test]
    #[cfg_attr(
        miri,
        ignore = "Miri rejects the types rustix passes to syscall(SYS_futex) (rust-lang/rust#161734)"
    )]
    fn a_wake_ends_the_wait() {
        let m = Mem::alloc(4, 4).unwrap();
        let waiter = {
            let m = m.clone();
            std::thread::spawn(move || {
                let word = m.atomic_u32(0).unwrap();
                while word.load(Ordering::Acquire) == 0 {
                    wait(word, 0, Duration::from_secs(60));
                }
            })
        };
        let word = m.atomic_u32(0).unwrap();
        word.store(1, Ordering::Release);
        wake_all(word);
        waiter.join().unwrap();
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "Miri rejects the types rustix passes to syscall(SYS_futex) (rust-lang/rust#161734)"
    )]
    fn a_wait_ends_on_another_value_or_at_its_timeout() {
        let word = AtomicU32::new(5);
        let start = Instant::now();
        wait(&word, 4, Duration::from_secs(60));
        wait(&word, 5, Duration::from_millis(20));
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(20), "{waited:?}");
        assert!(waited < Duration::from_secs(60), "{waited:?}");
    }
}
