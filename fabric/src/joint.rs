//! What gathered reads are made of (`gather.rs` gathers them): the batch that the requests of
//! its reads share ([`Joint`]), and an endpoint's open batch and whether the next read opens
//! one ([`Gathering`]); [`Span`] decides, free of I/O, whether a read joins.

use crate::core::Core;
use crate::error::{FiError, invalid};
use crate::peer::Peer;
use crate::remote::Remote;
use crate::stage::Staged;
use crate::track::Slot;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// The largest read that joins a batch: larger ones gain nothing from sharing a round trip.
pub(crate) const READ_MAX: usize = 256;
/// The largest range a batch covers (the bytes between its reads are read too, and dropped).
pub(crate) const SPAN_MAX: usize = 4096;

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

impl Joint {
    /// The operation of the batch while nobody has waited for it yet.
    pub(crate) fn pending(&self) -> Option<Slot> {
        match &*self.shared.borrow() {
            Shared::Posted { slot: Some(s), .. } => Some(*s),
            _ => None,
        }
    }

    /// Wait for the batch (posted by the caller) with `wait`, where nobody has yet, then copy
    /// the bytes read at the peer's address `addr` into `out` (as many as it holds).
    pub(crate) fn finish(
        &self,
        addr: u64,
        out: Option<&mut [u8]>,
        wait: impl FnOnce(Slot) -> Result<(), FiError>,
    ) -> Result<(), FiError> {
        let mut shared = self.shared.borrow_mut();
        if let Shared::Posted { slot, .. } = &mut *shared
            && let Some(s) = slot.take()
            && let Err(e) = wait(s)
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

/// The endpoint's open batch: its range, its peer, the requests' share of it and how many
/// reads it holds.
pub(crate) struct Batch {
    span: Span,
    peer: Peer,
    joint: Rc<Joint>,
    reads: u32,
}

impl Batch {
    /// Whether a request still waits for the batch: else it is dropped unposted.
    pub(crate) fn wanted(&self) -> bool {
        Rc::strong_count(&self.joint) > 1
    }

    /// The read that covers the batch: where it starts, and its length.
    pub(crate) fn read(&self) -> (Remote, usize) {
        let from = Remote {
            peer: self.peer,
            addr: self.span.lo,
            key: self.span.key,
        };
        (from, self.span.len())
    }

    /// Note how posting the batch's read went: in flight into `staged` with `slot`, or failed.
    pub(crate) fn posted(self, posted: Result<(Slot, Staged), FiError>) {
        let lo = self.span.lo;
        *self.joint.shared.borrow_mut() = match posted {
            Ok((slot, staged)) => Shared::Posted {
                slot: Some(slot),
                staged,
                lo,
            },
            Err(e) => Shared::Failed(e),
        };
    }
}

/// An endpoint's gathering: the open batch, and whether the last batch held more than one read.
#[derive(Default)]
pub(crate) struct Gathering {
    open: Option<Batch>,
    burst: bool,
}

impl Gathering {
    /// The open batch with a read of `len` bytes at `from` joined to it, where the read may join
    /// (a range of at most `limit` bytes).
    pub(crate) fn join(&mut self, len: usize, from: Remote, limit: usize) -> Option<Rc<Joint>> {
        let b = self.open.as_mut()?;
        b.span = b
            .span
            .join(from.peer.index, from.key, from.addr, len, limit)?;
        b.reads += 1;
        Some(b.joint.clone())
    }

    /// Whether a small read that joins no open batch opens one, its peer `busy` or not
    /// ([`opens`]).
    pub(crate) fn opens(&self, busy: bool) -> bool {
        opens(busy, self.burst)
    }

    /// Open a batch of `core`'s endpoint with a read of `len` bytes at `from` (the batch open
    /// before, if any, was taken).
    pub(crate) fn open(&mut self, core: &Arc<Core>, len: usize, from: Remote) -> Rc<Joint> {
        let joint = Rc::new(Joint {
            shared: RefCell::new(Shared::Open),
            core: core.clone(),
        });
        self.open = Some(Batch {
            span: Span::new(from.peer.index, from.key, from.addr, len),
            peer: from.peer,
            joint: joint.clone(),
            reads: 1,
        });
        joint
    }

    /// Whether a batch is open.
    #[inline]
    pub(crate) fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// The open batch, taken to be posted, if any; whether it held more than one read is noted.
    pub(crate) fn take(&mut self) -> Option<Batch> {
        let b = self.open.take()?;
        self.burst = b.reads > 1;
        Some(b)
    }
}

/// Whether a small read that joins no open batch opens one (else it is posted at once): when
/// its peer is `busy` (it could not be served before what is in flight there anyway), or when
/// the endpoint's last batch held more than one read (`burst`: the program starts its reads in
/// bursts, so the first read of the next burst waits for the rest). A lone read after a burst
/// waits once, and its batch of one clears `burst`.
fn opens(busy: bool, burst: bool) -> bool {
    busy || burst
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
