//! Small request reads gathered into one (Nagle's rule for reads): a small
//! [`Endpoint::start_read`] to a peer that already has operations in flight is not posted at
//! once; it joins the endpoint's open batch, and the batch is posted as one read of the range
//! that covers all of its reads at the endpoint's next call: any other operation (so the
//! endpoint's operations keep their order), a flush, or a test or wait of any request. Providers
//! that serve a peer's reads one after another (tcp;ofi_rxm takes about 36 times one read for
//! 64 reads in flight, libfabric's own loop 48 times) then move the batch in about the time of
//! one read. A read to an idle peer is posted at once, so that a lone request still overlaps
//! with the caller's computation, unless the program has been starting its reads in bursts
//! (`opens`).
//!
//! What a batch is made of, and the rule for opening one, are in `joint.rs`.

use crate::endpoint::Endpoint;
use crate::error::FiError;
use crate::joint::{Joint, READ_MAX, SPAN_MAX};
use crate::patience::Waiting;
use crate::remote::Remote;
use std::rc::Rc;

impl Endpoint {
    /// Gather a read of `len` bytes at `from` into the open batch, or open a batch for it
    /// (`Gathering::opens`); `None`: post it at once.
    pub(crate) fn gather(
        &self,
        len: usize,
        from: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Option<Rc<Joint>> {
        if len > READ_MAX {
            return None;
        }
        let limit = SPAN_MAX.min(self.max_msg);
        let mut g = self.gathering.borrow_mut();
        if let Some(joint) = g.join(len, from, limit) {
            return Some(joint);
        }
        if !g.opens(self.core.track().busy(from.peer.index)) {
            return None;
        }
        drop(g);
        self.launch(keep_waiting);
        Some(self.gathering.borrow_mut().open(&self.core, len, from))
    }

    /// Post the open batch, if any, as one read (before any other operation, and whenever
    /// someone waits); a batch nobody waits for any more is dropped unposted.
    #[inline]
    pub(crate) fn launch(&self, keep_waiting: &dyn Fn() -> Waiting) {
        // Looked at before it is taken, here where the call inlines: most calls find no batch,
        // and taking moves it.
        if self.gathering.borrow().is_open() {
            self.launch_open(keep_waiting);
        }
    }

    #[cold]
    #[inline(never)]
    fn launch_open(&self, keep_waiting: &dyn Fn() -> Waiting) {
        let Some(b) = self.gathering.borrow_mut().take() else {
            return;
        };
        if !b.wanted() {
            return;
        }
        let (from, len) = b.read();
        let posted = self.core.stage(len, self.local_mr).and_then(|staged| {
            let (addr, desc, keep) = (staged.mem().addr(), staged.desc(), Some(staged.clone()));
            let slot = self.rma_read(addr, len, desc, from, keep, keep_waiting)?;
            Ok((slot, staged))
        });
        b.posted(posted);
    }

    /// Whether the batch of `joint` has settled (progress is the caller's).
    pub(crate) fn joint_settled(&self, joint: &Joint) -> bool {
        match joint.pending() {
            Some(s) => self.core.track().settled(s),
            None => true,
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
        joint.finish(addr, out, |s| {
            self.wait_slot("fi_readmsg", s, keep_waiting).map(drop)
        })
    }
}
