//! The libfabric objects behind an endpoint, and the progress they are driven by: by the
//! owning thread while it issues and waits, by the progress thread while it does not.

use crate::domain::{Domain, close};
use crate::error::FiError;
use crate::sys;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the progress thread blocks in one `fi_cq_sread` before it looks again at its stop
/// flag and at the owner's activity.
const PROGRESS_WAIT_MS: i32 = 1;
/// The progress thread stands aside while the owning thread has driven the endpoint this
/// recently: two threads polling one endpoint contend for its lock and wake each other, which
/// doubled the latency of put + flush over tcp;ofi_rxm (12 us alone, 25 us with both). It is
/// also how often the standing-aside thread wakes to look: at 200 us those wake-ups on the
/// owner's core still cost 10-20% of that latency, at 1 ms they are lost in the noise, and a
/// target that stops calling in is served again within 1 ms.
const HOLDOFF: Duration = Duration::from_millis(1);
/// The libfabric objects of an endpoint, closed when the endpoint and every region bound to it
/// are gone.
pub(crate) struct Core {
    pub(crate) domain: Arc<Domain>,
    pub(crate) ep: *mut sys::fid_ep,
    pub(crate) av: *mut sys::fid_av,
    pub(crate) cq: *mut sys::fid_cq,
    pub(crate) cntr: *mut sys::fid_cntr,
    /// The completion queue has a wait object (`fi_cq_sread` blocks).
    pub(crate) waitable: bool,
    /// Text of the last error completion, read by whichever thread found it.
    pub(crate) last_error: Mutex<Option<String>>,
    /// When the owning thread last issued or waited for an operation (nanoseconds since
    /// `epoch`).
    pub(crate) active: AtomicU64,
    pub(crate) epoch: Instant,
}

// SAFETY: the domain is FI_THREAD_SAFE, so these objects may be used from any thread.
unsafe impl Send for Core {}
// SAFETY: as above.
unsafe impl Sync for Core {}

impl Core {
    /// Note that the owning thread is driving the endpoint now.
    pub(crate) fn touch(&self) {
        let now = self.epoch.elapsed().as_nanos() as u64;
        self.active.store(now, Ordering::Relaxed);
    }

    /// How long ago the owning thread last drove the endpoint.
    pub(crate) fn idle(&self) -> Duration {
        let now = self.epoch.elapsed().as_nanos() as u64;
        Duration::from_nanos(now.saturating_sub(self.active.load(Ordering::Relaxed)))
    }

    /// One round of the progress thread: stand aside while the owner is active, else block
    /// until traffic arrives (or a short timeout), serving the target side meanwhile.
    pub(crate) fn serve(&self) {
        let idle = self.idle();
        if idle < HOLDOFF {
            std::thread::sleep(HOLDOFF - idle);
        } else {
            self.wait();
        }
    }

    pub(crate) fn domain(&self) -> &Arc<Domain> {
        &self.domain
    }

    pub(crate) fn ep(&self) -> *mut sys::fid_ep {
        self.ep
    }

    /// Drive the provider (reading the completion queue progresses the endpoint) and keep the
    /// text of any error completion.
    pub(crate) fn poll(&self) {
        let mut entry = sys::fi_cq_entry::default();
        // SAFETY: the queue is open; `entry` has room for one FI_CQ_FORMAT_CONTEXT entry.
        let ret = unsafe { sys::fi_cq_read(self.cq, (&raw mut entry).cast(), 1) };
        if ret == -(sys::FI_EAVAIL as isize) {
            self.read_error();
        }
    }

    /// Block until traffic arrives or `PROGRESS_WAIT_MS` passes, progressing meanwhile.
    pub(crate) fn wait(&self) {
        if !self.waitable {
            self.poll();
            std::thread::sleep(HOLDOFF);
            return;
        }
        let mut entry = sys::fi_cq_entry::default();
        // SAFETY: as in `poll`; the condition argument may be NULL.
        let ret = unsafe {
            sys::fi_cq_sread(
                self.cq,
                (&raw mut entry).cast(),
                1,
                ptr::null(),
                PROGRESS_WAIT_MS,
            )
        };
        if ret == -(sys::FI_EAVAIL as isize) {
            self.read_error();
        }
    }

    fn read_error(&self) {
        let mut err = sys::fi_cq_err_entry::default();
        // SAFETY: the queue is open; `err` is a valid out-parameter with no provider buffer.
        let ret = unsafe { sys::fi_cq_readerr(self.cq, &mut err, 0) };
        if ret <= 0 {
            return;
        }
        let mut buf = [0 as libc::c_char; 256];
        // SAFETY: the queue is open; `err` was filled by fi_cq_readerr; `buf` has the length
        // given, and fi_cq_strerror returns a NUL-terminated string.
        let text = unsafe {
            let s = sys::fi_cq_strerror(
                self.cq,
                err.prov_errno,
                err.err_data,
                buf.as_mut_ptr(),
                buf.len(),
            );
            std::ffi::CStr::from_ptr(s).to_string_lossy().into_owned()
        };
        let text = format!(
            "{} ({}; provider errno {})",
            FiError::new("completion", err.err as i64).text(),
            err.err,
            text
        );
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(text);
    }

    pub(crate) fn take_error(&self) -> String {
        self.poll();
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_else(|| "an operation failed".into())
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        // SAFETY: nothing uses these objects any more (the progress thread has been joined and
        // every region holding this core is gone); the endpoint closes before what it is bound
        // to.
        unsafe {
            close(self.ep.cast());
            close(self.cq.cast());
            close(self.cntr.cast());
            close(self.av.cast());
        }
    }
}
