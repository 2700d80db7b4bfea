//! libfabric's start-up, begun by `World::init` on a thread of its own where this rank's windows
//! will use the fabric, so that it overlaps whatever the program does before its first window
//! instead of adding to that window.
//!
//! Loading Debian's libfabric 1.17 and its first `fi_getinfo` cost each process about 0.3 s
//! here (`compare/first-window.md`): the library's dependencies calibrate a clock for 2 x 100 ms
//! as they load, mostly asleep, and the first `fi_getinfo` runs every built-in provider's
//! initialization (the verbs provider reads `/proc/kallsyms` twice). The first window takes
//! what is done and waits for the rest: the library is loaded once per process (a `OnceLock`)
//! and libfabric initializes its providers once, under its own lock.
//!
//! It begins as `World::init` ends, after the start-up allgather:
//! - Not before the rank has joined its process manager: libfabric reads its variables with
//!   `getenv`, and a process manager's client may set variables as it starts (PMIx_Init does),
//!   which `getenv` on another thread does not survive.
//! - Not while `World::init` still connects its collective network, which starts a thread per
//!   connection. glibc holds its loader's lock while a library's dependencies run their
//!   constructors, and a Rust thread takes that lock as it starts (to register its thread-local
//!   destructors): begun right after the join, the start-up held each connection's thread until
//!   the calibration was over, and `World::init` took 207 ms at 2 ranks over tcp against 3.7.
//!   A thread the program starts in those 0.2 s waits the same way.

use super::resources::request;
use crate::config::FabricConfig;
use onesided_fabric as fi;
use std::thread::JoinHandle;
use std::time::Instant;

/// Load libfabric and initialize its providers for `config` on a new thread; `None` where no
/// thread could be started (the first window then does it).
pub(crate) fn begin(config: &FabricConfig) -> Option<JoinHandle<()>> {
    let req = request(config);
    std::thread::Builder::new()
        .name("onesided-fabric-start".into())
        .spawn(move || {
            let start = Instant::now();
            // Errors are the first window's to report, with its context.
            let found = fi::Provider::find(&req);
            tracing::debug!(
                elapsed_ms = start.elapsed().as_millis() as u64,
                ok = found.is_ok(),
                "libfabric started ahead of the first window"
            );
        })
        .ok()
}
