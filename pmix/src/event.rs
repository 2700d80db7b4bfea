//! Notification of failed processes: one PMIx event handler per process that hands each
//! failure to the callback of [`Client::on_failure`].

use crate::client::{Client, RANK_UNDEF, RANK_WILDCARD};
use crate::error::{PmixError, status_text};
use crate::sys;
use crate::value::{self, c_text, header_key, is_key};
use std::ffi::{CStr, c_void};
use std::panic::AssertUnwindSafe;
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A process failure PMIx reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The rank of the failed process in this namespace, when the event names one of ours.
    pub rank: Option<u32>,
    /// The event's status code (`PMIX_ERR_PROC_ABORTED_BY_SIG`, ...).
    pub status: i32,
    /// PMIx's name for the status (`PMIx_Error_string`), such as "PROC-ABORTED-BY-SIG".
    pub text: String,
}

/// What the handler needs: PMIx's handler signature carries no user data.
struct Hook {
    /// The namespace whose ranks a failure names.
    namespace: String,
    callback: Box<dyn Fn(Failure) + Send + Sync>,
}

/// The current hook, replaced by each [`Client::on_failure`]. The handler holds the lock only
/// to clone the `Arc`, so a callback may itself call `on_failure`.
static HOOK: Mutex<Option<Arc<Hook>>> = Mutex::new(None);

/// The event codes that mean a process of the job is gone: those of `PMIX_ERR_PROC_ABORTED`,
/// `PMIX_ERR_PROC_ABORTED_BY_SIG`, `PMIX_EVENT_PROC_TERMINATED`, `PMIX_ERR_LOST_CONNECTION`,
/// `PMIX_EVENT_JOB_END`, `PMIX_ERR_UNREACH` and `PMIX_ERR_PROC_ABORTING` that the installed
/// headers define (chosen by `build.rs`).
const CODES: &[sys::pmix_status_t] = &include!(concat!(env!("OUT_DIR"), "/failure_codes.rs"));

const AFFECTED_PROC: &CStr = header_key(sys::PMIX_EVENT_AFFECTED_PROC);
const EXIT_CODE: &CStr = header_key(sys::PMIX_EXIT_CODE);
const JOB_TERM_STATUS: &CStr = header_key(sys::PMIX_JOB_TERM_STATUS);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Client {
    /// Calls `f` for every process failure PMIx reports: a process aborted, aborting or killed
    /// by a signal, a process or the job terminated (with a non-zero exit code or status; a
    /// clean exit is not a failure), a peer unreachable or the server lost.
    ///
    /// The handler is registered once per process; a later call replaces the callback. The
    /// call returns once PMIx has confirmed the registration. `f` runs on PMIx's progress
    /// thread, so it must be quick and must not wait for other PMIx calls.
    ///
    /// Which events arrive depends on the launcher. The loss of the server always does (PMIx
    /// raises `PMIX_ERR_LOST_CONNECTION` in the client itself). Open MPI 4.1's `mpirun` sends
    /// none for a peer killed by a signal: by default it ends the whole job, and with
    /// `--enable-recovery` its notification fails inside its PMIx server.
    pub fn on_failure(&self, f: impl Fn(Failure) + Send + Sync + 'static) -> Result<(), PmixError> {
        let hook = Hook {
            namespace: self.namespace().to_owned(),
            callback: Box::new(f),
        };
        *lock(&HOOK) = Some(Arc::new(hook));
        let mut registered = crate::lifecycle::registered();
        if *registered {
            return Ok(());
        }
        let mut codes = CODES.to_vec();
        // SAFETY: with no completion callback the registration blocks (pmix.h: "If cbfunc is
        // NULL, then this is treated as a BLOCKING call"); `codes` is valid for the call, and
        // `handler` is a function that lives as long as the process.
        let id = unsafe {
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
        if id < 0 {
            return Err(PmixError::new("PMIx_Register_event_handler", id));
        }
        *registered = true;
        Ok(())
    }
}

/// The rank `p` names, if it is a single process of `namespace`.
fn our_rank(p: &sys::pmix_proc_t, namespace: &str) -> Option<u32> {
    let single = p.rank != RANK_WILDCARD && p.rank != RANK_UNDEF;
    (single && c_text(&p.nspace) == namespace).then_some(p.rank)
}

/// The failure an event describes, `None` for a clean termination.
///
/// The rank comes from `PMIX_EVENT_AFFECTED_PROC` when the event carries it, else from
/// `source`; either must be a single process of `namespace`.
///
/// # Safety
/// `source` is null or a valid proc, and `info` is null or points to `ninfo` valid infos, as
/// PMIx passes them to a notification function.
unsafe fn describe(
    namespace: &str,
    status: sys::pmix_status_t,
    source: *const sys::pmix_proc_t,
    info: *const sys::pmix_info_t,
    ninfo: usize,
) -> Option<Failure> {
    let infos: &[sys::pmix_info_t] = match info.is_null() {
        true => &[],
        // SAFETY: as the caller promises, `info` points to `ninfo` valid infos.
        false => unsafe { std::slice::from_raw_parts(info, ninfo) },
    };
    let ended = status == sys::PMIX_EVENT_PROC_TERMINATED || status == sys::PMIX_EVENT_JOB_END;
    let mut affected = None;
    for i in infos {
        if is_key(&i.key, AFFECTED_PROC) {
            // SAFETY: the value is PMIx's, valid during the notification.
            affected =
                Some(unsafe { value::process(&i.value) }.and_then(|p| our_rank(p, namespace)));
        } else if ended && (is_key(&i.key, EXIT_CODE) || is_key(&i.key, JOB_TERM_STATUS)) {
            // SAFETY: as above.
            if unsafe { value::integer(&i.value) } == Some(0) {
                return None;
            }
        }
    }
    // SAFETY: as the caller promises, `source` is null or valid.
    let from_source = || unsafe { source.as_ref() }.and_then(|p| our_rank(p, namespace));
    Some(Failure {
        rank: affected.unwrap_or_else(from_source),
        status,
        text: status_text(status),
    })
}

/// The event handler PMIx calls, on its progress thread.
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
    let hook = lock(&HOOK).clone();
    if let Some(hook) = hook {
        // SAFETY: PMIx passes a valid (or null) source and `ninfo` valid infos (or null).
        if let Some(failure) = unsafe { describe(&hook.namespace, status, source, info, ninfo) } {
            // A panic must not unwind into PMIx's C code; the panic hook has reported it, and
            // PMIx still hears that the event was handled.
            let call = AssertUnwindSafe(|| (hook.callback)(failure));
            drop(std::panic::catch_unwind(call));
        }
    }
    if let Some(done) = done {
        // SAFETY: tells PMIx this handler is done with the event, with the cbdata it gave; no
        // results and no release callback.
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::c_char;

    const NS: &str = "job.7";

    fn proc_of(nspace: &str, rank: u32) -> sys::pmix_proc_t {
        let mut p = sys::pmix_proc_t::default();
        for (d, s) in p.nspace.iter_mut().zip(nspace.bytes()) {
            *d = s as c_char;
        }
        p.rank = rank;
        p
    }

    fn info(key: &CStr) -> sys::pmix_info_t {
        let mut i = sys::pmix_info_t::default();
        for (d, s) in i.key.iter_mut().zip(key.to_bytes()) {
            *d = *s as c_char;
        }
        i
    }

    fn affected(p: &mut sys::pmix_proc_t) -> sys::pmix_info_t {
        let mut i = info(AFFECTED_PROC);
        i.value.type_ = sys::PMIX_PROC as sys::pmix_data_type_t;
        i.value.data.proc_ = p;
        i
    }

    fn exit_code(code: i32) -> sys::pmix_info_t {
        let mut i = info(EXIT_CODE);
        i.value.type_ = sys::PMIX_INT as sys::pmix_data_type_t;
        i.value.data.integer = code;
        i
    }

    fn rank_of(
        status: i32,
        source: Option<&sys::pmix_proc_t>,
        infos: &[sys::pmix_info_t],
    ) -> Option<Option<u32>> {
        let source = source.map_or(ptr::null(), ptr::from_ref);
        // SAFETY: `source` is null or a live proc, `infos` a live slice of initialized infos.
        unsafe { describe(NS, status, source, infos.as_ptr(), infos.len()) }.map(|f| f.rank)
    }

    #[test]
    fn the_rank_comes_from_the_affected_proc_of_our_namespace() {
        let abort = sys::PMIX_ERR_PROC_ABORTED;
        let server = proc_of("job.0", 0);
        let mut ours = proc_of(NS, 2);
        let mut theirs = proc_of("job.8", 1);
        let mut all = proc_of(NS, RANK_WILDCARD);
        assert_eq!(
            rank_of(abort, Some(&server), &[affected(&mut ours)]),
            Some(Some(2))
        );
        assert_eq!(
            rank_of(abort, Some(&server), &[affected(&mut theirs)]),
            Some(None)
        );
        assert_eq!(
            rank_of(abort, Some(&ours), &[affected(&mut all)]),
            Some(None)
        );
    }

    #[test]
    fn without_an_affected_proc_the_source_names_the_rank() {
        let lost = sys::PMIX_ERR_LOST_CONNECTION;
        assert_eq!(rank_of(lost, Some(&proc_of(NS, 1)), &[]), Some(Some(1)));
        assert_eq!(rank_of(lost, Some(&proc_of("job.0", 1)), &[]), Some(None));
        assert_eq!(
            rank_of(lost, Some(&proc_of(NS, RANK_UNDEF)), &[]),
            Some(None)
        );
        assert_eq!(rank_of(lost, None, &[]), Some(None));
    }

    #[test]
    fn a_clean_exit_is_no_failure() {
        let ended = sys::PMIX_EVENT_PROC_TERMINATED;
        let mut p = proc_of(NS, 1);
        assert_eq!(
            rank_of(ended, None, &[affected(&mut p), exit_code(0)]),
            None
        );
        assert_eq!(
            rank_of(ended, None, &[affected(&mut p), exit_code(9)]),
            Some(Some(1))
        );
        // SAFETY: no source and no infos.
        let f = unsafe {
            describe(
                NS,
                sys::PMIX_ERR_PROC_ABORTED_BY_SIG,
                ptr::null(),
                ptr::null(),
                0,
            )
        };
        let f = f.expect("a signal is a failure");
        assert_eq!(
            (f.rank, f.status),
            (None, sys::PMIX_ERR_PROC_ABORTED_BY_SIG)
        );
        assert_eq!(f.text, "PROC-ABORTED-BY-SIG");
    }
}
