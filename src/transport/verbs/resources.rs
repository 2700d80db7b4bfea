//! The verbs endpoint of a thread of the world: one per device choice, opened at the first
//! window that needs it, shared by every window that thread creates (their queue pairs, one
//! per peer, are the endpoint's), and closed with the last of them.
//!
//! Per thread, not per process: the endpoint is driven by the thread that owns the windows
//! (MPI_THREAD_FUNNELED), and the in-process test tier runs one world per thread.
//!
//! Where the world is MPI_THREAD_MULTIPLE, the endpoint gets lanes when it opens ([`lanes`]):
//! endpoints of its own for the threads of shared windows (`lanes.rs`), whose queue pairs are
//! prepared and connected with the endpoint's.

use crate::config::VerbsConfig;
use crate::error::{Error, ErrorClass, Result};
use crate::transport::Notices;
use onesided_verbs as ib;
use std::cell::RefCell;
use std::rc::{Rc, Weak};
use std::sync::Arc;

/// An endpoint, the windows of it that take notifications with the writes that carry them
/// (the immediate data's 32 bits: `transport/notices.rs`), and its lanes (held, like the
/// endpoint, by the windows alone: closed with the last of them).
type Opened = (
    Weak<ib::Endpoint>,
    Arc<Notices>,
    std::sync::Weak<[ib::Lane]>,
);

/// What an endpoint opened here is made of: the endpoint, its notices and its lanes.
pub(super) type Resources = (Rc<ib::Endpoint>, Arc<Notices>, Arc<[ib::Lane]>);

/// The most lanes an endpoint gets unless `ONESIDED_VERBS_LANES` says otherwise.
const MOST_LANES: usize = 8;

/// The most queue pairs the lanes of an endpoint have together, unless `ONESIDED_VERBS_LANES`
/// says otherwise: a lane has one per peer.
const LANE_QUEUE_PAIRS: usize = 4096;

/// How many lanes an endpoint of `config` gets, opened for a window whose ranks' world ranks
/// go up to `ranks - 1`: none unless a world of this process is MPI_THREAD_MULTIPLE; then as
/// many as `config` says, else one per CPU this process may use, at most [`MOST_LANES`], and
/// no more than keep their queue pairs within [`LANE_QUEUE_PAIRS`] (at least one).
fn lanes(config: &VerbsConfig, ranks: usize) -> usize {
    if !crate::world::threads_multiple() {
        return 0;
    }
    if let Some(n) = config.lanes {
        return n;
    }
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    cpus.min(MOST_LANES)
        .min(LANE_QUEUE_PAIRS / ranks.max(1))
        .max(1)
}

thread_local! {
    static OPEN: RefCell<Vec<(VerbsConfig, Opened)>> = const { RefCell::new(Vec::new()) };
}

/// This thread's endpoint for `config`, opened at the first window that needs it (whose ranks'
/// world ranks go up to `ranks - 1`; `None`: opened only to see that it opens, with no lanes),
/// its notices and its lanes.
pub(crate) fn endpoint(config: &VerbsConfig, ranks: Option<usize>) -> Result<Resources> {
    OPEN.with(|open| {
        let mut open = open.borrow_mut();
        open.retain(|(_, (e, _, _))| e.strong_count() > 0);
        if let Some(found) = open
            .iter()
            .find(|(c, _)| c == config)
            .and_then(|(_, (e, n, l))| Some((e.upgrade()?, n.clone(), l.upgrade()?)))
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
        let lanes = (0..ranks.map_or(0, |r| lanes(config, r)))
            .map(|_| ep.lane())
            .collect::<std::result::Result<Arc<[ib::Lane]>, _>>()
            .map_err(|e| {
                Error::new(
                    ErrorClass::Other,
                    format!("the verbs transport cannot open a lane: {e}"),
                )
            })?;
        let ep = Rc::new(ep);
        let opened = (Rc::downgrade(&ep), notices.clone(), Arc::downgrade(&lanes));
        open.push((config.clone(), opened));
        Ok((ep, notices, lanes))
    })
}
