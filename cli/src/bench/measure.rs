//! Timing a loop the OSU way, and the units results are printed in.

use super::options::Pass;
use super::stats::Summary;
use onesided::Result;
use std::time::{Duration, Instant};

/// Runs `body` `pass.warmup` times, then `pass.iters` times under the clock; returns the time
/// of the timed iterations. With `pass.per_op`, each iteration is timed on its own and the time
/// returned is the median iteration's, as many times as there were iterations.
#[inline(always)]
pub(super) fn timed(pass: Pass, mut body: impl FnMut() -> Result<()>) -> Result<Duration> {
    for _ in 0..pass.warmup {
        body()?;
    }
    if pass.per_op {
        let mut times = Vec::with_capacity(pass.iters);
        for _ in 0..pass.iters {
            let start = Instant::now();
            body()?;
            times.push(start.elapsed().as_secs_f64());
        }
        let median = Summary::of(&times).median;
        return Ok(Duration::try_from_secs_f64(median * pass.iters as f64).unwrap_or_default());
    }
    let start = Instant::now();
    for _ in 0..pass.iters {
        body()?;
    }
    Ok(start.elapsed())
}

/// Microseconds per unit, `units` units in `time` (counts as f64: -i may be huge).
pub(super) fn micros(time: Duration, units: f64) -> f64 {
    time.as_secs_f64() * 1e6 / units
}

/// MB/s (1 MB = 1e6 B) of `bytes` bytes moved in `time`.
pub(super) fn mbps(time: Duration, bytes: f64) -> f64 {
    bytes / 1e6 / time.as_secs_f64()
}
