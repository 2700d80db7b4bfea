//! Windows reached from many threads: [`Window::share`] lends the window to a body that may
//! start any number of threads, each of which makes RMA calls on it through one
//! [`WindowHandle`] at the same time as the others.
//!
//! **How.** The window stays on its thread, which serves the handle's calls one after the
//! other while the body runs on a scoped thread of its own: a call of a handle is a job sent to
//! the window's thread, which runs it on the window and sends the result back. So the window's
//! state is only ever touched by one thread, whatever the others do, and the RMA calls of all
//! threads are as MPI orders calls of one process made in some sequence. Calls to a target
//! whose window memory is mapped here and whose operations complete once issued (shared
//! memory) are the exception: the calling thread makes them itself (`loaded.rs`), a put or get
//! as a copy, a fetch_and_op, compare_and_swap, accumulate or get_accumulate of aligned
//! elements as a CPU atomic per element, a notified put or get as the copy and a CPU addition
//! to the target's notification counter, a flush as a memory fence, with no job and no lock
//! shared with the other threads. So are puts, gets and notified puts and gets of a target
//! over the fabric in any epoch, and its fetch_and_op, compare_and_swap, accumulates and
//! get_accumulates where the window runs them on the NIC (`wired.rs`): the calling thread makes
//! them through an endpoint of its own, opened at its first such call, and its flush of such a
//! target completes what every thread's endpoint and the window's thread issued to it. Over
//! direct verbs, where the world is MPI_THREAD_MULTIPLE ([`World::init_thread`](crate::World::init_thread)),
//! the same calls go through lanes of the window's endpoint, made and
//! connected with it (`transport/verbs/lanes.rs`); a flush there completes every lane's
//! operations to the target, and the window's thread's where it made calls since it last
//! flushed the target.
//!
//! **What a handle does.** The calls that move data and their completion: put, get, the
//! accumulate family, fetch_and_op, compare_and_swap, notified puts and gets and the waits for
//! notifications, and flush, flush_local, flush_all, flush_local_all; and the request forms
//! (rput, rget, raccumulate, rget_accumulate), which complete before they return (a thread
//! that wants its calls to overlap has the other threads), with a complete [`HandleRequest`]. A flush by one thread
//! completes every operation this process issued to its target, its own among them, as
//! MPI-4.1 12.5.4 says of the calling process. Epoch calls (fence, PSCW, lock, unlock and
//! their `_all` forms) are not calls of a handle: the window's owner opens the epoch before it
//! shares the window and closes it after, which is the pattern MPI-4.1 12.7 describes, so no
//! two threads can race to open or close an epoch, and a blocking epoch call of one thread
//! cannot hold up the others' calls. The waits of a handle (`wait_notify`) test and sleep on
//! the calling thread, leaving the window's thread free for the others.
//!
//! **What it costs.** A call the calling thread makes itself costs a bounds check and the copy
//! or the atomic, as the window's own call does, and T threads make T times as many (each
//! copies with atomic words, so that threads writing the same bytes race as atomics, not as a
//! data race). Any other call is a round trip between the calling thread and the window's
//! thread (a job, its reply, and a wake of whichever of them sleeps), and the data of a put or
//! accumulate is copied into the job, that of a get copied back from the reply; those calls are
//! served one at a time, so their message rate is that of one window thread, not T times one
//! thread's. Over the network that is every call but the puts, gets and NIC atomics of the
//! fabric and (at MPI_THREAD_MULTIPLE) of direct verbs, which cost what the window's own do,
//! plus a look at the other threads' endpoints or lanes at each flush.
//!
//! ```no_run
//! use onesided::{Assert, Info, Op, ThreadLevel, Window, World};
//!
//! let (world, _) = World::init_thread(ThreadLevel::Multiple)?;
//! let win = Window::allocate(&world, 8, 8, &Info::new())?;
//! win.lock_all(Assert::NONE)?;
//! win.share(|handle| {
//!     std::thread::scope(|s| {
//!         for _ in 0..4 {
//!             s.spawn(|| {
//!                 handle.fetch_and_op(1u64, 0, 0, Op::Sum)?;
//!                 handle.flush(0)
//!             });
//!         }
//!     })
//! });
//! win.unlock_all()?;
//! # Ok::<(), onesided::Error>(())
//! ```
//!
//! The body runs on another thread, so it cannot reach the window itself:
//!
//! ```compile_fail,E0277
//! let world = onesided::World::init().unwrap();
//! let win = onesided::Window::allocate(&world, 8, 8, &onesided::Info::new()).unwrap();
//! win.share(|_handle| win.fence(onesided::Assert::NONE));
//! ```
//!
//! # MPI-4.1: 11.6 (MPI_THREAD_MULTIPLE), 12.7 (semantics and correctness: threads)

use super::arrivals::Arrivals;
use super::atomic::{accumulate_op, bits};
use super::loaded::Loaded;
use super::wired::Wired;
use super::{AtomicElem, Op, Window};
use crate::error::{Error, ErrorClass, Result};
use crate::transport::AccOp;
use crate::wait;
use bytemuck::Pod;
use std::sync::atomic::{Ordering, fence};
use std::sync::{Arc, mpsc};
use std::time::Duration;

/// One call of a handle, run on the window's thread.
type Job = Box<dyn for<'w, 'a> FnOnce(&'w Window<'a>) + Send>;

/// What the window's thread receives.
enum Message {
    /// Run a call and send its result back.
    Call(Job),
    /// The body returned (or unwound): no thread can call any more.
    Done,
}

/// The longest a `wait_notify` of a handle sleeps between two tests.
const WAIT_NAP_MAX: Duration = Duration::from_millis(1);

/// How many times a `wait_notify` of a handle tests before it starts to sleep between tests.
const WAIT_SPINS: u32 = 64;

/// The RMA calls of a window shared by [`Window::share`], for every thread of its body: `Send`
/// and `Sync`, so `std::thread::scope`, rayon and other thread pools may share it by
/// reference. Displacements, errors and completion are those of the window's own calls.
#[derive(Debug)]
pub struct WindowHandle<'a> {
    calls: mpsc::Sender<Message>,
    /// The targets whose data this handle's threads move themselves.
    loaded: Loaded<'a>,
    /// The targets this handle's threads reach through endpoints of their own.
    wired: Arc<Wired>,
    /// The notifications this handle's threads test and wait for themselves, if they do.
    arrivals: Option<Arc<Arrivals>>,
    rank: usize,
    ranks: usize,
    /// Whether a reply is looked for by spinning before sleeping ([`Pace`]).
    pace: Pace,
}

/// How a receiver waits for its next message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pace {
    /// Spin, then yield, then sleep: the threads have several CPUs, so the sender runs while
    /// the receiver spins, and no progress thread needs them (calls over shared memory are
    /// served in well under a microsecond; over direct verbs the NICs serve the targets).
    Spin,
    /// Sleep at once: the process may run on one CPU only (a rank bound to a core), where a
    /// spinning receiver would hold the CPU its sender needs; or a call may wait for the
    /// network where progress threads (this rank's and the targets', libfabric's) need the
    /// CPUs a spinning receiver would hold.
    Sleep,
}

impl Pace {
    /// The pace for the threads of this one (they inherit its CPUs) calling a window whose
    /// operations are all `complete_once_issued` (shared memory only) or not. Where they are
    /// not, but no progress thread serves this process and the node has a CPU more than it
    /// runs ranks (the direct verbs transport), the threads spin too. In the software RoCE
    /// guest (2 ranks on 2 CPUs, so that the rule says sleep there) a thread's put and flush
    /// through the window's thread made 6,600-8,400 calls/s spinning, against 1,100-1,300
    /// asleep, while its target idled (`onesided bench put_rate -t 1`); but a target that
    /// works (notify_rate's, waiting for its notifications) made 518 against 2,075: the
    /// spinning threads held the CPU it needed.
    fn here(complete_once_issued: bool) -> Pace {
        // The CPUs online are read only where the answer matters.
        let unserved = || !wait::progress_thread() && wait::spare_cpu();
        match std::thread::available_parallelism() {
            Ok(cpus) if cpus.get() > 1 && (complete_once_issued || unserved()) => Pace::Spin,
            _ => Pace::Sleep,
        }
    }
}

impl<'a> Window<'a> {
    /// Share the window with threads: run `body` on a new thread with a [`WindowHandle`] that
    /// any number of threads it starts may call at the same time, and serve their calls on this
    /// thread until `body` returns; return what it returned. A panic of `body` is resumed here
    /// once the window's thread has stopped serving.
    ///
    /// Open the epoch the threads' calls need before and close it after (a fence, `lock_all`,
    /// a lock): the handle makes RMA calls and flushes, not epoch calls. This thread makes no
    /// other onesided call while `body` runs (the window, the world and its communicators are
    /// not `Send`, so `body` cannot reach them either).
    ///
    /// # MPI-4.1: 11.6 (MPI_THREAD_MULTIPLE), 12.7
    pub fn share<R: Send>(&self, body: impl FnOnce(&WindowHandle<'a>) -> R + Send) -> R {
        let (calls, served) = mpsc::channel();
        let pace = Pace::here(self.direct.all_fenced());
        let loaded = Loaded::of(self);
        let wired = Arc::new(Wired::of(self));
        let arrivals = Arrivals::of(self).map(Arc::new);
        let handle = WindowHandle {
            calls,
            loaded,
            wired: Arc::clone(&wired),
            arrivals: arrivals.clone(),
            rank: self.rank(),
            ranks: self.size_of_group(),
            pace,
        };
        std::thread::scope(|scope| {
            let body = scope.spawn(move || {
                // Sends `Done` when the body returns or unwinds.
                let done = Finished(handle.calls.clone());
                let out = body(&handle);
                drop(done);
                (out, handle.loaded.moved() || handle.wired.moved())
            });
            while let Some(message) = soon(&served, pace) {
                match message {
                    Message::Call(job) => job(self),
                    Message::Done => break,
                }
            }
            let joined = body.join();
            // The threads are gone: what their lanes left in flight completes now, and a
            // failure no flush reported goes to the window's next completion; the
            // notifications they consumed are the window's.
            if let Err(e) = wired.drain() {
                self.unreported.keep(e);
            }
            if let Some(arrivals) = &arrivals {
                arrivals.give_back(self);
            }
            match joined {
                Ok((out, moved)) => {
                    if moved {
                        self.epochs.borrow_mut().issued();
                    }
                    out
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }
}

/// How many times a receiver looks for a message before it yields its CPU: about a
/// microsecond of spinning, longer than a call of the shared-memory transport takes to be
/// served, much shorter than a sleep and a wake.
const SPINS: u32 = 1000;

/// How many times a receiver yields its CPU before it sleeps until a message comes.
const YIELDS: u32 = 4;

/// The next message of `from`, or `None` once every sender is gone. At [`Pace::Spin`] it is
/// looked for by spinning, then yielding the CPU, and only then waited for asleep, since the
/// message usually comes at once (a reply to a call, or the next call of a busy thread) and a
/// wake costs microseconds.
fn soon<T>(from: &mpsc::Receiver<T>, pace: Pace) -> Option<T> {
    let tries = match pace {
        Pace::Spin => SPINS + YIELDS,
        Pace::Sleep => 0,
    };
    for tries in 0..tries {
        match from.try_recv() {
            Ok(message) => return Some(message),
            Err(mpsc::TryRecvError::Disconnected) => return None,
            Err(mpsc::TryRecvError::Empty) if tries < SPINS => std::hint::spin_loop(),
            Err(mpsc::TryRecvError::Empty) => std::thread::yield_now(),
        }
    }
    from.recv().ok()
}

/// The request of a handle's request-based call: complete when the call returns, so `wait`,
/// `test` and awaiting it return at once. `Send`, unlike a window's [`Request`](super::Request).
#[derive(Debug)]
#[must_use = "a request says its call completed; wait for it or drop it"]
pub struct HandleRequest {
    _complete: (),
}

impl HandleRequest {
    /// A request whose call completed.
    const COMPLETE: HandleRequest = HandleRequest { _complete: () };

    /// Whether the call completed: always, for a handle's call.
    pub fn is_complete(&self) -> bool {
        true
    }

    /// Wait for the call: it completed before its request was returned.
    pub fn wait(self) -> Result<()> {
        Ok(())
    }

    /// Test the call: it completed before its request was returned.
    pub fn test(&mut self) -> Result<bool> {
        Ok(true)
    }
}

impl std::future::Future for HandleRequest {
    type Output = Result<()>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// Tells the window's thread that the body is over, on every way out of it.
struct Finished(mpsc::Sender<Message>);

impl Drop for Finished {
    fn drop(&mut self) {
        let _ = self.0.send(Message::Done);
    }
}

impl WindowHandle<'_> {
    /// Run `call` on the window's thread and return its result.
    fn call<R: Send + 'static>(
        &self,
        call: impl for<'w, 'a> FnOnce(&'w Window<'a>) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        self.call_as(true, call)
    }

    /// [`WindowHandle::call`], counted where the lanes' flushes need to know that the window's
    /// thread made calls (`Wired::ran_one`): every call that may leave operations in flight.
    fn call_as<R: Send + 'static>(
        &self,
        counted: bool,
        call: impl for<'w, 'a> FnOnce(&'w Window<'a>) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let (reply, answer) = mpsc::sync_channel(1);
        let counts = (counted && self.wired.counts_calls()).then(|| Arc::clone(&self.wired));
        let job: Job = Box::new(move |window| {
            let done = call(window);
            if let Some(wired) = &counts {
                wired.ran_one();
            }
            let _ = reply.send(done);
        });
        self.calls.send(Message::Call(job)).map_err(|_| ended())?;
        soon(&answer, self.pace).ok_or_else(ended)?
    }

    /// Run `call` on the window's thread with a buffer as long as `out`, which receives what
    /// `call` left in it: the calls that return data (get and its kin) from the window's thread.
    fn call_into<T: Pod + Send>(
        &self,
        out: &mut [T],
        call: impl for<'w, 'a> FnOnce(&'w Window<'a>, &mut [T]) -> Result<()> + Send + 'static,
    ) -> Result<()> {
        let len = out.len();
        let data = self.call(move |w| {
            let mut data = vec![T::zeroed(); len];
            call(w, &mut data).map(|()| data)
        })?;
        out.copy_from_slice(&data);
        Ok(())
    }

    /// Have the window's thread flush `target` for a flush through the lanes, which do not
    /// complete what it issued (`Wired::flush`).
    fn flush_on_window(&self, target: usize) -> Result<()> {
        let wired = Arc::clone(&self.wired);
        self.call_as(false, move |w| {
            let done = w.flush(target);
            wired.flushed_here(target);
            done
        })
    }

    /// Have the window's thread take `target`'s lock word where a lazy lock_all has not yet.
    fn enter(&self, target: usize) -> Result<()> {
        self.call(move |w| w.enter(target, false))
    }

    /// The communicator rank of this process in the window's group.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks in the window's group.
    pub fn size_of_group(&self) -> usize {
        self.ranks
    }

    /// [`Window::put`] from this thread.
    pub fn put<T: Pod + Send>(&self, origin: &[T], target: usize, disp: usize) -> Result<()> {
        let bytes = bytemuck::cast_slice(origin);
        if self.loaded.put(target, disp, bytes) {
            return Ok(());
        }
        if let Some(done) = self.wired.put(target, disp, bytes, || self.enter(target)) {
            return done;
        }
        let data = origin.to_vec();
        self.call(move |w| w.put(&data, target, disp))
    }

    /// [`Window::get`] into this thread's `origin`.
    pub fn get<T: Pod + Send>(&self, origin: &mut [T], target: usize, disp: usize) -> Result<()> {
        let bytes = bytemuck::cast_slice_mut(origin);
        if self.loaded.get(target, disp, bytes) {
            return Ok(());
        }
        if let Some(done) = self.wired.get(target, disp, bytes, || self.enter(target)) {
            return done;
        }
        self.call_into(origin, move |w, data| w.get(data, target, disp))
    }

    /// [`Window::accumulate`] from this thread.
    pub fn accumulate<T: AtomicElem + Send>(
        &self,
        origin: &[T],
        target: usize,
        disp: usize,
        op: Op,
    ) -> Result<()> {
        if let ([one], Ok(())) = (origin, accumulate_op::<T>(op)) {
            if self
                .loaded
                .rmw(target, disp, AccOp::Apply(op), *one)
                .is_some()
            {
                return Ok(());
            }
            let enter = || self.enter(target);
            if let Some(done) = self.wired.rmw(target, disp, AccOp::Apply(op), *one, enter) {
                return done.map(drop);
            }
        } else if origin.len() > 1 && accumulate_op::<T>(op).is_ok() {
            if self.loaded.accumulate_many(target, disp, op, origin, None) {
                return Ok(());
            }
            let enter = || self.enter(target);
            let wired = self
                .wired
                .accumulate_many(target, disp, op, origin, None, enter);
            if let Some(done) = wired {
                return done;
            }
        }
        let data = origin.to_vec();
        self.call(move |w| w.accumulate(&data, target, disp, op))
    }

    /// [`Window::get_accumulate`] from this thread (MPI_ERR_COUNT where `result` is not as long
    /// as `origin`).
    pub fn get_accumulate<T: AtomicElem + Send>(
        &self,
        origin: &[T],
        result: &mut [T],
        target: usize,
        disp: usize,
        op: Op,
    ) -> Result<()> {
        if origin.len() == result.len() && op.check(T::ELEM).is_ok() {
            if self
                .loaded
                .accumulate_many(target, disp, op, origin, Some(&mut *result))
            {
                return Ok(());
            }
            let enter = || self.enter(target);
            let wired = self
                .wired
                .accumulate_many(target, disp, op, origin, Some(result), enter);
            if let Some(done) = wired {
                return done;
            }
        }
        let data = origin.to_vec();
        self.call_into(result, move |w, previous| {
            w.get_accumulate(&data, previous, target, disp, op)
        })
    }

    /// [`Window::fetch_and_op`] from this thread.
    pub fn fetch_and_op<T: AtomicElem + Send>(
        &self,
        origin: T,
        target: usize,
        disp: usize,
        op: Op,
    ) -> Result<T> {
        if op.check(T::ELEM).is_ok() {
            if let Some(old) = self.loaded.rmw(target, disp, AccOp::Apply(op), origin) {
                return Ok(old);
            }
            let enter = || self.enter(target);
            if let Some(done) = self
                .wired
                .rmw(target, disp, AccOp::Apply(op), origin, enter)
            {
                return done;
            }
        }
        self.call(move |w| w.fetch_and_op(origin, target, disp, op))
    }

    /// [`Window::compare_and_swap`] from this thread.
    pub fn compare_and_swap<T: AtomicElem + Send>(
        &self,
        origin: T,
        compare: T,
        target: usize,
        disp: usize,
    ) -> Result<T> {
        let swap = AccOp::CompareSwap {
            compare: bits(compare),
        };
        if !T::ELEM.is_float() {
            if let Some(old) = self.loaded.rmw(target, disp, swap, origin) {
                return Ok(old);
            }
            if let Some(done) = self
                .wired
                .rmw(target, disp, swap, origin, || self.enter(target))
            {
                return done;
            }
        }
        self.call(move |w| w.compare_and_swap(origin, compare, target, disp))
    }

    /// [`Window::put_notify`] from this thread.
    pub fn put_notify<T: Pod + Send>(
        &self,
        origin: &[T],
        target: usize,
        disp: usize,
        id: usize,
    ) -> Result<()> {
        let bytes = bytemuck::cast_slice(origin);
        if self.loaded.put_notify(target, disp, bytes, id) {
            return Ok(());
        }
        let enter = || self.enter(target);
        if let Some(done) = self.wired.put_notify(target, disp, bytes, id, enter) {
            return done;
        }
        let data = origin.to_vec();
        self.call(move |w| w.put_notify(&data, target, disp, id))
    }

    /// [`Window::get_notify`] into this thread's `origin`.
    pub fn get_notify<T: Pod + Send>(
        &self,
        origin: &mut [T],
        target: usize,
        disp: usize,
        id: usize,
    ) -> Result<()> {
        let bytes = bytemuck::cast_slice_mut(origin);
        if self.loaded.get_notify(target, disp, bytes, id) {
            return Ok(());
        }
        let enter = || self.enter(target);
        if let Some(done) = self.wired.get_notify(target, disp, bytes, id, enter) {
            return done;
        }
        self.call_into(origin, move |w, data| w.get_notify(data, target, disp, id))
    }

    /// [`Window::rput`] from this thread. The put completes at this origin before the call
    /// returns, so the request is complete: MPI lets a request-based call complete at once,
    /// and a thread that wants overlap has the other threads.
    pub fn rput<T: Pod + Send>(
        &self,
        origin: &[T],
        target: usize,
        disp: usize,
    ) -> Result<HandleRequest> {
        let bytes = bytemuck::cast_slice(origin);
        if self.loaded.passive(target) && self.loaded.put(target, disp, bytes) {
            return Ok(HandleRequest::COMPLETE);
        }
        if self.wired.passive(target)
            && let Some(done) = self.wired.put(target, disp, bytes, || self.enter(target))
        {
            return done.map(|()| HandleRequest::COMPLETE);
        }
        let data = origin.to_vec();
        self.call(move |w| w.rput(&data, target, disp)?.wait())?;
        Ok(HandleRequest::COMPLETE)
    }

    /// [`Window::rget`] into this thread's `origin`, which holds the data when the call
    /// returns with a complete request (as [`WindowHandle::rput`]).
    pub fn rget<T: Pod + Send>(
        &self,
        origin: &mut [T],
        target: usize,
        disp: usize,
    ) -> Result<HandleRequest> {
        let bytes = bytemuck::cast_slice_mut(origin);
        if self.loaded.passive(target) && self.loaded.get(target, disp, bytes) {
            return Ok(HandleRequest::COMPLETE);
        }
        if self.wired.passive(target)
            && let Some(done) = self.wired.get(target, disp, bytes, || self.enter(target))
        {
            return done.map(|()| HandleRequest::COMPLETE);
        }
        self.call_into(origin, move |w, data| w.rget(data, target, disp)?.wait())?;
        Ok(HandleRequest::COMPLETE)
    }

    /// [`Window::raccumulate`] from this thread, complete when it returns (as
    /// [`WindowHandle::rput`]).
    pub fn raccumulate<T: AtomicElem + Send>(
        &self,
        origin: &[T],
        target: usize,
        disp: usize,
        op: Op,
    ) -> Result<HandleRequest> {
        let data = origin.to_vec();
        self.call(move |w| w.raccumulate(&data, target, disp, op)?.wait())?;
        Ok(HandleRequest::COMPLETE)
    }

    /// [`Window::rget_accumulate`] from this thread; `result` holds the previous values when it
    /// returns with a complete request (as [`WindowHandle::rput`]).
    pub fn rget_accumulate<T: AtomicElem + Send>(
        &self,
        origin: &[T],
        result: &mut [T],
        target: usize,
        disp: usize,
        op: Op,
    ) -> Result<HandleRequest> {
        let data = origin.to_vec();
        self.call_into(result, move |w, previous| {
            w.rget_accumulate(&data, previous, target, disp, op)?.wait()
        })?;
        Ok(HandleRequest::COMPLETE)
    }

    /// [`Window::test_notify`] from this thread.
    pub fn test_notify(&self, id: usize, count: usize) -> Result<bool> {
        if let Some(there) = self.arrivals.as_ref().and_then(|a| a.test(id, count)) {
            return Ok(there);
        }
        self.call(move |w| w.test_notify(id, count))
    }

    /// [`Window::wait_notify`] on this thread, which waits as the window does (spinning, then
    /// asleep on the doorbell) where every notification to this rank comes by a CPU atomic of
    /// shared memory (`arrivals.rs`); otherwise it tests through the window's thread, which
    /// drives the transport, and between tests yields, then sleeps up to a millisecond, so that
    /// the window's thread serves the other threads meanwhile. A dead rank of the window gives
    /// MPI_ERR_PROC_FAILED.
    pub fn wait_notify(&self, id: usize, count: usize) -> Result<()> {
        if let Some(done) = self.arrivals.as_ref().and_then(|a| a.wait(id, count)) {
            return done;
        }
        let mut tries = 0u32;
        loop {
            // Liveness first: a test of a notification that will never come would not fail.
            if self.call(move |w| w.peers.job_alive().and_then(|()| w.test_notify(id, count)))? {
                return Ok(());
            }
            tries = tries.saturating_add(1);
            match tries.checked_sub(WAIT_SPINS) {
                None => std::thread::yield_now(),
                Some(naps) => {
                    let nap = Duration::from_micros(10) * naps.min(100);
                    std::thread::sleep(nap.min(WAIT_NAP_MAX));
                }
            }
        }
    }

    /// [`Window::flush`] from this thread: completes every operation this process issued to
    /// `target`, from any thread.
    pub fn flush(&self, target: usize) -> Result<()> {
        if self.loaded.flush(target) {
            return Ok(());
        }
        if let Some(done) = self.wired.flush(target, || self.flush_on_window(target)) {
            return done;
        }
        self.call(move |w| w.flush(target))
    }

    /// [`Window::flush_local`] from this thread.
    pub fn flush_local(&self, target: usize) -> Result<()> {
        // A wired target's operations leave their origin buffers free when they return.
        if self.loaded.flush(target) || self.wired.passive(target) {
            return Ok(());
        }
        self.call(move |w| w.flush_local(target))
    }

    /// [`Window::flush_all`] from this thread.
    pub fn flush_all(&self) -> Result<()> {
        if self.loaded.flush_all() {
            return Ok(());
        }
        let mut rest = false;
        for t in 0..self.ranks {
            match self.wired.flush(t, || self.flush_on_window(t)) {
                Some(done) => done?,
                None => rest |= !self.loaded.passive(t),
            }
        }
        fence(Ordering::SeqCst);
        match rest {
            true => self.call(|w| w.flush_all()),
            false => Ok(()),
        }
    }

    /// [`Window::flush_local_all`] from this thread.
    pub fn flush_local_all(&self) -> Result<()> {
        if self.loaded.flush_all() {
            return Ok(());
        }
        let rest = (0..self.ranks).any(|t| !self.wired.passive(t) && !self.loaded.passive(t));
        fence(Ordering::SeqCst);
        if !rest {
            return Ok(());
        }
        self.call(|w| w.flush_local_all())
    }
}

/// A call of a handle whose window's thread stopped serving: a call panicked there.
#[cold]
fn ended() -> Error {
    Error::new(
        ErrorClass::Intern,
        "the window's thread stopped serving the threads' calls (a call panicked there)",
    )
}
