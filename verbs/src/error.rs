//! Errors of the verbs layer: a failed call with its errno, or a work request that completed
//! with an error status.

use std::fmt;

/// Why a verbs call or operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerbsError {
    /// What was being done.
    what: String,
    /// The errno of a failed call (0 where a completion status says why).
    errno: i32,
    /// The completion status of a failed work request (`ibv_wc_status`) and libibverbs' name
    /// for it.
    status: Option<(u32, String)>,
    /// More words: the loader's message, the device or peer concerned.
    detail: Option<String>,
    /// The peer is unreachable or gone: its queue pair broke on retries, or the caller gave up
    /// on it.
    unreachable: bool,
}

/// `IBV_WC_RETRY_EXC_ERR`, `IBV_WC_RNR_RETRY_EXC_ERR`, `IBV_WC_WR_FLUSH_ERR`: the statuses of a
/// peer that stopped answering (or of work flushed after that).
const UNREACHABLE: [u32; 3] = [
    crate::sys::IBV_WC_RETRY_EXC_ERR,
    crate::sys::IBV_WC_RNR_RETRY_EXC_ERR,
    crate::sys::IBV_WC_WR_FLUSH_ERR,
];

impl VerbsError {
    /// A failed call doing `what`, with `errno`.
    pub(crate) fn new(what: impl Into<String>, errno: i32) -> VerbsError {
        VerbsError {
            what: what.into(),
            errno,
            status: None,
            detail: None,
            unreachable: false,
        }
    }

    /// A failed call doing `what`, with the thread's errno.
    pub(crate) fn last(what: impl Into<String>) -> VerbsError {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        VerbsError::new(what, errno)
    }

    /// A work request doing `what` completed with `status`, which libibverbs calls `text`.
    pub(crate) fn completion(what: impl Into<String>, status: u32, text: String) -> VerbsError {
        VerbsError {
            status: Some((status, text)),
            unreachable: UNREACHABLE.contains(&status),
            ..VerbsError::new(what, 0)
        }
    }

    /// The caller gave up waiting on a peer it judges gone.
    pub(crate) fn gone(what: impl Into<String>) -> VerbsError {
        VerbsError {
            unreachable: true,
            ..VerbsError::new(what, libc::EHOSTDOWN)
        }
    }

    /// The same error with more words.
    pub(crate) fn detail(mut self, detail: impl Into<String>) -> VerbsError {
        self.detail = Some(detail.into());
        self
    }

    /// Whether the peer is unreachable or gone (its queue pair gave up retrying, or the caller
    /// judged it gone): a failed process, not a failed operation.
    pub fn is_unreachable(&self) -> bool {
        self.unreachable
    }

    /// The completion status of a failed work request, if that is what failed.
    pub fn status(&self) -> Option<u32> {
        self.status.as_ref().map(|(status, _)| *status)
    }

    /// The errno of a failed call (0 where a completion status says why).
    pub fn errno(&self) -> i32 {
        self.errno
    }
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.what)?;
        match &self.status {
            Some((s, text)) => write!(f, ": {text} ({s})")?,
            None if self.errno != 0 => {
                write!(f, ": {}", std::io::Error::from_raw_os_error(self.errno))?
            }
            None => {}
        }
        if let Some(d) = &self.detail {
            write!(f, " ({d})")?;
        }
        Ok(())
    }
}

impl std::error::Error for VerbsError {}
