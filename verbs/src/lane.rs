//! Lanes: endpoints of their own for the threads of a process ([`Endpoint::lane`]), each with
//! its completion queue, staging buffers and a queue pair per peer, on the protection domain
//! of the endpoint they were made from. A lane is `Send` and `Sync`: any thread takes it
//! ([`Lane::lock`], or [`Lane::try_lock`] to pass on to another lane while one is busy) and
//! makes blocking operations through it, side by side with the threads that hold other lanes
//! and with the endpoint's own thread.
//!
//! The peer's side of a lane's queue pair is a queue pair of one of the peer's lanes, prepared
//! and connected as the endpoint's are ([`LaneGuard::prepare`], [`LaneGuard::connect`]); the
//! peer's NIC serves it, so the peer makes no call for it.
//!
//! A lane's queue pairs take their receives from the endpoint's shared receive queue and
//! complete them on the endpoint's completion queue: a peer's write with immediate data through
//! a lane ([`LaneGuard::write_notify`]) is handed over by the endpoint's polls, as through the
//! endpoint's own queue pairs, and wakes a thread asleep on the endpoint's channel. (So a lane's
//! disconnect, which polls the lane's queue alone, may lose the receives that writes through it
//! took since the endpoint last polled: it is for queue pairs that never carried one, those of a
//! window whose creation failed.)
//!
//! Unlike an endpoint's, a lane's operations all complete in their call or at a flush: nothing
//! of it (no [`Ticket`](crate::Ticket), no region) outlives the lock its call holds.

use crate::endpoint::{Atomic, Endpoint, Remote, Waiting};
use crate::error::VerbsError;
use crate::queue::PortAddress;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// An endpoint that any thread may take in turn.
pub struct Lane {
    ep: Mutex<Endpoint>,
}

// SAFETY: an `Endpoint` is not `Send` for two reasons, and a lane keeps both from mattering.
// Its state lives in `RefCell`s behind an `Rc` that only the endpoint and its tickets hold:
// here the endpoint is reached only under the mutex, and no method of `LaneGuard` returns a
// ticket or anything else holding that `Rc` (the tickets some of them make are dropped before
// they return), so the count and the cells are only ever touched by the thread holding the
// lock; nor does any set a handler of immediate data (a lane has none, and its polls never
// see a receive). Its verbs objects (queue pairs, completion queue, memory registrations) are
// used through libibverbs, whose calls may be made from any thread, and what it shares with
// the endpoint it was made from (context, protection domain, shared receive queue and the
// queue its receives complete on) is held through `Arc` and is `Sync`.
unsafe impl Send for Lane {}
// SAFETY: as for `Send`: every access to the endpoint inside goes through the mutex.
unsafe impl Sync for Lane {}

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane").finish_non_exhaustive()
    }
}

impl Endpoint {
    /// A lane of this endpoint ([`Lane`]): an endpoint of its own on the same port and
    /// protection domain, so that the regions registered here serve its operations too, with
    /// its own completion queue for its sends, staging buffers and queue pairs (prepared and
    /// connected as this endpoint's are), whose receives this endpoint's shared receive queue
    /// gives and its completion queue reports; no completion channel: a lane's waits poll. It
    /// does not read the device's async events: a queue pair of it that breaks fails its work
    /// through its completions.
    pub fn lane(&self) -> Result<Lane, VerbsError> {
        Ok(Lane {
            ep: Mutex::new(self.sibling()?),
        })
    }
}

impl Lane {
    /// Take the lane, waiting while another thread has it. A thread that panicked holding it
    /// left nothing half done that a later call depends on: the endpoint's bookkeeping changes
    /// whole or not at all.
    pub fn lock(&self) -> LaneGuard<'_> {
        LaneGuard {
            ep: self.ep.lock().unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// Take the lane if no other thread has it.
    pub fn try_lock(&self) -> Option<LaneGuard<'_>> {
        match self.ep.try_lock() {
            Ok(ep) => Some(LaneGuard { ep }),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(LaneGuard { ep: p.into_inner() }),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

/// A lane taken by this thread: its operations, each complete (or in flight until a flush, for
/// writes) when it returns, as the endpoint's methods of the same names say.
pub struct LaneGuard<'l> {
    ep: MutexGuard<'l, Endpoint>,
}

impl LaneGuard<'_> {
    /// [`Endpoint::prepare`].
    pub fn prepare(&self, peer: u32) -> Result<u32, VerbsError> {
        self.ep.prepare(peer)
    }

    /// [`Endpoint::connect`].
    pub fn connect(&self, peer: u32, to: PortAddress, remote_qpn: u32) -> Result<(), VerbsError> {
        self.ep.connect(peer, to, remote_qpn)
    }

    /// [`Endpoint::disconnect`].
    pub fn disconnect(&self, peer: u32) {
        self.ep.disconnect(peer);
    }

    /// [`Endpoint::connected`].
    pub fn connected(&self, peer: u32) -> bool {
        self.ep.connected(peer)
    }

    /// [`Endpoint::write`].
    pub fn write(
        &self,
        peer: u32,
        src: &[u8],
        to: Remote,
        live: &dyn Fn() -> Waiting,
    ) -> Result<(), VerbsError> {
        self.ep.write(peer, src, to, live)
    }

    /// [`Endpoint::write_notify`]: the peer's endpoint hands `imm` over.
    pub fn write_notify(
        &self,
        peer: u32,
        src: &[u8],
        to: Remote,
        imm: u32,
        live: &dyn Fn() -> Waiting,
    ) -> Result<(), VerbsError> {
        self.ep.write_notify(peer, src, to, imm, live)
    }

    /// [`Endpoint::wake`].
    pub fn wake(
        &self,
        peer: u32,
        probe: Remote,
        live: &dyn Fn() -> Waiting,
    ) -> Result<(), VerbsError> {
        self.ep.wake(peer, probe, live)
    }

    /// [`Endpoint::max_message`].
    pub fn max_message(&self) -> usize {
        self.ep.max_message()
    }

    /// [`Endpoint::read`].
    pub fn read(
        &self,
        peer: u32,
        dst: &mut [u8],
        from: Remote,
        live: &dyn Fn() -> Waiting,
    ) -> Result<(), VerbsError> {
        self.ep.read(peer, dst, from, live)
    }

    /// [`Endpoint::atomic`].
    pub fn atomic(
        &self,
        peer: u32,
        op: Atomic,
        at: Remote,
        live: &dyn Fn() -> Waiting,
    ) -> Result<u64, VerbsError> {
        self.ep.atomic(peer, op, at, live)
    }

    /// The atomics `ops` on words of `peer`, all in flight together; their old values go to
    /// `out`, 8 bytes each in order ([`Endpoint::start_atomics`], then [`Endpoint::finish`]).
    pub fn atomics(
        &self,
        peer: u32,
        ops: &[(Atomic, Remote)],
        out: &mut [u8],
        live: &dyn Fn() -> Waiting,
    ) -> Result<(), VerbsError> {
        let t = self.ep.start_atomics(peer, ops, live)?;
        self.ep.finish(t, Some(out), live)
    }

    /// [`Endpoint::flush`].
    pub fn flush(
        &self,
        peer: u32,
        probe: Remote,
        live: &dyn Fn() -> Waiting,
    ) -> Result<(), VerbsError> {
        self.ep.flush(peer, probe, live)
    }

    /// [`Endpoint::idle`].
    pub fn idle(&self, peer: u32) -> bool {
        self.ep.idle(peer)
    }
}
