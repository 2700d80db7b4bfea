//! Request-based RMA: `rput`, `rget`, `raccumulate`, `rget_accumulate`, and the [`Request`]
//! they return.
//!
//! Each call checks its arguments and the epoch as its blocking twin does, with one more rule:
//! a passive-target epoch must cover the target (MPI_ERR_RMA_SYNC otherwise). It returns once
//! the operation is started; the request completes it locally ([`Request::wait`],
//! [`Request::test`], [`Request::wait_all`], [`Request::wait_any`]): the origin buffer may be
//! reused, and for `rget` and `rget_accumulate` the data is in it. Completion at the target
//! still needs a flush or the end of the epoch, as in MPI.
//!
//! Safe by construction: a request borrows its buffers until it is complete, and dropping an
//! incomplete request completes it. Over the fabric the data moves through buffers the endpoint
//! owns until the NIC is done with them, so even a request that is leaked never lets the NIC
//! touch memory the program has handed back; the result buffer of a leaked `rget` is simply
//! never filled. Small `rget`s to a fabric target that has operations in flight are gathered
//! into one read, posted at the next call that reaches the endpoint (any operation, flush, test
//! or wait): `docs/transports.md`.
//!
//! A request is also a [`Future`] (of `Result<()>`), for any executor: awaiting it completes
//! it as [`Request::wait`] does, so `futures::future::join_all(requests).await` waits for many.
//! A poll tests the request; one still in flight asks its transport to wake the task when it
//! may have completed. Over the fabric the endpoint's progress thread does: while a future
//! waits it polls the endpoint back to back and wakes every waiting task when operations
//! settle (and every 10 ms regardless, to look at the peers' liveness), so the task's thread
//! may sleep in its executor. Over shared memory a request is complete when it starts, and
//! over direct verbs, where the owner's polls are the progress, the task is woken at once to
//! poll again. A request borrows its window, which stays on its thread (MPI_THREAD_FUNNELED),
//! so its future runs on a single-threaded executor (`futures::executor::block_on`,
//! `LocalPool`, a local task set).
//!
//! # MPI-4.1: 12.3.5 (request-based RMA communication operations)

use super::Window;
use super::atomic::{AtomicElem, accumulate_op, elem_bytes, fetch_args};
use crate::error::Result;
use crate::error::in_call;
use crate::protocol::reduce::Op;
use crate::transport::{Pending, Space, Transport};
use bytemuck::Pod;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// How long a request awaited as a future is polled by its own task (woken again at once while
/// in flight) before its transport is asked to wake the task when it completes, so that the
/// task's thread may sleep: a completion expected soon is seen sooner by a poll than by a
/// wake-up from another thread.
const POLL_FOR: Duration = Duration::from_millis(1);

/// A request-based RMA operation in progress (MPI_Request of MPI_RPUT and its kin). It borrows
/// the window and its buffers until complete; dropping it completes it (ignoring an error, as
/// the destructor cannot report it: call [`Request::wait`] to see it).
#[must_use = "a request completes when waited for or dropped; dropping it at once waits at once"]
pub struct Request<'w> {
    transport: &'w dyn Transport,
    pending: Option<Pending>,
    /// Where the bytes read or fetched go (rget, rget_accumulate).
    out: Option<&'w mut [u8]>,
    rank: usize,
    /// When the request was first polled as a future.
    polled: Option<Instant>,
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("complete", &self.pending.is_none())
            .finish()
    }
}

impl<'w> Request<'w> {
    /// Whether the request has completed (by [`Request::test`] or [`Request::wait_any`]).
    pub fn is_complete(&self) -> bool {
        self.pending.is_none()
    }

    /// Complete the request: the origin buffer may be reused, and read or fetched data is in
    /// the result buffer.
    ///
    /// # MPI-4.1: 3.7.3 (MPI_WAIT)
    pub fn wait(mut self) -> Result<()> {
        in_call(Some(self.rank), "MPI_Wait", || self.complete())
    }

    /// Whether the request is complete, completing it if so; it can be tested again or
    /// waited for afterwards (both succeed at once).
    ///
    /// # MPI-4.1: 3.7.3 (MPI_TEST)
    pub fn test(&mut self) -> Result<bool> {
        in_call(Some(self.rank), "MPI_Test", || self.poll())
    }

    /// Complete every request of `requests`; the first error is returned, after every request
    /// has been completed.
    ///
    /// # MPI-4.1: 3.7.5 (MPI_WAITALL)
    pub fn wait_all(requests: impl IntoIterator<Item = Request<'w>>) -> Result<()> {
        let mut first = Ok(());
        for mut q in requests {
            let done = in_call(Some(q.rank), "MPI_Waitall", || q.complete());
            if first.is_ok() {
                first = done;
            }
        }
        first
    }

    /// Wait until one of the requests of `requests` not complete yet completes; its index, or
    /// `None` when every one was complete already (MPI_UNDEFINED).
    ///
    /// # MPI-4.1: 3.7.5 (MPI_WAITANY)
    pub fn wait_any(requests: &mut [Request<'w>]) -> Result<Option<usize>> {
        if requests.iter().all(Request::is_complete) {
            return Ok(None);
        }
        loop {
            for (i, q) in requests.iter_mut().enumerate() {
                if !q.is_complete() && in_call(Some(q.rank), "MPI_Waitany", || q.poll())? {
                    return Ok(Some(i));
                }
            }
        }
    }

    fn poll(&mut self) -> Result<bool> {
        let ready = match &self.pending {
            None => return Ok(true),
            Some(p) => self.transport.test(p)?,
        };
        if ready {
            self.complete()?;
        }
        Ok(ready)
    }

    fn complete(&mut self) -> Result<()> {
        match self.pending.take() {
            Some(p) => self.transport.finish(p, self.out.as_deref_mut()),
            None => Ok(()),
        }
    }
}

/// Awaiting a request completes it: `Ok` once the origin buffer may be reused (and read or
/// fetched data is in the result buffer), or the error [`Request::wait`] would return. Polled
/// again after that, it is ready with `Ok`.
///
/// # MPI-4.1: 3.7.3 (MPI_TEST)
impl Future for Request<'_> {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let q = &mut *self;
        let since = *q.polled.get_or_insert_with(Instant::now);
        let to_sleep = since.elapsed() >= POLL_FOR;
        in_call(Some(q.rank), "MPI_Test", || {
            let done = match &q.pending {
                None => true,
                Some(p) => q.transport.watch(p, cx.waker(), to_sleep)?,
            };
            if done {
                q.complete()?;
            }
            Ok(done)
        })
        .map_or_else(
            |e| Poll::Ready(Err(e)),
            |done| match done {
                true => Poll::Ready(Ok(())),
                false => Poll::Pending,
            },
        )
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        let _ = self.complete();
    }
}

impl Window<'_> {
    /// The checks every request-based call makes: rank, range, and a passive-target epoch
    /// covering `target`; where the `len` bytes at `disp` are.
    fn request_range(&self, target: usize, disp: usize, len: usize) -> Result<(Space, usize)> {
        self.place(target, disp, len, true)
    }

    fn request<'s>(
        &'s self,
        transport: &'s dyn Transport,
        started: Result<Pending>,
        out: Option<&'s mut [u8]>,
    ) -> Result<Request<'s>> {
        let pending = started?;
        self.epochs.borrow_mut().issued();
        Ok(Request {
            transport,
            pending: Some(pending),
            out,
            rank: self.rank(),
            polled: None,
        })
    }

    /// Like [`Window::put`], returning a request at once. Valid inside a passive-target epoch
    /// (lock or lock_all) that covers `target`.
    ///
    /// # MPI-4.1: 12.3.5 (MPI_RPUT)
    pub fn rput<'s, T: Pod>(
        &'s self,
        origin: &'s [T],
        target: usize,
        disp: usize,
    ) -> Result<Request<'s>> {
        in_call(Some(self.rank()), "MPI_Rput", || {
            let bytes: &[u8] = bytemuck::cast_slice(origin);
            let (space, off) = self.request_range(target, disp, bytes.len())?;
            let t = self.route(target);
            self.request(t, t.start_put(target, space, off, bytes), None)
        })
    }

    /// Like [`Window::get`], returning a request at once; `origin` holds the data once the
    /// request is complete. Valid inside a passive-target epoch that covers `target`.
    ///
    /// # MPI-4.1: 12.3.5 (MPI_RGET)
    pub fn rget<'s, T: Pod>(
        &'s self,
        origin: &'s mut [T],
        target: usize,
        disp: usize,
    ) -> Result<Request<'s>> {
        in_call(Some(self.rank()), "MPI_Rget", || {
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(origin);
            let (space, off) = self.request_range(target, disp, bytes.len())?;
            let t = self.route(target);
            let started = t.start_get(target, space, off, bytes);
            self.request(t, started, Some(bytes))
        })
    }

    /// Like [`Window::accumulate`], returning a request at once. Valid inside a passive-target
    /// epoch that covers `target`.
    ///
    /// # MPI-4.1: 12.3.5 (MPI_RACCUMULATE)
    pub fn raccumulate<'s, T: AtomicElem>(
        &'s self,
        origin: &'s [T],
        target: usize,
        disp: usize,
        op: Op,
    ) -> Result<Request<'s>> {
        in_call(Some(self.rank()), "MPI_Raccumulate", || {
            accumulate_op::<T>(op)?;
            let (space, off) = self.request_range(target, disp, elem_bytes::<T>(origin.len())?)?;
            let t = self.atomic_route();
            let started = t.start_accumulate(target, space, off, self.many(op, origin), None);
            self.request(t, started, None)
        })
    }

    /// Like [`Window::get_accumulate`], returning a request at once; `result` holds the
    /// previous values once the request is complete. Valid inside a passive-target epoch that
    /// covers `target`.
    ///
    /// # MPI-4.1: 12.3.5 (MPI_RGET_ACCUMULATE)
    pub fn rget_accumulate<'s, T: AtomicElem>(
        &'s self,
        origin: &'s [T],
        result: &'s mut [T],
        target: usize,
        disp: usize,
        op: Op,
    ) -> Result<Request<'s>> {
        in_call(Some(self.rank()), "MPI_Rget_accumulate", || {
            fetch_args(origin, result, op)?;
            let (space, off) = self.request_range(target, disp, elem_bytes::<T>(origin.len())?)?;
            let out: &mut [u8] = bytemuck::cast_slice_mut(result);
            let t = self.atomic_route();
            let started =
                t.start_accumulate(target, space, off, self.many(op, origin), Some(&mut *out));
            self.request(t, started, Some(out))
        })
    }
}
