//! The library's diagnostics through `tracing`: the process manager and rank a process joined
//! as, the transport each target of a window is reached by, the libfabric provider, domain and
//! MR mode chosen, retried operations and peers found failed. Silent by default.
//!
//! `ONESIDED_LOG` holds `tracing` filter directives (`debug`, `onesided=trace`, ...). When it is
//! set, [`crate::World::init`] installs a subscriber that prints matching events to stderr, each
//! line naming the rank, unless the program has installed a subscriber of its own; then that one
//! receives the events, under the program's filter.

use std::sync::OnceLock;
use std::time::Instant;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

use crate::error::{Error, ErrorClass, Result};

/// The variable with the filter directives.
pub(crate) const ENV_LOG: &str = "ONESIDED_LOG";

/// This process's rank in its job, once known: printed on every line.
static RANK: OnceLock<usize> = OnceLock::new();

/// Installs the stderr subscriber when `ONESIDED_LOG` asks for one and the program has none.
/// A directive `tracing` cannot parse is an error (MPI_ERR_ARG) naming the variable.
pub(crate) fn init() -> Result<()> {
    let directives = std::env::var(ENV_LOG).unwrap_or_default();
    if directives.trim().is_empty() {
        return Ok(());
    }
    let filter = EnvFilter::builder().parse(&directives).map_err(|e| {
        Error::new(
            ErrorClass::Arg,
            format!("{ENV_LOG}={directives:?} is not a tracing filter: {e}"),
        )
    })?;
    // A subscriber the program installed first stays; the events go to it.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_timer(Stamp(Instant::now()))
        .try_init();
    Ok(())
}

/// Records this process's rank for the lines printed from now on.
pub(crate) fn set_rank(rank: usize) {
    let _ = RANK.set(rank);
}

/// Seconds since the subscriber was installed, and the rank: `0.001234s rank 3`.
struct Stamp(Instant);

impl FormatTime for Stamp {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        let t = self.0.elapsed().as_secs_f64();
        match RANK.get() {
            Some(rank) => write!(w, "{t:.6}s rank {rank}"),
            None => write!(w, "{t:.6}s rank ?"),
        }
    }
}
