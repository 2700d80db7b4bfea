//! The libfabric objects behind an endpoint, and the progress they are driven by: by the
//! owning thread while it issues and waits, by the progress thread while it does not.

use crate::domain::{Domain, close};
use crate::error::FiError;
use crate::region::Registered;
use crate::stage::Staged;
use crate::stamp::Stamps;
use crate::sys;
use crate::track::{Context, Track};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
/// Completion entries read from the queue at once.
const BATCH: usize = 16;

/// The libfabric objects of an endpoint, closed when the endpoint and every region bound to it
/// are gone.
pub(crate) struct Core {
    pub(crate) domain: Arc<Domain>,
    pub(crate) ep: *mut sys::fid_ep,
    pub(crate) av: *mut sys::fid_av,
    pub(crate) cq: *mut sys::fid_cq,
    /// The completion queue has a wait object (`fi_cq_sread` blocks).
    pub(crate) waitable: bool,
    /// The operations in flight, settled by whichever thread reads their completions.
    pub(crate) track: Mutex<Track<Staged>>,
    /// The regions registered on this endpoint, by address range.
    pub(crate) registered: Mutex<Registered>,
    /// When the owning thread last issued or waited for an operation (a stamp of `stamps`).
    /// A time, not a count of calls: with a count, the progress thread stood aside from an
    /// owner that polls only now and then (on a crowded node), and exclusive locks amid shared
    /// lockers waited up to twice as long (`stress::exclusive_amid_shared`).
    pub(crate) active: AtomicU64,
    pub(crate) stamps: Stamps,
}

// SAFETY: the domain is FI_THREAD_SAFE, so these objects may be used from any thread.
unsafe impl Send for Core {}
// SAFETY: as above.
unsafe impl Sync for Core {}

impl Core {
    /// Note that the owning thread is driving the endpoint now.
    #[inline]
    pub(crate) fn touch(&self) {
        self.active.store(self.stamps.now(), Ordering::Relaxed);
    }

    /// How long ago the owning thread last drove the endpoint.
    pub(crate) fn idle(&self) -> Duration {
        self.stamps.since(self.active.load(Ordering::Relaxed))
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

    /// The completion bookkeeping, also after a panic of another thread holding it.
    pub(crate) fn track(&self) -> std::sync::MutexGuard<'_, Track<Staged>> {
        self.track.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The regions registered on this endpoint, also after a panic of another thread holding
    /// the list.
    pub(crate) fn registered(&self) -> std::sync::MutexGuard<'_, Registered> {
        self.registered.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drive the provider (reading the completion queue progresses the endpoint) and settle
    /// the operations whose completions it gives.
    pub(crate) fn poll(&self) {
        let mut entries = [sys::fi_cq_entry::default(); BATCH];
        // SAFETY: the queue is open; `entries` has room for BATCH FI_CQ_FORMAT_CONTEXT entries.
        let ret = unsafe { sys::fi_cq_read(self.cq, entries.as_mut_ptr().cast(), BATCH) };
        self.settle(ret, &entries);
    }

    /// Block until traffic arrives or `PROGRESS_WAIT_MS` passes, progressing meanwhile.
    pub(crate) fn wait(&self) {
        if !self.waitable {
            self.poll();
            std::thread::sleep(HOLDOFF);
            return;
        }
        let mut entries = [sys::fi_cq_entry::default(); BATCH];
        // SAFETY: as in `poll`; the condition argument may be NULL.
        let ret = unsafe {
            sys::fi_cq_sread(
                self.cq,
                entries.as_mut_ptr().cast(),
                BATCH,
                ptr::null(),
                PROGRESS_WAIT_MS,
            )
        };
        self.settle(ret, &entries);
    }

    /// Settle what one read of the queue returned: `ret` entries, or an error entry waiting.
    fn settle(&self, ret: isize, entries: &[sys::fi_cq_entry]) {
        if ret == -(sys::FI_EAVAIL as isize) {
            self.read_error();
            return;
        }
        let Ok(n) = usize::try_from(ret) else {
            return;
        };
        let mut track = self.track();
        let freed: Vec<Staged> = entries[..n.min(entries.len())]
            .iter()
            .filter_map(|e| track.settle(e.op_context as Context, None))
            .collect();
        drop(track);
        drop(freed);
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
        let freed = self.track().settle(err.op_context as Context, Some(text));
        drop(freed);
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
            close(self.av.cast());
        }
    }
}
