//! The verbs endpoint of a thread of the world: one per device choice, opened at the first
//! window that needs it, shared by every window that thread creates (their queue pairs, one
//! per peer, are the endpoint's), and closed with the last of them.
//!
//! Per thread, not per process: the endpoint is driven by the thread that owns the windows
//! (MPI_THREAD_FUNNELED), and the in-process test tier runs one world per thread.

use crate::config::VerbsConfig;
use crate::error::{Error, ErrorClass, Result};
use crate::transport::Notices;
use onesided_verbs as ib;
use std::cell::RefCell;
use std::rc::{Rc, Weak};
use std::sync::Arc;

/// An endpoint and the windows of it that take notifications with the writes that carry them
/// (the immediate data's 32 bits: `transport/notices.rs`).
type Opened = (Weak<ib::Endpoint>, Arc<Notices>);

thread_local! {
    static OPEN: RefCell<Vec<(VerbsConfig, Opened)>> = const { RefCell::new(Vec::new()) };
}

/// This thread's endpoint for `config`, opened at the first window that needs it, and its
/// notices.
pub(crate) fn endpoint(config: &VerbsConfig) -> Result<(Rc<ib::Endpoint>, Arc<Notices>)> {
    OPEN.with(|open| {
        let mut open = open.borrow_mut();
        open.retain(|(_, (e, _))| e.strong_count() > 0);
        if let Some(found) = open
            .iter()
            .find(|(c, _)| c == config)
            .and_then(|(_, (e, n))| Some((e.upgrade()?, n.clone())))
        {
            return Ok(found);
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
        let notices = Arc::new(Notices::for_bits(32).ok_or_else(|| {
            Error::new(ErrorClass::Intern, "32 bits of immediate data hold no tag")
        })?);
        let n = notices.clone();
        ep.on_remote_data(Box::new(move |imm| n.deliver(u64::from(imm))))
            .map_err(|e| Error::new(ErrorClass::Intern, format!("verbs: {e}")))?;
        let ep = Rc::new(ep);
        open.push((config.clone(), (Rc::downgrade(&ep), notices.clone())));
        Ok((ep, notices))
    })
}
