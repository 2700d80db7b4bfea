//! What the `onesided` command (crate `onesided-cli`) needs from the library beyond the user API
//! and the bootstrap protocol of [`crate::boot`]: process-manager detection, the provider report
//! and the environment variables it passes on. Built with the `launcher` feature only; not a
//! stable API.

use crate::config::{Config, ProcessManager};
use crate::error::Result;

pub use crate::config::{ENV_PROGRESS_CPUS, ENV_TRANSPORT};
pub use crate::transport::report::{providers, verbs};

/// The process manager that started this process, found as [`crate::World::init_with`] finds
/// it with `config`.
pub fn process_manager(config: &Config) -> Result<ProcessManager> {
    crate::pm::detect_from_env(config.requested_process_manager())
}
