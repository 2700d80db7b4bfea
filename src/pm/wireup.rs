//! The contract of a process manager: what the world needs from one, and the helpers every
//! implementation shares.

use crate::boot::Secret;
use crate::config::ProcessManager;
use crate::error::Result;

/// What the world needs from a process manager.
pub(crate) trait WireUp: Send + Sync {
    /// Which process manager this is.
    fn kind(&self) -> ProcessManager;
    /// This process's rank, `0..size`.
    fn rank(&self) -> usize;
    /// Number of ranks of the job.
    fn size(&self) -> usize;
    /// An id of the job, unique on this machine, usable in file names.
    fn job_id(&self) -> String;
    /// Publishes this rank's `card` and waits until every rank has published; returns the job
    /// secret, which the collective network's connections present.
    fn exchange(&self, card: &[u8]) -> Result<Secret>;
    /// The card `rank` published (after [`WireUp::exchange`]).
    fn card(&self, rank: usize) -> Result<Vec<u8>>;
    /// Leaves the process manager cleanly.
    fn finalize(&self) -> Result<()>;
}

/// `id` with every character a file name or segment name cannot hold replaced by `_`.
pub(super) fn file_safe(id: &str) -> String {
    id.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' => c,
            _ => '_',
        })
        .collect()
}

/// A job secret for a job whose process manager hands out none: rank 0 makes it and publishes
/// it with its card.
pub(super) fn fresh_secret() -> Result<Secret> {
    crate::boot::random()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_become_file_safe() {
        assert_eq!(file_safe("slurm.pmix.2.0"), "slurm.pmix.2.0");
        assert_eq!(file_safe("kvs_4975_0/x y"), "kvs_4975_0_x_y");
    }
}
