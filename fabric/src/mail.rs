//! Calls between endpoints: an origin sends a message naming work its peer does on its own
//! memory, and the peer answers with one message (the main crate's served accumulates: the
//! target applies them under its own lock, where a provider's atomics would apply each element
//! on its own).
//!
//! Every port peers address holds [`SLOTS`] posted receives of one [`SLOT`] each, whose
//! contexts carry [`RECEIVE`] (no operation's context does: `track::Context`). Whichever thread
//! reads a receive's completion, the progress thread included, copies the message out, posts
//! the receive again and handles it: a request goes to the endpoint's [`Serve`], whose answer
//! goes back to the rank that asked (known by its rank: [`crate::Endpoint::know_rank`]); an
//! answer goes to the call waiting for it, or nowhere if that call gave up. An answer or a
//! receive the provider refuses for now (`FI_EAGAIN`) waits for the next poll; a request is
//! posted by its caller, who polls meanwhile, with a slot that tells it if the send fails.

use crate::error::{FiError, check};
use crate::ledger::Ledger;
use crate::peer::Peer;
use crate::port::Port;
use crate::registered::Registered;
use crate::stage::{Pool, Staged};
use crate::sys;
use crate::track::{Context, Slot};
use onesided_shm::Mem;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Most bytes of a call's body: 32 KiB of operands and their header, which rxm's buffers as
/// `onesided run` sizes them (`FI_OFI_RXM_BUFFER_SIZE`) carry in one piece.
pub const BODY_MAX: usize = (32 << 10) + 64;
/// Kind, sender's rank, call number, body length.
pub(crate) const ENVELOPE: usize = 24;
/// Bytes of one posted receive.
const SLOT: usize = ENVELOPE + BODY_MAX;
/// Receives posted per port.
pub(crate) const SLOTS: usize = 8;
/// The flag of a receive's context.
pub(crate) const RECEIVE: Context = 1 << 63;
/// The flag of a receive posted on the serving port (else on the issuing one).
const SERVING: Context = 1 << 62;

const REQUEST: u32 = 1;
const ANSWER: u32 = 2;

/// What an endpoint does with the calls its peers make.
pub trait Serve: Send + Sync {
    /// Append the answer to `request` (the body of a peer's [`crate::Endpoint::call`]) to
    /// `answer`; `memory` reaches the memory this endpoint has registered for peers.
    fn serve(&self, request: &[u8], memory: &Memory<'_>, answer: &mut Vec<u8>);
}

/// The memory an endpoint has registered for its peers, as a call's handler reaches it.
pub struct Memory<'a> {
    registered: &'a Mutex<Registered>,
    /// Whether peers address it by virtual address (else by offset).
    virt: bool,
}

impl Memory<'_> {
    /// Hand `f` a copy of the `len` bytes at `addr` of the region peers reach with `key`
    /// (addressed as their RMA addresses it), then write back what `f` left there. False, and
    /// nothing touched, where no region registered for peers holds that whole range.
    pub fn update(&self, key: u64, addr: u64, len: usize, f: impl FnOnce(&mut [u8])) -> bool {
        lock(self.registered).update(key, addr, len, self.virt, f)
    }
}

/// Posted receives of one port.
struct Inbox {
    ep: *mut sys::fid_ep,
    mem: Mem<'static>,
    flag: Context,
}

/// The calls of an endpoint, once it serves them ([`crate::Endpoint::serve_calls`]).
pub(crate) struct Mail {
    serve: Arc<dyn Serve>,
    /// Messages up to this many bytes are injected: no buffer kept, no completion.
    inject: usize,
    /// The endpoint messages are sent from (the issuing port's), and where the buffers of
    /// those not injected come from (the endpoint's staging pool).
    out: *mut sys::fid_ep,
    pool: Arc<Pool>,
    /// Whether peers address registered memory by virtual address (else by offset).
    virt: bool,
    inboxes: Vec<Inbox>,
    /// The peer of each rank, for answers.
    ranks: Mutex<Vec<Option<Peer>>>,
    /// Calls waiting for their answer, by number (a few: a call blocks its thread), and how
    /// many answers have come, so that a waiting call looks at them only when one did.
    answers: Mutex<Vec<(u64, Option<Vec<u8>>)>>,
    arrived: AtomicU64,
    next: AtomicU64,
    /// Messages and receives the provider refused for now, and whether there are any.
    outbox: Mutex<VecDeque<(Peer, Vec<u8>)>>,
    unposted: Mutex<Vec<Context>>,
    backlog: AtomicBool,
}

/// The guard of `m`, also after a panic of another thread holding it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Mail {
    /// Receives posted on every port of an endpoint that peers address (`out`, which issues,
    /// and `serving`, where there is one), served by `serve`; messages sent from `out`, through
    /// buffers of `pool` (the endpoint's); `virt`: peers address registered memory by virtual
    /// address. The ports must stay open while the calls are.
    pub(crate) fn open(
        out: &Port,
        serving: Option<&Port>,
        pool: &Arc<Pool>,
        virt: bool,
        serve: Arc<dyn Serve>,
        inject: usize,
    ) -> Result<Mail, FiError> {
        let mut ports = vec![(out.ep, 0)];
        if let Some(s) = serving {
            ports.push((s.ep, SERVING));
        }
        let inboxes = ports
            .into_iter()
            .map(|(ep, flag)| {
                let mem = Mem::alloc(SLOT * SLOTS, 64)
                    .ok_or_else(|| FiError::new("receive buffers", -(libc::ENOMEM as i64)))?;
                Ok(Inbox { ep, mem, flag })
            })
            .collect::<Result<Vec<_>, FiError>>()?;
        let mail = Mail {
            serve,
            inject,
            out: out.ep,
            pool: pool.clone(),
            virt,
            inboxes,
            ranks: Mutex::default(),
            answers: Mutex::default(),
            arrived: AtomicU64::new(0),
            next: AtomicU64::new(1),
            outbox: Mutex::default(),
            unposted: Mutex::default(),
            backlog: AtomicBool::new(false),
        };
        for (i, inbox) in mail.inboxes.iter().enumerate() {
            for slot in 0..SLOTS {
                let ctx = RECEIVE | inbox.flag | (i * SLOTS + slot) as Context;
                match mail.post(ctx) {
                    Ok(true) => {}
                    Ok(false) => mail.later(|m| lock(&m.unposted).push(ctx)),
                    Err(e) => {
                        // The receives posted so far keep their buffers: never freed.
                        std::mem::forget(mail);
                        return Err(e);
                    }
                }
            }
        }
        Ok(mail)
    }

    /// Post the receive of `ctx`; false where the provider refuses it for now.
    fn post(&self, ctx: Context) -> Result<bool, FiError> {
        let index = (ctx & 0xffff_ffff) as usize;
        let inbox = &self.inboxes[index / SLOTS];
        let buf = inbox.mem.addr() + (index % SLOTS) * SLOT;
        // SAFETY: the endpoint is open while its core is; the buffer lies in `inbox.mem`, which
        // the core frees only after closing its ports (so after the provider lets go of it).
        let ret = unsafe {
            sys::fi_recv(
                inbox.ep,
                buf as *mut libc::c_void,
                SLOT,
                std::ptr::null_mut(),
                u64::MAX,
                ctx as *mut libc::c_void,
            )
        };
        if ret == -(sys::FI_EAGAIN as isize) {
            return Ok(false);
        }
        check("fi_recv", ret as i64).map(|_| true)
    }

    /// Note something for the next poll to retry.
    fn later(&self, note: impl FnOnce(&Mail)) {
        note(self);
        self.backlog.store(true, Ordering::Release);
    }

    /// Note that `rank` is `peer`.
    pub(crate) fn know(&self, rank: u32, peer: Peer) {
        let mut ranks = lock(&self.ranks);
        let i = rank as usize;
        if ranks.len() <= i {
            ranks.resize(i + 1, None);
        }
        ranks[i] = Some(peer);
    }

    /// A new call's number, waited for by [`Mail::answer`].
    pub(crate) fn open_call(&self) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.answers).push((id, None));
        id
    }

    /// How many answers have come so far.
    pub(crate) fn arrived(&self) -> u64 {
        self.arrived.load(Ordering::Acquire)
    }

    /// The answer to call `id` once it came (the call is over then).
    pub(crate) fn answer(&self, id: u64) -> Option<Vec<u8>> {
        let mut answers = lock(&self.answers);
        let i = answers.iter().position(|(c, a)| *c == id && a.is_some())?;
        answers.swap_remove(i).1
    }

    /// Nobody waits for call `id` any more: its answer, if it comes, is dropped.
    pub(crate) fn give_up(&self, id: u64) {
        lock(&self.answers).retain(|(c, _)| *c != id);
    }

    /// Post a request of call `id` from rank `from` to `peer`: injected where it is small, else
    /// with a slot of its own to learn whether it failed (`Some(None)` and `Some(Some(slot))`);
    /// `None` where the provider refuses it for now. `track`: the endpoint's bookkeeping.
    pub(crate) fn request(
        &self,
        track: &Ledger,
        peer: Peer,
        from: u32,
        id: u64,
        body: &[&[u8]],
    ) -> Result<Option<Option<Slot>>, FiError> {
        let len = body.iter().map(|p| p.len()).sum();
        self.post_send(track, peer, &envelope(REQUEST, from, id, len), body, true)
    }

    /// Send an answer to `peer`: left to settle on its own, and when the provider refuses it
    /// for now, kept for the next poll.
    fn answer_to(&self, track: &Ledger, peer: Peer, msg: Vec<u8>) {
        match self.post_send(track, peer, &msg, &[], false) {
            Ok(Some(_)) => {}
            Ok(None) => self.later(|m| lock(&m.outbox).push_back((peer, msg))),
            // The peer is gone (its call with it), or the provider failed: nothing waits here
            // that could be told.
            Err(_) => {}
        }
    }

    /// Post the message `head` followed by the parts of `body` to `peer`: injected up to the
    /// inject size, else from a buffer the endpoint owns until the send settles (counted for the
    /// peer's flush; the parts are copied straight into it), with `slot` in a slot of its own
    /// (returned), else settling alone, tracked in `track`. `None` where the provider refuses it
    /// for now.
    fn post_send(
        &self,
        track: &Ledger,
        peer: Peer,
        head: &[u8],
        body: &[&[u8]],
        slot: bool,
    ) -> Result<Option<Option<Slot>>, FiError> {
        let mut parts = std::iter::once(head).chain(body.iter().copied());
        let len = parts.clone().map(<[u8]>::len).sum();
        if len <= self.inject {
            let mut msg = Vec::with_capacity(len);
            parts.for_each(|p| msg.extend_from_slice(p));
            // SAFETY: the endpoint is open; the provider copies `msg` before it returns.
            let ret = unsafe { sys::fi_inject(self.out, msg.as_ptr().cast(), len, peer.addr) };
            if ret == -(sys::FI_EAGAIN as isize) {
                return Ok(None);
            }
            return check("fi_inject", ret as i64).map(|_| Some(None));
        }
        let staged = Staged::new(&self.pool, len, None)?;
        parts.try_fold(0, |at, p| staged.write(at, p).map(|()| at + p.len()))?;
        let addr = staged.mem().addr();
        let (ctx, own) = track.lock().issue(peer.index, true, Some(staged));
        // SAFETY: the endpoint is open; the buffer is kept by the operation's slot until the
        // operation settles.
        let ret = unsafe {
            sys::fi_send(
                self.out,
                addr as *const libc::c_void,
                len,
                std::ptr::null_mut(),
                peer.addr,
                ctx as *mut libc::c_void,
            )
        };
        if ret != 0 {
            let kept = track.lock().withdraw(ctx);
            drop(kept);
            if ret == -(sys::FI_EAGAIN as isize) {
                return Ok(None);
            }
            return check("fi_send", ret as i64).map(|_| None);
        }
        match (slot, own) {
            (false, Some(own)) => {
                let kept = track.lock().abandon(own);
                drop(kept);
                Ok(Some(None))
            }
            (_, own) => Ok(Some(own)),
        }
    }

    /// Retry what the provider refused before, if anything (`track`: the endpoint's
    /// bookkeeping).
    pub(crate) fn retry(&self, track: &Ledger) {
        if !self.backlog.load(Ordering::Acquire) || !self.backlog.swap(false, Ordering::AcqRel) {
            return;
        }
        let unposted = std::mem::take(&mut *lock(&self.unposted));
        for ctx in unposted {
            if !matches!(self.post(ctx), Ok(true)) {
                self.later(|m| lock(&m.unposted).push(ctx));
            }
        }
        let waiting = std::mem::take(&mut *lock(&self.outbox));
        for (peer, msg) in waiting {
            self.answer_to(track, peer, msg);
        }
    }

    /// The receive of `ctx` completed (`failed`: with an error): handle its message, and post
    /// the receive again. `track` and `registered`: the endpoint's bookkeeping and the regions
    /// registered on it.
    pub(crate) fn received(
        &self,
        track: &Ledger,
        registered: &Mutex<Registered>,
        ctx: Context,
        failed: bool,
    ) {
        let index = (ctx & 0xffff_ffff) as usize;
        let Some(inbox) = self.inboxes.get(index / SLOTS) else {
            return;
        };
        let at = (index % SLOTS) * SLOT;
        let mut head = [0u8; ENVELOPE];
        let read = !failed && inbox.mem.read(at, &mut head).is_ok();
        let (kind, from, id, len) = envelope_of(&head);
        let n = len.min(BODY_MAX);
        // Small requests are read onto the stack; answers go to their caller as they are.
        let on_stack = kind == REQUEST && n <= SMALL;
        let mut small = [0u8; SMALL];
        let (read, large) = match on_stack {
            true => (
                read && inbox.mem.read(at + ENVELOPE, &mut small[..n]).is_ok(),
                Vec::new(),
            ),
            false => match read.then(|| inbox.mem.to_vec(at + ENVELOPE, n)) {
                Some(Ok(v)) => (true, v),
                _ => (false, Vec::new()),
            },
        };
        let body: &[u8] = match on_stack {
            true => &small[..n],
            false => &large,
        };
        if !matches!(self.post(ctx), Ok(true)) {
            self.later(|m| lock(&m.unposted).push(ctx));
        }
        match kind {
            REQUEST if read => {
                // A rank not known yet has not finished creating the window it calls about,
                // which its call cannot precede: nothing to answer to.
                let Some(peer) = lock(&self.ranks).get(from as usize).copied().flatten() else {
                    return;
                };
                let mut answer = Vec::with_capacity(ENVELOPE + SMALL);
                answer.extend_from_slice(&envelope(ANSWER, 0, id, 0));
                let memory = Memory {
                    registered,
                    virt: self.virt,
                };
                self.serve.serve(body, &memory, &mut answer);
                let n = answer.len() - ENVELOPE;
                answer[..ENVELOPE].copy_from_slice(&envelope(ANSWER, 0, id, n));
                self.answer_to(track, peer, answer);
            }
            ANSWER if read => {
                let mut answers = lock(&self.answers);
                if let Some((_, waiting)) = answers.iter_mut().find(|(c, _)| *c == id) {
                    *waiting = Some(large);
                    self.arrived.fetch_add(1, Ordering::Release);
                }
            }
            _ => {}
        }
    }
}

/// Bytes of a request read onto the stack.
const SMALL: usize = 256;

/// A message's envelope, with a body of `len` bytes to follow.
fn envelope(kind: u32, from: u32, id: u64, len: usize) -> [u8; ENVELOPE] {
    let mut e = [0u8; ENVELOPE];
    e[0..4].copy_from_slice(&kind.to_le_bytes());
    e[4..8].copy_from_slice(&from.to_le_bytes());
    e[8..16].copy_from_slice(&id.to_le_bytes());
    e[16..24].copy_from_slice(&(len as u64).to_le_bytes());
    e
}

/// Kind, sender, call number and body length of an envelope.
fn envelope_of(e: &[u8; ENVELOPE]) -> (u32, u32, u64, usize) {
    let word = |at: usize| u64::from_le_bytes(e[at..at + 8].try_into().expect("8 bytes"));
    let (low, id, len) = (word(0), word(8), word(16));
    (low as u32, (low >> 32) as u32, id, len as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_round_trip() {
        let head = envelope(REQUEST, 3, 0x1_0000_0002, 3);
        assert_eq!(envelope_of(&head), (REQUEST, 3, 0x1_0000_0002, 3));
        let head = envelope(ANSWER, u32::MAX, u64::MAX, BODY_MAX);
        assert_eq!(envelope_of(&head), (ANSWER, u32::MAX, u64::MAX, BODY_MAX));
    }
}
