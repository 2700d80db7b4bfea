//! The direct verbs transport: targets reached through ibverbs reliable-connected queue pairs,
//! with no libfabric (and no rxm layer) in between.
//!
//! Windows of a thread share one endpoint (`resources.rs`): one device port, one completion
//! queue, and one queue pair per peer, created and connected at the first window the two ranks
//! share (each rank prepares a queue pair for every rank it is not connected to yet, the window's
//! key exchange carries their numbers, then each connects its own: no extra round), and kept for
//! later windows. Each rank registers its control block and window memory as memory regions at
//! window creation and publishes their keys with its port address (`key.rs`). Puts are RDMA
//! writes (inline where they fit, else from a staging buffer: the caller's buffer is free when
//! the put returns), gets RDMA reads, lock words and the 64-bit fetch-add, atomic read and
//! compare-and-swap accumulates the NIC's own atomics (where the device has them); every other
//! accumulate runs under the target's accumulate lock (`transport::locked_accumulate`).
//! Completion is tracked per queue pair, so a flush of one target waits for that target's work.
//! No progress thread: the NIC serves this rank's memory while the rank computes or sleeps.
//! A rank waiting for a signal (fence, PSCW, a window's free) sleeps on its completion channel
//! once it has spun and yielded: it sets its sleep notice in every rank's control block first
//! ([`layout::asleep_slot`]), and an origin whose signal finds the notice set follows the
//! signal with a zero-length write with immediate data, whose completion wakes the target. A
//! signal to a target that does not sleep is one operation, as before; a signal that crossed
//! the notice on its way wakes the target at the end of its sleep's slice ([`SLICE`]).
//! Memory attached to a dynamic window is registered when it is attached and deregistered when
//! it is detached; origins learn its key from the owner's attach table. Where a world of the
//! process is MPI_THREAD_MULTIPLE, the endpoint also has lanes, prepared and connected with its
//! queue pairs, through which the threads of a shared window make their calls (`lanes.rs`).
//!
//! # MPI-4.1: 12.3 (communication calls), 12.5.4 (flush), 12.7 (semantics and correctness)

mod key;
mod lanes;
mod names;
mod notices;
mod resources;
mod span;

use super::foreign;
use super::{
    Accumulate, AccumulateMany, Amo, Attach, Caps, Kind, Lanes, NativeOps, NotifiedWindow, Opened,
    Part, Path, Pending, Reach, Space, Transport, gets_in_flight, locked_accumulate,
    locked_accumulate_many, notice_data, outside, path_at, under_acc_lock, unserved,
};
use crate::config::VerbsConfig;
use crate::error::{Error, ErrorClass, Result};
use crate::peers::Peers;
use crate::protocol::layout;
use crate::protocol::reduce::Elem;
use crate::world::Comm;
use key::VerbsKey;
use names::{ib_err, nic_op, waiting};
use onesided_shm::Mem;
use onesided_verbs as ib;
use span::Span;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

#[derive(Debug)]
struct Target {
    /// The peer's world rank: its queue pair on the endpoint.
    peer: u32,
    ctrl: Span,
    data: Span,
    /// [`VerbsKey::notify`].
    notify: u32,
    /// [`VerbsKey::wakes`].
    wakes: bool,
}

/// How long a sleep on the completion channel lasts at most before the sleeper looks at its
/// word again: the delay of a signal whose origin read the sleep notice just before it was
/// set.
const SLICE: std::time::Duration = std::time::Duration::from_millis(1);

/// The direct verbs transport of one window.
pub struct VerbsTransport<'a> {
    caps: Caps,
    targets: Vec<Target>,
    /// This rank's index in the window.
    me: usize,
    peers: Peers,
    /// This rank's control block (its sleep notices are read before a signal).
    ctrl: ib::Region<'static>,
    _data: Option<ib::Region<'a>>,
    attached: RefCell<Vec<ib::Region<'a>>>,
    /// The notifications that arrived with their writes (`transport/notices.rs`).
    notified: Option<NotifiedWindow>,
    /// The endpoint's lanes, for the threads of a shared window (`lanes.rs`).
    lanes: Arc<[ib::Lane]>,
    /// This thread's endpoint (after the regions: they are deregistered first).
    ep: Rc<ib::Endpoint>,
}

impl std::fmt::Debug for VerbsTransport<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsTransport")
            .field("caps", &self.caps)
            .field("targets", &self.targets.len())
            .finish()
    }
}

/// Whether this rank can open the verbs endpoint `config` describes (opening it, for the
/// windows to come).
pub(crate) fn usable(config: &VerbsConfig) -> bool {
    resources::endpoint(config, None).is_ok()
}

/// This rank's endpoint and registrations, and the queue pairs it prepared, before the keys are
/// exchanged.
struct Local<'a> {
    ep: Rc<ib::Endpoint>,
    /// The endpoint's lanes (none unless the world is MPI_THREAD_MULTIPLE).
    lanes: Arc<[ib::Lane]>,
    ctrl: ib::Region<'static>,
    data: Option<ib::Region<'a>>,
    key: VerbsKey,
    /// The window's registration for notifications that come with their writes.
    notified: Option<NotifiedWindow>,
}

fn open_local<'a>(
    world: &[u32],
    config: &VerbsConfig,
    ctrl: Mem<'static>,
    data: Mem<'a>,
) -> Result<Local<'a>> {
    let ranks = world.iter().max().map_or(1, |&r| r as usize + 1);
    let (ep, notices, lanes) = resources::endpoint(config, Some(ranks))?;
    let ctrl = ep.register(ctrl).map_err(ib_err)?;
    let len = data.len();
    let data = match len {
        0 => None,
        _ => Some(ep.register(data).map_err(ib_err)?),
    };
    let mut qpns = Vec::with_capacity(world.len());
    let mut lane_qpns = Vec::with_capacity(world.len());
    for &peer in world {
        let connected = ep.connected(peer);
        qpns.push(match connected {
            true => 0,
            false => ep.prepare(peer).map_err(ib_err)?,
        });
        lane_qpns.push(match connected {
            true => Vec::new(),
            false => (lanes.iter())
                .map(|l| l.lock().prepare(peer).map_err(ib_err))
                .collect::<Result<Vec<u32>>>()?,
        });
    }
    let key = VerbsKey {
        port: ep.address(),
        qpns,
        lanes: lane_qpns,
        ctrl: ctrl.key(),
        data: data.as_ref().map(ib::Region::key).unwrap_or_default(),
        len,
        atomics: ep.has_atomics(),
        notify: 0,
        wakes: false,
    };
    // The endpoint must have receives posted for the immediate data.
    let receives = ep.remote_data_room() > 0;
    let notified = receives.then(|| notices.register()).flatten();
    let key = VerbsKey {
        notify: notified.as_ref().map_or(0, |w| w.tag),
        wakes: receives && ep.sleeps(),
        ..key
    };
    Ok(Local {
        ep,
        lanes,
        ctrl,
        data,
        key,
        notified,
    })
}

/// Direct verbs opened on this rank for one window (its registrations, a queue pair prepared
/// for every rank not connected yet), waiting for every rank's key. Dropped before it is taken,
/// it disconnects the queue pairs it prepared.
pub(crate) struct OpenedVerbs<'a> {
    local: Local<'a>,
    /// The queue pairs prepared for this window, disconnected unless it is taken.
    prepared: Prepared,
    /// The world rank of each rank of the window, and this rank's index.
    world: Vec<u32>,
    me: usize,
    peers: Peers,
    /// The ranks' keys, once connected.
    keys: Vec<VerbsKey>,
}

/// Open direct verbs for a window of `comm`: register this rank's control block `ctrl` and
/// window memory `data`, prepare a queue pair for every rank not connected yet. `peers` watches
/// the ranks.
pub(crate) fn open<'a>(
    comm: &Comm,
    config: &VerbsConfig,
    ctrl: Mem<'static>,
    data: Mem<'a>,
    peers: Peers,
) -> Result<OpenedVerbs<'a>> {
    let world = comm.world_ranks();
    let local = open_local(&world, config, ctrl, data)?;
    let prepared = Prepared {
        ep: local.ep.clone(),
        lanes: local.lanes.clone(),
        peers: (local.key.qpns.iter().zip(&world))
            .filter(|&(&qpn, _)| qpn != 0)
            .map(|(_, &peer)| peer)
            .collect(),
    };
    Ok(OpenedVerbs {
        local,
        prepared,
        world,
        me: comm.rank(),
        peers,
        keys: Vec::new(),
    })
}

/// Queue pairs prepared for peers (the endpoint's and its lanes'), disconnected on drop unless
/// kept.
struct Prepared {
    ep: Rc<ib::Endpoint>,
    lanes: Arc<[ib::Lane]>,
    peers: Vec<u32>,
}

impl Prepared {
    /// The window keeps the queue pairs: nothing is disconnected on drop.
    fn keep(&mut self) {
        self.peers.clear();
    }
}

impl Drop for Prepared {
    fn drop(&mut self) {
        for &peer in &self.peers {
            self.ep.disconnect(peer);
            for lane in self.lanes.iter() {
                lane.lock().disconnect(peer);
            }
        }
    }
}

impl<'a> Opened<'a> for OpenedVerbs<'a> {
    fn key(&self) -> Vec<u8> {
        self.local.key.encode()
    }

    /// Queue pairs need no warming: they are connected by [`Opened::connect`].
    fn fresh(&self) -> bool {
        false
    }

    /// Connect every queue pair prepared to the one its peer prepared for this rank.
    fn connect(&mut self, keys: &[Vec<u8>]) -> Result<()> {
        let keys = keys
            .iter()
            .map(|k| VerbsKey::decode(k))
            .collect::<Result<Vec<VerbsKey>>>()?;
        connect_all(&self.world, self.me, &self.local, &keys)?;
        self.keys = keys;
        Ok(())
    }

    fn into_transport(self: Box<Self>) -> Box<dyn Attach<'a> + 'a> {
        let OpenedVerbs {
            local,
            mut prepared,
            world,
            peers,
            keys,
            me,
        } = *self;
        prepared.keep();
        let atomics = keys.iter().all(|k| k.atomics);
        let targets = keys
            .iter()
            .zip(&world)
            .map(|(k, &peer)| Target {
                peer,
                ctrl: Span::of(k.ctrl, layout::ctrl_block(keys.len())),
                data: Span::of(k.data, k.len),
                notify: k.notify,
                wakes: k.wakes,
            })
            .collect();
        let wakes = local.key.wakes;
        let ep = local.ep;
        let lanes = local.lanes;
        Box::new(VerbsTransport {
            caps: Caps {
                name: "verbs",
                reach: Reach::Any,
                load_store: false,
                needs_target_progress: false,
                wakes_sleepers: false,
                wakes_by_completion: wakes,
                atomics_order_prior: false,
                inject: ep.max_inline(),
                max_msg: usize::MAX,
                local_mr: true,
                native_atomics: match atomics {
                    true => NativeOps::verbs(),
                    false => NativeOps::NONE,
                },
                cpu_atomics: false,
            },
            targets,
            peers,
            me,
            ctrl: local.ctrl,
            _data: local.data,
            attached: RefCell::new(Vec::new()),
            notified: local.notified,
            lanes,
            ep,
        })
    }
}

impl<'a> VerbsTransport<'a> {
    /// `target`, or MPI_ERR_RANK.
    #[inline]
    fn target(&self, target: usize) -> Result<&Target> {
        self.targets
            .get(target)
            .ok_or_else(|| unserved("verbs", target))
    }

    /// Where `len` bytes at `offset` of `target`'s `space` are, or RMA_RANGE: the peer and the
    /// remote address.
    #[inline]
    fn at(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        len: usize,
    ) -> Result<(u32, ib::Remote)> {
        let t = self.target(target)?;
        let r = match space {
            Space::Data => t.data,
            Space::Control => t.ctrl,
            Space::Attached(e) => Span {
                addr: e.base,
                rkey: e.key as u32,
                len: usize::try_from(e.len).unwrap_or(usize::MAX),
            },
        };
        match offset.checked_add(len) {
            Some(end) if end <= r.len => Ok((t.peer, r.at(offset))),
            _ => Err(outside(target, offset, len, r.len)),
        }
    }

    /// How a wait on `target` should go on: give up once the job has a failure or the rank's
    /// process is gone.
    fn alive(&self, target: usize) -> ib::Waiting {
        waiting(&self.peers, target)
    }

    /// Wake `target` after a change of the control word at `offset`, where a waiter there may
    /// sleep on it ([`layout::rings_doorbell`]) and the target sleeps on its completion
    /// channel ([`VerbsKey::wakes`]); behind the change on the queue pair, in flight.
    fn wake(&self, target: usize, offset: usize) -> Result<()> {
        let wakes = self.target(target)?.wakes;
        if !wakes || !layout::rings_doorbell(offset) || !self.asleep(target) {
            return Ok(());
        }
        let (peer, probe) = self.at(target, Space::Control, 0, 0)?;
        self.ep
            .wake(peer, probe, &|| self.alive(target))
            .map_err(ib_err)
    }

    /// Whether `target`'s sleep notice in this rank's control block is set.
    fn asleep(&self, target: usize) -> bool {
        notices::asleep(self.ctrl.mem(), self.targets.len(), target)
    }

    /// Write `v` as this rank's sleep notice into every rank's control block. Best effort: a
    /// rank it does not reach misses only a wake, and its wait has its own bound.
    fn tell_asleep(&self, v: u64) {
        let at = layout::asleep_slot(self.targets.len(), self.me);
        for i in 0..self.targets.len() {
            if let Ok((peer, to)) = self.at(i, Space::Control, at, 8) {
                let _ = self.ep.write_word(peer, v, to, &|| self.alive(i));
            }
        }
    }

    /// How accumulates of `kind` on `elem` at `offset` of `target`'s `space` go
    /// (`transport::path_at`: where the element lies in the target's memory decides).
    fn path(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        elem: Elem,
        kind: Kind,
        same_op: bool,
    ) -> Result<Path> {
        let t = self.target(target)?;
        let base = match space {
            Space::Attached(e) => e.addr,
            Space::Data => t.data.addr,
            Space::Control => t.ctrl.addr,
        };
        let native = self.caps.native_atomics;
        Ok(path_at(
            native,
            base.wrapping_add(offset as u64),
            elem,
            kind,
            same_op,
        ))
    }

    /// The accumulates of `acc` as NIC atomics, one per element, all in flight.
    fn start_native(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: AccumulateMany<'_>,
    ) -> Result<Pending> {
        // One range check covers every element.
        let (peer, at) = self.at(target, space, offset, acc.operands.len())?;
        let size = acc.elem.size();
        let ops: Vec<_> = (0..acc.count())
            .map(|i| (nic_op(&acc.element(i)), at.shifted(i * size)))
            .collect();
        if ops.is_empty() {
            return Ok(Pending::Done);
        }
        let t = self
            .ep
            .start_atomics(peer, &ops, &|| self.alive(target))
            .map_err(ib_err)?;
        Ok(Pending::Started(target, Box::new(t)))
    }
}

/// Connect every queue pair this rank prepared to the one its peer prepared for it, and each of
/// its lanes' to the one the peer's lane of the same number prepared (as many lanes as both
/// ranks have; the others' stay unconnected).
fn connect_all(world: &[u32], me: usize, local: &Local<'_>, keys: &[VerbsKey]) -> Result<()> {
    for (r, k) in keys.iter().enumerate() {
        let mine = local.key.qpns[r];
        let theirs = k.qpns.get(me).copied().unwrap_or(0);
        if (mine == 0) != (theirs == 0) {
            return Err(Error::new(
                ErrorClass::Intern,
                format!("ranks {me} and {r} disagree on whether their queue pairs are connected"),
            ));
        }
        if mine != 0 {
            local.ep.connect(world[r], k.port, theirs).map_err(ib_err)?;
            let mine = local.key.lanes.get(r).map_or(0, Vec::len);
            let theirs = k.lanes.get(me).map_or(&[][..], Vec::as_slice);
            for (lane, &qpn) in local.lanes.iter().zip(theirs).take(mine) {
                lane.lock().connect(world[r], k.port, qpn).map_err(ib_err)?;
            }
        }
    }
    Ok(())
}

impl Transport for VerbsTransport<'_> {
    fn caps(&self) -> &Caps {
        &self.caps
    }

    fn put(&self, target: usize, space: Space, offset: usize, src: &[u8]) -> Result<()> {
        let (peer, to) = self.at(target, space, offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.ep
            .write(peer, src, to, &|| self.alive(target))
            .map_err(ib_err)
    }

    /// One write with immediate data, where the target takes notifications.
    fn put_notify(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        src: &[u8],
        id: usize,
    ) -> Result<bool> {
        let tag = self.target(target)?.notify;
        if tag == 0 || src.len() > self.ep.max_message() {
            return Ok(false);
        }
        let (peer, to) = self.at(target, space, offset, src.len())?;
        let imm = u32::try_from(notice_data(tag, id)).map_err(|_| {
            Error::new(
                ErrorClass::Intern,
                "a notification that 32 bits do not hold",
            )
        })?;
        self.ep
            .write_notify(peer, src, to, imm, &|| self.alive(target))
            .map_err(ib_err)?;
        Ok(true)
    }

    fn notified(&self, id: usize) -> u64 {
        self.notified.as_ref().map_or(0, |w| w.counts.of(id))
    }

    fn carries_notifications(&self) -> bool {
        self.notified.is_some()
    }

    fn get(&self, target: usize, space: Space, offset: usize, dst: &mut [u8]) -> Result<()> {
        let (peer, from) = self.at(target, space, offset, dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        self.ep
            .read(peer, dst, from, &|| self.alive(target))
            .map_err(ib_err)
    }

    fn amo(&self, target: usize, space: Space, offset: usize, op: Amo) -> Result<u64> {
        let (peer, at) = self.at(target, space, offset, 8)?;
        let changes = !matches!(op, Amo::Load);
        let op = match op {
            Amo::FetchAdd(v) => ib::Atomic::FetchAdd(v),
            Amo::Load => ib::Atomic::FetchAdd(0),
            Amo::CompareSwap { compare, swap } => ib::Atomic::CompareSwap { compare, swap },
        };
        let old = self.ep.atomic(peer, op, at, &|| self.alive(target));
        let old = old.map_err(ib_err)?;
        if changes && space == Space::Control {
            self.wake(target, offset)?;
        }
        Ok(old)
    }

    /// On the NIC where the device and the path allow, else under the target's accumulate
    /// lock.
    fn accumulate(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: Accumulate,
    ) -> Result<u64> {
        let watch = || self.peers.all_alive();
        let native = || {
            let (peer, at) = self.at(target, space, offset, 8)?;
            self.ep
                .atomic(peer, nic_op(&acc), at, &|| self.alive(target))
                .map_err(ib_err)
        };
        match self.path(target, space, offset, acc.elem, acc.op.kind(), acc.same_op)? {
            Path::Native => native(),
            Path::Locked => locked_accumulate(self, &watch, target, space, offset, acc),
            Path::ReadLocked => under_acc_lock(self, &watch, target, native),
        }
    }

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

    /// A fetch-add left in flight: its completion is waited for by the next flush of `target`.
    fn signal(&self, target: usize, offset: usize, add: u64) -> Result<()> {
        let (peer, at) = self.at(target, Space::Control, offset, 8)?;
        let live = || self.alive(target);
        let t = self
            .ep
            .start_atomics(peer, &[(ib::Atomic::FetchAdd(add), at)], &live);
        t.map(drop).map_err(ib_err)?;
        self.wake(target, offset)
    }

    fn flush(&self, target: usize) -> Result<()> {
        // After a get or an atomic (each waited for) there is nothing to complete.
        if self.ep.idle(self.target(target)?.peer) {
            return Ok(());
        }
        let (peer, probe) = self.at(target, Space::Control, 0, 0)?;
        self.ep
            .flush(peer, probe, &|| self.alive(target))
            .map_err(ib_err)
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

    fn progress(&self) -> Result<()> {
        self.ep.progress().map_err(ib_err)
    }

    /// With the sleep notice set in every rank's control block for as long as it sleeps, in
    /// slices ([`SLICE`]) up to `timeout`, until `ready` holds.
    fn sleep(&self, ready: &dyn Fn() -> bool, timeout: std::time::Duration) -> Result<bool> {
        if !self.caps.wakes_by_completion {
            if !ready() {
                std::thread::sleep(timeout);
            }
            return Ok(false);
        }
        self.tell_asleep(1);
        let end = std::time::Instant::now() + timeout;
        let slept = (|| {
            let mut woken = false;
            loop {
                woken |= self.ep.arm().map_err(ib_err)?;
                if ready() {
                    return Ok(true);
                }
                let left = end.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return Ok(woken);
                }
                woken |= self.ep.sleep(left.min(SLICE)).map_err(ib_err)?;
            }
        })();
        self.tell_asleep(0);
        slept
    }

    fn start_get(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<Pending> {
        let (peer, from) = self.at(target, space, offset, dst.len())?;
        if dst.is_empty() {
            return Ok(Pending::Done);
        }
        let t = self
            .ep
            .start_read(peer, dst.len(), from, &|| self.alive(target))
            .map_err(ib_err)?;
        Ok(Pending::Started(target, Box::new(t)))
    }

    /// Every get in flight together, then each completed in turn.
    fn get_many(&self, parts: &mut [Part<&mut [u8]>]) -> Result<()> {
        let gets = parts
            .iter_mut()
            .map(|p| (p.target, p.space, p.offset, &mut *p.bytes));
        gets_in_flight(self, gets)
    }

    /// On the NIC, one atomic per element, all in flight; under the target's accumulate lock
    /// where the NIC may not, complete when it returns.
    fn start_accumulate(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: AccumulateMany<'_>,
        fetched: Option<&mut [u8]>,
    ) -> Result<Pending> {
        acc.check(fetched.as_deref())?;
        let watch = || self.peers.all_alive();
        let kind = Kind::Apply(acc.op);
        match self.path(target, space, offset, acc.elem, kind, acc.same_op)? {
            Path::Native => self.start_native(target, space, offset, acc),
            Path::Locked => {
                locked_accumulate_many(self, &watch, target, space, offset, acc, fetched)?;
                Ok(Pending::Done)
            }
            Path::ReadLocked => {
                under_acc_lock(self, &watch, target, || {
                    let p = self.start_native(target, space, offset, acc)?;
                    self.finish(p, fetched)
                })?;
                Ok(Pending::Done)
            }
        }
    }

    /// Complete, or never to complete because the target is gone.
    fn test(&self, pending: &Pending) -> Result<bool> {
        Ok(match pending {
            Pending::Done => true,
            Pending::Started(target, t) => {
                let t = t
                    .downcast_ref::<ib::Ticket>()
                    .ok_or_else(|| foreign("verbs"))?;
                self.ep.test(t).map_err(ib_err)? || self.alive(*target) == ib::Waiting::GiveUp
            }
        })
    }

    fn finish(&self, pending: Pending, out: Option<&mut [u8]>) -> Result<()> {
        match pending {
            Pending::Done => Ok(()),
            Pending::Started(target, t) => {
                let t = t.downcast::<ib::Ticket>().map_err(|_| foreign("verbs"))?;
                self.ep
                    .finish(*t, out, &|| self.alive(target))
                    .map_err(ib_err)
            }
        }
    }
}

impl<'a> Attach<'a> for VerbsTransport<'a> {
    /// Register `mem` as a memory region (nothing for empty memory, which no operation
    /// reaches).
    fn attach(&self, mem: Mem<'a>) -> Result<(u64, u64)> {
        if mem.is_empty() {
            return Ok((0, 0));
        }
        let region = self.ep.register(mem).map_err(ib_err)?;
        let key = region.key();
        self.attached.borrow_mut().push(region);
        Ok((key.addr, key.rkey.into()))
    }

    fn detach(&self, addr: u64) {
        let mut attached = self.attached.borrow_mut();
        if let Some(i) = attached.iter().position(|r| r.mem().addr() as u64 == addr) {
            attached.swap_remove(i);
        }
    }

    /// The endpoint's lanes to the targets `wired` names, each connected to as many as both
    /// ranks have (`lanes.rs`); none where the endpoint has none.
    fn lanes(&self, wired: &[bool]) -> Option<Box<dyn Lanes>> {
        if self.lanes.is_empty() {
            return None;
        }
        let targets = (self.targets.iter().enumerate())
            .map(|(i, t)| {
                let lanes = match wired.get(i) {
                    Some(true) => (self.lanes.iter())
                        .take_while(|l| l.lock().connected(t.peer))
                        .count(),
                    _ => 0,
                };
                (lanes > 0).then_some(lanes::LaneTarget {
                    peer: t.peer,
                    data: t.data,
                    ctrl: t.ctrl,
                    wakes: t.wakes,
                    lanes,
                    notify: t.notify,
                })
            })
            .collect();
        let native = self.caps.native_atomics;
        let notices = self.ctrl.mem().clone();
        let lanes = lanes::VerbsLanes::new(
            self.lanes.clone(),
            targets,
            native,
            self.peers.clone(),
            notices,
        );
        lanes.map(|l| Box::new(l) as Box<dyn Lanes>)
    }
}
