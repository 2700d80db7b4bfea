//! The fabric transport: targets reached through libfabric (RDMA on verbs, tcp;ofi_rxm, shm).
//!
//! Windows of a thread share one endpoint per configuration (`resources.rs`). Each rank
//! registers its control block and window memory with the NIC at window creation and publishes
//! the keys with its endpoint address (`key.rs`); puts are `fi_writemsg` (injected when small),
//! gets `fi_read`, atomics `fi_fetch_atomic` / `fi_compare_atomic`, an accumulate of many
//! elements one `fi_fetch_atomic` with a count (split at the provider's limit). Accumulates the
//! NIC cannot run, for their type or an element not aligned in memory, take the target's
//! accumulate lock, once per call (`transport::locked_accumulate`). Every operation carries
//! `FI_DELIVERY_COMPLETE` and completion is tracked per target and per operation
//! (`onesided_fabric`'s endpoint), so a flush of one target waits for that target's operations,
//! complete there, visible to its loads and to other origins; a get or an atomic waits for its
//! own completion only. The request forms move data through buffers the endpoint owns until the
//! operations complete. The endpoint's progress thread serves the target side of providers that
//! need the target to call into libfabric, so a target that computes or sleeps does not stall its
//! origins. Memory attached to a dynamic window is registered when it is attached and
//! closed when it is detached; origins learn its key from the owner's attach table.

mod atomics;
mod key;
mod lanes;
mod names;
pub(crate) mod prereg;
pub(crate) mod presets;
mod resources;
mod served;
mod server;
mod span;
pub(crate) mod start;
mod waits;

use super::{
    Accumulate, AccumulateMany, Amo, Attach, Caps, Kind, Lanes, NativeOps, NotifiedWindow, Opened,
    Part, Path, Pending, Reach, Space, Transport, foreign, locked_accumulate,
    locked_accumulate_many, notice_data, signal_and_wait, under_acc_lock, unserved,
};
use crate::config::{FabricConfig, Threads};
use crate::error::{Error, ErrorClass, Result};
use crate::peers::Peers;
use crate::protocol::layout;
use crate::world::Comm;
use key::FabricKey;
use names::fi_err;
use onesided_fabric as fi;
use onesided_shm::Mem;
pub(crate) use resources::release;
use resources::{Resources, resources};
use span::Span;
use std::cell::{Cell, OnceCell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;
use waits::waiting;

/// Calls of `progress` between two looks at whether a peer is stopped (a look reads the clock).
const STOPPED_EVERY: u32 = 64;
/// Of the polls of requests awaited as futures that find them in flight, taking turns, one in
/// this many progresses the endpoint (the others look at their operations only): a future
/// joining 64 `rget`s polls them all each round.
const PROGRESS_EVERY: u32 = 8;

/// The target and fabric ticket of a request in flight; `None` for one complete already.
fn ticket(pending: &Pending) -> Result<Option<(usize, &fi::Ticket)>> {
    match pending {
        Pending::Done => Ok(None),
        Pending::Started(target, t) => match t.downcast_ref::<fi::Ticket>() {
            Some(t) => Ok(Some((*target, t))),
            None => Err(foreign("the fabric")),
        },
    }
}

#[derive(Debug)]
struct Target {
    peer: fi::Peer,
    ctrl: Span,
    data: Span,
    /// [`FabricKey::lead`].
    lead: u64,
    /// [`FabricKey::notify`].
    notify: u32,
    /// The address it was inserted at, and its process where it runs on this node (for lanes).
    name: Vec<u8>,
    pid: Option<u32>,
}

/// This rank's endpoint and registrations, before the keys are exchanged.
struct Local<'a> {
    res: Rc<Resources>,
    ctrl: fi::Region<'static>,
    data: Option<fi::Region<'a>>,
    key: FabricKey,
    /// The window's registration for notifications that come with their writes.
    notified: Option<NotifiedWindow>,
    /// The threads of a shared window have lanes (`ONESIDED_FABRIC_THREADS`).
    lanes: bool,
}

fn open_local<'a>(config: &FabricConfig, ctrl: Mem<'static>, data: Mem<'a>) -> Result<Local<'a>> {
    let res = resources(config)?;
    let ep = &res.ep;
    let ctrl = ep.register(ctrl).map_err(fi_err)?;
    let (len, lead) = (data.len(), data.addr() as u64 % 8);
    let ahead = prereg::find(&res, data.addr(), len).filter(|_| len > 0);
    let data = if len == 0 || ahead.is_some() {
        None
    } else {
        Some(ep.register(data).map_err(fi_err)?)
    };
    if ahead.is_some() {
        tracing::debug!(len, "window memory registered ahead by alloc_mem");
    }
    let key = FabricKey {
        name: ep.name().map_err(fi_err)?,
        near: ep.near_name().map_err(fi_err)?.unwrap_or_default(),
        ctrl: ctrl.key().map_err(fi_err)?,
        data: match (ahead, &data) {
            (Some(k), _) => k,
            (None, Some(r)) => r.key().map_err(fi_err)?,
            (None, None) => fi::RegionKey::default(),
        },
        len,
        lead,
        native: res.native.bits(),
        served: res.served,
        notify: 0,
    };
    let notified = res.notices.as_ref().and_then(|n| n.register());
    let key = FabricKey {
        notify: notified.as_ref().map_or(0, |w| w.tag),
        ..key
    };
    Ok(Local {
        res,
        ctrl,
        data,
        key,
        notified,
        lanes: config.threads == Threads::Endpoints,
    })
}

/// The fabric transport of one window.
pub struct FabricTransport<'a> {
    caps: Caps,
    targets: Vec<Target>,
    /// The ranks' liveness: a wait on the NIC ends with an error once the job has a failure
    /// or the process of a rank it waits for is gone.
    peers: Peers,
    /// Calls of `progress` so far, and whether a peer was stopped when it last looked.
    progress_calls: Cell<u32>,
    /// The request a future polled last (its ticket's address), and how many such polls there
    /// were (`Transport::watch`).
    future_polls: Cell<(usize, u32)>,
    stopped: Cell<bool>,
    /// This rank in the world, as the targets of its calls know it (`served.rs`).
    world_rank: u32,
    /// The world rank of each rank of the window.
    world: Vec<u32>,
    _ctrl: fi::Region<'static>,
    _data: Option<fi::Region<'a>>,
    /// Memory attached to the dynamic window, registered.
    attached: RefCell<Vec<fi::Region<'a>>>,
    /// The notifications that arrived with their writes (`transport/notices.rs`).
    notified: Option<NotifiedWindow>,
    /// The threads of a shared window have lanes (`ONESIDED_FABRIC_THREADS`).
    lanes: bool,
    /// The lanes kept between times of sharing, from the first (closed before the endpoint
    /// below).
    kept: OnceCell<Arc<lanes::Kept>>,
    /// This thread's endpoint, shared with its other windows (after the regions: they are
    /// closed first).
    res: Rc<Resources>,
}

impl std::fmt::Debug for FabricTransport<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FabricTransport")
            .field("caps", &self.caps)
            .field("targets", &self.targets.len())
            .finish()
    }
}

/// The fabric opened on this rank for one window (its endpoint, its registrations), waiting
/// for every rank's key.
pub(crate) struct OpenedFabric<'a> {
    local: Local<'a>,
    /// The world rank of each rank of the window, and this rank's index.
    world: Vec<u32>,
    me: usize,
    peers: Peers,
    /// What [`Opened::connect`] made of the keys.
    connected: Option<Connected>,
}

/// The targets as the keys describe them.
struct Connected {
    targets: Vec<Target>,
    native: NativeOps,
}

/// Open the fabric for a window of `comm`: this thread's endpoint, with this rank's control
/// block `ctrl` and window memory `data` registered. `peers` watches the ranks.
pub(crate) fn open<'a>(
    comm: &Comm,
    config: &FabricConfig,
    ctrl: Mem<'static>,
    data: Mem<'a>,
    peers: Peers,
) -> Result<OpenedFabric<'a>> {
    let world = comm.world_ranks();
    Ok(OpenedFabric {
        local: open_local(config, ctrl, data)?,
        world,
        me: comm.rank(),
        peers,
        connected: None,
    })
}

impl<'a> Opened<'a> for OpenedFabric<'a> {
    fn key(&self) -> Vec<u8> {
        self.local.key.encode()
    }

    fn fresh(&self) -> bool {
        let warmed = self.local.res.warmed.borrow();
        self.world.iter().any(|w| !warmed.contains(w))
    }

    /// Insert every rank's endpoint address as a peer (a rank of this node at its near
    /// address, where it has one) and map the keys of its memory.
    fn connect(&mut self, keys: &[Vec<u8>]) -> Result<()> {
        let keys = keys
            .iter()
            .map(|k| FabricKey::decode(k))
            .collect::<Result<Vec<FabricKey>>>()?;
        let res = &self.local.res;
        if keys.iter().any(|k| k.served != res.served) {
            return Err(Error::new(
                ErrorClass::Other,
                "some ranks serve accumulates at the target and some do not \
                 (ONESIDED_FABRIC_ATOMICS, or providers that differ between nodes)",
            ));
        }
        let ep = &res.ep;
        let mut native = NativeOps::ALL;
        let targets = keys
            .iter()
            .enumerate()
            .map(|(r, k)| {
                native = native.and(NativeOps::from_bits(k.native));
                let remote = |r: &fi::RegionKey, len| -> Result<Span> {
                    let key = if r.key.is_empty() {
                        0
                    } else {
                        ep.map_key(r).map_err(fi_err)?
                    };
                    Ok(Span {
                        base: r.base,
                        key,
                        len,
                    })
                };
                let pid = self.peers.process_of(r);
                let name = match pid.is_some() && !k.near.is_empty() {
                    true => &k.near,
                    false => &k.name,
                };
                let peer = ep.insert(name).map_err(fi_err)?;
                ep.know_rank(self.world[r], peer);
                match pid {
                    Some(pid) => ep.set_pid(peer, pid),
                    None if r != self.me => ep.set_far(),
                    None => {}
                }
                Ok(Target {
                    peer,
                    ctrl: remote(&k.ctrl, layout::ctrl_block(keys.len()))?,
                    data: remote(&k.data, k.len)?,
                    lead: k.lead,
                    notify: k.notify,
                    name: name.clone(),
                    pid,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        self.connected = Some(Connected { targets, native });
        Ok(())
    }

    fn into_transport(self: Box<Self>) -> Box<dyn Attach<'a> + 'a> {
        let OpenedFabric {
            local,
            world,
            me,
            peers,
            connected,
        } = *self;
        let Connected { targets, native } = connected.unwrap_or(Connected {
            targets: Vec::new(),
            native: NativeOps::NONE,
        });
        let ep = &local.res.ep;
        Box::new(FabricTransport {
            caps: Caps {
                name: "fabric",
                reach: Reach::Any,
                load_store: false,
                needs_target_progress: true,
                wakes_sleepers: false,
                wakes_by_completion: false,
                atomics_order_prior: false,
                inject: ep.inject_size(),
                max_msg: ep.max_msg_size(),
                local_mr: ep.local_mr(),
                native_atomics: native,
                cpu_atomics: false,
            },
            targets,
            peers,
            progress_calls: Cell::new(0),
            future_polls: Cell::new((0, 0)),
            stopped: Cell::new(false),
            world_rank: world[me],
            world,
            res: local.res,
            _ctrl: local.ctrl,
            _data: local.data,
            attached: RefCell::new(Vec::new()),
            notified: local.notified,
            lanes: local.lanes,
            kept: OnceCell::new(),
        })
    }
}

impl<'a> FabricTransport<'a> {
    /// `target`, or MPI_ERR_RANK.
    #[inline]
    fn target(&self, target: usize) -> Result<&Target> {
        self.targets
            .get(target)
            .ok_or_else(|| unserved("the fabric", target))
    }

    /// Where `len` bytes at `offset` of `target`'s `space` are, or RMA_RANGE.
    #[inline]
    fn at(&self, target: usize, space: Space, offset: usize, len: usize) -> Result<fi::Remote> {
        let t = self.target(target)?;
        let r = match space {
            Space::Data => t.data,
            Space::Control => t.ctrl,
            Space::Attached(e) => Span {
                base: e.base,
                key: e.key,
                len: usize::try_from(e.len).unwrap_or(usize::MAX),
            },
        };
        r.remote(t.peer, target, offset, len)
    }

    /// How a wait on `target` should go on ([`waiting`]).
    fn alive(&self, target: usize) -> fi::Waiting {
        waiting(&self.peers, target)
    }

    /// How a wait on operations to every rank of `targets` should go on: give up when one is
    /// gone, sleep between polls when one is stopped.
    fn alive_all(&self, targets: &[usize]) -> fi::Waiting {
        let mut worst = fi::Waiting::Poll;
        for &t in targets {
            match self.alive(t) {
                fi::Waiting::GiveUp => return fi::Waiting::GiveUp,
                fi::Waiting::Idle => worst = fi::Waiting::Idle,
                fi::Waiting::Poll => {}
            }
        }
        worst
    }

    /// The distinct targets of a batch.
    fn targets_of<B>(parts: &[Part<B>]) -> Vec<usize> {
        let mut targets: Vec<usize> = parts.iter().map(|p| p.target).collect();
        targets.sort_unstable();
        targets.dedup();
        targets
    }
}

impl Transport for FabricTransport<'_> {
    fn caps(&self) -> &Caps {
        &self.caps
    }

    fn put(&self, target: usize, space: Space, offset: usize, src: &[u8]) -> Result<()> {
        let to = self.at(target, space, offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.res
            .ep
            .write(src, to, &|| self.alive(target))
            .map_err(fi_err)
    }

    fn get(&self, target: usize, space: Space, offset: usize, dst: &mut [u8]) -> Result<()> {
        let from = self.at(target, space, offset, dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        self.res
            .ep
            .read(dst, from, &|| self.alive(target))
            .map_err(fi_err)
    }

    fn amo(&self, target: usize, space: Space, offset: usize, op: Amo) -> Result<u64> {
        let to = self.at(target, space, offset, 8)?;
        let mut old = [0u8; 8];
        let live = || self.alive(target);
        let t = fi::Datatype::U64;
        match op {
            Amo::FetchAdd(v) => {
                let v = v.to_le_bytes();
                self.res
                    .ep
                    .fetch_atomic(t, fi::AtomicOp::Sum, &v, &mut old, to, &live)
            }
            Amo::Load => {
                self.res
                    .ep
                    .fetch_atomic(t, fi::AtomicOp::Read, &[0; 8], &mut old, to, &live)
            }
            Amo::CompareSwap { compare, swap } => {
                let (c, s) = (compare.to_le_bytes(), swap.to_le_bytes());
                self.res.ep.compare_swap(t, &c, &s, &mut old, to, &live)
            }
        }
        .map_err(fi_err)?;
        Ok(u64::from_le_bytes(old))
    }

    /// On the NIC, under the target's accumulate lock, or both (see `FabricTransport::path`).
    fn accumulate(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: Accumulate,
    ) -> Result<u64> {
        if self.res.served {
            return self.served_one(target, space, offset, acc);
        }
        let watch = || self.peers.all_alive();
        match self.path(target, space, offset, acc.elem, acc.op.kind(), acc.same_op)? {
            Path::Native => self.native(target, space, offset, acc),
            Path::Locked => locked_accumulate(self, &watch, target, space, offset, acc),
            Path::ReadLocked => under_acc_lock(self, &watch, target, || {
                self.native(target, space, offset, acc)
            }),
        }
    }

    /// The request form, completed at once: on the NIC with element counts, or under the
    /// target's accumulate lock taken once (see `FabricTransport::start_accumulate`).
    fn accumulate_many(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: AccumulateMany<'_>,
        mut fetched: Option<&mut [u8]>,
    ) -> Result<()> {
        let p = self.start_accumulate(target, space, offset, acc, fetched.as_deref_mut())?;
        self.finish(p, fetched)
    }

    /// A non-fetching atomic add, left in flight (the endpoint keeps its operand until it
    /// settles, and `flush(target)` waits for it), where the provider allows the form.
    fn signal(&self, target: usize, offset: usize, add: u64) -> Result<()> {
        let ep = &self.res.ep;
        if !ep.plain_atomics() {
            return signal_and_wait(self, target, offset, add);
        }
        let to = self.at(target, Space::Control, offset, 8)?;
        let live = || self.alive(target);
        let (t, op) = (fi::Datatype::U64, fi::AtomicOp::Sum);
        ep.start_atomic_many(t, op, &add.to_le_bytes(), false, to, &live)
            .map(drop)
            .map_err(fi_err)
    }

    /// One write that carries its notification, where the target's endpoint takes them and
    /// the bytes fit one operation.
    fn put_notify(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        src: &[u8],
        id: usize,
    ) -> Result<bool> {
        let tag = self.target(target)?.notify;
        let ep = &self.res.ep;
        if tag == 0 || src.is_empty() || src.len() > ep.max_msg_size() {
            return Ok(false);
        }
        let to = self.at(target, space, offset, src.len())?;
        let data = notice_data(tag, id);
        ep.write_notify(src, to, data, &|| self.alive(target))
            .map_err(fi_err)?;
        Ok(true)
    }

    fn notified(&self, id: usize) -> u64 {
        self.notified.as_ref().map_or(0, |w| w.counts.of(id))
    }

    fn carries_notifications(&self) -> bool {
        self.notified.is_some()
    }

    fn flush(&self, target: usize) -> Result<()> {
        let peer = self.target(target)?.peer;
        self.res
            .ep
            .flush(peer, &|| self.alive(target))
            .map_err(fi_err)
    }

    fn flush_all(&self) -> Result<()> {
        (0..self.targets.len()).try_for_each(|t| self.flush(t))
    }

    /// Every call returns with its origin buffer free to reuse.
    fn flush_local(&self, _target: usize) -> Result<()> {
        Ok(())
    }

    fn flush_local_all(&self) -> Result<()> {
        Ok(())
    }

    fn start_put(&self, target: usize, space: Space, offset: usize, src: &[u8]) -> Result<Pending> {
        let to = self.at(target, space, offset, src.len())?;
        if src.is_empty() {
            return Ok(Pending::Done);
        }
        let t = self.res.ep.start_write(src, to, &|| self.alive(target));
        Ok(Pending::Started(target, Box::new(t.map_err(fi_err)?)))
    }

    fn start_get(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<Pending> {
        let from = self.at(target, space, offset, dst.len())?;
        if dst.is_empty() {
            return Ok(Pending::Done);
        }
        let t = self
            .res
            .ep
            .start_read(dst.len(), from, &|| self.alive(target));
        Ok(Pending::Started(target, Box::new(t.map_err(fi_err)?)))
    }

    /// Every put posted before the first is waited for, zero-copy (`Endpoint::write_all`).
    fn put_many(&self, parts: &[Part<&[u8]>]) -> Result<()> {
        let mut posts = Vec::with_capacity(parts.len());
        for p in parts.iter().filter(|p| !p.bytes.is_empty()) {
            posts.push((
                p.bytes,
                self.at(p.target, p.space, p.offset, p.bytes.len())?,
            ));
        }
        let targets = Self::targets_of(parts);
        let live = || self.alive_all(&targets);
        self.res.ep.write_all(&posts, &live).map_err(fi_err)
    }

    /// Every get posted before the first is waited for, zero-copy (`Endpoint::read_all`).
    fn get_many(&self, parts: &mut [Part<&mut [u8]>]) -> Result<()> {
        let targets = Self::targets_of(parts);
        let mut posts = Vec::with_capacity(parts.len());
        for p in parts.iter_mut().filter(|p| !p.bytes.is_empty()) {
            let from = self.at(p.target, p.space, p.offset, p.bytes.len())?;
            posts.push((&mut *p.bytes, from));
        }
        let live = || self.alive_all(&targets);
        self.res.ep.read_all(&mut posts, &live).map_err(fi_err)
    }

    /// Scatter-gather: as few writes as the provider's `rma_iov_limit` allows (several target
    /// ranges each), from a copy the endpoint owns, left in flight until the next flush of
    /// `target` (which also reports their failure).
    fn put_runs(&self, target: usize, space: Space, pieces: &[(usize, &[u8])]) -> Result<()> {
        if let [(offset, src)] = pieces {
            return self.put(target, space, *offset, src);
        }
        for &(offset, src) in pieces {
            self.at(target, space, offset, src.len())?;
        }
        let pieces: Vec<(usize, &[u8])> = pieces
            .iter()
            .filter(|(_, src)| !src.is_empty())
            .copied()
            .collect();
        let to = self.at(target, space, 0, 0)?;
        let ep = &self.res.ep;
        ep.start_write_runs(&pieces, to, &|| self.alive(target))
            .map(drop)
            .map_err(fi_err)
    }

    /// Scatter-gather as in `put_runs`: the ranges read into one buffer, then copied out.
    fn get_runs(&self, target: usize, space: Space, runs: &mut [(usize, &mut [u8])]) -> Result<()> {
        if let [(offset, dst)] = runs {
            return self.get(target, space, *offset, dst);
        }
        for (offset, dst) in runs.iter() {
            self.at(target, space, *offset, dst.len())?;
        }
        let ranges: Vec<(usize, usize)> = runs
            .iter()
            .filter(|(_, dst)| !dst.is_empty())
            .map(|(offset, dst)| (*offset, dst.len()))
            .collect();
        let (from, live) = (self.at(target, space, 0, 0)?, || self.alive(target));
        let ep = &self.res.ep;
        let t = ep.start_read_runs(&ranges, from, &live).map_err(fi_err)?;
        let mut packed = vec![0u8; ranges.iter().map(|&(_, n)| n).sum()];
        ep.finish(t, Some(&mut packed), &live).map_err(fi_err)?;
        let mut at = 0;
        for (_, dst) in runs.iter_mut() {
            dst.copy_from_slice(&packed[at..at + dst.len()]);
            at += dst.len();
        }
        Ok(())
    }

    /// On the NIC with element counts, all in flight; under the target's accumulate lock where
    /// the NIC cannot or may not (see `FabricTransport::path`), complete when it returns.
    fn start_accumulate(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: AccumulateMany<'_>,
        fetched: Option<&mut [u8]>,
    ) -> Result<Pending> {
        acc.check(fetched.as_deref())?;
        if self.res.served {
            self.served_many(target, space, offset, acc, fetched)?;
            return Ok(Pending::Done);
        }
        let watch = || self.peers.all_alive();
        let kind = Kind::Apply(acc.op);
        match self.path(target, space, offset, acc.elem, kind, acc.same_op)? {
            Path::Native => self.start_native(target, space, offset, acc, fetched.is_some()),
            Path::Locked => {
                locked_accumulate_many(self, &watch, target, space, offset, acc, fetched)?;
                Ok(Pending::Done)
            }
            Path::ReadLocked => {
                under_acc_lock(self, &watch, target, || {
                    let p = self.start_native(target, space, offset, acc, true)?;
                    self.finish(p, fetched)
                })?;
                Ok(Pending::Done)
            }
        }
    }

    /// Complete, or never to complete because the target is gone (`finish` then reports the
    /// failure instead of a caller polling forever).
    fn test(&self, pending: &Pending) -> Result<bool> {
        let Some((target, t)) = ticket(pending)? else {
            return Ok(true);
        };
        let live = || self.alive(target);
        Ok(self.res.ep.test(t, &live) || live() == fi::Waiting::GiveUp)
    }

    /// Once `to_sleep`, progress is the endpoint's progress thread's, which wakes `waker` when
    /// operations settle: the owner's thread may sleep in its executor meanwhile.
    fn watch(&self, pending: &Pending, waker: &Waker, to_sleep: bool) -> Result<bool> {
        let Some((target, t)) = ticket(pending)? else {
            return Ok(true);
        };
        let live = || self.alive(target);
        let ep = &self.res.ep;
        if to_sleep {
            return Ok(ep.watch(t, waker, &live) || live() == fi::Waiting::GiveUp);
        }
        // Each progress is a call into the provider (over tcp a poll(2) of its sockets): a
        // request polled again and again progresses every time; of the polls of requests a
        // future joins, every PROGRESS_EVERY-th progresses, the others look.
        let (last, polls) = self.future_polls.get();
        let this = std::ptr::from_ref(t) as usize;
        self.future_polls.set((this, polls.wrapping_add(1)));
        let done = match last == this || polls.is_multiple_of(PROGRESS_EVERY) {
            true => ep.test(t, &live),
            false => ep.looked_settled(t, &live),
        };
        if !done {
            waker.wake_by_ref();
        }
        Ok(done || live() == fi::Waiting::GiveUp)
    }

    fn finish(&self, pending: Pending, out: Option<&mut [u8]>) -> Result<()> {
        match pending {
            Pending::Done => Ok(()),
            Pending::Started(target, t) => {
                let t = t
                    .downcast::<fi::Ticket>()
                    .map_err(|_| foreign("the fabric"))?;
                self.res
                    .ep
                    .finish(*t, out, &|| self.alive(target))
                    .map_err(fi_err)
            }
        }
    }

    fn progress(&self) -> Result<()> {
        let calls = self.progress_calls.get().wrapping_add(1);
        self.progress_calls.set(calls);
        if calls.is_multiple_of(STOPPED_EVERY) {
            self.stopped.set(self.peers.any_stopped());
        }
        if self.stopped.get() {
            self.res.ep.idle();
        } else {
            self.res.ep.progress();
        }
        Ok(())
    }
}

impl<'a> Attach<'a> for FabricTransport<'a> {
    /// Register `mem` with the NIC (nothing for empty memory, which no operation reaches).
    fn attach(&self, mem: Mem<'a>) -> Result<(u64, u64)> {
        if mem.is_empty() {
            return Ok((0, 0));
        }
        let region = self.res.ep.register(mem).map_err(fi_err)?;
        let key = region.key().map_err(fi_err)?;
        if key.raw {
            return Err(Error::new(
                ErrorClass::RmaAttach,
                "the provider's remote keys are raw (FI_MR_RAW), which the attach table of a \
                 dynamic window does not hold",
            ));
        }
        let mapped = self.res.ep.map_key(&key).map_err(fi_err)?;
        self.attached.borrow_mut().push(region);
        Ok((key.base, mapped))
    }

    fn detach(&self, addr: u64) {
        let mut attached = self.attached.borrow_mut();
        if let Some(i) = attached.iter().position(|r| r.mem().addr() as u64 == addr) {
            attached.swap_remove(i);
        }
    }

    /// Lanes on this window's domain to the `wired` targets' window memory (keys are mapped
    /// once per domain, so every endpoint of it uses the window's).
    fn lanes(&self, wired: &[bool]) -> Option<Box<dyn Lanes>> {
        if !self.lanes {
            return None;
        }
        let targets = self
            .targets
            .iter()
            .enumerate()
            .map(|(r, t)| {
                wired
                    .get(r)
                    .copied()
                    .unwrap_or(false)
                    .then_some(lanes::LaneTarget {
                        data: t.data,
                        peer: t.peer,
                        lead: t.lead,
                        ctrl: t.ctrl,
                        notify: t.notify,
                    })
            })
            .collect::<Vec<_>>();
        targets.iter().any(Option::is_some).then(|| {
            let ep = &self.res.ep;
            let kept = self.kept.get_or_init(|| {
                let addresses = self.targets.iter().map(|t| (t.name.clone(), t.pid));
                Arc::new(lanes::Kept::new(addresses.collect()))
            });
            Box::new(lanes::FabricLanes::new(
                ep.domain().clone(),
                (targets, Arc::clone(kept)),
                ep.flusher(),
                (self.caps.native_atomics, self.res.served),
                self.peers.clone(),
            )) as Box<dyn Lanes>
        })
    }

    /// Read 8 bytes of the control block of every rank this endpoint has not read from yet:
    /// rxm connects the pair then, answered by the peer's progress (over software RoCE under
    /// load, a first `lock_all` timed out connecting in the middle of an epoch). Then the
    /// provider's sockets, connected now, are kept from the processes the program starts.
    fn warm_up(&self) -> Result<()> {
        let ep = &self.res.ep;
        let mut fresh = false;
        for (r, t) in self.targets.iter().enumerate() {
            if self.res.warmed.borrow().contains(&self.world[r]) {
                continue;
            }
            let at = fi::Remote {
                peer: t.peer,
                addr: t.ctrl.base,
                key: t.ctrl.key,
            };
            let live = || {
                let gone = self.peers.job_alive().is_err() || self.peers.gone(r);
                if gone {
                    fi::Waiting::GiveUp
                } else {
                    fi::Waiting::Poll
                }
            };
            ep.read(&mut [0u8; 8], at, &live).map_err(fi_err)?;
            self.res.warmed.borrow_mut().insert(self.world[r]);
            fresh = true;
        }
        if fresh {
            let marked = ep.keep_sockets_from_children(self.targets.iter().map(|t| &t.name[..]));
            tracing::debug!(marked, "the provider's sockets kept from child processes");
        }
        Ok(())
    }
}
