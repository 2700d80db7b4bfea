//! One memory registration (`fi_mr_reg`) and how it may be accessed: what regions, staging
//! buffers and the registration cache are made of.

use crate::domain::{Domain, close};
use crate::error::{FiError, check, opened};
use crate::info::MrMode;
use crate::sys;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

/// How registered memory may be accessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Window memory: peers read and write it, and it may be a local buffer too.
    Remote,
    /// A local buffer of this process's operations only.
    Local,
}

impl Access {
    /// Local buffers are registered readable by peers too: rxm (libfabric 1.17) enters the key of
    /// every registration in a map for its atomics and refuses a key it holds already, and a
    /// device may give a registration without remote access no key of its own (rxe gives 0), so
    /// the second local buffer failed with `FI_ENOKEY`. With remote read each has its own key.
    fn flags(self) -> u64 {
        let local = (sys::FI_READ | sys::FI_WRITE | sys::FI_REMOTE_READ) as u64;
        match self {
            Access::Remote => local | sys::FI_REMOTE_WRITE as u64,
            Access::Local => local,
        }
    }
}

/// Keys chosen by onesided where the provider does not choose them (no `FI_MR_PROV_KEY`).
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// One registration, closed on drop; the memory must outlive it, and the domain it was made on
/// must be open until then.
pub(crate) struct Mr(*mut sys::fid_mr);

// SAFETY: the domain is FI_THREAD_SAFE; a registration is only read (desc, key) and closed.
unsafe impl Send for Mr {}
// SAFETY: as above: shared references only read the descriptor.
unsafe impl Sync for Mr {}

impl Mr {
    /// Register `len` bytes at `addr` on `domain`; binds to the endpoint `ep` and enables when
    /// the mode demands it.
    ///
    /// # Safety
    /// The memory must stay valid (mapped, and not freed) until the registration is dropped;
    /// `domain` must be open until then, and `ep` be an open endpoint of it.
    pub(crate) unsafe fn register(
        domain: &Domain,
        ep: *mut sys::fid_ep,
        addr: usize,
        len: usize,
        access: Access,
    ) -> Result<Mr, FiError> {
        let mode = domain.provider().mr_mode();
        let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the domain is open; the caller keeps the memory valid for the registration's
        // life; the registration is closed by Drop once opened.
        let r = Mr(opened("fi_mr_reg", |raw| unsafe {
            sys::fi_mr_reg(
                domain.raw(),
                addr as *const libc::c_void,
                len,
                access.flags(),
                0,
                key,
                0,
                raw,
                ptr::null_mut(),
            )
        })?);
        if mode.contains(MrMode::ENDPOINT) {
            // SAFETY: both objects are open (the caller vouches for the endpoint); the endpoint
            // is closed only after every region bound to it (regions hold its core; staged
            // buffers live in it).
            check("fi_mr_bind", unsafe {
                sys::fi_mr_bind(r.0, &mut (*ep).fid, 0)
            })?;
            // SAFETY: the registration is open and bound.
            check("fi_mr_enable", unsafe { sys::fi_mr_enable(r.0) })?;
        }
        Ok(r)
    }

    /// The descriptor to pass with local buffers in this registration.
    pub(crate) fn desc(&self) -> *mut libc::c_void {
        // SAFETY: the registration is open.
        unsafe { sys::fi_mr_desc(self.0) }
    }

    /// The registration itself, for the calls that read its key (`fi_mr_key`,
    /// `fi_mr_raw_attr`); open while `self` is.
    pub(crate) fn raw(&self) -> *mut sys::fid_mr {
        self.0
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: opened by `register`, closed once here.
        unsafe { close(self.0.cast()) }
    }
}

/// Where an endpoint registers local buffers (staging buffers, callers' buffers lent for a
/// transfer): its domain, and the endpoint that issues its operations, which they are bound to
/// where the provider binds registrations to endpoints (`FI_MR_ENDPOINT`).
#[derive(Clone, Copy)]
pub(crate) struct Local<'a> {
    domain: &'a Domain,
    ep: *mut sys::fid_ep,
}

impl<'a> Local<'a> {
    /// Local buffers registered on `domain`, bound to `ep` where the mode demands it.
    ///
    /// # Safety
    /// `ep` is an endpoint of `domain`, open for all of `'a` and until every registration made
    /// through the returned value is dropped.
    pub(crate) unsafe fn new(domain: &'a Domain, ep: *mut sys::fid_ep) -> Local<'a> {
        Local { domain, ep }
    }

    /// Register the `len` bytes at `addr` as a local buffer (see [`Mr::register`]).
    ///
    /// # Safety
    /// The memory must stay valid (mapped, and not freed) until the registration is dropped,
    /// and the domain open until then.
    pub(crate) unsafe fn register(self, addr: usize, len: usize) -> Result<Mr, FiError> {
        // SAFETY: the caller keeps the memory valid and the domain open; `Local::new`'s caller
        // vouched for the endpoint.
        unsafe { Mr::register(self.domain, self.ep, addr, len, Access::Local) }
    }
}
