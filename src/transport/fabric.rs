//! The fabric transport: targets reached through libfabric (RDMA on verbs, tcp;ofi_rxm, shm).
//!
//! Each rank registers its control block and window memory with the NIC at window creation and
//! publishes the keys with its endpoint address; puts are `fi_writemsg` (injected when small),
//! gets `fi_read`, atomics `fi_fetch_atomic` / `fi_compare_atomic`, an accumulate of many
//! elements one `fi_fetch_atomic` with a count (split at the provider's limit). Accumulates the
//! NIC cannot run, for their type or an element not aligned in memory, take the target's
//! accumulate lock, once per call (`transport::locked_accumulate`). Every operation carries `FI_DELIVERY_COMPLETE` and bumps
//! one counter, so a flush is the counter reaching the number of operations issued: complete at
//! the target, visible to its loads and to other origins. A progress thread per endpoint serves
//! the target side of providers that need the target to call into libfabric, so a target that
//! computes or sleeps does not stall its origins.

use super::{
    AccOp, Accumulate, AccumulateMany, Amo, Caps, Space, Transport, locked_accumulate,
    locked_accumulate_many,
};
use crate::codec::{Dec, Enc};
use crate::config::{Atomics, FabricConfig, MrMode};
use crate::error::{Error, ErrorClass, Result};
use crate::protocol::layout;
use crate::protocol::reduce::{Elem, Op};
use crate::wait::Peers;
use crate::world::Comm;
use onesided_fabric as fi;
use onesided_shm::Mem;
use std::cell::RefCell;
use std::sync::{Arc, Mutex};

/// Text of a libfabric failure as an MPI error: a peer that cannot be reached is a failed
/// process; anything else is MPI_ERR_OTHER with libfabric's words.
fn fi_err(e: fi::FiError) -> Error {
    let class = if e.is_unreachable() {
        ErrorClass::ProcFailed
    } else {
        ErrorClass::Other
    };
    Error::new(class, format!("fabric: {e}")).caused_by(e)
}

/// The domain of this process for `config`, opened once and shared by its windows: libfabric's
/// first, or with the `hwloc` feature the one nearest to the CPUs this rank is bound to
/// (`nic.rs`).
pub(crate) fn domain(config: &FabricConfig) -> Result<Arc<fi::Domain>> {
    static OPEN: Mutex<Option<(FabricConfig, Arc<fi::Domain>)>> = Mutex::new(None);
    let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, d)) = open.as_ref().filter(|(c, _)| c == config) {
        return Ok(d.clone());
    }
    let req = fi::Request {
        provider: config.provider.clone(),
        mr_mode: match config.mr_mode {
            MrMode::Provider => fi::MrMode::ALL,
            MrMode::Verbs => fi::MrMode::VERBS,
        },
        delivery_complete: true,
    };
    #[cfg(feature = "hwloc")]
    let found = super::nic::find_provider(&req);
    #[cfg(not(feature = "hwloc"))]
    let found = fi::Provider::find(&req);
    let provider = found.map_err(|e| {
        Error::new(
            ErrorClass::Other,
            format!(
                "no libfabric provider{} offers RDM endpoints with RMA and atomics: {e}",
                config
                    .provider
                    .as_deref()
                    .map_or(String::new(), |p| format!(" named {p:?}"))
            ),
        )
    })?;
    tracing::debug!(
        provider = %provider.name(),
        fabric = %provider.fabric(),
        domain = %provider.domain(),
        mr_mode = %provider.mr_mode().names(),
        inject = provider.inject_size(),
        max_msg = provider.max_msg_size(),
        "opening the libfabric domain"
    );
    let d = fi::Domain::open(provider).map_err(fi_err)?;
    *open = Some((config.clone(), d.clone()));
    Ok(d)
}

/// What one rank publishes: its endpoint address and the keys of its control block and window
/// memory.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FabricKey {
    name: Vec<u8>,
    ctrl: fi::RegionKey,
    data: fi::RegionKey,
    len: usize,
    /// The address of the window memory modulo 8, so that origins know which elements are
    /// aligned in memory (the key's base is an offset where the MR mode has no VIRT_ADDR).
    lead: u64,
    /// Bit `Elem::index()` set: this rank's provider runs every accumulate on that type natively.
    native: u64,
}

fn enc_region(e: Enc, k: &fi::RegionKey) -> Enc {
    e.u64(k.base).bytes(&k.key).u64(k.raw as u64)
}

fn dec_region(d: &mut Dec<'_>) -> Result<fi::RegionKey> {
    Ok(fi::RegionKey {
        base: d.u64()?,
        key: d.bytes()?.to_vec(),
        raw: d.u64()? != 0,
    })
}

impl FabricKey {
    fn encode(&self) -> Vec<u8> {
        let e = Enc::new().bytes(&self.name);
        let e = enc_region(e, &self.ctrl);
        enc_region(e, &self.data)
            .u64(self.len as u64)
            .u64(self.lead)
            .u64(self.native)
            .finish()
    }

    fn decode(b: &[u8]) -> Result<FabricKey> {
        let mut d = Dec::new(b);
        Ok(FabricKey {
            name: d.bytes()?.to_vec(),
            ctrl: dec_region(&mut d)?,
            data: dec_region(&mut d)?,
            len: d.usize()?,
            lead: d.u64()?,
            native: d.u64()?,
        })
    }
}

/// A remote region as operations address it.
#[derive(Debug, Clone, Copy)]
struct Remote {
    base: u64,
    key: u64,
    len: usize,
}

#[derive(Debug)]
struct Target {
    peer: fi::Peer,
    ctrl: Remote,
    data: Remote,
    /// [`FabricKey::lead`].
    lead: u64,
}

/// This rank's endpoint and registrations, before the keys are exchanged.
struct Local<'a> {
    ep: fi::Endpoint,
    ctrl: fi::Region<'static>,
    data: Option<fi::Region<'a>>,
    key: FabricKey,
}

fn datatype(e: Elem) -> fi::Datatype {
    match e {
        Elem::I32 => fi::Datatype::I32,
        Elem::U32 => fi::Datatype::U32,
        Elem::I64 => fi::Datatype::I64,
        Elem::U64 => fi::Datatype::U64,
        Elem::F32 => fi::Datatype::F32,
        Elem::F64 => fi::Datatype::F64,
    }
}

/// The libfabric operation of `op`.
fn atomic_op(op: Op) -> fi::AtomicOp {
    match op {
        Op::Sum => fi::AtomicOp::Sum,
        Op::Prod => fi::AtomicOp::Prod,
        Op::Min => fi::AtomicOp::Min,
        Op::Max => fi::AtomicOp::Max,
        Op::Band => fi::AtomicOp::Band,
        Op::Bor => fi::AtomicOp::Bor,
        Op::Bxor => fi::AtomicOp::Bxor,
        Op::Replace => fi::AtomicOp::Write,
        Op::NoOp => fi::AtomicOp::Read,
    }
}

/// Element types on which `ep`'s provider runs every operation natively, fetching or not, and
/// compare-and-swap for integers: only those may use the NIC, since a type whose operations
/// were split between NIC and emulation would not be atomic with itself (MPICH decides the
/// same way, per window).
fn native_mask(ep: &fi::Endpoint) -> u64 {
    let domain = ep.domain();
    let native = |e: Elem| {
        let dt = datatype(e);
        let ops = Op::ALL.iter().filter(|op| op.check(e).is_ok());
        let all = ops.into_iter().all(|&op| {
            let fop = atomic_op(op);
            let plain = op == Op::NoOp || domain.atomic_native(dt, fop, fi::AtomicKind::Plain);
            plain && domain.atomic_native(dt, fop, fi::AtomicKind::Fetch)
        });
        all && (e.is_float()
            || domain.atomic_native(dt, fi::AtomicOp::Cswap, fi::AtomicKind::Compare))
    };
    let mask = Elem::ALL
        .iter()
        .filter(|&&e| native(e))
        .fold(0, |m, e| m | 1 << e.index());
    tracing::debug!(
        native = ?Elem::ALL.iter().filter(|e| mask & 1 << e.index() != 0).collect::<Vec<_>>(),
        "element types whose accumulates run on the NIC (the others are emulated under a lock)"
    );
    mask
}

/// Open an endpoint on the process's domain. libfabric 1.17's shm provider now and then refuses
/// to enable a new endpoint with EBUSY while the region of one just closed is still being torn
/// down (1 window creation in about 500 of the suite); a few retries ride that out.
fn open_endpoint(config: &FabricConfig) -> Result<fi::Endpoint> {
    let domain = domain(config)?;
    let mut tries = 0;
    loop {
        match fi::Endpoint::open(&domain) {
            Err(e) if e.code == libc::EBUSY && tries < 5 => {
                tries += 1;
                tracing::debug!(tries, "endpoint busy (EBUSY), opening it again");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return r.map_err(fi_err),
        }
    }
}

fn open_local<'a>(config: &FabricConfig, ctrl: Mem<'static>, data: Mem<'a>) -> Result<Local<'a>> {
    let ep = open_endpoint(config)?;
    let ctrl = ep.register(ctrl).map_err(fi_err)?;
    let (len, lead) = (data.len(), data.addr() as u64 % 8);
    let data = if len == 0 {
        None
    } else {
        Some(ep.register(data).map_err(fi_err)?)
    };
    let key = FabricKey {
        name: ep.name().map_err(fi_err)?,
        ctrl: ctrl.key().map_err(fi_err)?,
        data: match &data {
            Some(r) => r.key().map_err(fi_err)?,
            None => fi::RegionKey::default(),
        },
        len,
        lead,
        native: match config.atomics {
            Atomics::Software => 0,
            Atomics::Auto => native_mask(&ep),
        },
    };
    Ok(Local {
        ep,
        ctrl,
        data,
        key,
    })
}

/// The fabric transport of one window.
pub struct FabricTransport<'a> {
    caps: Caps,
    targets: Vec<Target>,
    /// The ranks' liveness: a wait on the NIC ends with an error once the job has a failure
    /// or the process of a rank it waits for is gone.
    peers: Peers,
    /// Element types whose accumulates use the NIC on every rank (bit `Elem::index()`).
    native: u64,
    /// Targets of the operations issued since everything last completed.
    pending: RefCell<Vec<usize>>,
    ep: fi::Endpoint,
    _ctrl: fi::Region<'static>,
    _data: Option<fi::Region<'a>>,
}

impl std::fmt::Debug for FabricTransport<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FabricTransport")
            .field("caps", &self.caps)
            .field("targets", &self.targets.len())
            .finish()
    }
}

impl<'a> FabricTransport<'a> {
    /// Collective over `comm`: register this rank's control block `ctrl` and window memory
    /// `data`, exchange keys and endpoint addresses, and insert every rank as a peer.
    pub(crate) fn connect(
        comm: &Comm,
        config: &FabricConfig,
        ctrl: Mem<'static>,
        data: Mem<'a>,
        peers: Peers,
    ) -> Result<FabricTransport<'a>> {
        let opened = open_local(config, ctrl, data);
        let key = opened.as_ref().map(|l| l.key.encode());
        let keys = comm.agree_gather("opening the fabric", key.as_deref().map_err(|e| *e));
        let local = opened?;
        let keys = keys?;
        let mut native = u64::MAX;
        let targets = keys
            .iter()
            .map(|k| {
                let k = FabricKey::decode(k)?;
                native &= k.native;
                let ep = &local.ep;
                let remote = |r: &fi::RegionKey, len| -> Result<Remote> {
                    let key = if r.key.is_empty() {
                        0
                    } else {
                        ep.map_key(r).map_err(fi_err)?
                    };
                    Ok(Remote {
                        base: r.base,
                        key,
                        len,
                    })
                };
                Ok(Target {
                    peer: ep.insert(&k.name).map_err(fi_err)?,
                    ctrl: remote(&k.ctrl, layout::CTRL_BLOCK)?,
                    data: remote(&k.data, k.len)?,
                    lead: k.lead,
                })
            })
            .collect::<Result<Vec<_>>>();
        let targets = comm.agree("connecting to the fabric peers", targets)?;
        Ok(FabricTransport {
            caps: Caps {
                name: "fabric",
                load_store: false,
                needs_target_progress: true,
                wakes_sleepers: false,
                atomics_order_prior: false,
            },
            targets,
            peers,
            native,
            pending: RefCell::new(Vec::new()),
            ep: local.ep,
            _ctrl: local.ctrl,
            _data: local.data,
        })
    }

    /// The peer, and the address of `len` bytes at `offset` of its `space`, or RMA_RANGE.
    fn at(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        len: usize,
    ) -> Result<(fi::Peer, u64, u64)> {
        let t = self.targets.get(target).ok_or_else(|| {
            Error::new(
                ErrorClass::Rank,
                format!("rank {target} not served by the fabric"),
            )
        })?;
        let r = match space {
            Space::Data => t.data,
            Space::Control => t.ctrl,
        };
        match offset.checked_add(len) {
            Some(end) if end <= r.len => {
                self.issue(target);
                Ok((t.peer, r.base + offset as u64, r.key))
            }
            _ => Err(Error::new(
                ErrorClass::RmaRange,
                format!(
                    "{len} bytes at offset {offset} outside rank {target}'s {} bytes",
                    r.len
                ),
            )),
        }
    }

    /// Whether every rank this origin has operations pending at is alive (as far as this node
    /// can tell): a rank that finished and exited is no reason to fail a wait on others. While
    /// a rank is stopped, waits sleep until traffic arrives instead of polling.
    fn alive(&self) -> fi::Waiting {
        let pending = self.pending.borrow();
        if self.peers.job_alive().is_err() || pending.iter().any(|&r| self.peers.gone(r)) {
            fi::Waiting::GiveUp
        } else if self.peers.any_stopped() {
            fi::Waiting::Idle
        } else {
            fi::Waiting::Poll
        }
    }

    /// Note an operation to `target`, until the next completion of everything.
    fn issue(&self, target: usize) {
        let mut pending = self.pending.borrow_mut();
        if !pending.contains(&target) {
            pending.push(target);
        }
    }

    /// The outcome of a call that waited for every operation issued (reads and atomics): on
    /// success nothing is pending any more.
    fn synced<T>(&self, done: std::result::Result<T, fi::FiError>) -> Result<T> {
        let v = done.map_err(fi_err)?;
        self.pending.borrow_mut().clear();
        Ok(v)
    }

    /// Wait for every operation issued to complete at its target.
    fn complete(&self) -> Result<()> {
        self.synced(self.ep.complete(&|| self.alive()))
    }

    /// One element's accumulate on the NIC.
    fn native(&self, target: usize, offset: usize, acc: Accumulate) -> Result<u64> {
        let size = acc.elem.size();
        let (peer, addr, key) = self.at(target, Space::Data, offset, size)?;
        let (dt, live) = (datatype(acc.elem), || self.alive());
        let operand = acc.operand.to_le_bytes();
        let mut old = [0u8; 8];
        let done = match acc.op {
            AccOp::CompareSwap { compare } => self.ep.compare_swap(
                dt,
                &compare.to_le_bytes(),
                &operand,
                &mut old,
                peer,
                addr,
                key,
                &live,
            ),
            AccOp::Apply(op) => {
                let result = &mut old[..];
                self.ep
                    .fetch_atomic(dt, atomic_op(op), &operand, result, peer, addr, key, &live)
            }
        };
        self.synced(done)?;
        Ok(u64::from_le_bytes(old))
    }

    /// Many elements' accumulates on the NIC, as few `fi_fetch_atomic` calls as the provider
    /// allows (the old values are fetched either way: see `fi::Endpoint::fetch_atomic`).
    fn native_many(
        &self,
        target: usize,
        offset: usize,
        acc: AccumulateMany<'_>,
        fetched: Option<&mut [u8]>,
    ) -> Result<()> {
        let (peer, addr, key) = self.at(target, Space::Data, offset, acc.operands.len())?;
        let mut scratch = Vec::new();
        let result = match fetched {
            Some(f) => f,
            None => {
                scratch.resize(acc.operands.len(), 0);
                &mut scratch[..]
            }
        };
        let (dt, op) = (datatype(acc.elem), atomic_op(acc.op));
        let live = || self.alive();
        let done = self
            .ep
            .fetch_atomic_many(dt, op, acc.operands, result, peer, addr, key, &live);
        self.synced(done)
    }

    /// Whether accumulates on elements of `elem` at `offset` of `target` run on the NIC: where
    /// its provider runs every accumulate of the type natively on every rank and the element is
    /// aligned in the target's memory (the first element decides for its neighbours). Every
    /// origin decides the same way for an element, so accumulates on it never mix the NIC and
    /// the lock.
    fn on_nic(&self, target: usize, offset: usize, elem: Elem) -> Result<bool> {
        let t = self.targets.get(target).ok_or_else(|| {
            Error::new(
                ErrorClass::Rank,
                format!("rank {target} not served by the fabric"),
            )
        })?;
        let aligned = t
            .lead
            .wrapping_add(offset as u64)
            .is_multiple_of(elem.size() as u64);
        Ok(aligned && self.native & 1 << elem.index() != 0)
    }
}

impl Transport for FabricTransport<'_> {
    fn caps(&self) -> &Caps {
        &self.caps
    }

    fn put(&self, target: usize, space: Space, offset: usize, src: &[u8]) -> Result<()> {
        let (peer, addr, key) = self.at(target, space, offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.ep
            .write(src, peer, addr, key, &|| self.alive())
            .map_err(fi_err)
    }

    fn get(&self, target: usize, space: Space, offset: usize, dst: &mut [u8]) -> Result<()> {
        let (peer, addr, key) = self.at(target, space, offset, dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        let done = self.ep.read(dst, peer, addr, key, &|| self.alive());
        self.synced(done)
    }

    fn amo(&self, target: usize, space: Space, offset: usize, op: Amo) -> Result<u64> {
        let (peer, addr, key) = self.at(target, space, offset, 8)?;
        let mut old = [0u8; 8];
        let live = || self.alive();
        let t = fi::Datatype::U64;
        let done = match op {
            Amo::FetchAdd(v) => self.ep.fetch_atomic(
                t,
                fi::AtomicOp::Sum,
                &v.to_le_bytes(),
                &mut old,
                peer,
                addr,
                key,
                &live,
            ),
            Amo::Load => self.ep.fetch_atomic(
                t,
                fi::AtomicOp::Read,
                &[0; 8],
                &mut old,
                peer,
                addr,
                key,
                &live,
            ),
            Amo::CompareSwap { compare, swap } => self.ep.compare_swap(
                t,
                &compare.to_le_bytes(),
                &swap.to_le_bytes(),
                &mut old,
                peer,
                addr,
                key,
                &live,
            ),
        };
        self.synced(done)?;
        Ok(u64::from_le_bytes(old))
    }

    /// On the NIC or under the target's accumulate lock (see `FabricTransport::on_nic`).
    fn accumulate(&self, target: usize, offset: usize, acc: Accumulate) -> Result<u64> {
        if self.on_nic(target, offset, acc.elem)? {
            self.native(target, offset, acc)
        } else {
            locked_accumulate(self, &|| self.peers.all_alive(), target, offset, acc)
        }
    }

    /// On the NIC with element counts, or under the target's accumulate lock taken once (see
    /// `FabricTransport::on_nic`).
    fn accumulate_many(
        &self,
        target: usize,
        offset: usize,
        acc: AccumulateMany<'_>,
        fetched: Option<&mut [u8]>,
    ) -> Result<()> {
        acc.check(fetched.as_deref())?;
        if self.on_nic(target, offset, acc.elem)? {
            self.native_many(target, offset, acc, fetched)
        } else {
            let watch = || self.peers.all_alive();
            locked_accumulate_many(self, &watch, target, offset, acc, fetched)
        }
    }

    fn flush(&self, _target: usize) -> Result<()> {
        self.complete()
    }

    fn flush_all(&self) -> Result<()> {
        self.complete()
    }

    fn flush_local(&self, _target: usize) -> Result<()> {
        Ok(())
    }

    fn flush_local_all(&self) -> Result<()> {
        Ok(())
    }

    fn progress(&self) -> Result<()> {
        if self.peers.any_stopped() {
            self.ep.idle();
        } else {
            self.ep.progress();
        }
        Ok(())
    }
}
