//! The options of `onesided bench`, checked against the test they are given to, and the
//! OSU iteration counts.

use super::{BenchArgs, Creation, SyncMode, Test};
use onesided::{Error, ErrorClass, Result};

/// The largest window a test may create (bandwidth tests: size * W bytes).
const MAX_WINDOW: usize = 1 << 30;
/// Messages up to this size get the "small" iteration counts.
const SMALL: usize = 8192;

/// Message sizes: every power of two from `min` to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// The smallest size in bytes (a power of two).
    pub min: usize,
    /// The largest size in bytes (a power of two, at least `min`).
    pub max: usize,
}

impl Sizes {
    /// The OSU default, 1 B to 4 MiB.
    pub const DEFAULT: Sizes = Sizes {
        min: 1,
        max: 4 << 20,
    };

    /// The sizes in increasing order.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        std::iter::successors(Some(self.min), |s| s.checked_mul(2))
            .take_while(move |s| *s <= self.max)
    }
}

/// One size: a byte count with an optional K (KiB) or M (MiB) suffix.
fn parse_size(s: &str) -> std::result::Result<usize, String> {
    let (digits, scale) = match s.strip_suffix(['K', 'k']) {
        Some(d) => (d, 1usize << 10),
        None => match s.strip_suffix(['M', 'm']) {
            Some(d) => (d, 1 << 20),
            None => (s, 1),
        },
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 64, 8K, 4M)"))?;
    let n = n
        .checked_mul(scale)
        .ok_or_else(|| format!("{s} is too large"))?;
    if !n.is_power_of_two() {
        return Err(format!("{s} is not a power of two of at least 1 byte"));
    }
    Ok(n)
}

/// Parses `-m [MIN:]MAX`; MIN defaults to 1.
pub fn parse_sizes(s: &str) -> std::result::Result<Sizes, String> {
    let (min, max) = match s.split_once(':') {
        Some((min, max)) => (parse_size(min)?, parse_size(max)?),
        None => (1, parse_size(s)?),
    };
    if min > max {
        return Err(format!("MIN {min} is larger than MAX {max}"));
    }
    Ok(Sizes { min, max })
}

/// Whether a test times latency or bandwidth (they have different OSU iteration counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Latency,
    Bandwidth,
}

/// Warm-up and timed iterations of one size.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pass {
    pub warmup: usize,
    pub iters: usize,
}

/// The options with their defaults filled in, valid for every test they will run.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub sync: SyncMode,
    pub creation: Creation,
    pub sizes: Sizes,
    pub window: usize,
    iterations: Option<usize>,
    warmup: Option<usize>,
}

fn usage(msg: String) -> Error {
    Error::new(ErrorClass::Arg, msg)
}

/// The tests that accept an option, for the message when it is given to another one.
fn refuse(test: Test, option: &str, accepted_by: &str) -> Error {
    usage(format!(
        "{option} applies to {accepted_by}, not to {}",
        test.name()
    ))
}

impl Plan {
    /// Checks `args` against the test and fills in the defaults.
    pub fn new(args: &BenchArgs) -> Result<Plan> {
        let t = args.test;
        let rma = matches!(
            t,
            Test::PutLatency | Test::GetLatency | Test::PutBw | Test::GetBw | Test::All
        );
        let windowed = matches!(t, Test::PutBw | Test::GetBw | Test::MemcpyBw | Test::All);
        let sized = t != Test::AtomicPingpong;
        if args.sync.is_some() && !rma {
            return Err(refuse(
                t,
                "-s",
                "the RMA tests (put/get latency and bandwidth)",
            ));
        }
        if args.creation.is_some() && !rma {
            return Err(refuse(
                t,
                "-w",
                "the RMA tests (put/get latency and bandwidth)",
            ));
        }
        if args.window.is_some() && !windowed {
            return Err(refuse(
                t,
                "-W",
                "the bandwidth tests (put_bw, get_bw, memcpy_bw)",
            ));
        }
        if args.sizes.is_some() && !sized {
            return Err(refuse(t, "-m", "the tests that sweep message sizes"));
        }
        if args.iterations == Some(0) {
            return Err(usage("-i must be at least 1".into()));
        }
        let window = args.window.unwrap_or(64);
        if window == 0 {
            return Err(usage("-W must be at least 1".into()));
        }
        let sizes = args.sizes.unwrap_or(Sizes::DEFAULT);
        let per_size = if windowed { window } else { 1 };
        if sizes
            .max
            .checked_mul(per_size)
            .is_none_or(|b| b > MAX_WINDOW)
        {
            return Err(usage(format!(
                "messages of {} bytes with -W {per_size} need more than {MAX_WINDOW} bytes of window",
                sizes.max
            )));
        }
        Ok(Plan {
            sync: args.sync.unwrap_or(SyncMode::Flush),
            creation: args.creation.unwrap_or(Creation::Allocate),
            sizes,
            window,
            iterations: args.iterations,
            warmup: args.warmup,
        })
    }

    /// The iterations of a `kind` test at `size` bytes: the OSU counts unless -i / -x say otherwise.
    pub fn pass(&self, kind: Kind, size: usize) -> Pass {
        let (iters, warmup) = match (kind, size <= SMALL) {
            (Kind::Latency, true) => (10_000, 100),
            (Kind::Latency, false) => (1_000, 10),
            (Kind::Bandwidth, true) => (100, 10),
            (Kind::Bandwidth, false) => (20, 2),
        };
        Pass {
            warmup: self.warmup.unwrap_or(warmup),
            iters: self.iterations.unwrap_or(iters),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_sizes("8:8"), Ok(Sizes { min: 8, max: 8 }));
        assert_eq!(
            parse_sizes("4M"),
            Ok(Sizes {
                min: 1,
                max: 4 << 20
            })
        );
        assert_eq!(
            parse_sizes("1k:2K"),
            Ok(Sizes {
                min: 1024,
                max: 2048
            })
        );
        assert!(parse_sizes("0").is_err());
        assert!(parse_sizes("3").is_err());
        assert!(parse_sizes("8:4").is_err());
        assert!(parse_sizes(":4").is_err());
        assert!(parse_sizes("x").is_err());
        assert!(parse_sizes("99999999999999999999M").is_err());
    }

    #[test]
    fn sizes_iterate_by_doubling() {
        let v: Vec<usize> = Sizes { min: 2, max: 16 }.iter().collect();
        assert_eq!(v, [2, 4, 8, 16]);
        assert_eq!(Sizes::DEFAULT.iter().count(), 23);
    }
}
