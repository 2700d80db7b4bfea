//! An endpoint: one device port with its protection domain, one completion queue, a
//! reliable-connected queue pair per peer, and the staging buffers of this side's operations.
//! Nothing runs on its own: the NIC serves peers' operations on this side's memory, and this
//! side's own work completes when its caller polls (no progress thread).
//!
//! Puts are RDMA writes (inline up to the queue pair's limit, else from a staging buffer), gets
//! RDMA reads into a staging buffer, atomics the NIC's 8-byte fetch-and-add and
//! compare-and-swap. Writes are signalled selectively (`track.rs`); a flush of a peer waits
//! until its queue pair's outstanding work is retired, adding a signalled zero-length write
//! behind it where the newest request is unsignalled (the queue pair completes in order, so its
//! completion, the peer's acknowledgement, means the writes before it are complete there).
//!
//! A thread waiting for a peer's write may sleep on the completion queue's channel
//! ([`Endpoint::arm`], [`Endpoint::sleep`]): a write the peer follows with a zero-length
//! write with immediate data ([`Endpoint::wake`]) wakes it, the queue pair placing the writes
//! and executing the atomics before it in order.

use crate::device::{Context, LinkLayer, choose_gid};
use crate::error::VerbsError;
use crate::library::failed_completion;
use crate::queue::{Channel, Connect, Cq, Pd, PortAddress, Qp, Srq};
use crate::region::Region;
use crate::stage::{Buf, Stage};
use crate::sys;
use crate::track::{FLUSHED, Ledger, Phase};
use onesided_shm::Mem;
use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Send queue entries per queue pair (at most; the device may grant fewer).
const DEPTH: u32 = 128;
/// Receive entries kept posted in the endpoint's shared receive queue, each taken by a write
/// with immediate data of any peer ([`Endpoint::write_notify`], [`Endpoint::wake`]) until a
/// poll here posts it again; at most half the completion queue, which holds their completions
/// beside the sends'.
const RECEIVES: u32 = 4096;
/// The work request id of a receive (the ledger's ids never have this bit).
const RECEIVE: u64 = 1 << 63;
/// Completions read from the queue at once.
const BATCH: usize = 16;
/// Completion queue entries (at most the device's limit).
const CQ_ENTRIES: u32 = 8192;
/// The immediate data of [`Endpoint::wake`], which no notification carries: it wakes a
/// sleeper and goes to no handler.
const WAKE: u32 = 0;
/// Inline bytes asked of the first queue pair; later ones ask for what it was granted.
const INLINE: u32 = 256;
/// RDMA reads and atomics in flight per queue pair, each way (at most the device's limits).
const RD_ATOMIC: u32 = 16;
/// The largest transfer one work request moves (at most the port's largest message); longer
/// ones are split.
const CHUNK: usize = 1 << 30;
/// How often a wait asks its caller whether to go on, and looks at the device's async events.
const CHECK_EVERY: Duration = Duration::from_millis(10);
/// Rounds a wait polls back to back before it yields the core on every round.
const SPIN_ROUNDS: u32 = 1024;

/// What a wait should do, as its caller judges the peers it waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Keep polling.
    Poll,
    /// Give up: a peer the wait depends on is gone.
    GiveUp,
}

/// Where an operation goes in a peer's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remote {
    /// The target address (a virtual address of the peer, inside a region it registered).
    pub addr: u64,
    /// The region's remote key.
    pub rkey: u32,
}

impl Remote {
    /// This address moved `by` bytes on, in the same region.
    pub fn shifted(self, by: usize) -> Remote {
        Remote {
            addr: self.addr + by as u64,
            rkey: self.rkey,
        }
    }
}

/// An 8-byte atomic of the NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Atomic {
    /// Add, returning the old value.
    FetchAdd(u64),
    /// Store `swap` if the word equals `compare`, returning the old value.
    CompareSwap {
        /// The value the word must hold.
        compare: u64,
        /// The value stored.
        swap: u64,
    },
}

/// Which device, port and GID an endpoint uses (`None`: chosen, see [`Endpoint::open`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Request {
    /// The device's name.
    pub device: Option<String>,
    /// The port number.
    pub port: Option<u8>,
    /// The GID index.
    pub gid_index: Option<u32>,
}

/// What one operation does.
enum Work<'s> {
    /// A write, with immediate data for the peer's completion queue where there is some.
    Write(&'s [u8], Option<u32>),
    Read(usize),
    Atomic(Atomic),
}

/// The handler of the immediate data of peers' writes ([`Endpoint::on_remote_data`]).
type RemoteData = Box<dyn Fn(u32)>;

/// A peer's queue pair.
enum Link {
    Prepared(Qp),
    Ready(Qp),
}

impl Link {
    fn qp(&self) -> &Qp {
        match self {
            Link::Prepared(qp) | Link::Ready(qp) => qp,
        }
    }
}

struct State {
    ledger: Ledger<Buf>,
    stage: Stage,
}

impl State {
    /// Give up on the operations `ops` (ids and lengths): their outcomes go unread, and their
    /// buffers come back once they are retired.
    fn forget(&mut self, ops: &[(u64, usize)]) {
        for &(id, _) in ops {
            if let Some(b) = self.ledger.forget(id) {
                self.stage.give(b);
            }
        }
    }
}

struct Core {
    /// Queue pairs by peer (dropped first: before the buffers and queues they use).
    links: RefCell<Vec<Option<Link>>>,
    /// The receives of every queue pair (of its lanes' too), [`RECEIVES`] of them posted;
    /// `None` where the device has no shared receive queues (then no peer's write carries
    /// immediate data here).
    srq: Option<Arc<Srq>>,
    state: RefCell<State>,
    /// Where its queue pairs' sends complete.
    cq: Arc<Cq>,
    /// Where its queue pairs' receives complete: `cq`, or for a lane the endpoint's, so that
    /// the endpoint's polls hand over what peers' writes through lanes carried.
    receives: Arc<Cq>,
    /// What a thread sleeps on until the queue gets an entry (the queue holds it: destroyed
    /// after it); `None` where the device gives none, and for a lane.
    channel: Option<Arc<Channel>>,
    pd: Arc<Pd>,
    ctx: Arc<Context>,
    port: u8,
    sgid: Option<u32>,
    address: PortAddress,
    depth: u32,
    /// The largest transfer of one work request.
    chunk: usize,
    inline: std::cell::Cell<u32>,
    rd_atomic: u8,
    atomics: bool,
    /// What the immediate data of a peer's write goes to ([`Endpoint::on_remote_data`]).
    remote: RefCell<Option<RemoteData>>,
    /// Its waits read the context's async events ([`Core::events`]): the endpoint's do, its
    /// lanes' do not, so that one reader sees every event of the queue pairs it knows.
    reads_events: bool,
}

/// An endpoint on one device port (not `Send`: it is driven by the thread that owns it).
pub struct Endpoint {
    core: Rc<Core>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("device", &self.core.ctx.name)
            .field("port", &self.core.port)
            .field("gid_index", &self.core.sgid)
            .finish()
    }
}

/// Operations started by the request forms, until [`Endpoint::finish`]; dropped unfinished,
/// they complete on their own and their buffers go back then.
pub struct Ticket {
    core: Rc<Core>,
    /// Work request ids, with the bytes each hands over.
    ops: Vec<(u64, usize)>,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("ops", &self.ops.len())
            .finish()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.ops.is_empty() {
            return;
        }
        self.core.state.borrow_mut().forget(&self.ops);
    }
}

impl Endpoint {
    /// Open the endpoint `req` describes: the named device, or the first with an active port;
    /// that port, or its first active one; the GID of `req`, or on Ethernet the one
    /// [`choose_gid`] picks.
    pub fn open(req: &Request) -> Result<Endpoint, VerbsError> {
        let mut devices = crate::device::opened()?;
        let found = devices.iter().position(|(_, d)| match &req.device {
            Some(name) => &d.name == name,
            None => d.active_port().is_some(),
        });
        let Some(i) = found else {
            let what = match &req.device {
                Some(n) => format!("no verbs device named {n:?}"),
                None if devices.is_empty() => "no verbs device".to_owned(),
                None => "no verbs device with an active port".to_owned(),
            };
            return Err(VerbsError::new(what, libc::ENODEV));
        };
        let (ctx, info) = devices.swap_remove(i);
        drop(devices);
        let port = match req.port {
            Some(p) => info.ports.iter().find(|x| x.number == p),
            None => info.active_port(),
        }
        .ok_or_else(|| {
            VerbsError::new(
                format!("{}: no such port, or none active", info.name),
                libc::ENODEV,
            )
        })?;
        if !port.active {
            return Err(VerbsError::new(
                format!("{} port {} is {}", info.name, port.number, port.state),
                libc::ENETDOWN,
            ));
        }
        let sgid = req
            .gid_index
            .or_else(|| choose_gid(&port.gids, port.link_layer));
        let gid = match sgid {
            Some(i) => Some(
                port.gids
                    .iter()
                    .find(|g| g.index == i)
                    .map(|g| g.gid)
                    .ok_or_else(|| {
                        VerbsError::new(
                            format!("{} port {}: no GID at index {i}", info.name, port.number),
                            libc::EINVAL,
                        )
                    })?,
            ),
            None if port.link_layer == LinkLayer::Ethernet => {
                return Err(VerbsError::new(
                    format!(
                        "{} port {} has no GID to address peers by",
                        info.name, port.number
                    ),
                    libc::EADDRNOTAVAIL,
                ));
            }
            None => None,
        };
        let ctx = Arc::new(ctx);
        set_nonblocking(&ctx)?;
        let pd = Pd::alloc(ctx.clone())?;
        let channel = Channel::create(ctx.clone()).map(Arc::new);
        let cq = Cq::create(ctx.clone(), CQ_ENTRIES.min(info.max_cqe), channel.as_ref())?;
        let cq = Arc::new(cq);
        let receives = RECEIVES.min(cq.size / 2).min(info.max_srq_wr);
        let srq = (receives > 0)
            .then(|| Srq::create(pd.clone(), receives))
            .flatten()
            .map(Arc::new);
        if let Some(srq) = &srq {
            (0..srq.depth).try_for_each(|_| srq.post_receive(RECEIVE))?;
        }
        let stage = Stage::new(pd.clone())?;
        let rd_atomic = RD_ATOMIC.min(info.max_qp_rd_atom).min(255) as u8;
        Ok(Endpoint {
            core: Rc::new(Core {
                links: RefCell::new(Vec::new()),
                srq,
                state: RefCell::new(State {
                    ledger: Ledger::new(),
                    stage,
                }),
                receives: cq.clone(),
                cq,
                channel,
                pd,
                port: port.number,
                sgid,
                address: PortAddress {
                    lid: port.lid,
                    gid,
                    mtu: port.active_mtu,
                },
                depth: DEPTH.min(info.max_qp_wr.max(1)),
                chunk: CHUNK.min(port.max_msg.max(4096) as usize),
                inline: std::cell::Cell::new(INLINE),
                rd_atomic: rd_atomic.max(1),
                atomics: info.has_atomics(),
                remote: RefCell::new(None),
                reads_events: true,
                ctx,
            }),
        })
    }

    /// An endpoint on this one's port and protection domain, so that the regions registered
    /// here serve its operations too, with its own completion queue for its sends, staging
    /// buffers and queue pairs, whose receives come from this endpoint's shared receive queue
    /// and complete on its completion queue; no completion channel, handler of immediate data
    /// or reader of async events: what a lane is made of ([`Endpoint::lane`]).
    pub(crate) fn sibling(&self) -> Result<Endpoint, VerbsError> {
        let c = &self.core;
        let cq = Arc::new(Cq::create(c.ctx.clone(), c.cq.size, None)?);
        let stage = Stage::new(c.pd.clone())?;
        Ok(Endpoint {
            core: Rc::new(Core {
                links: RefCell::new(Vec::new()),
                srq: c.srq.clone(),
                receives: c.receives.clone(),
                state: RefCell::new(State {
                    ledger: Ledger::new(),
                    stage,
                }),
                cq,
                channel: None,
                pd: c.pd.clone(),
                ctx: c.ctx.clone(),
                port: c.port,
                sgid: c.sgid,
                address: c.address,
                depth: c.depth,
                chunk: c.chunk,
                inline: std::cell::Cell::new(c.inline.get()),
                rd_atomic: c.rd_atomic,
                atomics: c.atomics,
                remote: RefCell::new(None),
                reads_events: false,
            }),
        })
    }

    /// The device's name.
    pub fn device(&self) -> &str {
        &self.core.ctx.name
    }

    /// The port and GID index in use.
    pub fn port(&self) -> (u8, Option<u32>) {
        (self.core.port, self.core.sgid)
    }

    /// How peers reach this endpoint's port.
    pub fn address(&self) -> PortAddress {
        self.core.address
    }

    /// The longest transfer one work request moves ([`Endpoint::write_notify`] at most).
    pub fn max_message(&self) -> usize {
        self.core.chunk
    }

    /// Whether the device runs 8-byte fetch-and-add and compare-and-swap.
    pub fn has_atomics(&self) -> bool {
        self.core.atomics
    }

    /// The largest write sent inline (known once a queue pair was created; the size asked
    /// before).
    pub fn max_inline(&self) -> usize {
        self.core.inline.get() as usize
    }

    /// Register `mem` for peers to write, read and run atomics on.
    pub fn register<'a>(&self, mem: Mem<'a>) -> Result<Region<'a>, VerbsError> {
        Region::new(self.core.pd.clone(), mem)
    }

    /// Whether `peer` has a connected queue pair.
    pub fn connected(&self, peer: u32) -> bool {
        matches!(
            self.core.links.borrow().get(peer as usize),
            Some(Some(Link::Ready(_)))
        )
    }

    /// How many of the peers' writes with immediate data ([`Endpoint::write_notify`]) this
    /// endpoint takes, from all of them together, while it polls nothing: the entries of its
    /// shared receive queue. 0 where the device has no shared receive queues: then no peer's
    /// write carries immediate data here.
    pub fn remote_data_room(&self) -> u32 {
        self.core.srq.as_ref().map_or(0, |srq| srq.depth)
    }

    /// Hand the immediate data of every peer's [`Endpoint::write_notify`] to `handle`, when a
    /// poll of this endpoint (an operation's wait, a flush, [`Endpoint::progress`]) finds its
    /// completion: set once (EBUSY after).
    pub fn on_remote_data(&self, handle: RemoteData) -> Result<(), VerbsError> {
        let mut remote = self.core.remote.borrow_mut();
        if remote.is_some() {
            return Err(VerbsError::new("remote data handler", libc::EBUSY));
        }
        *remote = Some(handle);
        Ok(())
    }

    /// A queue pair for `peer`, ready to be connected: its number, which the peer connects to.
    pub fn prepare(&self, peer: u32) -> Result<u32, VerbsError> {
        let c = &self.core;
        let srq = c.srq.as_deref();
        let qp = Qp::create(
            c.pd.clone(),
            &c.cq,
            &c.receives,
            c.depth,
            srq,
            c.inline.get(),
        )?;
        c.inline.set(qp.max_inline);
        qp.init(c.port)?;
        let num = qp.num();
        let mut links = c.links.borrow_mut();
        let i = peer as usize;
        if links.len() <= i {
            links.resize_with(i + 1, || None);
        }
        links[i] = Some(Link::Prepared(qp));
        Ok(num)
    }

    /// Connect `peer`'s prepared queue pair to its queue pair `remote_qpn` at `to`.
    pub fn connect(&self, peer: u32, to: PortAddress, remote_qpn: u32) -> Result<(), VerbsError> {
        let c = &self.core;
        let mut links = c.links.borrow_mut();
        let slot = links.get_mut(peer as usize).and_then(Option::take);
        let Some(Link::Prepared(qp)) = slot else {
            return Err(VerbsError::new(
                format!("no queue pair prepared for peer {peer}"),
                libc::EINVAL,
            ));
        };
        qp.connect(&Connect {
            port: c.port,
            mtu: c.address.mtu,
            sgid: c.sgid,
            to,
            remote_qpn,
            remote_psn: remote_qpn & 0xff_ffff,
            local_psn: qp.num() & 0xff_ffff,
            rd_atomic: c.rd_atomic,
        })?;
        links[peer as usize] = Some(Link::Ready(qp));
        Ok(())
    }

    /// Drop `peer`'s queue pair, connected or not (a connection that failed on some rank).
    ///
    /// The queue pair goes to ERR, so that it takes nothing more from the shared receive
    /// queue, and the completion queue is polled before it is destroyed: destroying a queue
    /// pair removes its completions still in the queue (mlx5 does), and the receives those
    /// had taken would never be posted again.
    pub fn disconnect(&self, peer: u32) {
        let link = self
            .core
            .links
            .borrow_mut()
            .get_mut(peer as usize)
            .and_then(Option::take);
        if let Some(link) = link {
            link.qp().fail();
            // An error here is the device's, and the next wait reports it.
            let _ = self.core.drain();
            let mut st = self.core.state.borrow_mut();
            let State { ledger, stage } = &mut *st;
            ledger.break_queue(peer, FLUSHED, |b| stage.give(b));
            drop(link);
        }
    }

    /// Write `src` at `to` of `peer`; returns when `src` may be reused (sent inline, or copied
    /// into a staging buffer), the write in flight until a flush of `peer`.
    pub fn write(
        &self,
        peer: u32,
        src: &[u8],
        to: Remote,
        live: &dyn Fn() -> Waiting,
    ) -> Result<(), VerbsError> {
        let chunk = self.core.chunk;
        for (i, piece) in src.chunks(chunk).enumerate() {
            let at = to.shifted(i * chunk);
            self.core
                .start(peer, Work::Write(piece, None), at, false, false, live)?;
        }
        Ok(())
    }

    /// [`Endpoint::write`] as one write that carries `imm` to `peer`'s completion queue, where
    /// its handler ([`Endpoint::on_remote_data`]) gets it once the bytes are in its memory
    /// (the queue pair places a write's data before its completion). For a peer whose
    /// [`Endpoint::remote_data_room`] is not 0, `src` of one work request and `imm` other than 0,
    /// which [`Endpoint::wake`] carries (EINVAL otherwise). A peer that does not poll while
    /// more writes with immediate data arrive, from all its peers together, than its room
    /// (4096 where the device allows) holds later ones back (the device retries them) until it
    /// does.
    pub fn write_notify(
        &self,
        peer: u32,
        src: &[u8],
        to: Remote,
        imm: u32,
        live: &dyn Fn() -> Waiting,
    ) -> Result<(), VerbsError> {
        if src.len() > self.core.chunk {
            return Err(VerbsError::new(
                "a write with immediate data longer than one work request",
                libc::EINVAL,
            ));
        }
        if imm == WAKE {
            return Err(VerbsError::new(
                "immediate data 0, which only wakes a sleeper",
                libc::EINVAL,
            ));
        }
        self.core
            .start(peer, Work::Write(src, Some(imm)), to, false, false, live)
            .map(drop)
    }

    /// Wake `peer` if it sleeps in [`Endpoint::sleep`]: a zero-length write with immediate
    /// data, behind this side's earlier work to `peer` (which its queue pair executes first).
    /// `probe`: memory of `peer`'s that is registered. For a peer whose
    /// [`Endpoint::remote_data_room`] is not 0. Left in flight, signalled: this side's next poll
    /// retires it, so that a flush after it has nothing to wait for.
    pub fn wake(
        &self,
        peer: u32,
        probe: Remote,
        live: &dyn Fn() -> Waiting,
    ) -> Result<(), VerbsError> {
        self.core
            .start(peer, Work::Write(&[], Some(WAKE)), probe, false, true, live)
            .map(drop)
    }

    /// Write the 8 bytes of `value` at `to` of `peer`, signalled: this side's next poll retires
    /// it with what went before it on the queue pair, so that a flush after it has nothing left
    /// to wait for (a control word written now and then, such as a sleep notice).
    pub fn write_word(
        &self,
        peer: u32,
        value: u64,
        to: Remote,
        live: &dyn Fn() -> Waiting,
    ) -> Result<(), VerbsError> {
        let bytes = value.to_le_bytes();
        self.core
            .start(peer, Work::Write(&bytes, None), to, false, true, live)
            .map(drop)
    }

    /// Whether a thread can sleep on this endpoint until a completion arrives
    /// ([`Endpoint::arm`]): whether the device gave a completion channel.
    pub fn sleeps(&self) -> bool {
        self.core.channel.is_some()
    }

    /// Get ready to [`Endpoint::sleep`]: ask for an event at the next completion, then retire
    /// what is already there. `true`: something was (look again before sleeping, the event
    /// will not come for it); also `true` without a channel, which has no sleep.
    pub fn arm(&self) -> Result<bool, VerbsError> {
        if self.core.channel.is_none() {
            return Ok(true);
        }
        self.core.cq.arm()?;
        Ok(self.core.drain()? > 0)
    }

    /// After [`Endpoint::arm`] returned `false`: sleep until a completion arrives (a peer's
    /// write with immediate data, [`Endpoint::wake`] among them, or this side's own work) or
    /// `timeout` passes, then retire what completed. Whether one arrived.
    pub fn sleep(&self, timeout: Duration) -> Result<bool, VerbsError> {
        let Some(channel) = &self.core.channel else {
            return Ok(false);
        };
        let woken = channel.wait(timeout)?;
        self.core.drain()?;
        Ok(woken)
    }

    /// Read `dst.len()` bytes at `from` of `peer` into `dst`.
    pub fn read(
        &self,
        peer: u32,
        dst: &mut [u8],
        from: Remote,
        live: &dyn Fn() -> Waiting,
    ) -> Result<(), VerbsError> {
        let c = &self.core;
        // One work request, the common case: no ticket to allocate.
        if !dst.is_empty() && dst.len() <= c.chunk {
            let id = c.start(peer, Work::Read(dst.len()), from, true, true, live)?;
            return c.settle(&[(id, dst.len())], Some(dst), live);
        }
        let t = self.start_read(peer, dst.len(), from, live)?;
        self.finish(t, Some(dst), live)
    }

    /// The 8-byte atomic `op` on the word at `at` of `peer` (8-aligned); the old value.
    pub fn atomic(
        &self,
        peer: u32,
        op: Atomic,
        at: Remote,
        live: &dyn Fn() -> Waiting,
    ) -> Result<u64, VerbsError> {
        let c = &self.core;
        let id = c.start(peer, Work::Atomic(op), at, true, true, live)?;
        let mut old = [0u8; 8];
        c.settle(&[(id, 8)], Some(&mut old), live)?;
        Ok(u64::from_ne_bytes(old))
    }

    /// Start reading `len` bytes at `from` of `peer` (one read per largest message, all in
    /// flight together); [`Endpoint::finish`] hands them over.
    pub fn start_read(
        &self,
        peer: u32,
        len: usize,
        from: Remote,
        live: &dyn Fn() -> Waiting,
    ) -> Result<Ticket, VerbsError> {
        let chunk = self.core.chunk;
        let mut t = self.ticket(Vec::with_capacity(len.div_ceil(chunk)));
        for at in (0..len).step_by(chunk) {
            let n = chunk.min(len - at);
            let last = at + n == len;
            let id = self
                .core
                .start(peer, Work::Read(n), from.shifted(at), true, last, live)?;
            t.ops.push((id, n));
        }
        Ok(t)
    }

    /// Start the atomics `ops` on words of `peer`, all in flight together; [`Endpoint::finish`]
    /// hands over their old values, 8 bytes each in order.
    pub fn start_atomics(
        &self,
        peer: u32,
        ops: &[(Atomic, Remote)],
        live: &dyn Fn() -> Waiting,
    ) -> Result<Ticket, VerbsError> {
        let mut t = self.ticket(Vec::with_capacity(ops.len()));
        for &(op, at) in ops {
            let last = t.ops.len() + 1 == ops.len();
            let id = self
                .core
                .start(peer, Work::Atomic(op), at, true, last, live)?;
            t.ops.push((id, 8));
        }
        Ok(t)
    }

    fn ticket(&self, ops: Vec<(u64, usize)>) -> Ticket {
        Ticket {
            core: self.core.clone(),
            ops,
        }
    }

    /// Whether every operation of `t` is retired (polling once).
    pub fn test(&self, t: &Ticket) -> Result<bool, VerbsError> {
        self.core.drain()?;
        let st = self.core.state.borrow();
        Ok(t.ops
            .iter()
            .all(|&(id, _)| st.ledger.phase(id) != Phase::Flight))
    }

    /// Wait for the operations of `t`; what they read goes to `out`, in order. The first
    /// failure is returned once every operation is retired (or given up on).
    pub fn finish(
        &self,
        mut t: Ticket,
        out: Option<&mut [u8]>,
        live: &dyn Fn() -> Waiting,
    ) -> Result<(), VerbsError> {
        let ops = std::mem::take(&mut t.ops);
        self.core.settle(&ops, out, live)
    }

    /// Complete every operation to `peer` at `peer`: wait until its queue pair has retired
    /// them, behind a signalled zero-length write to `probe` (memory of `peer`'s that is
    /// registered) where the newest is unsignalled: a queue pair completes in order, and a
    /// write completes when the peer acknowledged it, so that completion means every write
    /// before it is complete at the peer. An operation that failed since breaks the queue pair:
    /// the flush fails with it.
    pub fn flush(
        &self,
        peer: u32,
        probe: Remote,
        live: &dyn Fn() -> Waiting,
    ) -> Result<(), VerbsError> {
        let c = &self.core;
        let (queued, signaled) = {
            let st = c.state.borrow();
            (st.ledger.queued(peer), st.ledger.newest_signaled(peer))
        };
        if queued > 0 {
            if !signaled {
                c.start(peer, Work::Write(&[], None), probe, false, true, live)?;
            }
            c.wait(
                "flushing RDMA writes",
                |st| st.ledger.queued(peer) == 0,
                live,
            )?;
        }
        match c.state.borrow().ledger.broken(peer) {
            Some(s) => Err(failed_completion(
                format!("an RDMA operation to peer {peer}"),
                s,
            )),
            None => Ok(()),
        }
    }

    /// Whether a flush of `peer` has nothing to do: no operation to it is in flight and its
    /// queue pair is not broken. One look, where [`Endpoint::flush`] needs a probe address.
    #[inline]
    pub fn idle(&self, peer: u32) -> bool {
        let st = self.core.state.borrow();
        st.ledger.queued(peer) == 0 && st.ledger.broken(peer).is_none()
    }

    /// Retire what has completed (a call while nothing is waited for).
    pub fn progress(&self) -> Result<(), VerbsError> {
        self.core.drain().map(drop)
    }
}

/// Make the context's async event descriptor non-blocking, so waits look at it in passing.
fn set_nonblocking(ctx: &Context) -> Result<(), VerbsError> {
    // SAFETY: `raw` is an open context; `async_fd` is its descriptor.
    let fd = unsafe { (*ctx.raw).async_fd };
    // SAFETY: plain fcntl calls on a descriptor the context owns.
    let rc = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK)
    };
    if rc < 0 {
        return Err(VerbsError::last(
            "making the async event descriptor non-blocking",
        ));
    }
    Ok(())
}

impl Core {
    /// Wait until the operations `ops` (ids and lengths) are retired, then hand what they read
    /// to `out` in order and give back their buffers; the first failure among them is the
    /// result. A wait that gives up forgets them.
    fn settle(
        &self,
        ops: &[(u64, usize)],
        mut out: Option<&mut [u8]>,
        live: &dyn Fn() -> Waiting,
    ) -> Result<(), VerbsError> {
        let done = self.wait(
            "waiting for RDMA completions",
            |st| {
                ops.iter()
                    .all(|&(id, _)| st.ledger.phase(id) != Phase::Flight)
            },
            live,
        );
        let mut st = self.state.borrow_mut();
        if let Err(e) = done {
            st.forget(ops);
            return Err(e);
        }
        let State { ledger, stage } = &mut *st;
        let mut first = Ok(());
        let mut at = 0;
        for &(id, len) in ops {
            let Some((phase, buf)) = ledger.take(id) else {
                continue;
            };
            match (phase, &buf, out.as_deref_mut()) {
                (Phase::Done, Some(b), Some(out)) if len > 0 => {
                    let end = (at + len).min(out.len());
                    stage.drain(b, &mut out[at..end]);
                }
                (Phase::Failed(s), _, _) if first.is_ok() => {
                    first = Err(failed_completion("RDMA operation", s));
                }
                _ => {}
            }
            at += len;
            if let Some(b) = buf {
                stage.give(b);
            }
        }
        first
    }

    /// The ready queue pair of `peer`, or why there is none.
    fn with_qp<R>(&self, peer: u32, f: impl FnOnce(&Qp) -> R) -> Result<R, VerbsError> {
        let links = self.links.borrow();
        match links.get(peer as usize) {
            Some(Some(Link::Ready(qp))) => Ok(f(qp)),
            _ => Err(VerbsError::new(
                format!("no connection to peer {peer}"),
                libc::ENOTCONN,
            )),
        }
    }

    /// Post `work` to `at` of `peer`, once its queue pair and the completion queue have room
    /// and a staging buffer is free; `kept`: the caller takes the outcome; `signal`: ask for a
    /// completion. The work request id.
    fn start(
        &self,
        peer: u32,
        work: Work<'_>,
        at: Remote,
        kept: bool,
        signal: bool,
        live: &dyn Fn() -> Waiting,
    ) -> Result<u64, VerbsError> {
        let depth = self.with_qp(peer, |qp| qp.depth)?;
        let broken = |st: &State| st.ledger.broken(peer);
        if let Some(s) = broken(&self.state.borrow()) {
            return Err(failed_completion(
                format!("an earlier RDMA operation to peer {peer}"),
                s,
            ));
        }
        let room = |st: &State| {
            broken(st).is_some()
                || (st.ledger.queued(peer) + 1 < depth as usize
                    && st.ledger.outstanding() < self.cq.size as usize / 2)
        };
        if !room(&self.state.borrow()) {
            self.wait("waiting for room in the send queue", room, live)?;
            if let Some(s) = broken(&self.state.borrow()) {
                return Err(failed_completion(
                    format!("an RDMA operation to peer {peer}"),
                    s,
                ));
            }
        }
        let len = match work {
            Work::Write(src, _) => src.len(),
            Work::Read(len) => len,
            Work::Atomic(_) => 8,
        };
        let inline = matches!(work, Work::Write(..)) && len <= self.inline.get() as usize;
        let buf = match inline {
            true => None,
            false => Some(self.state.borrow_mut().stage.take(len)?),
        };
        let mut st = self.state.borrow_mut();
        let State { ledger, stage } = &mut *st;
        // The scatter-gather entry first, whole: the request points to it.
        let mut sge = match (&buf, &work) {
            (Some(b), work) => {
                if let Work::Write(src, _) = work {
                    stage.fill(b, src);
                }
                staged(stage.at(b), len)
            }
            (None, work) => sys::ibv_sge {
                addr: match work {
                    Work::Write(src, _) => src.as_ptr() as u64,
                    _ => 0,
                },
                length: len as u32,
                lkey: 0,
            },
        };
        let mut wr = sys::ibv_send_wr {
            sg_list: &mut sge,
            // A zero-length write (a flush's marker) carries no data at all.
            num_sge: (len > 0).into(),
            ..Default::default()
        };
        match work {
            Work::Write(..) | Work::Read(_) => {
                wr.opcode = match work {
                    Work::Read(_) => sys::IBV_WR_RDMA_READ,
                    Work::Write(_, Some(imm)) => {
                        wr.__bindgen_anon_1.imm_data = imm.to_be();
                        sys::IBV_WR_RDMA_WRITE_WITH_IMM
                    }
                    _ => sys::IBV_WR_RDMA_WRITE,
                };
                if buf.is_none() {
                    wr.send_flags = sys::IBV_SEND_INLINE;
                }
                wr.wr.rdma = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
                    remote_addr: at.addr,
                    rkey: at.rkey,
                };
            }
            Work::Atomic(op) => {
                let (opcode, compare_add, swap) = match op {
                    Atomic::FetchAdd(add) => (sys::IBV_WR_ATOMIC_FETCH_AND_ADD, add, 0),
                    Atomic::CompareSwap { compare, swap } => {
                        (sys::IBV_WR_ATOMIC_CMP_AND_SWP, compare, swap)
                    }
                };
                wr.opcode = opcode;
                wr.wr.atomic = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
                    remote_addr: at.addr,
                    compare_add,
                    swap,
                    rkey: at.rkey,
                };
            }
        }
        let (id, signaled) = ledger.begin(peer, depth, buf, kept, signal);
        wr.wr_id = id;
        if signaled {
            wr.send_flags |= sys::IBV_SEND_SIGNALED;
        }
        let posted = self.with_qp(peer, |qp| qp.post(&mut wr)).and_then(|r| r);
        if let Err(e) = posted {
            if let Some(b) = ledger.undo(id) {
                stage.give(b);
            }
            return Err(e);
        }
        Ok(id)
    }

    /// Poll the completion queue until it is empty, retiring what completed; how many.
    fn drain(&self) -> Result<usize, VerbsError> {
        let mut room = [MaybeUninit::<sys::ibv_wc>::uninit(); BATCH];
        let mut retired = 0;
        loop {
            let wcs = self.cq.poll(&mut room)?;
            let n = wcs.len();
            retired += n;
            if n == 0 {
                return Ok(retired);
            }
            let mut st = self.state.borrow_mut();
            let State { ledger, stage } = &mut *st;
            let mut received = false;
            for wc in wcs {
                let status = (wc.status != sys::IBV_WC_SUCCESS).then_some(wc.status);
                if wc.wr_id & RECEIVE != 0 {
                    received = true;
                } else {
                    ledger.complete(wc.wr_id, status, |b| stage.give(b));
                }
            }
            drop(st);
            if received {
                wcs.iter()
                    .filter(|wc| wc.wr_id & RECEIVE != 0)
                    .try_for_each(|wc| self.received(wc))?;
            }
            if n < BATCH {
                return Ok(retired);
            }
        }
    }

    /// A receive completed: a peer's write with immediate data is in memory here; hand its
    /// data over and post the receive again. One that a queue pair which broke had taken comes
    /// back flushed: only posted again.
    fn received(&self, wc: &sys::ibv_wc) -> Result<(), VerbsError> {
        if wc.status == sys::IBV_WC_SUCCESS && wc.opcode == sys::IBV_WC_RECV_RDMA_WITH_IMM {
            // SAFETY: a completion of RECV_RDMA_WITH_IMM holds the immediate data in the union.
            let imm = u32::from_be(unsafe { wc.__bindgen_anon_1.imm_data });
            if let (false, Some(handle)) = (imm == WAKE, self.remote.borrow().as_ref()) {
                handle(imm);
            }
        }
        self.srq
            .as_ref()
            .map_or(Ok(()), |srq| srq.post_receive(RECEIVE))
    }

    /// Poll until `done` holds; every [`CHECK_EVERY`], look at the device's async events and
    /// ask `live` whether to go on.
    fn wait(
        &self,
        what: &str,
        done: impl Fn(&State) -> bool,
        live: &dyn Fn() -> Waiting,
    ) -> Result<(), VerbsError> {
        let mut rounds = 0u32;
        let mut checked: Option<Instant> = None;
        loop {
            self.drain()?;
            if done(&self.state.borrow()) {
                return Ok(());
            }
            rounds = rounds.wrapping_add(1);
            if rounds.is_multiple_of(64) {
                let now = Instant::now();
                let since = checked.get_or_insert(now);
                if now.duration_since(*since) >= CHECK_EVERY {
                    *since = now;
                    if self.reads_events {
                        self.events();
                    }
                    if live() == Waiting::GiveUp {
                        return Err(VerbsError::gone(what));
                    }
                }
            }
            if rounds < SPIN_ROUNDS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Read the device's pending async events: a queue pair the device reports broken fails
    /// its outstanding work.
    ///
    /// This is the only reader of the context's async events, and it acknowledges each one
    /// before it returns. That is what keeps `ibv_destroy_qp` and `ibv_destroy_srq` from
    /// waiting: they wait until every event of their object that was read has been
    /// acknowledged (the kernel counts an event as reported when it is read, and drops the
    /// unread ones of an object it destroys). Events such as IBV_EVENT_QP_LAST_WQE_REACHED,
    /// which HCAs raise when a queue pair attached to a shared receive queue enters ERR, are
    /// acknowledged and otherwise ignored.
    fn events(&self) {
        let lib = self.ctx.lib;
        loop {
            let mut ev = sys::ibv_async_event::default();
            // SAFETY: `ctx.raw` is an open context whose async descriptor is non-blocking; `ev`
            // is a valid out pointer, acknowledged below.
            if unsafe { (lib.get_async_event)(self.ctx.raw, &mut ev) } != 0 {
                return;
            }
            let broken_qp = match ev.event_type {
                sys::IBV_EVENT_QP_FATAL
                | sys::IBV_EVENT_QP_REQ_ERR
                | sys::IBV_EVENT_QP_ACCESS_ERR => {
                    // SAFETY: for queue pair events the element is the queue pair.
                    Some(unsafe { ev.element.qp })
                }
                _ => None,
            };
            if let Some(qp) = broken_qp {
                let peer = self
                    .links
                    .borrow()
                    .iter()
                    .position(|l| l.as_ref().is_some_and(|l| l.qp().raw == qp));
                if let Some(peer) = peer {
                    let status = match ev.event_type {
                        sys::IBV_EVENT_QP_ACCESS_ERR => sys::IBV_WC_REM_ACCESS_ERR,
                        _ => sys::IBV_WC_FATAL_ERR,
                    };
                    let mut st = self.state.borrow_mut();
                    let State { ledger, stage } = &mut *st;
                    ledger.break_queue(peer as u32, status, |b| stage.give(b));
                }
            }
            // SAFETY: `ev` came from ibv_get_async_event and is acknowledged once.
            unsafe { (lib.ack_async_event)(&mut ev) };
        }
    }
}

/// The scatter-gather entry of `len` bytes of a staging buffer at `addr` with `lkey`.
fn staged((addr, lkey): (usize, u32), len: usize) -> sys::ibv_sge {
    sys::ibv_sge {
        addr: addr as u64,
        length: len as u32,
        lkey,
    }
}
