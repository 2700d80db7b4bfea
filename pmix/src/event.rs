//! Notification of failed processes: a PMIx event handler that hands each failure to a
//! callback.

use crate::client::{Client, RANK_UNDEF, RANK_WILDCARD, c_text};
use crate::error::PmixError;
use crate::sys;
use std::ffi::{CStr, c_void};
use std::ptr;
use std::sync::{Mutex, PoisonError};

/// A process failure PMIx reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The rank of the failed process in this namespace, when the event names one.
    pub rank: Option<u32>,
    /// The event's status code.
    pub status: i32,
    /// PMIx's text for the status.
    pub text: String,
}

type Callback = Box<dyn Fn(Failure) + Send + Sync>;

/// The callback the handler calls: PMIx's handler signature carries no user data.
static CALLBACK: Mutex<Option<Callback>> = Mutex::new(None);
/// Whether the handler is registered (once per process).
static REGISTERED: Mutex<bool> = Mutex::new(false);

/// The events that mean a process of the job is gone.
const CODES: [sys::pmix_status_t; 6] = [
    sys::PMIX_ERR_PROC_ABORTED,
    sys::PMIX_ERR_PROC_ABORTING,
    sys::PMIX_ERR_PROC_ABORTED_BY_SIG,
    sys::PMIX_EVENT_PROC_TERMINATED,
    sys::PMIX_ERR_LOST_CONNECTION,
    sys::PMIX_ERR_UNREACH,
];

impl Client {
    /// Calls `f` for every process failure PMIx reports (aborted, killed by a signal,
    /// terminated with a non-zero status, unreachable, or the server lost). The handler is
    /// registered once per process; a later call replaces the callback. `f` runs on PMIx's
    /// progress thread and must be quick.
    pub fn on_failure(&self, f: impl Fn(Failure) + Send + Sync + 'static) -> Result<(), PmixError> {
        *CALLBACK.lock().unwrap_or_else(PoisonError::into_inner) = Some(Box::new(f));
        let mut registered = REGISTERED.lock().unwrap_or_else(PoisonError::into_inner);
        if *registered {
            return Ok(());
        }
        let mut codes = CODES;
        // SAFETY: a blocking registration (no completion callback): `codes` is valid for the
        // call, and `handler` is a function that lives as long as the process.
        let rc = unsafe {
            sys::PMIx_Register_event_handler(
                codes.as_mut_ptr(),
                codes.len(),
                ptr::null_mut(),
                0,
                Some(handler),
                None,
                ptr::null_mut(),
            )
        };
        if rc < 0 {
            return Err(PmixError::new("PMIx_Register_event_handler", rc));
        }
        *registered = true;
        Ok(())
    }
}

/// The failure an event describes; `None` for a process that terminated with status 0.
///
/// # Safety
/// `source` is null or a valid proc, and `info` points to `ninfo` valid infos, as PMIx passes
/// them to a notification function.
unsafe fn describe(
    status: sys::pmix_status_t,
    source: *const sys::pmix_proc_t,
    info: *const sys::pmix_info_t,
    ninfo: usize,
) -> Option<Failure> {
    let named = |r: u32| (r != RANK_WILDCARD && r != RANK_UNDEF).then_some(r);
    // SAFETY: as the caller promises, `source` is null or valid.
    let mut rank = unsafe { source.as_ref() }.and_then(|p| named(p.rank));
    let infos: &[sys::pmix_info_t] = match info.is_null() {
        true => &[],
        // SAFETY: as the caller promises, `info` points to `ninfo` valid infos.
        false => unsafe { std::slice::from_raw_parts(info, ninfo) },
    };
    let key_of = |k: &[u8]| CStr::from_bytes_with_nul(k).map(|c| c.to_string_lossy().into_owned());
    let affected = key_of(sys::PMIX_EVENT_AFFECTED_PROC).unwrap_or_default();
    let exit_code = key_of(sys::PMIX_EXIT_CODE).unwrap_or_default();
    for i in infos {
        let key = c_text(&i.key);
        let ty = u32::from(i.value.type_);
        // SAFETY: each union field is read only when the value's type says it holds it; the
        // proc pointer of a PMIX_PROC value is PMIx's and valid during the notification.
        unsafe {
            if key == affected && ty == sys::PMIX_PROC && !i.value.data.proc_.is_null() {
                rank = named((*i.value.data.proc_).rank).or(rank);
            }
            if key == exit_code && status == sys::PMIX_EVENT_PROC_TERMINATED {
                let clean = match ty {
                    sys::PMIX_INT => i.value.data.integer == 0,
                    sys::PMIX_UINT32 => i.value.data.uint32 == 0,
                    _ => false,
                };
                if clean {
                    return None;
                }
            }
        }
    }
    Some(Failure {
        rank,
        status,
        text: PmixError::new("event", status).to_string(),
    })
}

/// The event handler PMIx calls (on its progress thread).
unsafe extern "C" fn handler(
    _id: usize,
    status: sys::pmix_status_t,
    source: *const sys::pmix_proc_t,
    info: *mut sys::pmix_info_t,
    ninfo: usize,
    _results: *mut sys::pmix_info_t,
    _nresults: usize,
    done: sys::pmix_event_notification_cbfunc_fn_t,
    cbdata: *mut c_void,
) {
    // SAFETY: PMIx passes a valid (or null) source and `ninfo` valid infos.
    if let Some(failure) = unsafe { describe(status, source, info, ninfo) } {
        let callback = CALLBACK.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = callback.as_ref() {
            f(failure);
        }
    }
    if let Some(done) = done {
        // SAFETY: telling PMIx this handler is done with the event, with the cbdata it gave.
        unsafe {
            done(
                sys::PMIX_EVENT_ACTION_COMPLETE,
                ptr::null_mut(),
                0,
                None,
                ptr::null_mut(),
                cbdata,
            )
        };
    }
}
