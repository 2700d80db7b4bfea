//! Cross-process futex wait/wake on a 32-bit word in shared memory.
//!
//! The non-private futex operations are used, so that waiters and wakers may be different
//! processes that map the same segment.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleep while `*word == expected`, at most `timeout`. Returns early on a wake-up, a signal, a
/// value change, or the timeout; the caller re-checks its condition in every case.
pub fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned 32-bit word for the duration of the call and `ts` a valid
    // relative timeout; FUTEX_WAIT only reads the word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        )
    };
}

/// Wake every process sleeping on `word`.
pub fn wake_all(word: &AtomicU32) {
    // SAFETY: `word` is a valid aligned word; FUTEX_WAKE does not access user memory beyond it.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX) };
}
