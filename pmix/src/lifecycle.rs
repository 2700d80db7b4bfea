//! Whether this process's failure handler is registered with PMIx, kept in step with
//! `PMIx_Init` and `PMIx_Finalize`: PMIx drops its handlers when the last client finalizes.

use crate::sys;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Whether the handler is registered with PMIx. Its lock also serializes `PMIx_Init` and
/// `PMIx_Finalize` with registration (see [`lifecycle`]), never the handler itself.
static REGISTERED: Mutex<bool> = Mutex::new(false);

/// Runs `f` (PMIx_Init or PMIx_Finalize) in step with registration; afterwards, if PMIx is no
/// longer initialized (the last client finalized), its handlers are gone and the next
/// `on_failure` registers again.
pub(crate) fn lifecycle<T>(f: impl FnOnce() -> T) -> T {
    let mut registered = registered();
    let out = f();
    // SAFETY: PMIx_Initialized takes no arguments and may be called at any time.
    if unsafe { sys::PMIx_Initialized() } == 0 {
        *registered = false;
    }
    out
}

/// The registration flag, locked: `PMIx_Init` and `PMIx_Finalize` wait while it is held.
pub(crate) fn registered() -> MutexGuard<'static, bool> {
    REGISTERED.lock().unwrap_or_else(PoisonError::into_inner)
}
