//! What rank 1 does while rank 0 times a passive-target test (`--target`): wait inside
//! onesided, as OSU's target does, or sleep or compute without calling it, so that its memory
//! is served only by what onesided runs beside the application (shared memory needs nothing;
//! the fabric needs its progress thread).
//!
//! A busy rank 1 learns that the timed loop is over from a word at the end of its window:
//! rank 0 puts the number of the repetition there, and rank 1 looks at it with plain loads
//! between slices of sleep or work.

use onesided::{Assert, LockType, Result, Window};
use std::cell::Cell;
use std::time::{Duration, Instant};

/// What rank 1 does during a passive-target test.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[value(rename_all = "snake_case")]
pub enum Target {
    /// Wait inside onesided (in the window's closing fence), as OSU's target does.
    #[default]
    Wait,
    /// Sleep (std::thread::sleep), without calling onesided.
    Sleep,
    /// Compute (a loop of arithmetic), without calling onesided.
    Compute,
}

impl Target {
    /// The name `--target` takes.
    pub fn name(self) -> &'static str {
        match self {
            Target::Wait => "wait",
            Target::Sleep => "sleep",
            Target::Compute => "compute",
        }
    }

    /// The phrase of the report's note, `None` for OSU's own target.
    pub fn note(self) -> Option<&'static str> {
        match self {
            Target::Wait => None,
            Target::Sleep => Some("rank 1 sleeps, without calling onesided"),
            Target::Compute => Some("rank 1 computes, without calling onesided"),
        }
    }
}

/// The bytes of a window for a test moving `bytes` bytes: the end-of-loop word follows them,
/// 8-aligned, and ends the window.
pub fn window_bytes(bytes: usize) -> usize {
    bytes.next_multiple_of(8) + 8
}

/// The displacement of the end-of-loop word in a window of [`window_bytes`].
fn word(window: usize) -> usize {
    window - 8
}

/// How long a busy rank 1 sleeps or computes between two looks at the word.
const SLICE: Duration = Duration::from_micros(50);

thread_local! {
    /// Timed loops so far on this rank: both ranks count the same loops.
    static LOOPS: Cell<u64> = const { Cell::new(0) };
}

fn next_loop() -> u64 {
    LOOPS.with(|n| {
        n.set(n.get() + 1);
        n.get()
    })
}

/// Rank 0, after its timed loop: tell a busy rank 1 that it is over (windows of
/// [`window_bytes`]). Nothing to do for [`Target::Wait`], the only target the active modes
/// and dynamic windows take (`options.rs`).
pub fn release(win: &Window<'_>, target: Target) -> Result<()> {
    if target == Target::Wait {
        return Ok(());
    }
    let n = next_loop();
    win.lock(LockType::Shared, 1, Assert::NONE)?;
    win.put(&[n], 1, word(win.size()))?;
    win.unlock(1)
}

/// Rank 1: sleep or compute until rank 0's timed loop is over (at once for [`Target::Wait`]).
pub fn occupy(win: &Window<'_>, target: Target) -> Result<()> {
    if target == Target::Wait {
        return Ok(());
    }
    let n = next_loop();
    let at = word(win.size());
    let mut seen = [0u64];
    loop {
        win.read_local(at, &mut seen)?;
        // At least `n`: rank 0 may end its next loop, and put `n + 1`, within one slice.
        if seen[0] >= n {
            return Ok(());
        }
        match target {
            Target::Sleep => std::thread::sleep(SLICE),
            _ => compute(SLICE),
        }
    }
}

/// Computes (a loop of integer arithmetic, without calling onesided) for `time`.
pub fn compute(time: Duration) {
    let start = Instant::now();
    let mut sink = 0u64;
    while start.elapsed() < time {
        for i in 0..64u64 {
            sink = std::hint::black_box(sink.wrapping_mul(6364136223846793005) ^ i);
        }
    }
    std::hint::black_box(sink);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_lies_past_the_test_bytes_and_is_aligned() {
        for bytes in [1, 7, 8, 9, 4096, 4097] {
            let w = window_bytes(bytes);
            assert!(word(w) >= bytes, "{bytes}");
            assert_eq!(word(w) % 8, 0);
            assert!(word(w) + 8 <= w);
        }
    }
}
