//! The verbs endpoint of a thread of the world: one per device choice, opened at the first
//! window that needs it, shared by every window that thread creates (their queue pairs, one
//! per peer, are the endpoint's), and closed with the last of them.
//!
//! Per thread, not per process: the endpoint is driven by the thread that owns the windows
//! (MPI_THREAD_FUNNELED), and the in-process test tier runs one world per thread.

use crate::config::VerbsConfig;
use crate::error::{Error, ErrorClass, Result};
use onesided_verbs as ib;
use std::cell::RefCell;
use std::rc::{Rc, Weak};

thread_local! {
    static OPEN: RefCell<Vec<(VerbsConfig, Weak<ib::Endpoint>)>> = const { RefCell::new(Vec::new()) };
}

/// This thread's endpoint for `config`, opened at the first window that needs it.
pub(crate) fn endpoint(config: &VerbsConfig) -> Result<Rc<ib::Endpoint>> {
    OPEN.with(|open| {
        let mut open = open.borrow_mut();
        open.retain(|(_, e)| e.strong_count() > 0);
        if let Some(e) = open
            .iter()
            .find(|(c, _)| c == config)
            .and_then(|(_, e)| e.upgrade())
        {
            return Ok(e);
        }
        let req = ib::Request {
            device: config.device.clone(),
            port: config.port,
            gid_index: config.gid_index,
        };
        let ep = ib::Endpoint::open(&req).map_err(|e| {
            Error::new(
                ErrorClass::Other,
                format!("the verbs transport cannot open a device: {e}"),
            )
        })?;
        tracing::debug!(
            device = ep.device(),
            port = ep.port().0,
            gid_index = ?ep.port().1,
            atomics = ep.has_atomics(),
            "verbs endpoint open"
        );
        let ep = Rc::new(ep);
        open.push((config.clone(), Rc::downgrade(&ep)));
        Ok(ep)
    })
}
