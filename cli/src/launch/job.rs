//! What a job to launch is: its ranks, program and placement, and how long its ranks have to
//! start.

use onesided::{Error, ErrorClass, Result};
use std::ffi::OsString;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// Environment variable holding the start-up timeout in seconds ([`StartTimeout`]), read when
/// `--start-timeout` is not given.
pub const ENV_START_TIMEOUT: &str = "ONESIDED_START_TIMEOUT";

/// How long, once the first rank of a job has joined the launcher's hub, the other ranks have to
/// join it before the launcher names them and stops the job: a rank that never starts would
/// otherwise leave the others waiting forever. `None`: no limit. Parsed from seconds (`"2.5"`);
/// `"0"` is no limit. The default is 60 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartTimeout(pub Option<Duration>);

impl Default for StartTimeout {
    fn default() -> StartTimeout {
        StartTimeout(Some(Duration::from_secs(60)))
    }
}

impl FromStr for StartTimeout {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<StartTimeout, String> {
        let seconds: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a number of seconds"))?;
        match Duration::try_from_secs_f64(seconds) {
            Ok(d) if d.is_zero() => Ok(StartTimeout(None)),
            Ok(d) => Ok(StartTimeout(Some(d))),
            Err(_) => Err(format!("{s:?} is not a number of seconds")),
        }
    }
}

impl StartTimeout {
    /// The timeout in [`ENV_START_TIMEOUT`], or the default if it is unset. A malformed value
    /// is an [`ErrorClass::Arg`] error.
    pub fn from_env() -> Result<StartTimeout> {
        match std::env::var(ENV_START_TIMEOUT) {
            Ok(value) => value
                .parse()
                .map_err(|e| Error::new(ErrorClass::Arg, format!("{ENV_START_TIMEOUT}: {e}"))),
            Err(std::env::VarError::NotPresent) => Ok(StartTimeout::default()),
            Err(e) => Err(Error::new(
                ErrorClass::Arg,
                format!("{ENV_START_TIMEOUT}: {e}"),
            )),
        }
    }
}

/// Placement of ranks on CPUs.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bind {
    /// Bind when there are at least as many CPUs as ranks.
    Auto,
    /// Bind rank r to the r-th allowed CPU (round robin when there are more ranks); with the
    /// `hwloc` feature, to the allowed hardware threads of the r-th core that has some.
    Core,
    /// Bind rank r to the allowed CPUs of the r-th NUMA node that has some (round robin); needs
    /// the `hwloc` feature.
    Numa,
    /// No binding.
    None,
}

/// A job to launch.
#[derive(Debug, Clone)]
pub struct Job {
    /// Number of ranks.
    pub n: usize,
    /// Program every rank runs (looked up in `PATH` if it has no `/`).
    pub program: PathBuf,
    /// Arguments of the program.
    pub args: Vec<OsString>,
    /// Prefix every output line with `[RANK] `.
    pub tag_output: bool,
    /// Simulate this many nodes (sets `ONESIDED_NODE`).
    pub simulate_nodes: Option<usize>,
    /// Extra environment variables of the ranks, set after (so overriding) the `ONESIDED_*` ones.
    pub extra_env: Vec<(String, String)>,
    /// Placement of the ranks on CPUs.
    pub bind: Bind,
}
