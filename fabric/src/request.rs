//! The request forms of an endpoint's operations: [`Endpoint::start_write`],
//! [`Endpoint::start_read`] and [`Endpoint::start_atomic_many`] post and return a [`Ticket`] at
//! once; [`Endpoint::test`] polls it and [`Endpoint::finish`] waits for it. Data moves through
//! buffers the endpoint owns (`stage.rs`) until the operations settle, so a ticket dropped or
//! leaked never lets the provider touch memory its caller has handed back.

use crate::core::Core;
use crate::domain::{AtomicKind, AtomicOp, Datatype};
use crate::endpoint::Endpoint;
use crate::error::{FiError, invalid};
use crate::joint::Joint;
use crate::patience::Waiting;
use crate::remote::Remote;
use crate::stage::Staged;
use crate::sys;
use crate::track::Slot;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;

/// Operations posted by a request form, waited for by [`Endpoint::finish`] or polled by
/// [`Endpoint::test`]. Dropped unfinished, the operations settle on their own, and the buffers
/// they use are freed only then.
pub struct Ticket {
    slots: Vec<Slot>,
    /// Where results land (reads, fetching atomics), at `result`.
    staged: Option<Staged>,
    result: usize,
    /// A read gathered with others (`gather.rs`): the batch, and the peer's address read.
    joined: Option<(Rc<Joint>, u64)>,
    /// Where `slots` are abandoned when the ticket is dropped unfinished; `None` for a ticket
    /// that never holds any (an injected write, a gathered read), which saves a count of the
    /// core's references on each of them.
    core: Option<Arc<Core>>,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("operations", &self.slots.len())
            .finish()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let Some(core) = self.core.as_ref().filter(|_| !self.slots.is_empty()) else {
            return;
        };
        let mut track = core.track();
        let freed: Vec<Staged> = self
            .slots
            .drain(..)
            .filter_map(|s| track.abandon(s))
            .collect();
        drop(track);
        drop(freed);
    }
}

impl Ticket {
    /// Add an operation (nothing for one counted only).
    pub(crate) fn push(&mut self, slot: Option<Slot>) {
        debug_assert!(
            slot.is_none() || self.core.is_some(),
            "an operation added to a ticket made without slots"
        );
        self.slots.extend(slot);
    }

    /// A ticket that holds no operations of its own: complete at once, or `joined` to a batch
    /// of gathered reads.
    fn without_slots(joined: Option<(Rc<Joint>, u64)>) -> Ticket {
        Ticket {
            slots: Vec::new(),
            staged: None,
            result: 0,
            joined,
            core: None,
        }
    }
}

impl Endpoint {
    /// A ticket for operations to come (`Ticket::push`); the bytes read or fetched land in
    /// `staged` at `result`.
    pub(crate) fn ticket(&self, staged: Option<Staged>, result: usize) -> Ticket {
        Ticket {
            slots: Vec::new(),
            staged,
            result,
            joined: None,
            core: Some(self.core.clone()),
        }
    }

    /// Start writing `src` to `to`: `src` is copied (injected when small, else into a buffer
    /// the endpoint owns), so it may be reused at once; the ticket completes when the write is
    /// complete at this origin.
    pub fn start_write(
        &self,
        src: &[u8],
        to: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<Ticket, FiError> {
        if src.len() <= self.inject {
            self.inject(src, to, None, keep_waiting)?;
            return Ok(Ticket::without_slots(None));
        }
        let staged = self.core.stage(src.len(), self.local_mr)?;
        staged.write(0, src)?;
        let mut t = self.ticket(None, 0);
        let (base, desc, step) = (staged.mem().addr(), staged.desc(), self.step());
        for at in (0..src.len()).step_by(step) {
            let n = step.min(src.len() - at);
            let keep = Some(staged.clone());
            let s = self.rma_write(
                base + at,
                n,
                desc,
                to.at(at),
                keep,
                false,
                None,
                keep_waiting,
            )?;
            t.push(s);
        }
        Ok(t)
    }

    /// Start reading `len` bytes at `from` into a buffer the endpoint owns; [`Endpoint::finish`]
    /// hands them over. A small read may be gathered with the reads around it into one read,
    /// posted at the endpoint's next call (`gather.rs`).
    pub fn start_read(
        &self,
        len: usize,
        from: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<Ticket, FiError> {
        if let Some(joint) = self.gather(len, from, keep_waiting) {
            return Ok(Ticket::without_slots(Some((joint, from.addr))));
        }
        let staged = self.core.stage(len, self.local_mr)?;
        let mut t = self.ticket(Some(staged.clone()), 0);
        let (base, desc, step) = (staged.mem().addr(), staged.desc(), self.step());
        for at in (0..len).step_by(step) {
            let n = step.min(len - at);
            let keep = Some(staged.clone());
            let s = self.rma_read(base + at, n, desc, from.at(at), keep, keep_waiting)?;
            t.push(Some(s));
        }
        Ok(t)
    }

    /// Start `op` on the `operands.len() / dtype.size()` consecutive `dtype` elements at `to`,
    /// each atomic on its own. With `fetch`, the old values are fetched (`fi_fetch_atomic`) into
    /// a buffer the endpoint owns, which [`Endpoint::finish`] hands over; without, nothing comes
    /// back (`fi_atomic`, half the bytes on the wire), which only providers whose non-fetching
    /// atomics have read their operands when they complete allow ([`Endpoint::plain_atomics`]).
    /// One call carries as many elements as the provider allows for `(dtype, op)`
    /// (`fi_query_atomic`'s count), all in flight together.
    pub fn start_atomic_many(
        &self,
        dtype: Datatype,
        op: AtomicOp,
        operands: &[u8],
        fetch: bool,
        to: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<Ticket, FiError> {
        let (name, kind) = match fetch {
            true => ("fi_fetch_atomic", AtomicKind::Fetch),
            false => ("fi_atomic", AtomicKind::Plain),
        };
        let (size, len) = (dtype.size(), operands.len());
        if !len.is_multiple_of(size) || !(fetch || self.plain_atomics()) {
            return Err(invalid(name));
        }
        let max = self.domain().atomic_count(dtype, op, kind);
        if max == 0 {
            return Err(FiError::new(name, -(sys::FI_EOPNOTSUPP as i64)));
        }
        let room = if fetch { 2 * len } else { len };
        let staged = self.core.stage(room, self.local_mr)?;
        staged.write(0, operands)?;
        let mut t = self.ticket(fetch.then(|| staged.clone()), len);
        let (base, desc, piece) = (staged.mem().addr(), staged.desc(), max * size);
        for at in (0..len).step_by(piece) {
            let (n, to) = (piece.min(len - at) / size, to.at(at));
            let (src, old) = (base + at, base + len + at);
            let keep = Some(staged.clone());
            // SAFETY: the endpoint is open; the piece's operands (and results) lie in the staged
            // buffer, which the slot keeps until the operation settles.
            let s = self.post(name, to.peer, true, keep, keep_waiting, |ctx| unsafe {
                let (ep, peer, dt, o) = (self.core.ep(), to.peer.addr, dtype.raw(), op.raw());
                let src = src as *const libc::c_void;
                match fetch {
                    true => sys::fi_fetch_atomic(
                        ep,
                        src,
                        n,
                        desc,
                        old as *mut libc::c_void,
                        desc,
                        peer,
                        to.addr,
                        to.key,
                        dt,
                        o,
                        ctx,
                    ),
                    false => sys::fi_atomic(ep, src, n, desc, peer, to.addr, to.key, dt, o, ctx),
                }
            })?;
            t.push(s);
        }
        Ok(t)
    }

    /// Whether every operation of `ticket` has settled (progressing the endpoint once, and
    /// posting gathered reads; `keep_waiting` as in [`Endpoint::finish`] while posting them).
    pub fn test(&self, ticket: &Ticket, keep_waiting: &dyn Fn() -> Waiting) -> bool {
        self.core.touch();
        self.launch(keep_waiting);
        self.core.poll();
        self.settled(ticket)
    }

    /// For a future: whether every operation of `ticket` has settled, and if not, have `waker`
    /// woken when operations of this endpoint next settle (posting gathered reads first;
    /// `keep_waiting` as in [`Endpoint::finish`] while posting them). The progress is the
    /// progress thread's: while any future waits it polls the endpoint back to back and wakes
    /// every waiting future when operations settle, and every 10 ms if nothing does (for a look
    /// at the peers' liveness). A woken future whose operations are still in flight watches
    /// again; the owner need not poll, so its thread may sleep in its executor.
    pub fn watch(
        &self,
        ticket: &Ticket,
        waker: &Waker,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> bool {
        self.launch(keep_waiting);
        if self.settled(ticket) {
            return true;
        }
        if self.core.watchers.add(waker) {
            self.core.wake();
        }
        // A settle between the first look and the watch woke nobody: look once more.
        self.settled(ticket)
    }

    /// Whether every operation of `ticket` has settled, without progressing the endpoint
    /// (posting gathered reads first, as [`Endpoint::test`]): a look that costs no call into
    /// the provider, for the many requests a future joins, whose polls need not all progress.
    pub fn looked_settled(&self, ticket: &Ticket, keep_waiting: &dyn Fn() -> Waiting) -> bool {
        self.launch(keep_waiting);
        self.settled(ticket)
    }

    /// Whether every operation of `ticket` has settled, without progressing the endpoint.
    fn settled(&self, ticket: &Ticket) -> bool {
        if let Some((joint, _)) = &ticket.joined
            && !self.joint_settled(joint)
        {
            return false;
        }
        let track = self.core.track();
        ticket.slots.iter().all(|&s| track.settled(s))
    }

    /// Wait for every operation of `ticket`; the bytes read or fetched go to `out` (as many as
    /// it holds). The first failure is returned, after every operation has been waited for.
    pub fn finish(
        &self,
        mut ticket: Ticket,
        out: Option<&mut [u8]>,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        self.launch(keep_waiting);
        if let Some((joint, addr)) = ticket.joined.take() {
            return self.joint_finish(&joint, addr, out, keep_waiting);
        }
        let slots = std::mem::take(&mut ticket.slots);
        let mut waited = Ok(());
        for (i, &s) in slots.iter().enumerate() {
            if let Err(e) = self.wait_slot("operation", s, keep_waiting) {
                // The slots not waited for yet are abandoned with the ticket.
                ticket.slots = slots[i + 1..].to_vec();
                waited = Err(e);
                break;
            }
        }
        waited?;
        match (out, &ticket.staged) {
            (Some(out), Some(staged)) => staged.read(ticket.result, out),
            _ => Ok(()),
        }
    }
}
