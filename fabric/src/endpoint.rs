//! An RDM endpoint with its address vector and completion queue, its progress thread, and
//! completion tracked per peer and per operation (`track.rs`; the operations are in `ops.rs`).

use crate::cache::{Cache, CacheReport};
use crate::core::{Core, IDLE_NAP};
use crate::domain::Domain;
use crate::doorbell::{Doorbell, Knocker};
use crate::error::{FiError, check};
use crate::info::MrMode;
use crate::joint::Gathering;
use crate::ledger::Ledger;
use crate::mr::Access;
use crate::patience::{Patience, Waiting};
use crate::peer::Peer;
use crate::port::Port;
use crate::region::{Region, RegionKey};
use crate::registered::Registered;
use crate::stage::Staged;
use crate::stamp::Stamps;
use crate::sys;
use crate::track::{Outcome, Slot};
use crate::watch::Watchers;
use onesided_shm::Mem;
use std::cell::RefCell;
use std::collections::HashMap;
use std::os::unix::thread::JoinHandleExt;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes of the registered bounce buffer used for small transfers and atomic operands when
/// the provider demands registered local buffers (`FI_MR_LOCAL`).
pub(crate) const BOUNCE: usize = 64 << 10;
/// How long a closing endpoint waits for operations still in flight before it leaks the
/// buffers they use.
const DRAIN: Duration = Duration::from_millis(200);

/// How many reads of a batch (`Endpoint::read_all`) one operation of the provider `name`
/// carries, where one carries `limit` transfers: one over the shm provider (`batch.rs`'s module
/// docs say why).
fn shared_reads(name: &str, limit: usize) -> usize {
    match name {
        "shm" => 1,
        _ => limit,
    }
}

/// The progress thread's handle on the core.
struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// An RDM endpoint, ready for RMA and atomics to the peers inserted into it.
pub struct Endpoint {
    pub(crate) core: Arc<Core>,
    progress: Progress,
    pub(crate) bounce: Region<'static>,
    pub(crate) local_mr: bool,
    /// Whether `fi_atomic` has read its operands when it completes ([`Endpoint::plain_atomics`]).
    plain_atomics: bool,
    /// Bits of data a write may carry to the peer ([`Endpoint::remote_data_bits`]).
    remote_data_bits: u32,
    pub(crate) inject: usize,
    pub(crate) delivery: u64,
    pub(crate) max_msg: usize,
    /// Most remote ranges one operation reaches.
    pub(crate) rma_iov: usize,
    /// Most writes of a batch one operation carries ([`Endpoint::write_all`]): as many local
    /// buffers and remote ranges as the provider moves in one.
    pub(crate) write_iov: usize,
    /// Most reads of a batch one operation carries ([`Endpoint::read_all`]).
    pub(crate) read_iov: usize,
    /// The peers inserted so far, by address name.
    peers: RefCell<HashMap<Vec<u8>, Peer>>,
    /// Small request reads gathered into one (`gather.rs`).
    pub(crate) gathering: RefCell<Gathering>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("provider", self.core.domain.provider())
            .field("peers", &self.peers.borrow().len())
            .finish()
    }
}

/// A pointer that may be sent to the progress thread.
struct SendCore(Arc<Core>);

impl Endpoint {
    /// Open an endpoint on `domain` (a port to issue on, and with [`Idle::Wake`] a second one
    /// for peers to address, `port.rs`) and start its progress thread, which waits as `idle`
    /// says while the owner is away.
    pub fn open(domain: &Arc<Domain>, idle: Idle) -> Result<Endpoint, FiError> {
        Endpoint::open_served(domain, idle, true)
    }

    /// [`Endpoint::open`], with a progress thread or (`served` false) without one: then only
    /// the calls of its owner and flushes from other threads ([`Flusher`]) drive it, which
    /// suits an endpoint that only issues (a [`crate::Lane`]).
    pub(crate) fn open_served(
        domain: &Arc<Domain>,
        idle: Idle,
        served: bool,
    ) -> Result<Endpoint, FiError> {
        let out = Port::open(domain)?;
        let serve = match idle {
            Idle::Wake => Port::open_waking(domain)?,
            Idle::Poll => None,
        };
        let (doorbell, knocker) = (Doorbell::take(), Knocker::new());
        let core = Core {
            domain: domain.clone(),
            out,
            serve,
            track: Ledger::default(),
            registered: Mutex::new(Registered::default()),
            active: AtomicU64::new(0),
            stamps: Stamps::new(),
            rounds: AtomicU64::new(0),
            pool: Arc::default(),
            doorbell,
            rings: AtomicU64::new(0),
            knocker,
            pids: Mutex::default(),
            rung: AtomicU64::new(0),
            crowded: AtomicBool::new(false),
            shares_cpu: AtomicBool::new(false),
            near: AtomicBool::new(false),
            far: AtomicBool::new(false),
            mail: OnceLock::new(),
            remote: OnceLock::new(),
            cache: Cache::default(),
            watchers: Watchers::default(),
        };
        let core = Arc::new(core);
        let p = domain.provider();
        let bounce_mem = Mem::alloc(BOUNCE, 4096)
            .ok_or_else(|| FiError::new("bounce buffer", -(libc::ENOMEM as i64)))?;
        let bounce = Region::new(&core, bounce_mem, Access::Local)?;
        let stop = Arc::new(AtomicBool::new(false));
        let progress = if served {
            let (stop, c) = (stop.clone(), SendCore(core.clone()));
            let thread = std::thread::Builder::new()
                .name("onesided-progress".into())
                .spawn(move || {
                    let c = c;
                    while !stop.load(Ordering::Acquire) {
                        c.0.serve();
                    }
                })
                .map_err(|e| {
                    FiError::new(
                        "progress thread",
                        -(e.raw_os_error().unwrap_or(libc::EAGAIN) as i64),
                    )
                })?;
            Some(thread)
        } else {
            None
        };
        // Transfers of a batch one operation carries: a local buffer and a remote range each.
        let shared = p.iov_limit().min(p.rma_iov_limit());
        Ok(Endpoint {
            local_mr: p.mr_mode().contains(MrMode::LOCAL),
            plain_atomics: p.name() != "shm",
            remote_data_bits: 8 * p.remote_data_bytes() as u32,
            inject: p.inject_size(),
            delivery: if p.delivery_complete() {
                sys::FI_DELIVERY_COMPLETE as u64
            } else {
                0
            },
            max_msg: p.max_msg_size().max(1),
            rma_iov: p.rma_iov_limit(),
            write_iov: shared,
            read_iov: shared_reads(&p.name(), shared),
            core,
            progress: Progress {
                stop,
                thread: progress,
            },
            bounce,
            peers: RefCell::new(HashMap::new()),
            gathering: RefCell::new(Gathering::default()),
        })
    }

    /// The largest write handed to the provider at once (`FI_INJECT`).
    pub fn inject_size(&self) -> usize {
        self.inject
    }

    /// The largest transfer one operation moves.
    pub fn max_msg_size(&self) -> usize {
        self.max_msg
    }

    /// Most remote ranges one operation reaches (the provider's `rma_iov_limit`).
    pub fn rma_iov_limit(&self) -> usize {
        self.rma_iov
    }

    /// Whether a non-fetching atomic (`fi_atomic`) has read its operands when it completes, so
    /// that [`Endpoint::start_atomic_many`] may be used: not so for libfabric 1.17's shm
    /// provider, which completes `fi_atomic` before the target has read the operand (found by
    /// the suite's exact counts), so every atomic there fetches.
    pub fn plain_atomics(&self) -> bool {
        self.plain_atomics
    }

    /// Bits of data a write may carry to its peer ([`Endpoint::write_notify`]): 64 over tcp and
    /// shm, 32 over verbs (the immediate data), 0 where the provider carries none.
    pub fn remote_data_bits(&self) -> u32 {
        self.remote_data_bits
    }

    /// Hand the data of every peer's [`Endpoint::write_notify`] to `handle`, on whichever
    /// thread reads its completion (the progress thread, mostly): set once, before any peer
    /// writes with data; a second handler is refused (EBUSY).
    pub fn on_remote_data(&self, handle: Arc<dyn Fn(u64) + Send + Sync>) -> Result<(), FiError> {
        self.core
            .remote
            .set(handle)
            .map_err(|_| FiError::new("remote data handler", -(libc::EBUSY as i64)))
    }

    /// The node runs more processes than it has CPUs: a wait yields the core from its first
    /// round, and the progress thread, serving back to back after a wake, after every poll, so
    /// that the peer waited for gets the CPU.
    pub fn set_crowded(&self) {
        self.core.crowded.store(true, Ordering::Relaxed);
    }

    /// The node has CPUs for its processes but not also for their progress threads: the
    /// progress thread, serving back to back after a wake, yields the core after every poll,
    /// so that the thread of its own process or of a peer that shares the CPU with it runs
    /// meanwhile. A wait still polls back to back first (unlike [`Endpoint::set_crowded`]).
    pub fn set_progress_shares_cpu(&self) {
        self.core.shares_cpu.store(true, Ordering::Relaxed);
    }

    /// Runs the progress thread on `cpus` only, of which the kernel keeps those the process's CPU
    /// set allows: EINVAL where that leaves none, or a CPU is beyond what a `cpu_set_t` holds.
    /// Nothing to do for an endpoint without a progress thread. A thread starts on the CPUs of
    /// the thread that makes it, so a rank bound to one CPU has its progress thread there, where
    /// it serves a computing rank only when the rank's time slice ends.
    pub fn bind_progress(&self, cpus: &[usize]) -> Result<(), FiError> {
        let fail = |errno: i32| FiError::new("binding the progress thread", -(errno as i64));
        let Some(thread) = &self.progress.thread else {
            return Ok(());
        };
        // SAFETY: cpu_set_t is a plain bit mask; all zeroes is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        for &cpu in cpus {
            if cpu >= 8 * size {
                return Err(fail(libc::EINVAL));
            }
            // SAFETY: `cpu` is below the bits of the set, checked just above.
            unsafe { libc::CPU_SET(cpu, &mut set) };
        }
        // SAFETY: the endpoint holds the thread's handle and joins it only when dropped, so the
        // pthread_t names a thread not yet joined; `set` is a cpu_set_t of `size` bytes.
        let rc = unsafe { libc::pthread_setaffinity_np(thread.as_pthread_t(), size, &set) };
        match rc {
            0 => Ok(()),
            errno => Err(fail(errno)),
        }
    }

    /// Whether local buffers must be registered (`FI_MR_LOCAL`).
    pub fn local_mr(&self) -> bool {
        self.local_mr
    }

    /// How many times a peer's ring of this process's doorbell woke this endpoint's progress
    /// thread (`doorbell.rs`; 0 where another endpoint holds the doorbell): the peers on this
    /// node that waited for this rank while it was away.
    pub fn rings(&self) -> u64 {
        self.core.rings.load(Ordering::Relaxed)
    }

    /// What the cache of registrations of callers' buffers did so far (`FI_MR_LOCAL` only):
    /// whether it watches memory, its hits and what it keeps.
    pub fn registration_cache(&self) -> CacheReport {
        self.core.cache.report()
    }

    /// The domain this endpoint was opened on.
    pub fn domain(&self) -> &Arc<Domain> {
        &self.core.domain
    }

    /// This endpoint's address, for peers to insert.
    pub fn name(&self) -> Result<Vec<u8>, FiError> {
        // SAFETY: the core's ports are open while the endpoint is.
        unsafe { name_of(self.core.addressed()) }
    }

    /// The address for peers on this node to insert instead of [`Endpoint::name`], where
    /// there is one: the issuing port of an endpoint whose progress thread sleeps in its
    /// serving queue's wait object and on the process's doorbell. Serving a peer through a
    /// queue with a wait object costs its every operation: over tcp;ofi_rxm the provider then
    /// watches its sockets with epoll, and a put + flush took 10.7-10.9 us where the target
    /// polled that queue, against 9.8-10.0 us through a queue without one. A peer on this node
    /// rings the doorbell instead when its operation waits for this rank. None where regions
    /// are bound to the serving port (`FI_MR_ENDPOINT`) or the doorbell is another endpoint's.
    pub fn near_name(&self) -> Result<Option<Vec<u8>>, FiError> {
        match self.serves_near() {
            // SAFETY: as in `name`.
            true => unsafe { name_of(self.core.ep()) }.map(Some),
            false => Ok(None),
        }
    }

    /// Whether peers on this node address the issuing port ([`Endpoint::near_name`]).
    fn serves_near(&self) -> bool {
        let c = &self.core;
        let waking = c.serve.as_ref().is_some_and(|s| s.wait_fd.is_some());
        let bound = c.domain.provider().mr_mode().contains(MrMode::ENDPOINT);
        waking && c.doorbell.is_some() && !bound
    }

    /// Keep the provider's sockets of this endpoint, and of its connections to the peers at
    /// `peers` (the addresses they were inserted at), out of the processes the program starts
    /// (`inherit.rs`): libfabric's tcp provider opens them without close-on-exec. Call it once
    /// the pairs are connected; how many descriptors it marked.
    pub fn keep_sockets_from_children<'n>(&self, peers: impl Iterator<Item = &'n [u8]>) -> usize {
        let own = [self.name().ok(), self.near_name().ok().flatten()];
        let mut addresses: Vec<_> = peers.filter_map(crate::inherit::socket_address).collect();
        addresses.extend(
            own.iter()
                .flatten()
                .filter_map(|n| crate::inherit::socket_address(n)),
        );
        crate::inherit::close_on_exec(&addresses)
    }

    /// Whether the peer at address `name` was inserted already (by an earlier window).
    pub fn knows(&self, name: &[u8]) -> bool {
        self.peers.borrow().contains_key(name)
    }

    /// Insert a peer's address (from its [`Endpoint::name`]); a name inserted before gives the
    /// same peer.
    pub fn insert(&self, name: &[u8]) -> Result<Peer, FiError> {
        if let Some(&p) = self.peers.borrow().get(name) {
            return Ok(p);
        }
        let mut addr: sys::fi_addr_t = 0;
        // SAFETY: the address vector is open; `name` holds one address of this provider's
        // format (the provider validates it); `addr` receives one fi_addr_t.
        let ret = unsafe {
            sys::fi_av_insert(
                self.core.out.av,
                name.as_ptr().cast(),
                1,
                &mut addr,
                0,
                ptr::null_mut(),
            )
        };
        if check("fi_av_insert", ret)? != 1 {
            return Err(FiError::new("fi_av_insert", -(sys::FI_EINVAL as i64)));
        }
        let mut peers = self.peers.borrow_mut();
        let peer = Peer {
            addr,
            index: peers.len() as u32,
        };
        peers.insert(name.to_vec(), peer);
        Ok(peer)
    }

    /// Note that `peer` is process `pid` on this node, whose progress thread a wait for
    /// operations to it may wake where the provider cannot (`doorbell.rs`). Such a peer
    /// addresses this endpoint at its [`Endpoint::near_name`] where it has one: from now on,
    /// waits on what peers do poll the issuing port every round.
    pub fn set_pid(&self, peer: Peer, pid: u32) {
        if pid != 0 && self.serves_near() {
            self.core.near.store(true, Ordering::Relaxed);
        }
        let mut pids = self.core.pids.lock().unwrap_or_else(|p| p.into_inner());
        let i = peer.index as usize;
        if pids.len() <= i {
            pids.resize(i + 1, 0);
        }
        pids[i] = pid;
    }

    /// Note that a peer other than this endpoint's owner, on another node or in this process
    /// (another thread's world), addresses this endpoint at its [`Endpoint::name`]: waits on
    /// what peers do poll the serving port every round from now on.
    pub fn set_far(&self) {
        self.core.far.store(true, Ordering::Relaxed);
    }

    /// Register memory for the life of `'a` so that peers can reach it.
    pub fn register<'a>(&self, mem: Mem<'a>) -> Result<Region<'a>, FiError> {
        Region::new(&self.core, mem, Access::Remote)
    }

    /// The key to use in operations on a peer's region described by `key` (maps raw keys).
    pub fn map_key(&self, key: &RegionKey) -> Result<u64, FiError> {
        if !key.raw {
            let bytes: [u8; 8] = key
                .key
                .as_slice()
                .try_into()
                .map_err(|_| FiError::new("remote key", -(sys::FI_EINVAL as i64)))?;
            return Ok(u64::from_le_bytes(bytes));
        }
        let mut out = 0u64;
        let mut raw = key.key.clone();
        // SAFETY: the domain is open; `raw` holds the key bytes a peer's fi_mr_raw_attr gave.
        check("fi_mr_map_raw", unsafe {
            sys::fi_mr_map_raw(
                self.core.domain.raw(),
                key.base,
                raw.as_mut_ptr(),
                raw.len(),
                &mut out,
                0,
            )
        })?;
        Ok(out)
    }

    /// Post one operation to `peer`, progressing and retrying while the provider says FI_EAGAIN
    /// (a full queue, or a peer that does not take more); `keep_waiting` is asked every few
    /// milliseconds meanwhile and ends the retries with an error when it says no. With `slot`,
    /// the operation gets a slot of its own to wait for (keeping `keep` until it settles);
    /// without, it is counted for the peer's flush only. `call` gets the operation's context.
    pub(crate) fn post(
        &self,
        op: &str,
        peer: Peer,
        slot: bool,
        keep: Option<Staged>,
        keep_waiting: &dyn Fn() -> Waiting,
        mut call: impl FnMut(*mut libc::c_void) -> isize,
    ) -> Result<Option<Slot>, FiError> {
        self.core.touch();
        self.launch(keep_waiting);
        let (ctx, slot) = self.core.track().issue(peer.index, slot, keep);
        // Made at the first refusal only: most posts are taken at once.
        let mut patience = None;
        loop {
            let ret = call(ctx as *mut libc::c_void);
            let failed = if ret == -(sys::FI_EAGAIN as isize) {
                self.core.poll();
                patience
                    .get_or_insert_with(|| Patience::new(&self.core, keep_waiting))
                    .tick(op)
                    .err()
            } else {
                check(op, ret as i64).err()
            };
            match failed {
                None if ret == 0 => return Ok(slot),
                None => continue,
                Some(e) => {
                    let kept = self.core.track().withdraw(ctx);
                    drop(kept);
                    return Err(e);
                }
            }
        }
    }

    /// Wait until the operation of `slot` has settled; returns what its slot kept, or its
    /// failure. `keep_waiting` as in [`Endpoint::post`]; a wait given up abandons the slot.
    pub(crate) fn wait_slot(
        &self,
        op: &str,
        slot: Slot,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<Option<Staged>, FiError> {
        let outcome = |(keep, failed): Outcome<Staged>| match failed {
            None => Ok(keep),
            Some(text) => Err(FiError::with_detail(op, sys::FI_EIO as i32, text)),
        };
        // Polling first settles a completion the provider already holds (a read over the shm
        // provider completes inside the call that posts it) with one look at the bookkeeping
        // instead of two: with `Endpoint::read` waiting for a single read without a list of
        // slots, 1.88 us per 8-byte read against 1.92-1.96 (`raw_floor`). The poll takes the
        // slot's outcome under the lock it settles completions with. The wait's pace is made
        // only when that first look finds nothing.
        let mut seen = None;
        if let Some(out) = self.core.poll_take(slot, &mut seen) {
            return outcome(out);
        }
        let mut patience = Patience::new(&self.core, keep_waiting);
        loop {
            if let Err(e) = patience.tick(op) {
                let kept = self.core.track().abandon(slot);
                drop(kept);
                return Err(e);
            }
            if let Some(out) = self.core.poll_take(slot, &mut seen) {
                patience.done();
                return outcome(out);
            }
        }
    }

    /// Wait until every operation posted to `peer` so far has settled (delivered at the peer,
    /// for a provider that gives FI_DELIVERY_COMPLETE); the first failure of an operation not
    /// waited for on its own is reported here, once. `keep_waiting` is asked every few
    /// milliseconds and ends the wait with an error when it says no (a peer known to be dead).
    #[inline]
    pub fn flush(&self, peer: Peer, keep_waiting: &dyn Fn() -> Waiting) -> Result<(), FiError> {
        self.launch(keep_waiting);
        // Nothing in flight and no failure to report: the common flush after blocking
        // operations, answered without the bookkeeping's lock, here where the call inlines.
        if self.core.track.quiet() {
            return Ok(());
        }
        self.flush_wait(peer, keep_waiting)
    }

    /// [`Endpoint::flush`] where something is in flight or a failure waits.
    fn flush_wait(&self, peer: Peer, keep_waiting: &dyn Fn() -> Waiting) -> Result<(), FiError> {
        let mut patience = Patience::new(&self.core, keep_waiting);
        let mut seen = None;
        loop {
            // Looked at again only once completions were settled since the last look.
            let flushed = match self.core.track.changed(&mut seen) {
                true => self.core.track().flushed(peer.index),
                false => None,
            };
            match flushed {
                Some(Ok(())) => {
                    patience.done();
                    return Ok(());
                }
                Some(Err(text)) => {
                    return Err(FiError::with_detail("operation", sys::FI_EIO as i32, text));
                }
                None => {}
            }
            self.core.poll();
            patience.tick("operation")?;
        }
    }

    /// A handle on this endpoint's completions for other threads ([`Flusher`]).
    pub fn flusher(&self) -> Flusher {
        Flusher(self.core.clone())
    }

    /// Whether any operation of this endpoint is in flight.
    pub fn in_flight(&self) -> bool {
        self.core.track().in_flight()
    }

    /// Let the provider move pending work (the caller is driving the endpoint: the progress
    /// thread stands aside meanwhile).
    pub fn progress(&self) {
        self.core.touch();
        self.core.poll_for_peers();
    }

    /// Like [`Endpoint::progress`], but block in the serving port's wait object until traffic
    /// arrives or about a millisecond passes (without one: doze a millisecond on the doorbell;
    /// the progress thread stands aside meanwhile): for waits on a peer that makes no progress
    /// ([`Waiting::Idle`]).
    pub fn idle(&self) {
        self.core.touch();
        self.core.wait(IDLE_NAP);
        self.core.touch();
    }
}

/// The address of the endpoint `ep`, for peers to insert.
///
/// # Safety
/// `ep` is an open endpoint.
unsafe fn name_of(ep: *mut sys::fid_ep) -> Result<Vec<u8>, FiError> {
    let mut buf = vec![0u8; 256];
    loop {
        let mut len = buf.len();
        // SAFETY: `ep` is open (guaranteed by the caller); `buf` has `len` writable bytes.
        let ret = unsafe { sys::fi_getname(&mut (*ep).fid, buf.as_mut_ptr().cast(), &mut len) };
        if ret == -(sys::FI_ETOOSMALL as i32) && len > buf.len() {
            buf.resize(len, 0);
            continue;
        }
        check("fi_getname", ret)?;
        buf.truncate(len);
        return Ok(buf);
    }
}

/// What a thread other than an endpoint's owner may do with it: wait for the operations its
/// owner issued to a peer ([`Flusher::flush`]), driving its completion queue meanwhile (the
/// domain is FI_THREAD_SAFE). Keeps the endpoint's libfabric objects open while it lives.
#[derive(Clone)]
pub struct Flusher(Arc<Core>);

impl std::fmt::Debug for Flusher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flusher")
            .field("provider", self.0.domain.provider())
            .finish()
    }
}

impl Flusher {
    /// [`Endpoint::set_crowded`], from any thread; `false` undoes it (an endpoint kept for
    /// other threads).
    pub fn set_crowded(&self, crowded: bool) {
        self.0.crowded.store(crowded, Ordering::Relaxed);
    }

    /// Wait until every operation the owner had posted to `peer` when this call began has
    /// settled, however many it posts meanwhile. A failure among them stays for the owner's
    /// own flush to report. `keep_waiting` as in [`Endpoint::flush`].
    pub fn flush(&self, peer: Peer, keep_waiting: &dyn Fn() -> Waiting) -> Result<(), FiError> {
        let core = &self.0;
        if core.track.quiet() {
            return Ok(());
        }
        let (goal, settled) = core.track().counts(peer.index);
        if settled >= goal {
            return Ok(());
        }
        let mut patience = Patience::new(core, keep_waiting);
        loop {
            core.poll();
            if core.track().counts(peer.index).1 >= goal {
                patience.done();
                return Ok(());
            }
            patience.tick("operation")?;
        }
    }
}

/// How an endpoint's progress thread serves the target side while its owner is away (computing,
/// asleep, or in waits that do not drive the endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Peers address a second, serving endpoint, whose completion queue has a wait object (a
    /// file descriptor) that the provider wakes when traffic arrives; the progress thread
    /// sleeps in it, and on the process's doorbell. Operations are issued on the first
    /// endpoint, whose queue has none: a wait object costs every poll of its queue (over
    /// tcp;ofi_rxm an `epoll_wait` on the wait set and a signal per completion, 2-4 us of a
    /// 13 us put + flush when the one endpoint had it). Peers on this node address the first
    /// endpoint instead, and ring the doorbell ([`Endpoint::near_name`]).
    Wake,
    /// One endpoint, whose queue has no wait object: the progress thread polls it every
    /// millisecond, or at once when a peer on this node rings the process's doorbell
    /// (`doorbell.rs`).
    Poll,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let since = Instant::now();
        while self.in_flight() && since.elapsed() < DRAIN {
            self.core.poll();
            std::thread::yield_now();
        }
        // Memory the provider may still write into is never freed.
        let stranded = self.core.track().strand();
        std::mem::forget(stranded);
        self.progress.stop.store(true, Ordering::Release);
        self.core.wake();
        if let Some(t) = self.progress.thread.take() {
            let _ = t.join();
        }
        self.core.pool.close();
    }
}
