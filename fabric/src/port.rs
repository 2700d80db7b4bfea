//! One RDM endpoint with its own address vector and completion queue: the unit an [`Endpoint`]
//! is built of. An endpoint issues its operations through one port, whose queue has no wait
//! object, and, where its progress thread sleeps until traffic arrives, is addressed by its
//! peers at a second port, whose queue has one (`Idle::Wake`).
//!
//! [`Endpoint`]: crate::Endpoint

use crate::domain::{Domain, close};
use crate::error::FiError;
use crate::error::{check, opened};
use crate::sys;
use std::ptr;

/// An enabled RDM endpoint bound to an address vector and a completion queue (entries of
/// `FI_CQ_FORMAT_DATA`, for transmits, receives and the remote data of peers' writes).
pub(crate) struct Port {
    pub(crate) ep: *mut sys::fid_ep,
    pub(crate) av: *mut sys::fid_av,
    pub(crate) cq: *mut sys::fid_cq,
    /// The file descriptor of the queue's wait object, where it has one to poll (`FI_GETWAIT`).
    pub(crate) wait_fd: Option<libc::c_int>,
}

impl Port {
    /// Open a port on `domain` whose queue has no wait object.
    pub(crate) fn open(domain: &Domain) -> Result<Port, FiError> {
        let mut port = Port::queue(domain, sys::fi_wait_obj_FI_WAIT_NONE)?;
        port.enable(domain)?;
        Ok(port)
    }

    /// Open a port on `domain` whose queue has a file descriptor as wait object, so that
    /// `fi_cq_sread` sleeps in the kernel until traffic arrives (the provider's own choice may
    /// be FI_WAIT_YIELD, the shm provider's, a blocking read that spins on sched_yield and
    /// burned a core of every process waiting on a stopped peer). `None` where the provider
    /// refuses that wait object.
    pub(crate) fn open_waking(domain: &Domain) -> Result<Option<Port>, FiError> {
        let Ok(mut port) = Port::queue(domain, sys::fi_wait_obj_FI_WAIT_FD) else {
            return Ok(None);
        };
        port.enable(domain)?;
        let mut fd: libc::c_int = -1;
        // SAFETY: the queue is open with an FI_WAIT_FD wait object, for which FI_GETWAIT writes
        // one int.
        let ret = unsafe {
            sys::fi_control(
                &mut (*port.cq).fid,
                sys::FI_GETWAIT as i32,
                (&mut fd as *mut libc::c_int).cast(),
            )
        };
        port.wait_fd = (ret == 0 && fd >= 0).then_some(fd);
        Ok(Some(port))
    }

    /// A port of only a completion queue with the wait object `wait_obj` (closed by `Drop`
    /// if a later step fails).
    fn queue(domain: &Domain, wait_obj: sys::fi_wait_obj) -> Result<Port, FiError> {
        let mut port = Port {
            ep: ptr::null_mut(),
            av: ptr::null_mut(),
            cq: ptr::null_mut(),
            wait_fd: None,
        };
        let mut cq_attr = sys::fi_cq_attr {
            format: sys::fi_cq_format_FI_CQ_FORMAT_DATA,
            wait_obj,
            ..Default::default()
        };
        // SAFETY: the domain is open; `cq_attr` is valid; the queue is closed by Drop once open.
        port.cq = opened("fi_cq_open", |cq| unsafe {
            sys::fi_cq_open(domain.raw(), &mut cq_attr, cq, ptr::null_mut())
        })?;
        Ok(port)
    }

    /// Open the endpoint and its address vector, bind them to the queue, and enable the
    /// endpoint (whatever was opened is closed by `Drop` if a step fails).
    fn enable(&mut self, domain: &Domain) -> Result<(), FiError> {
        let info = domain.provider().raw();
        // SAFETY: the domain is open and `info` is its provider's fi_info; the queue is open;
        // what opens is this port's, closed by Drop.
        unsafe {
            self.ep = opened("fi_endpoint", |ep| {
                sys::fi_endpoint(domain.raw(), info, ep, ptr::null_mut())
            })?;
            let mut av_attr = sys::fi_av_attr {
                type_: sys::fi_av_type_FI_AV_UNSPEC,
                ..Default::default()
            };
            self.av = opened("fi_av_open", |av| {
                sys::fi_av_open(domain.raw(), &mut av_attr, av, ptr::null_mut())
            })?;
            check(
                "fi_ep_bind(av)",
                sys::fi_ep_bind(self.ep, &mut (*self.av).fid, 0),
            )?;
            // Every operation reports its completion, with its context (`track.rs`).
            let cq_flags = sys::FI_TRANSMIT as u64 | sys::FI_RECV as u64;
            check(
                "fi_ep_bind(cq)",
                sys::fi_ep_bind(self.ep, &mut (*self.cq).fid, cq_flags),
            )?;
            check("fi_enable", sys::fi_enable(self.ep))?;
        }
        Ok(())
    }

    /// Close the endpoint, then what it is bound to.
    ///
    /// # Safety
    /// Nothing uses these objects any more, and nothing is bound to the endpoint.
    pub(crate) unsafe fn close(&mut self) {
        // SAFETY: guaranteed by the caller; `close` skips objects never opened.
        unsafe {
            close(self.ep.cast());
            close(self.cq.cast());
            close(self.av.cast());
        }
        self.ep = ptr::null_mut();
        self.cq = ptr::null_mut();
        self.av = ptr::null_mut();
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        // SAFETY: a port still open when dropped is one whose endpoint failed to come up (an
        // endpoint's core closes its ports itself, before its domain); nothing else holds it.
        unsafe { self.close() };
    }
}
