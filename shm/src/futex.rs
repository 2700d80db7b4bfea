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
        // The waiter sleeps once, for up to a minute; the word changes and the wake is sent
        // only once the kernel shows the waiter asleep. A lost wake leaves it asleep until the
        // timeout, which fails the bound below.
        let m = Mem::alloc(4, 4).unwrap();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let waiter = {
            let m = m.clone();
            std::thread::spawn(move || {
                let word = m.atomic_u32(0).unwrap();
                tid_tx
                    .send(rustix::thread::gettid().as_raw_nonzero())
                    .unwrap();
                let start = Instant::now();
                wait(word, 0, Duration::from_secs(60));
                (start.elapsed(), word.load(Ordering::Acquire))
            })
        };
        let tid = tid_rx.recv().unwrap();
        let stat = format!("/proc/self/task/{tid}/stat");
        let asleep = || {
            std::fs::read_to_string(&stat).is_ok_and(|s| {
                let state = s.rsplit_once(')').map(|(_, rest)| rest.trim_start());
                state.is_some_and(|rest| rest.starts_with('S'))
            })
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !asleep() {
            assert!(Instant::now() < deadline, "the waiter never went to sleep");
            std::thread::sleep(Duration::from_millis(1));
        }
        let word = m.atomic_u32(0).unwrap();
        word.store(1, Ordering::Release);
        wake_all(word);
        let (waited, seen) = waiter.join().unwrap();
        assert_eq!(seen, 1);
        assert!(
            waited < Duration::from_secs(10),
            "woken after {waited:?}: the wake was lost"
        );
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
