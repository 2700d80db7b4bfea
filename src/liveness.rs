//! What this process has learnt about failed ranks of its job.
//!
//! Failures are reported by whoever notices them first: the launcher's hub (a rank it saw die),
//! the collective network (a peer's connection broke without a goodbye, or a peer forwarded a
//! failure it heard of), or the process manager (PMIx events). The first failure of the job is
//! kept; from then on every wait of the job ends with MPI_ERR_PROC_FAILED naming it, so a rank
//! blocked behind a live peer that is itself stuck behind the dead one does not wait forever.

use crate::error::{Error, ErrorClass, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// Called once with the world rank of the first failure (if known), e.g. to remove what the
/// dead process left in `/dev/shm`.
type OnFailure = Box<dyn Fn(Option<usize>) + Send + Sync>;

/// The failure state of a job, shared by every thread of the process.
#[derive(Default)]
pub(crate) struct Liveness {
    failed: AtomicBool,
    first: Mutex<Option<(Option<usize>, String)>>,
    on_failure: OnceLock<OnFailure>,
}

impl std::fmt::Debug for Liveness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Liveness")
            .field(
                "first",
                &*self.first.lock().unwrap_or_else(PoisonError::into_inner),
            )
            .finish_non_exhaustive()
    }
}

impl Liveness {
    pub(crate) fn new() -> Liveness {
        Liveness::default()
    }

    /// Records that world rank `rank` (`None`: unknown) failed for `reason`. Returns `true` if
    /// this is the first failure this process hears of (the caller then passes it on).
    pub(crate) fn fail(&self, rank: Option<usize>, reason: &str) -> bool {
        {
            let mut first = self.first.lock().unwrap_or_else(PoisonError::into_inner);
            if first.is_some() {
                return false;
            }
            *first = Some((rank, reason.to_owned()));
            self.failed.store(true, Ordering::Release);
        }
        tracing::warn!(failed = ?rank, reason, "the job has a failure");
        if let Some(hook) = self.on_failure.get() {
            hook(rank);
        }
        true
    }

    /// Sets what to do on the first failure (once; later calls are ignored). If the job has
    /// failed already, `hook` runs now.
    pub(crate) fn on_failure(&self, hook: OnFailure) {
        if self.on_failure.set(hook).is_ok()
            && let Some((rank, _)) = self.first()
            && let Some(hook) = self.on_failure.get()
        {
            hook(rank);
        }
    }

    fn first(&self) -> Option<(Option<usize>, String)> {
        self.first
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The job's first failure as MPI_ERR_PROC_FAILED, if there was one.
    pub(crate) fn failure(&self) -> Option<Error> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        self.first().map(|(rank, reason)| {
            let msg = match rank {
                Some(r) => format!("rank {r} failed: {reason}"),
                None => format!("a rank failed: {reason}"),
            };
            Error::new(ErrorClass::ProcFailed, msg)
        })
    }

    /// `Err` once the job has a failure.
    #[inline]
    pub(crate) fn check(&self) -> Result<()> {
        match self.failure() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn the_first_failure_is_kept_and_reported() {
        let l = Liveness::new();
        assert!(l.check().is_ok());
        assert!(l.fail(Some(3), "killed by signal 9"));
        assert!(!l.fail(Some(1), "later"));
        let e = l.check().unwrap_err();
        assert_eq!(e.class(), ErrorClass::ProcFailed);
        assert_eq!(e.message(), "rank 3 failed: killed by signal 9");
    }

    #[test]
    fn the_hook_runs_once_even_when_set_late() {
        let l = Liveness::new();
        let seen = Arc::new(AtomicUsize::new(0));
        assert!(l.fail(None, "gone"));
        let s = seen.clone();
        l.on_failure(Box::new(move |r| {
            assert_eq!(r, None);
            s.fetch_add(1, Ordering::SeqCst);
        }));
        l.fail(Some(2), "again");
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        assert_eq!(l.check().unwrap_err().message(), "a rank failed: gone");
    }
}
