//! An endpoint one thread at a time uses, which may move between threads: blocking puts (with
//! a notification or without), gets, atomics and flushes only (a lane of a thread of a shared
//! window).

use crate::domain::{AtomicOp, Datatype, Domain};
use crate::endpoint::{Endpoint, Flusher, Idle};
use crate::error::FiError;
use crate::patience::Waiting;
use crate::peer::Peer;
use crate::remote::Remote;
use std::sync::Arc;

/// An [`Endpoint`] offering blocking puts, gets and atomics and flushes only, so that it may be
/// sent to another thread (and closed there).
#[derive(Debug)]
pub struct Lane(Endpoint);

// SAFETY: what keeps an `Endpoint` from being `Send` is its gathering of request-form reads,
// whose batches it shares by `Rc` with the tickets of those requests. A `Lane` offers no
// request form, so its gathering stays empty and no ticket shares anything with it; every
// other part of the endpoint is `Send` (its libfabric objects: the domain is FI_THREAD_SAFE).
unsafe impl Send for Lane {}

impl Lane {
    /// Open an endpoint on `domain` without a progress thread: its thread's calls drive it,
    /// and flushes from other threads ([`Flusher`]); nothing addresses a lane, so nothing
    /// needs serving while its thread is away.
    pub fn open(domain: &Arc<Domain>) -> Result<Lane, FiError> {
        Endpoint::open_served(domain, Idle::Poll, false).map(Lane)
    }

    /// [`Endpoint::insert`].
    pub fn insert(&self, name: &[u8]) -> Result<Peer, FiError> {
        self.0.insert(name)
    }

    /// [`Endpoint::set_pid`].
    pub fn set_pid(&self, peer: Peer, pid: u32) {
        self.0.set_pid(peer, pid);
    }

    /// [`Endpoint::write`].
    pub fn write(
        &self,
        src: &[u8],
        to: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        self.0.write(src, to, keep_waiting)
    }

    /// Whether [`Lane::write_notify`] carries `len` bytes: the provider carries remote data
    /// ([`Endpoint::remote_data_bits`]) and they fit one operation.
    pub fn carries(&self, len: usize) -> bool {
        self.0.remote_data_bits() > 0 && len <= self.0.max_msg_size()
    }

    /// [`Endpoint::write_notify`].
    pub fn write_notify(
        &self,
        src: &[u8],
        to: Remote,
        data: u64,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        self.0.write_notify(src, to, data, keep_waiting)
    }

    /// [`Endpoint::read`].
    pub fn read(
        &self,
        dst: &mut [u8],
        from: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        self.0.read(dst, from, keep_waiting)
    }

    /// [`Endpoint::fetch_atomic`].
    pub fn fetch_atomic(
        &self,
        dtype: Datatype,
        op: AtomicOp,
        operand: &[u8],
        result: &mut [u8],
        to: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        self.0
            .fetch_atomic(dtype, op, operand, result, to, keep_waiting)
    }

    /// [`Endpoint::fetch_atomic_many`].
    pub fn fetch_atomic_many(
        &self,
        dtype: Datatype,
        op: AtomicOp,
        operands: &[u8],
        result: &mut [u8],
        to: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        self.0
            .fetch_atomic_many(dtype, op, operands, result, to, keep_waiting)
    }

    /// [`Endpoint::compare_swap`].
    pub fn compare_swap(
        &self,
        dtype: Datatype,
        compare: &[u8],
        swap: &[u8],
        result: &mut [u8],
        to: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        self.0
            .compare_swap(dtype, compare, swap, result, to, keep_waiting)
    }

    /// [`Endpoint::flush`].
    pub fn flush(&self, peer: Peer, keep_waiting: &dyn Fn() -> Waiting) -> Result<(), FiError> {
        self.0.flush(peer, keep_waiting)
    }

    /// [`Endpoint::flusher`].
    pub fn flusher(&self) -> Flusher {
        self.0.flusher()
    }
}
