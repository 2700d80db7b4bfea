//! libfabric errors with their `fi_strerror` text.

use crate::library::{Unloadable, loaded};
use crate::sys;
use std::ffi::CStr;
use std::fmt;

/// A failed libfabric call: what was being done and the (positive) libfabric error code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FiError {
    /// The call or step that failed, e.g. "fi_write".
    pub op: String,
    /// The positive error code (FI_EAGAIN, FI_ENODATA, ... or an errno).
    pub code: i32,
    /// Extra text from the provider (an error completion's description), if any.
    pub detail: String,
}

impl FiError {
    pub(crate) fn new(op: impl Into<String>, ret: i64) -> FiError {
        FiError {
            op: op.into(),
            code: ret.unsigned_abs().min(i32::MAX as u64) as i32,
            detail: String::new(),
        }
    }

    /// An error with provider text and no code of its own.
    pub(crate) fn with_detail(op: impl Into<String>, code: i32, detail: String) -> FiError {
        FiError {
            op: op.into(),
            code,
            detail,
        }
    }

    /// The `fi_strerror` text of the code; the system's text of an errno value where libfabric
    /// is not loaded (an error of loading it).
    pub fn text(&self) -> String {
        let Some(lib) = loaded() else {
            let mut buf = [0 as libc::c_char; 128];
            // SAFETY: `buf` is writable for its length; strerror_r writes a NUL-terminated text
            // into it, or fails and leaves it as it was (zeroed: an empty string).
            unsafe { libc::strerror_r(self.code, buf.as_mut_ptr(), buf.len()) };
            // SAFETY: `buf` was zeroed and strerror_r NUL-terminates what it writes within it.
            return unsafe { CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .into_owned();
        };
        // SAFETY: fi_strerror accepts any int and returns a pointer to a static NUL-terminated
        // string (libfabric's table, or strerror's for errno values).
        unsafe { CStr::from_ptr((lib.strerror)(self.code)) }
            .to_string_lossy()
            .into_owned()
    }

    /// The peer is gone or unreachable (the connection failed or was reset).
    pub fn is_unreachable(&self) -> bool {
        [
            sys::FI_ECONNREFUSED,
            sys::FI_ECONNRESET,
            sys::FI_ECONNABORTED,
            sys::FI_EHOSTUNREACH,
            sys::FI_ENOTCONN,
            sys::FI_ETIMEDOUT,
            sys::FI_EIO,
        ]
        .iter()
        .any(|&c| c as i32 == self.code)
    }
}

impl fmt::Display for FiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({})", self.op, self.text(), self.code)?;
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl std::error::Error for FiError {}

impl From<Unloadable> for FiError {
    /// The error of a call that needs libfabric where it could not be loaded.
    fn from(why: Unloadable) -> FiError {
        FiError::with_detail("loading libfabric", libc::ELIBACC, why.0.to_owned())
    }
}

/// `Ok(ret)` for a non-negative libfabric return, else the error of `op`.
pub(crate) fn check(op: &str, ret: impl Into<i64>) -> Result<i64, FiError> {
    let ret = ret.into();
    if ret < 0 {
        Err(FiError::new(op, ret))
    } else {
        Ok(ret)
    }
}

/// The error of `op` given an argument it cannot take (`FI_EINVAL`).
pub(crate) fn invalid(op: &str) -> FiError {
    FiError::new(op, -(sys::FI_EINVAL as i64))
}

/// The object a libfabric call `op` opens through the out-pointer `open` is given, once the
/// call succeeded: a provider may leave in the out-pointer, on failure, an object it freed
/// itself (the verbs provider does), which its owner must then not close again.
pub(crate) fn opened<T>(
    op: &str,
    open: impl FnOnce(&mut *mut T) -> i32,
) -> Result<*mut T, FiError> {
    let mut raw = std::ptr::null_mut();
    check(op, open(&mut raw))?;
    Ok(raw)
}
