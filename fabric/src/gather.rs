//! Small request reads gathered into one (Nagle's rule for reads): a small
//! [`Endpoint::start_read`] to a peer that already has operations in flight is not posted at
//! once; it joins the endpoint's open batch, and the batch is posted as one read of the range
//! that covers all of its reads at the endpoint's next call: any other operation (so the
//! endpoint's operations keep their order), a flush, or a test or wait of any request. Providers
//! that serve a peer's reads one after another (tcp;ofi_rxm takes about 36 times one read for
//! 64 reads in flight, libfabric's own loop 48 times) then move the batch in about the time of
//! one read. A read to an idle peer is posted at once, so that a lone request still overlaps
//! with the caller's computation, unless the program has been starting its reads in bursts
//! ([`opens`]).
//!
//! [`Span`] decides, free of I/O, whether a read joins; [`Joint`] is the batch that the requests
//! of its reads share.

use crate::core::Core;
use crate::endpoint::{Endpoint, Peer};
use crate::error::FiError;
use crate::ops::{Remote, invalid};
use crate::patience::Waiting;
use crate::stage::Staged;
use crate::track::Slot;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// The largest read that joins a batch: larger ones gain nothing from sharing a round trip.
pub(crate) const READ_MAX: usize = 256;
/// The largest range a batch covers (the bytes between its reads are read too, and dropped).
const SPAN_MAX: usize = 4096;

/// The range of one peer's region that a batch of reads covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    peer: u32,
    key: u64,
    lo: u64,
    hi: u64,
}

impl Span {
    /// The span of one read of `len` bytes at `addr` of `peer`'s region `key`.
    fn new(peer: u32, key: u64, addr: u64, len: usize) -> Span {
        Span {
            peer,
            key,
            lo: addr,
            hi: addr + len as u64,
        }
    }

    /// The span grown by a read of `len` bytes at `addr` of `peer`'s region `key`, or `None`
    /// when the read may not join: another peer or region, a read above [`READ_MAX`], or a
    /// range above `limit` bytes.
    fn join(&self, peer: u32, key: u64, addr: u64, len: usize, limit: usize) -> Option<Span> {
        if peer != self.peer || key != self.key || len > READ_MAX {
            return None;
        }
        let (lo, hi) = (self.lo.min(addr), self.hi.max(addr + len as u64));
        (hi - lo <= limit as u64).then_some(Span { lo, hi, ..*self })
    }

    fn len(&self) -> usize {
        (self.hi - self.lo) as usize
    }
}

/// Where a batch stands.
enum Shared {
    /// Open: more reads may join; not posted yet.
    Open,
    /// Posted into `staged`, whose first byte was read from the peer's address `lo`; `slot`
    /// until someone has waited for it.
    Posted {
        slot: Option<Slot>,
        staged: Staged,
        lo: u64,
    },
    /// Could not be posted, or failed.
    Failed(FiError),
}

/// A batch of gathered reads, shared by the requests of its reads (and by the endpoint while
/// it is open). The last one to let go of a batch in flight abandons its operation, whose
/// buffer is then freed once the operation settles.
pub(crate) struct Joint {
    shared: RefCell<Shared>,
    core: Arc<Core>,
}

impl Drop for Joint {
    fn drop(&mut self) {
        if let Shared::Posted { slot: Some(s), .. } = *self.shared.get_mut() {
            let kept = self.core.track().abandon(s);
            drop(kept);
        }
    }
}

/// The endpoint's open batch: its range, its peer, the requests' share of it and how many
/// reads it holds.
pub(crate) struct Batch {
    span: Span,
    peer: Peer,
    joint: Rc<Joint>,
    reads: u32,
}

/// An endpoint's gathering: the open batch, and whether the last batch held more than one read.
#[derive(Default)]
pub(crate) struct Gathering {
    open: Option<Batch>,
    burst: bool,
}

/// Whether a small read that joins no open batch opens one (else it is posted at once): when
/// its peer is `busy` (it could not be served before what is in flight there anyway), or when
/// the endpoint's last batch held more than one read (`burst`: the program starts its reads in
/// bursts, so the first read of the next burst waits for the rest). A lone read after a burst
/// waits once, and its batch of one clears `burst`.
fn opens(busy: bool, burst: bool) -> bool {
    busy || burst
}

impl Endpoint {
    /// Gather a read of `len` bytes at `from` into the open batch, or open a batch for it
    /// ([`opens`]); `None`: post it at once.
    pub(crate) fn gather(
        &self,
        len: usize,
        from: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Option<Rc<Joint>> {
        if len > READ_MAX {
            return None;
        }
        let (peer, limit) = (from.peer.index, SPAN_MAX.min(self.max_msg));
        let mut g = self.gathering.borrow_mut();
        if let Some(b) = g.open.as_mut()
            && let Some(span) = b.span.join(peer, from.key, from.addr, len, limit)
        {
            b.span = span;
            b.reads += 1;
            return Some(b.joint.clone());
        }
        if !opens(self.core.track().busy(peer), g.burst) {
            return None;
        }
        drop(g);
        self.launch(keep_waiting);
        let joint = Rc::new(Joint {
            shared: RefCell::new(Shared::Open),
            core: self.core.clone(),
        });
        self.gathering.borrow_mut().open = Some(Batch {
            span: Span::new(peer, from.key, from.addr, len),
            peer: from.peer,
            joint: joint.clone(),
            reads: 1,
        });
        Some(joint)
    }

    /// Post the open batch, if any, as one read (before any other operation, and whenever
    /// someone waits); a batch nobody waits for any more is dropped unposted.
    #[inline]
    pub(crate) fn launch(&self, keep_waiting: &dyn Fn() -> Waiting) {
        // Looked at before it is taken, here where the call inlines: most calls find no batch,
        // and taking moves it.
        if self.gathering.borrow().open.is_some() {
            self.launch_open(keep_waiting);
        }
    }

    #[cold]
    #[inline(never)]
    fn launch_open(&self, keep_waiting: &dyn Fn() -> Waiting) {
        let b = {
            let mut g = self.gathering.borrow_mut();
            let Some(b) = g.open.take() else {
                return;
            };
            g.burst = b.reads > 1;
            b
        };
        if Rc::strong_count(&b.joint) == 1 {
            return;
        }
        let (len, lo) = (b.span.len(), b.span.lo);
        let from = Remote {
            peer: b.peer,
            addr: lo,
            key: b.span.key,
        };
        let posted = Staged::new(&self.core, len, self.local_mr).and_then(|staged| {
            let (addr, desc, keep) = (staged.mem().addr(), staged.desc(), Some(staged.clone()));
            let slot = self.rma_read(addr, len, desc, from, keep, keep_waiting)?;
            Ok(Shared::Posted {
                slot: Some(slot),
                staged,
                lo,
            })
        });
        *b.joint.shared.borrow_mut() = posted.unwrap_or_else(Shared::Failed);
    }

    /// Whether the batch of `joint` has settled (progress is the caller's).
    pub(crate) fn joint_settled(&self, joint: &Joint) -> bool {
        match &*joint.shared.borrow() {
            Shared::Posted { slot: Some(s), .. } => self.core.track().settled(*s),
            _ => true,
        }
    }

    /// Wait for the batch of `joint` (posted by the caller), then copy the bytes read at the
    /// peer's address `addr` into `out` (as many as it holds).
    pub(crate) fn joint_finish(
        &self,
        joint: &Joint,
        addr: u64,
        out: Option<&mut [u8]>,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        let mut shared = joint.shared.borrow_mut();
        if let Shared::Posted { slot, .. } = &mut *shared
            && let Some(s) = slot.take()
            && let Err(e) = self.wait_slot("fi_readmsg", s, keep_waiting)
        {
            *shared = Shared::Failed(e);
        }
        match (&*shared, out) {
            (Shared::Posted { staged, lo, .. }, Some(out)) => {
                staged.read((addr - lo) as usize, out)
            }
            (Shared::Posted { .. }, None) => Ok(()),
            (Shared::Failed(e), _) => Err(e.clone()),
            (Shared::Open, _) => Err(invalid("fi_readmsg")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_of_one_region_join_up_to_the_limit() {
        let s = Span::new(1, 7, 1000, 8);
        let s = s.join(1, 7, 1008, 8, 64).unwrap();
        assert_eq!((s.lo, s.hi), (1000, 1016));
        let s = s.join(1, 7, 992, 8, 64).unwrap();
        assert_eq!(
            (s.lo, s.hi),
            (992, 1016),
            "a read below grows the span down"
        );
        let s = s.join(1, 7, 1000, 8, 64).unwrap();
        assert_eq!((s.lo, s.hi), (992, 1016), "a read inside changes nothing");
        assert!(s.join(1, 7, 1048, 8, 64).is_some(), "64 bytes exactly");
        assert!(s.join(1, 7, 1049, 8, 64).is_none(), "65 bytes");
        assert!(s.join(1, 7, 928, 8, 64).is_none(), "too far below");
    }

    #[test]
    fn a_batch_opens_behind_traffic_or_after_a_burst() {
        assert!(
            !opens(false, false),
            "a lone read to an idle peer goes at once"
        );
        assert!(opens(true, false));
        assert!(opens(false, true));
    }

    #[test]
    fn other_peers_regions_and_large_reads_do_not_join() {
        let s = Span::new(1, 7, 1000, 8);
        assert!(s.join(2, 7, 1008, 8, SPAN_MAX).is_none(), "another peer");
        assert!(s.join(1, 8, 1008, 8, SPAN_MAX).is_none(), "another region");
        assert!(s.join(1, 7, 1008, READ_MAX + 1, SPAN_MAX).is_none());
        assert_eq!(
            s.join(1, 7, 1008, READ_MAX, SPAN_MAX).unwrap().len(),
            8 + READ_MAX
        );
    }
}
