//! One RDM endpoint with its own address vector and completion queue: the unit an [`Endpoint`]
//! is built of. An endpoint issues its operations through one port, whose queue has no wait
//! object, and, where its progress thread sleeps until traffic arrives, is addressed by its
//! peers at a second port, whose queue has one (`Idle::Wake`).
//!
//! [`Endpoint`]: crate::Endpoint

use crate::domain::{Domain, close};
use crate::error::FiError;
use crate::error::check;
use crate::sys;
use std::ptr;

/// An enabled RDM endpoint bound to an address vector and a completion queue (entries of
/// `FI_CQ_FORMAT_CONTEXT`, for transmits and receives).
pub(crate) struct Port {
    pub(crate) ep: *mut sys::fid_ep,
    pub(crate) av: *mut sys::fid_av,
    pub(crate) cq: *mut sys::fid_cq,
}

impl Port {
    /// Open a port on `domain`; with `wait`, its queue has a file descriptor as wait object, so
    /// that `fi_cq_sread` sleeps in the kernel until traffic arrives (the provider's own choice
    /// may be FI_WAIT_YIELD, the shm provider's, a blocking read that spins on sched_yield and
    /// burned a core of every process waiting on a stopped peer). `None` where the provider
    /// refuses that wait object.
    pub(crate) fn open(domain: &Domain, wait: bool) -> Result<Option<Port>, FiError> {
        let info = domain.provider().raw();
        let mut port = Port {
            ep: ptr::null_mut(),
            av: ptr::null_mut(),
            cq: ptr::null_mut(),
        };
        // SAFETY: the domain is open and `info` is its provider's fi_info; each out-pointer is
        // closed by `close`, also when a later step fails.
        let opened = unsafe {
            let mut cq_attr = sys::fi_cq_attr {
                format: sys::fi_cq_format_FI_CQ_FORMAT_CONTEXT,
                wait_obj: if wait {
                    sys::fi_wait_obj_FI_WAIT_FD
                } else {
                    sys::fi_wait_obj_FI_WAIT_NONE
                },
                ..Default::default()
            };
            let ret = sys::fi_cq_open(domain.raw(), &mut cq_attr, &mut port.cq, ptr::null_mut());
            if wait && ret != 0 {
                return Ok(None);
            }
            port.enable(domain, info, ret)
        };
        match opened {
            Ok(()) => Ok(Some(port)),
            Err(e) => {
                // SAFETY: nothing else holds these objects yet.
                unsafe { port.close() };
                Err(e)
            }
        }
    }

    /// The steps of [`Port::open`] after the queue (`cq_ret`: what opening it returned).
    ///
    /// # Safety
    /// As in [`Port::open`]: the domain is open and `info` is its provider's.
    unsafe fn enable(
        &mut self,
        domain: &Domain,
        info: *mut sys::fi_info,
        cq_ret: i32,
    ) -> Result<(), FiError> {
        check("fi_cq_open", cq_ret)?;
        // SAFETY: guaranteed by the caller; the out-pointers are this port's.
        unsafe {
            check(
                "fi_endpoint",
                sys::fi_endpoint(domain.raw(), info, &mut self.ep, ptr::null_mut()),
            )?;
            let mut av_attr = sys::fi_av_attr {
                type_: sys::fi_av_type_FI_AV_UNSPEC,
                ..Default::default()
            };
            check(
                "fi_av_open",
                sys::fi_av_open(domain.raw(), &mut av_attr, &mut self.av, ptr::null_mut()),
            )?;
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
