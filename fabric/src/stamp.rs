//! Cheap time stamps for the owner's activity on an endpoint ([`crate::core::Core::touch`],
//! on every issue and wait): the CPU's time-stamp counter where the kernel keeps time by it,
//! which costs a few cycles where a clock read cost a tenth of a target's progress loop
//! (`perf`); else nanoseconds of the monotonic clock. Only the progress thread turns stamps
//! into durations, measuring the counter's rate against the clock since the stamps began.

use std::time::{Duration, Instant};

/// A source of activity stamps.
pub(crate) struct Stamps {
    /// Stamps are time-stamp counter values (else nanoseconds since `epoch`).
    tsc: bool,
    epoch: Instant,
    /// The stamp taken at `epoch`.
    first: u64,
}

/// How long the counter's rate is measured before durations are read from it; until then
/// [`Stamps::since`] says no time has passed.
const CALIBRATION: Duration = Duration::from_millis(1);

impl Stamps {
    pub(crate) fn new() -> Stamps {
        let tsc = tsc_is_clock();
        let epoch = Instant::now();
        let first = if tsc { counter() } else { 0 };
        Stamps { tsc, epoch, first }
    }

    /// The stamp of now.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        match self.tsc {
            true => counter(),
            false => self.epoch.elapsed().as_nanos() as u64,
        }
    }

    /// How long ago `stamp` was taken (zero for a stamp from the future, or while the counter's
    /// rate is still being measured).
    pub(crate) fn since(&self, stamp: u64) -> Duration {
        let now = self.now();
        let ticks = now.saturating_sub(stamp);
        if !self.tsc {
            return Duration::from_nanos(ticks);
        }
        let elapsed = self.epoch.elapsed();
        if elapsed < CALIBRATION {
            return Duration::ZERO;
        }
        let per_ns = now.saturating_sub(self.first) as f64 / elapsed.as_nanos() as f64;
        match per_ns > 0.0 {
            true => Duration::from_nanos((ticks as f64 / per_ns) as u64),
            false => Duration::ZERO,
        }
    }
}

/// Whether the kernel's clock source is the time-stamp counter: then it counts at a constant
/// rate and agrees across cores.
fn tsc_is_clock() -> bool {
    cfg!(target_arch = "x86_64")
        && std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .is_ok_and(|s| s.trim() == "tsc")
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn counter() -> u64 {
    // SAFETY: RDTSC reads a counter; it has no preconditions on x86_64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn counter() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_measure_time_after_calibration() {
        let s = Stamps::new();
        std::thread::sleep(CALIBRATION);
        let then = s.now();
        std::thread::sleep(Duration::from_millis(20));
        let since = s.since(then);
        assert!(
            since >= Duration::from_millis(18) && since < Duration::from_secs(2),
            "{since:?} after sleeping 20 ms"
        );
        assert_eq!(s.since(s.now() + (1 << 40)), Duration::ZERO);
    }
}
