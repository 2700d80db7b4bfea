//! The libfabric objects behind an endpoint, and the progress they are driven by: by the
//! owning thread while it issues and waits, by the progress thread while it does not.

use crate::cache::Cache;
use crate::domain::Domain;
use crate::doorbell::{Doorbell, KNOCK_EVERY, Knocker, readable};
use crate::error::FiError;
use crate::info::MrMode;
use crate::ledger::{Ledger, Tracked};
use crate::mail::{Mail, RECEIVE};
use crate::mr::Local;
use crate::port::Port;
use crate::registered::Registered;
use crate::stage::{Pool, Staged};
use crate::stamp::Stamps;
use crate::sys;
use crate::track::{Context, Outcome, Slot};
use crate::watch::{HEARTBEAT, Watchers};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The handler of the data peers' writes carry ([`crate::Endpoint::on_remote_data`]).
pub(crate) type RemoteData = Arc<dyn Fn(u64) + Send + Sync>;

/// How long one wait on the serving queue blocks (a `poll` of its file descriptor and the
/// doorbell, or `fi_cq_sread`) before the thread looks again at its own operations, its stop
/// flag and the owner's activity, unless every peer rings the doorbell ([`ASIDE`]).
const PROGRESS_WAIT_MS: i32 = 1;
/// [`PROGRESS_WAIT_MS`] as a duration: how long a wait on a peer that makes no progress
/// (`Waiting::Idle`) blocks at once.
pub(crate) const IDLE_NAP: Duration = Duration::from_millis(PROGRESS_WAIT_MS as u64);
/// The progress thread stands aside while the owning thread has driven the endpoint this
/// recently: two threads polling one endpoint contend for its lock and wake each other, which
/// doubled the latency of put + flush over tcp;ofi_rxm (12 us alone, 25 us with both). It is
/// also how often the standing-aside thread wakes to look: at 200 us those wake-ups on the
/// owner's core still cost 10-20% of that latency, at 1 ms they are lost in the noise, and a
/// target that stops calling in is served again within 1 ms.
const HOLDOFF: Duration = Duration::from_millis(1);
/// How long the progress thread sleeps at once where every peer rings its doorbell (all run
/// on this node), whether the owner is active or away: a peer whose operation waits for this
/// rank rings it, again every [`KNOCK_EVERY`] while it waits, so a look every [`HOLDOFF`]
/// only woke the thread for nothing. Those wake-ups took a core from the ranks on this 2-core
/// machine: over the shm provider, `get_bw` at 1 MiB ran at 0.88-0.90x of the C floor with
/// them and 0.98-1.02x without, and a rank computing alone lost 2% of its core to them.
const ASIDE: Duration = Duration::from_millis(20);
/// How long the progress thread serves back to back after traffic woke it (operations come in
/// bursts: only the first of a burst pays for the wake-up).
const HOT: Duration = KNOCK_EVERY;
/// A wait for this endpoint's own operations polls the serving port every this many rounds.
const SERVE_EVERY: u64 = 8;
/// Completion entries read from the queue at once.
const BATCH: usize = 16;

/// The libfabric objects of an endpoint, closed when the endpoint and every region bound to it
/// are gone.
pub(crate) struct Core {
    pub(crate) domain: Arc<Domain>,
    /// Where operations are issued: its queue has no wait object, which would cost every poll
    /// (over tcp;ofi_rxm an `epoll_wait` on the wait set and a signal per completion: put +
    /// flush 13.1 us instead of 10.7).
    pub(crate) out: Port,
    /// Where peers address this endpoint, when its queue has a wait object for the progress
    /// thread to sleep in until traffic arrives (`Idle::Wake`); else they address `out`, as
    /// peers on this node do where the endpoint holds the doorbell (`Endpoint::near_name`).
    pub(crate) serve: Option<Port>,
    /// The operations in flight, settled by whichever thread reads their completions.
    pub(crate) track: Ledger,
    /// The regions registered on this endpoint, by address range.
    pub(crate) registered: Mutex<Registered>,
    /// When the owning thread last issued or waited for an operation (a stamp of `stamps`).
    /// A time, not a count of calls: with a count, the progress thread stood aside from an
    /// owner that polls only now and then (on a crowded node), and exclusive locks amid shared
    /// lockers waited up to twice as long (`stress::exclusive_amid_shared`).
    pub(crate) active: AtomicU64,
    pub(crate) stamps: Stamps,
    /// Polls so far (`Core::poll`), to pace the polls of the serving port.
    pub(crate) rounds: AtomicU64,
    /// Staging buffers of settled request operations, kept for reuse (`stage.rs`).
    pub(crate) pool: Arc<Pool>,
    /// This process's doorbell, where this endpoint took it: the progress thread dozes on it
    /// and peers on this node ring it when their operations wait for this rank (`doorbell.rs`).
    pub(crate) doorbell: Option<Doorbell>,
    /// How many times a ring woke the progress thread ([`crate::Endpoint::rings`]).
    pub(crate) rings: AtomicU64,
    /// What this endpoint rings its peers' doorbells with, the process of each peer (by its
    /// number; 0: none to ring, as for peers on other nodes), and when it last rang (a stamp of
    /// `stamps`; 0: never).
    pub(crate) knocker: Option<Knocker>,
    pub(crate) pids: Mutex<Vec<u32>>,
    pub(crate) rung: AtomicU64,
    /// The node runs more processes than it has CPUs ([`crate::Endpoint::set_crowded`]).
    pub(crate) crowded: AtomicBool,
    /// The progress thread shares the CPUs of the node's processes
    /// ([`crate::Endpoint::set_progress_shares_cpu`]).
    pub(crate) shares_cpu: AtomicBool,
    /// Where there is a serving port: peers address the issuing port (peers on this node), and
    /// peers of other processes address the serving one. Waits on what peers do poll every
    /// round the ports peers address (the serving one while neither is known).
    pub(crate) near: AtomicBool,
    /// Some peer addresses the serving port: one on another node, or another thread's world in
    /// this process ([`crate::Endpoint::set_far`]).
    pub(crate) far: AtomicBool,
    /// The calls peers make and this endpoint makes, once it serves them (`mail.rs`).
    pub(crate) mail: OnceLock<Mail>,
    /// What the data of a peer's write that carries some goes to.
    pub(crate) remote: OnceLock<RemoteData>,
    /// Registrations of callers' buffers, kept while their memory lives (`cache.rs`).
    pub(crate) cache: Cache,
    /// The futures waiting for operations of this endpoint (`watch.rs`).
    pub(crate) watchers: Watchers,
}

// SAFETY: the domain is FI_THREAD_SAFE, so these objects may be used from any thread.
unsafe impl Send for Core {}
// SAFETY: as above.
unsafe impl Sync for Core {}

impl Core {
    /// Note that the owning thread is driving the endpoint now.
    #[inline]
    pub(crate) fn touch(&self) {
        self.active.store(self.stamps.now(), Ordering::Relaxed);
    }

    /// How long ago the owning thread last drove the endpoint.
    pub(crate) fn idle(&self) -> Duration {
        self.stamps.since(self.active.load(Ordering::Relaxed))
    }

    /// One round of the progress thread: stand aside while the owner is active, else block
    /// until traffic arrives (or a timeout), serving the target side meanwhile.
    pub(crate) fn serve(&self) {
        if self.watchers.any() {
            self.serve_watched();
            return;
        }
        let idle = self.idle();
        let rung = self.rung_by_all();
        match (idle < HOLDOFF, rung) {
            (true, true) => self.doze(ASIDE),
            (true, false) => self.doze(HOLDOFF - idle),
            (false, true) => self.wait(ASIDE),
            (false, false) => self.wait(IDLE_NAP),
        }
    }

    /// Whether every peer rings this endpoint's doorbell when its operations wait for this
    /// rank: the endpoint holds it and no peer addresses it from elsewhere ([`Core::far`]).
    /// Then the progress thread need not look by itself: it sleeps [`ASIDE`] at a time.
    fn rung_by_all(&self) -> bool {
        self.doorbell.is_some() && !self.far.load(Ordering::Relaxed)
    }

    /// Sleep for `d`, or on the doorbell until a peer rings it: then serve the peers back to
    /// back for [`HOT`].
    fn doze(&self, d: Duration) {
        let Some(bell) = &self.doorbell else {
            std::thread::sleep(d);
            return;
        };
        if bell.doze(d) {
            self.rings.fetch_add(1, Ordering::Relaxed);
            self.hot();
        }
    }

    /// After traffic woke this thread: serve the peers back to back for [`HOT`], since
    /// operations come in bursts, unless the owner starts driving the endpoint meanwhile. On a
    /// crowded node, or where the progress threads have no CPU of their own, it yields the core
    /// after every poll: spinning there took the CPUs from the ranks it serves (a fence of 8
    /// ranks over the shm provider on 2 cores: 1.1-1.7 ms, against 0.11-0.14 ms with the
    /// yields; IMB's Truly_passive_put over the shm provider, 2 ranks on 2 cores, where the
    /// owner's waits outside the fabric yield too: 33-48 us a put, flush and barrier, against
    /// 3.3-4.8 us).
    fn hot(&self) {
        let began = self.stamps.now();
        self.poll_back_to_back(HOT, || self.active.load(Ordering::Relaxed) < began);
    }

    /// Futures wait for this endpoint's operations, their owner parked in its executor: poll
    /// back to back until a settle wakes them, and wake them anyway after [`HEARTBEAT`], so that
    /// they look at their peers' liveness again.
    fn serve_watched(&self) {
        self.poll_back_to_back(HEARTBEAT, || self.watchers.any());
        if self.watchers.any() {
            self.watchers.wake_all();
        }
    }

    /// Poll both ports back to back for at most `limit` while `go_on` holds, yielding the core
    /// after every poll on a crowded node or without a CPU of its own.
    fn poll_back_to_back(&self, limit: Duration, go_on: impl Fn() -> bool) {
        let since = Instant::now();
        let yields =
            self.crowded.load(Ordering::Relaxed) || self.shares_cpu.load(Ordering::Relaxed);
        while since.elapsed() < limit && go_on() {
            self.poll_all();
            match yields {
                true => std::thread::yield_now(),
                false => std::hint::spin_loop(),
            }
        }
    }

    /// Block on the file descriptor `fd` of the serving queue's wait object, and on the
    /// doorbell where this endpoint holds it, until traffic arrives, a peer rings or `nap`
    /// passes, then progress, and when woken serve back to back ([`Core::hot`]).
    /// `fi_cq_sread` would not return on traffic that leaves no completion (a peer's RMA),
    /// only at its timeout. False where the provider has work pending and the thread must not
    /// block (the caller progresses instead).
    fn block_on(&self, serve: &Port, fd: libc::c_int, nap: Duration) -> bool {
        // SAFETY: the queue is open; its fid is its first member.
        let mut fid = unsafe { &raw mut (*serve.cq).fid };
        // SAFETY: the fabric and the queue are open; fi_trywait reads one fid pointer.
        if unsafe { sys::fi_trywait(self.domain.fabric(), &mut fid, 1) } != 0 {
            return false;
        }
        let bell = self.doorbell.as_ref();
        let fds = [fd, bell.map_or(-1, Doorbell::fd)];
        let woken = readable(fds, nap);
        if let Some(bell) = bell.filter(|_| woken)
            && bell.answer()
        {
            self.rings.fetch_add(1, Ordering::Relaxed);
        }
        self.poll_all();
        if woken {
            self.hot();
        }
        true
    }

    /// Ring the doorbells of the peers this endpoint has operations in flight to, and of peer
    /// `also` (for a wait that has lasted long enough that they are likely away), unless this
    /// endpoint rang less than [`KNOCK_EVERY`] ago: a wait calls it at every look at the clock,
    /// so while it lasts its peers are rung again as soon as the back-to-back serving
    /// ([`Core::hot`]) that the last ring started is over.
    pub(crate) fn knock(&self, also: Option<u32>) {
        let Some(knocker) = &self.knocker else {
            return;
        };
        let rung = self.rung.load(Ordering::Relaxed);
        if rung != 0 && self.stamps.since(rung) < KNOCK_EVERY {
            return;
        }
        self.rung.store(self.stamps.now().max(1), Ordering::Relaxed);
        let mut busy: Vec<u32> = self.track().busy_peers().collect();
        if let Some(p) = also
            && !busy.contains(&p)
        {
            busy.push(p);
        }
        let pids = self.pids.lock().unwrap_or_else(|p| p.into_inner());
        for pid in busy.into_iter().filter_map(|p| pids.get(p as usize)) {
            if *pid != 0 {
                knocker.knock(*pid);
            }
        }
    }

    pub(crate) fn domain(&self) -> &Arc<Domain> {
        &self.domain
    }

    /// Whether peers address registered memory by virtual address (else by offset).
    pub(crate) fn virt_addr(&self) -> bool {
        self.domain.provider().mr_mode().contains(MrMode::VIRT_ADDR)
    }

    /// The endpoint operations are issued on.
    pub(crate) fn ep(&self) -> *mut sys::fid_ep {
        self.out.ep
    }

    /// The endpoint peers address: its name is the one they insert, and regions they reach
    /// are bound to it where the provider binds regions to endpoints.
    pub(crate) fn addressed(&self) -> *mut sys::fid_ep {
        self.serve.as_ref().map_or(self.out.ep, |s| s.ep)
    }

    /// Where local buffers are registered: this endpoint's domain, bound to the issuing port
    /// where the provider binds registrations to endpoints.
    pub(crate) fn local(&self) -> Local<'_> {
        // SAFETY: the issuing port is an endpoint of the domain, open while the core is (which
        // `'_` borrows), and closed only after the registrations bound to it: regions hold the
        // core, staged buffers and the cache's registrations live in it.
        unsafe { Local::new(&self.domain, self.out.ep) }
    }

    /// A staging buffer of at least `len` bytes from this endpoint's pool, registered for local
    /// access when `register` (`stage.rs`).
    pub(crate) fn stage(&self, len: usize, register: bool) -> Result<Staged, FiError> {
        Staged::new(&self.pool, len, register.then(|| self.local()))
    }

    /// The completion bookkeeping, locked.
    pub(crate) fn track(&self) -> Tracked<'_> {
        self.track.lock()
    }

    /// The regions registered on this endpoint, also after a panic of another thread holding
    /// the list.
    pub(crate) fn registered(&self) -> std::sync::MutexGuard<'_, Registered> {
        self.registered.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drive the provider (reading a completion queue progresses its endpoint) and settle the
    /// operations whose completions it gives. A wait for this endpoint's own operations calls
    /// it round after round: the serving port, whose every poll costs a look at its wait set,
    /// is polled only every `SERVE_EVERY`-th round.
    pub(crate) fn poll(&self) {
        self.poll_with(None);
    }

    /// [`Core::poll`], then the outcome of `slot`'s operation if it has settled (the slot is
    /// free again then), taken under the lock the poll settles completions with. Where the poll
    /// found nothing and no completion was settled since the wait last looked (`seen`, as in
    /// [`Ledger::changed`]), the bookkeeping is not looked at.
    pub(crate) fn poll_take(&self, slot: Slot, seen: &mut Option<u64>) -> Option<Outcome<Staged>> {
        self.poll_with(Some((slot, seen)))
    }

    /// The round of [`Core::poll`], taking `slot`'s outcome as [`Core::poll_take`] where given.
    fn poll_with(&self, slot: Option<(Slot, &mut Option<u64>)>) -> Option<Outcome<Staged>> {
        let out = self.poll_issuing(slot);
        if self.next_round() {
            self.poll_serving();
        }
        out
    }

    /// Drive both ports, for waits on what peers do: every round those that peers address,
    /// the other one every `SERVE_EVERY`-th (an operation of this rank to itself goes to the
    /// serving port). A poll of a port nobody addresses only lengthens the rounds between which
    /// a peer's operation waits to be served (two ranks over tcp, 10 rounds: put + flush 10.00
    /// us against 10.04 with the serving port polled every round, get 10.00 against 10.11).
    pub(crate) fn poll_for_peers(&self) {
        if self.serve.is_none() {
            self.poll_issuing(None);
            return;
        }
        let near = self.near.load(Ordering::Relaxed);
        let far = self.far.load(Ordering::Relaxed) || !near;
        let round = self.next_round();
        if far || round {
            self.poll_serving();
        }
        if near || round {
            self.poll_issuing(None);
        }
    }

    /// Drive both ports.
    pub(crate) fn poll_all(&self) {
        self.poll_issuing(None);
        self.poll_serving();
    }

    /// Count a round; whether it is one of every `SERVE_EVERY`. Two threads counting at once
    /// may lose a round, which only shifts the pace: a plain load and store, where an atomic
    /// add would cost every poll a locked instruction.
    fn next_round(&self) -> bool {
        let n = self.rounds.load(Ordering::Relaxed);
        self.rounds.store(n.wrapping_add(1), Ordering::Relaxed);
        n.is_multiple_of(SERVE_EVERY)
    }

    /// Progress the issuing port and settle the operations whose completions it gives; with
    /// `slot`, then take its outcome if settled.
    fn poll_issuing(&self, slot: Option<(Slot, &mut Option<u64>)>) -> Option<Outcome<Staged>> {
        if let Some(mail) = self.mail.get() {
            mail.retry(&self.track);
        }
        let mut entries = [sys::fi_cq_data_entry::default(); BATCH];
        // SAFETY: the queue is open; `entries` has room for BATCH FI_CQ_FORMAT_DATA entries.
        let ret = unsafe { sys::fi_cq_read(self.out.cq, entries.as_mut_ptr().cast(), BATCH) };
        self.settle(ret, &entries, slot)
    }

    /// Progress the serving port (the target side of the peers' operations): nothing is
    /// issued on it, so its queue holds no completions of ours.
    fn poll_serving(&self) {
        let Some(serve) = &self.serve else {
            return;
        };
        let mut entries = [sys::fi_cq_data_entry::default(); BATCH];
        // SAFETY: the queue is open; `entries` has room for BATCH FI_CQ_FORMAT_DATA entries.
        let ret = unsafe { sys::fi_cq_read(serve.cq, entries.as_mut_ptr().cast(), BATCH) };
        self.served(serve, ret, &entries);
    }

    /// Handle what one read of the serving queue returned: `ret` entries, or an error entry
    /// waiting (receives only: nothing is issued on that port).
    fn served(&self, serve: &Port, ret: isize, entries: &[sys::fi_cq_data_entry]) {
        if ret == -(sys::FI_EAVAIL as isize) {
            let mut err = sys::fi_cq_err_entry::default();
            // SAFETY: the queue is open; `err` is a valid out-parameter with no provider buffer.
            if unsafe { sys::fi_cq_readerr(serve.cq, &mut err, 0) } > 0 {
                self.receive(err.op_context as Context, true);
            }
            return;
        }
        let n = usize::try_from(ret).unwrap_or(0).min(entries.len());
        for e in &entries[..n] {
            if !self.remote_data(e) {
                self.receive(e.op_context as Context, false);
            }
        }
    }

    /// Hand the data of a peer's write that carried some (`FI_REMOTE_CQ_DATA`) to the
    /// endpoint's handler ([`crate::Endpoint::on_remote_data`]); whether `e` was such an entry.
    fn remote_data(&self, e: &sys::fi_cq_data_entry) -> bool {
        if e.flags & sys::FI_REMOTE_CQ_DATA as u64 == 0 {
            return false;
        }
        if let Some(handle) = self.remote.get() {
            handle(e.data);
        }
        true
    }

    /// Hand a receive's completion (`failed`: with an error) to the calls; anything else
    /// (nothing else completes on the serving port) is ignored.
    fn receive(&self, ctx: Context, failed: bool) {
        if let Some(mail) = self.mail.get().filter(|_| ctx & RECEIVE != 0) {
            mail.received(&self.track, &self.registered, ctx, failed);
        }
    }

    /// Block until traffic arrives at the serving port, a peer rings the doorbell or `nap`
    /// passes (without a serving port: doze `nap` on the doorbell; without a file descriptor
    /// to wait on: `fi_cq_sread` for `PROGRESS_WAIT_MS`), progressing meanwhile.
    pub(crate) fn wait(&self, nap: Duration) {
        let Some(serve) = &self.serve else {
            self.poll();
            self.doze(nap);
            return;
        };
        if let Some(fd) = serve.wait_fd
            && self.block_on(serve, fd, nap)
        {
            return;
        }
        let mut entries = [sys::fi_cq_data_entry::default(); BATCH];
        // SAFETY: as in `poll`; the condition argument may be NULL.
        let ret = unsafe {
            sys::fi_cq_sread(
                serve.cq,
                entries.as_mut_ptr().cast(),
                BATCH,
                ptr::null(),
                PROGRESS_WAIT_MS,
            )
        };
        self.served(serve, ret, &entries);
        self.poll_all();
    }

    /// Wake a thread blocked in [`Core::wait`] or dozing on the doorbell.
    pub(crate) fn wake(&self) {
        if let Some(serve) = &self.serve {
            // SAFETY: the queue is open; fi_cq_signal wakes a thread blocked in fi_cq_sread or
            // polling the queue's file descriptor.
            unsafe { sys::fi_cq_signal(serve.cq) };
        }
        if let Some(bell) = &self.doorbell {
            bell.ring();
        }
    }

    /// Settle what one read of the queue returned: `ret` entries, or an error entry waiting;
    /// with `slot`, then take its outcome if settled, under the same lock (one lock of the
    /// bookkeeping per look, where a wait for a read took two).
    fn settle(
        &self,
        ret: isize,
        entries: &[sys::fi_cq_data_entry],
        slot: Option<(Slot, &mut Option<u64>)>,
    ) -> Option<Outcome<Staged>> {
        if ret == -(sys::FI_EAVAIL as isize) {
            self.read_error();
        }
        let n = usize::try_from(ret).unwrap_or(0).min(entries.len());
        let (slot, moved) = match slot {
            Some((s, seen)) => (Some(s), self.track.changed(seen)),
            None => (None, false),
        };
        if n == 0 && !moved {
            return None;
        }
        let mut track = self.track();
        // Dropped after the lock is given back; no allocation unless a settle hands one back.
        let mut freed = Vec::new();
        let mut received = false;
        let mut remote = false;
        for e in &entries[..n] {
            let ctx = e.op_context as Context;
            if e.flags & sys::FI_REMOTE_CQ_DATA as u64 != 0 {
                remote = true;
            } else if ctx & RECEIVE != 0 {
                received = true;
            } else if let Some(k) = track.settle(ctx, None) {
                freed.push(k);
            }
        }
        if n > 0 {
            track.moved();
        }
        let out = slot.and_then(|s| track.take(s));
        drop(track);
        drop(freed);
        if n > 0 {
            self.watchers.settled();
        }
        if received || remote {
            for e in &entries[..n] {
                let ctx = e.op_context as Context;
                if !self.remote_data(e) && ctx & RECEIVE != 0 {
                    self.receive(ctx, false);
                }
            }
        }
        out
    }

    fn read_error(&self) {
        let mut err = sys::fi_cq_err_entry::default();
        // SAFETY: the queue is open; `err` is a valid out-parameter with no provider buffer.
        let ret = unsafe { sys::fi_cq_readerr(self.out.cq, &mut err, 0) };
        if ret <= 0 {
            return;
        }
        if err.op_context as Context & RECEIVE != 0 {
            self.receive(err.op_context as Context, true);
            return;
        }
        let mut buf = [0 as libc::c_char; 256];
        // SAFETY: the queue is open; `err` was filled by fi_cq_readerr; `buf` has the length
        // given, and fi_cq_strerror returns a NUL-terminated string.
        let text = unsafe {
            let s = sys::fi_cq_strerror(
                self.out.cq,
                err.prov_errno,
                err.err_data,
                buf.as_mut_ptr(),
                buf.len(),
            );
            std::ffi::CStr::from_ptr(s).to_string_lossy().into_owned()
        };
        let text = format!(
            "{} ({}; provider errno {})",
            FiError::new("completion", err.err as i64).text(),
            err.err,
            text
        );
        let mut track = self.track();
        let freed = track.settle(err.op_context as Context, Some(text));
        track.moved();
        drop(track);
        drop(freed);
        self.watchers.settled();
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        self.cache.clear();
        // SAFETY: nothing uses these objects any more (the progress thread has been joined and
        // every region holding this core is gone).
        unsafe {
            self.out.close();
            if let Some(serve) = &mut self.serve {
                serve.close();
            }
        }
    }
}
