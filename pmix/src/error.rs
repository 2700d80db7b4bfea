//! Errors of PMIx calls.

use crate::sys;
use std::ffi::CStr;
use std::fmt;

/// A failed PMIx call: its name, its status code and the text PMIx gives for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmixError {
    call: &'static str,
    status: i32,
    text: String,
}

impl PmixError {
    /// The error of `call`, which returned `status`.
    pub(crate) fn new(call: &'static str, status: i32) -> PmixError {
        PmixError {
            call,
            status,
            text: status_text(status),
        }
    }

    /// An error of `call` found on our side (a value of the wrong type, a key too long).
    pub(crate) fn detail(call: &'static str, text: String) -> PmixError {
        PmixError {
            call,
            status: 0,
            text,
        }
    }

    /// The PMIx status code (0 for errors found outside PMIx).
    pub fn status(&self) -> i32 {
        self.status
    }
}

impl fmt::Display for PmixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            0 => write!(f, "{}: {}", self.call, self.text),
            s => write!(f, "{}: {} ({s})", self.call, self.text),
        }
    }
}

impl std::error::Error for PmixError {}

/// PMIx's name for `status` (`PMIx_Error_string`), such as "PROC-ABORTED-BY-SIG".
pub(crate) fn status_text(status: sys::pmix_status_t) -> String {
    // SAFETY: PMIx_Error_string takes any status value and returns a pointer to a static
    // NUL-terminated string, or NULL.
    let text = unsafe { sys::PMIx_Error_string(status) };
    if text.is_null() {
        return "unknown status".to_owned();
    }
    // SAFETY: non-null, NUL-terminated and static, as above.
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

/// `Ok` if `status` is PMIX_SUCCESS, else the error of `call`.
pub(crate) fn check(call: &'static str, status: sys::pmix_status_t) -> Result<(), PmixError> {
    if status == sys::PMIX_SUCCESS as sys::pmix_status_t {
        Ok(())
    } else {
        Err(PmixError::new(call, status))
    }
}
