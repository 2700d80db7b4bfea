//! The shared-memory transport: targets on this node.
//!
//! Window memory of MPI_Win_allocate / MPI_Win_allocate_shared windows and every control block
//! live in one segment per node, mapped by every node-local rank: put and get are copies, atomics
//! are CPU atomics, flush is a memory fence. Memory the user lent to MPI_Win_create stays in its
//! process and is reached by cross-memory attach (process_vm_writev / process_vm_readv), which
//! completes before the call returns.
//!
//! Accumulates on elements aligned in mapped memory are CPU atomics. The others (an element not
//! aligned to its size, and every element of MPI_Win_create memory, which other ranks reach only
//! by copies) take the target's accumulate lock word (`transport::locked_accumulate`), the
//! owner of create memory included, so that every accumulate on one element takes one path.
//! Memory lent to MPI_Win_create that was allocated by MPI_Alloc_mem (`crate::alloc`) is mapped
//! by every rank of the node, like the segment, and reached the same way.
//! Memory attached to a dynamic window is reached the same way as create memory: by
//! cross-memory attach from the other ranks, directly by its owner, every accumulate under the
//! lock word.
//!
//! # MPI-4.1: 12.3.4, 12.7.1 (accumulates at any displacement, atomic per element)

use super::{
    AccOp, Accumulate, AccumulateMany, Amo, Attach, Caps, Entry, NativeOps, Part, Reach, RemoteKey,
    Space, Transport, locked_accumulate, locked_accumulate_many,
};
use crate::codec::{Dec, Enc};
use crate::error::{Error, ErrorClass, Result};
use crate::peers::Peers;
use crate::protocol::layout;
use crate::protocol::reduce::{Elem, Op, combine};
use onesided_shm::cma::{CmaError, RemoteMem};
use onesided_shm::{FileId, Mem, OutOfRange, Segment};
use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

/// Where a rank's window memory is, as other ranks of the node reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DataDesc {
    /// In the node segment at `off`.
    Segment { off: usize, len: usize },
    /// In the memory of process `pid` at `addr` (MPI_Win_create).
    Process { pid: u32, addr: usize, len: usize },
    /// In a block of alloc_mem memory (MPI_Win_create over MPI_Alloc_mem memory): mapped by
    /// the node's ranks.
    Block(BlockDesc),
}

/// `len` bytes at `off` of a block of alloc_mem memory of process `pid`, the file of
/// `block_len` bytes that it holds open as descriptor `fd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlockDesc {
    pub pid: u32,
    pub fd: i32,
    pub id: FileId,
    pub block_len: usize,
    pub off: usize,
    pub len: usize,
}

impl BlockDesc {
    /// Map the memory into this process.
    pub(crate) fn map(&self) -> Result<Mem<'static>> {
        let seg = Segment::open_fd_of(self.pid, self.fd, self.block_len, layout::PAGE, self.id)
            .map_err(|e| Error::os("mapping alloc_mem memory of another process", e))?;
        Ok(Mem::from_segment(Arc::new(seg)).sub(self.off, self.len)?)
    }
}

/// One rank's shared-memory key: its node segment, control block and window memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShmKey {
    pub segment: String,
    pub ctrl: usize,
    pub data: DataDesc,
}

impl ShmKey {
    pub(crate) fn encode(&self) -> RemoteKey {
        let e = Enc::new().str(&self.segment).u64(self.ctrl as u64);
        let e = match self.data {
            DataDesc::Segment { off, len } => e.u64(0).u64(off as u64).u64(len as u64),
            DataDesc::Process { pid, addr, len } => {
                e.u64(1).u64(pid as u64).u64(addr as u64).u64(len as u64)
            }
            DataDesc::Block(ref b) => e
                .u64(2)
                .u64(b.pid as u64)
                .u64(b.fd as u64)
                .u64(b.id.dev)
                .u64(b.id.ino)
                .u64(b.block_len as u64)
                .u64(b.off as u64)
                .u64(b.len as u64),
        };
        RemoteKey(e.finish())
    }

    pub(crate) fn decode(key: &RemoteKey) -> Result<ShmKey> {
        let mut d = Dec::new(&key.0);
        let segment = d.str()?;
        let ctrl = d.usize()?;
        let data = match d.u64()? {
            0 => DataDesc::Segment {
                off: d.usize()?,
                len: d.usize()?,
            },
            1 => DataDesc::Process {
                pid: d.u64()? as u32,
                addr: d.usize()?,
                len: d.usize()?,
            },
            _ => DataDesc::Block(BlockDesc {
                pid: d.u64()? as u32,
                fd: d.u64()? as i32,
                id: FileId {
                    dev: d.u64()?,
                    ino: d.u64()?,
                },
                block_len: d.usize()?,
                off: d.usize()?,
                len: d.usize()?,
            }),
        };
        Ok(ShmKey {
            segment,
            ctrl,
            data,
        })
    }
}

#[derive(Debug)]
enum Data<'a> {
    Mapped(Mem<'a>),
    Process(RemoteMem),
}

#[derive(Debug)]
struct Target<'a> {
    ctrl: Mem<'static>,
    data: Data<'a>,
    /// The memory was lent to MPI_Win_create: every accumulate on it takes the lock word, since
    /// the other ranks reach it only by copies.
    lent: bool,
    /// The target's process, where memory it attached to a dynamic window is.
    pid: u32,
}

/// Memory of a target as this process reaches it.
enum Reached<'m, 'a> {
    Mapped(&'m Mem<'a>),
    Own(Mem<'a>),
    Process(RemoteMem),
}

impl Reached<'_, '_> {
    fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        match self {
            Reached::Mapped(m) => m.write(offset, src).map_err(Error::from),
            Reached::Own(m) => m.write(offset, src).map_err(Error::from),
            Reached::Process(p) => p.write(offset, src).map_err(cma_err),
        }
    }

    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        match self {
            Reached::Mapped(m) => m.read(offset, dst).map_err(Error::from),
            Reached::Own(m) => m.read(offset, dst).map_err(Error::from),
            Reached::Process(p) => p.read(offset, dst).map_err(cma_err),
        }
    }

    /// Each `(offset, src)` of `pieces` written: process memory with as few system calls as
    /// the kernel allows; every range checked before anything moves.
    fn write_runs(&self, pieces: &[(usize, &[u8])]) -> Result<()> {
        if let Reached::Process(p) = self {
            return p.write_runs(pieces).map_err(cma_err);
        }
        self.within(pieces.iter().map(|(o, src)| (*o, src.len())))?;
        pieces.iter().try_for_each(|&(o, src)| self.write(o, src))
    }

    /// Each `(offset, dst)` of `runs` read, as [`Reached::write_runs`].
    fn read_runs(&self, runs: &mut [(usize, &mut [u8])]) -> Result<()> {
        if let Reached::Process(p) = self {
            return p.read_runs(runs).map_err(cma_err);
        }
        self.within(runs.iter().map(|(o, dst)| (*o, dst.len())))?;
        runs.iter_mut().try_for_each(|(o, dst)| self.read(*o, dst))
    }

    /// Whether every `(offset, len)` of `ranges` lies inside the memory (RMA_RANGE otherwise).
    fn within(&self, mut ranges: impl Iterator<Item = (usize, usize)>) -> Result<()> {
        let limit = match self {
            Reached::Mapped(m) => m.len(),
            Reached::Own(m) => m.len(),
            Reached::Process(p) => p.len(),
        };
        let outside = |&(offset, len): &(usize, usize)| {
            layout::offset_in(0, limit as u64, offset as u64, len as u64).is_none()
        };
        match ranges.find(outside) {
            Some((offset, len)) => Err(Error::from(OutOfRange { offset, len, limit })),
            None => Ok(()),
        }
    }

    fn amo(&self, offset: usize, op: Amo) -> Result<u64> {
        match self {
            Reached::Mapped(m) => Ok(op.on(m.atomic_u64(offset).map_err(Error::from)?)),
            Reached::Own(m) => Ok(op.on(m.atomic_u64(offset).map_err(Error::from)?)),
            Reached::Process(_) => Err(Error::new(
                ErrorClass::Other,
                "atomics on another process's private memory are not supported by the shm transport",
            )),
        }
    }
}

/// The shared-memory transport of one window.
#[derive(Debug)]
pub struct ShmTransport<'a> {
    caps: Caps,
    targets: Vec<Option<Target<'a>>>,
    /// The ranks, watched while waiting for a target's accumulate lock.
    peers: Peers,
    /// This rank, and the memory it attached to a dynamic window.
    me: usize,
    attached: RefCell<Vec<Mem<'a>>>,
}

/// What shared memory can do: reach the ranks of this node by loads, stores and CPU atomics.
pub(crate) const CAPS: Caps = Caps {
    name: "shm",
    reach: Reach::Node,
    load_store: true,
    needs_target_progress: false,
    wakes_sleepers: true,
    wakes_by_completion: false,
    atomics_order_prior: true,
    inject: usize::MAX,
    max_msg: usize::MAX,
    local_mr: false,
    native_atomics: NativeOps::ALL,
    cpu_atomics: true,
};

fn cma_err(e: CmaError) -> Error {
    match e {
        CmaError::Range(r) => Error::from(r),
        CmaError::Os(e) if e.raw_os_error() == Some(libc::ESRCH) => Error::new(
            ErrorClass::ProcFailed,
            format!("target process is gone: {e}"),
        ),
        CmaError::Os(e) => Error::os("cross-memory attach", e),
    }
}

impl<'a> ShmTransport<'a> {
    /// Connect to the targets whose keys are given (`None`: a target this transport does not
    /// serve). `segment` is this node's segment, already mapped; `mapped` is each other
    /// target's window memory where this process maps it (in the segment, or a block of
    /// alloc_mem memory); `own` is this rank's window memory when it lives outside the segment
    /// (MPI_Win_create); `pids` are the ranks' processes and `peers` watches them.
    pub(crate) fn connect(
        me: usize,
        keys: &[Option<ShmKey>],
        segment: &Arc<Segment>,
        mapped: &[Option<Mem<'static>>],
        own: Option<Mem<'a>>,
        pids: &[u32],
        peers: Peers,
    ) -> Result<ShmTransport<'a>> {
        let whole = Mem::from_segment(segment.clone());
        let mut own = own;
        let mut targets = Vec::with_capacity(keys.len());
        for (rank, key) in keys.iter().enumerate() {
            let Some(key) = key else {
                targets.push(None);
                continue;
            };
            if key.segment != segment.name() {
                return Err(Error::new(
                    ErrorClass::Intern,
                    format!("rank {rank} is on segment {}, not this node's", key.segment),
                ));
            }
            let ctrl = whole
                .sub(key.ctrl, layout::ctrl_block(keys.len()))
                .map_err(Error::from)?;
            let missing = || Error::new(ErrorClass::Intern, "window memory not mapped");
            let data = match (&key.data, rank == me) {
                (DataDesc::Segment { .. }, _) | (DataDesc::Block(_), false) => {
                    Data::Mapped(mapped[rank].clone().ok_or_else(missing)?)
                }
                (DataDesc::Process { .. } | DataDesc::Block(_), true) => {
                    Data::Mapped(own.take().ok_or_else(missing)?)
                }
                (DataDesc::Process { pid, addr, len }, false) => Data::Process(
                    RemoteMem::new(*pid as i32, *addr, *len)
                        .map_err(|e| Error::os("window of another process", e))?,
                ),
            };
            let lent = matches!(key.data, DataDesc::Process { .. });
            let pid = pids[rank];
            targets.push(Some(Target {
                ctrl,
                data,
                lent,
                pid,
            }));
        }
        Ok(ShmTransport {
            caps: CAPS,
            targets,
            peers,
            me,
            attached: RefCell::new(Vec::new()),
        })
    }

    /// Where `space` of `target` is (the control block is not asked for here).
    fn reach(&self, target: usize, space: Space) -> Result<Reached<'_, 'a>> {
        let t = self.target(target)?;
        Ok(match (space, &t.data) {
            (Space::Control, _) => Reached::Mapped(&t.ctrl),
            (Space::Data, Data::Mapped(m)) => Reached::Mapped(m),
            (Space::Data, Data::Process(p)) => Reached::Process(*p),
            (Space::Attached(e), _) if target == self.me => Reached::Own(self.own(&e)?),
            (Space::Attached(e), _) => Reached::Process(
                RemoteMem::new(t.pid as i32, e.addr as usize, e.len as usize)
                    .map_err(|e| Error::os("attached memory of another process", e))?,
            ),
        })
    }

    /// This rank's attached memory that `e` describes.
    fn own(&self, e: &Entry) -> Result<Mem<'a>> {
        let attached = self.attached.borrow();
        let found = attached
            .iter()
            .find(|m| m.addr() as u64 == e.addr && m.len() as u64 == e.len);
        found.cloned().ok_or_else(|| {
            Error::new(
                ErrorClass::RmaRange,
                format!("no memory attached at address {:#x}", e.addr),
            )
        })
    }

    fn target(&self, rank: usize) -> Result<&Target<'a>> {
        match self.targets.get(rank) {
            Some(Some(t)) => Ok(t),
            _ => Err(Error::new(
                ErrorClass::Intern,
                format!("rank {rank} not served by shm"),
            )),
        }
    }

    /// The mapped window memory of `target` where an element of `size` bytes at `offset` is
    /// reached with CPU atomics (aligned in mapped memory, not lent to MPI_Win_create); `None`
    /// where accumulates there take the lock word ([`cpu_aligned`]).
    fn cpu(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        size: usize,
    ) -> Result<Option<&Mem<'a>>> {
        Ok(match (space, self.target(target)?) {
            (
                Space::Data,
                Target {
                    data: Data::Mapped(m),
                    lent: false,
                    ..
                },
            ) if cpu_aligned(m, offset, size) => Some(m),
            _ => None,
        })
    }

    /// The control block of `rank` (for local waits on this rank's own words).
    pub(crate) fn control(&self, rank: usize) -> Result<&Mem<'static>> {
        Ok(&self.target(rank)?.ctrl)
    }

    /// The window memory of `rank` where this process maps it (not another process's private
    /// memory).
    pub(crate) fn mapped(&self, rank: usize) -> Option<&Mem<'a>> {
        match &self.target(rank).ok()?.data {
            Data::Mapped(m) => Some(m),
            Data::Process(_) => None,
        }
    }

    /// The window memory of `rank` where accumulates on its aligned elements are CPU atomics
    /// (mapped here and not lent to MPI_Win_create: see [`ShmTransport::cpu`]).
    pub(crate) fn atomic_mapped(&self, rank: usize) -> Option<&Mem<'a>> {
        match self.target(rank).ok()? {
            Target {
                data: Data::Mapped(m),
                lent: false,
                ..
            } => Some(m),
            _ => None,
        }
    }
}

/// Whether the element of `size` bytes at `offset` of mapped memory `mem` is aligned to its
/// size, so that an accumulate on it is a CPU atomic. The answer depends only on the offset and
/// the target's memory, the same on every rank: segments are mapped on page boundaries (or
/// coarser) everywhere.
#[inline]
pub(crate) fn cpu_aligned(mem: &Mem<'_>, offset: usize, size: usize) -> bool {
    mem.addr().wrapping_add(offset).is_multiple_of(size)
}

/// An element's word for CPU atomics: 8 or 4 bytes, aligned to its size.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Word<'m> {
    U64(&'m AtomicU64),
    U32(&'m AtomicU32),
}

/// One element's read-modify-write with CPU atomics on the element at `offset` of `mem`, which
/// is aligned to its size (MPI_ERR_RMA_RANGE otherwise). Returns the old bits.
pub(crate) fn rmw(mem: &Mem<'_>, offset: usize, acc: Accumulate) -> Result<u64> {
    let word = match acc.elem.size() {
        8 => Word::U64(mem.atomic_u64(offset)?),
        _ => Word::U32(mem.atomic_u32(offset)?),
    };
    Ok(rmw_word(word, acc))
}

/// One element's read-modify-write with CPU atomics on `word`: a single instruction for integer
/// sums, replacement and reads; a compare-and-swap loop otherwise. Returns the old bits.
pub(crate) fn rmw_word(word: Word<'_>, acc: Accumulate) -> u64 {
    let sum = matches!(acc.op, AccOp::Apply(Op::Sum)) && !acc.elem.is_float();
    macro_rules! word {
        ($w:expr, $t:ty) => {{
            let w = $w;
            let operand = acc.operand as $t;
            (match acc.op {
                AccOp::Apply(Op::NoOp) => w.load(Ordering::SeqCst),
                AccOp::Apply(Op::Replace) => w.swap(operand, Ordering::SeqCst),
                _ if sum => w.fetch_add(operand, Ordering::SeqCst),
                AccOp::CompareSwap { compare } => w
                    .compare_exchange(compare as $t, operand, Ordering::SeqCst, Ordering::SeqCst)
                    .unwrap_or_else(|old| old),
                _ => w
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |old| {
                        Some(acc.next(old as u64) as $t)
                    })
                    .unwrap_or_else(|old| old),
            }) as u64
        }};
    }
    match word {
        Word::U64(w) => word!(w, u64),
        Word::U32(w) => word!(w, u32),
    }
}

/// A run of elements' words for CPU atomics: 8 or 4 bytes each, aligned to their size.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Words<'m> {
    U64(&'m [AtomicU64]),
    U32(&'m [AtomicU32]),
}

impl<'m> Words<'m> {
    /// The `count` words of `elem` from `offset` of `mem` (in range and aligned, checked once:
    /// MPI_ERR_RMA_RANGE otherwise).
    pub(crate) fn of(mem: &'m Mem<'_>, offset: usize, elem: Elem, count: usize) -> Result<Self> {
        Ok(match elem.size() {
            8 => Words::U64(mem.atomic_u64s(offset, count)?),
            _ => Words::U32(mem.atomic_u32s(offset, count)?),
        })
    }
}

/// Each element's read-modify-write of `op` with its operand (little-endian `operands`, one
/// per word) by CPU atomics, one atomic per element, each on its own: a single instruction
/// for integer sums, replacement and reads, a compare-and-swap loop otherwise, as
/// [`rmw_word`] does one by one, with the operation chosen once for the run. The old values
/// land in `fetched` (as long as `operands`) when given.
pub(crate) fn rmw_run(
    words: Words<'_>,
    elem: Elem,
    op: Op,
    operands: &[u8],
    fetched: Option<&mut [u8]>,
) {
    let sum = op == Op::Sum && !elem.is_float();
    // One loop per kind of operation, chosen before it: `each!(w, operand => old)`.
    macro_rules! run {
        ($words:expr, $t:ty) => {{
            const N: usize = size_of::<$t>();
            let words = $words;
            let operands = operands
                .chunks_exact(N)
                .map(|o| <$t>::from_le_bytes(o.try_into().expect("N bytes")));
            let mut fetched = fetched.map(|f| f.chunks_exact_mut(N));
            macro_rules! each {
                ($w:ident, $operand:ident => $old:expr) => {
                    for ($w, $operand) in words.iter().zip(operands) {
                        let old: $t = $old;
                        if let Some(f) = fetched.as_mut().and_then(Iterator::next) {
                            f.copy_from_slice(&old.to_le_bytes());
                        }
                    }
                };
            }
            match op {
                Op::NoOp => each!(w, _o => w.load(Ordering::SeqCst)),
                Op::Replace => each!(w, o => w.swap(o, Ordering::SeqCst)),
                _ if sum => each!(w, o => w.fetch_add(o, Ordering::SeqCst)),
                _ => each!(w, o => w
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |old| {
                        Some(combine(elem, op, old as u64, o as u64) as $t)
                    })
                    .unwrap_or_else(|old| old)),
            }
        }};
    }
    match words {
        Words::U64(w) => run!(w, u64),
        Words::U32(w) => run!(w, u32),
    }
}

impl Transport for ShmTransport<'_> {
    fn caps(&self) -> &Caps {
        &self.caps
    }

    #[inline]
    fn put(&self, target: usize, space: Space, offset: usize, src: &[u8]) -> Result<()> {
        self.reach(target, space)?.write(offset, src)
    }

    #[inline]
    fn get(&self, target: usize, space: Space, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.reach(target, space)?.read(offset, dst)
    }

    /// The target reached once; its process memory with one system call per `IOV_MAX` runs.
    fn put_runs(&self, target: usize, space: Space, pieces: &[(usize, &[u8])]) -> Result<()> {
        self.reach(target, space)?.write_runs(pieces)
    }

    /// As `put_runs`.
    fn get_runs(&self, target: usize, space: Space, runs: &mut [(usize, &mut [u8])]) -> Result<()> {
        self.reach(target, space)?.read_runs(runs)
    }

    /// Each stretch of parts to one target's space as the runs of one `put_runs`: into another
    /// process's private memory (create windows), one system call for the stretch.
    fn put_many(&self, parts: &[Part<&[u8]>]) -> Result<()> {
        parts
            .chunk_by(|a, b| (a.target, a.space) == (b.target, b.space))
            .try_for_each(|same| {
                let pieces: Vec<(usize, &[u8])> =
                    same.iter().map(|p| (p.offset, p.bytes)).collect();
                self.put_runs(same[0].target, same[0].space, &pieces)
            })
    }

    /// As `put_many`, each stretch one `get_runs`.
    fn get_many(&self, parts: &mut [Part<&mut [u8]>]) -> Result<()> {
        parts
            .chunk_by_mut(|a, b| (a.target, a.space) == (b.target, b.space))
            .try_for_each(|same| {
                let (target, space) = (same[0].target, same[0].space);
                let mut runs: Vec<(usize, &mut [u8])> =
                    same.iter_mut().map(|p| (p.offset, &mut *p.bytes)).collect();
                self.get_runs(target, space, &mut runs)
            })
    }

    #[inline]
    fn amo(&self, target: usize, space: Space, offset: usize, op: Amo) -> Result<u64> {
        if space != Space::Control {
            return self.reach(target, space)?.amo(offset, op);
        }
        let ctrl = &self.target(target)?.ctrl;
        let old = op.on(ctrl.atomic_u64(offset).map_err(Error::from)?);
        if !matches!(op, Amo::Load) && layout::rings_doorbell(offset) {
            crate::wait::ring(ctrl)?;
        }
        Ok(old)
    }

    /// A CPU atomic on an element aligned in mapped memory; under the target's accumulate lock
    /// otherwise (see `ShmTransport::cpu`).
    fn accumulate(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: Accumulate,
    ) -> Result<u64> {
        match self.cpu(target, space, offset, acc.elem.size())? {
            Some(m) => rmw(m, offset, acc),
            None => {
                let watch = || self.peers.all_alive();
                locked_accumulate(self, &watch, target, space, offset, acc)
            }
        }
    }

    /// CPU atomics element by element where the elements are aligned in mapped memory (all
    /// are when the first is); under the target's accumulate lock, taken once, otherwise.
    fn accumulate_many(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: AccumulateMany<'_>,
        fetched: Option<&mut [u8]>,
    ) -> Result<()> {
        acc.check(fetched.as_deref())?;
        let size = acc.elem.size();
        match self.cpu(target, space, offset, size)? {
            Some(m) => {
                // The whole range first, so that an access beyond it changes no element.
                let words = Words::of(m, offset, acc.elem, acc.count())?;
                rmw_run(words, acc.elem, acc.op, acc.operands, fetched);
                Ok(())
            }
            None => {
                let watch = || self.peers.all_alive();
                locked_accumulate_many(self, &watch, target, space, offset, acc, fetched)
            }
        }
    }

    #[inline]
    fn flush(&self, _target: usize) -> Result<()> {
        fence(Ordering::SeqCst);
        Ok(())
    }

    fn flush_all(&self) -> Result<()> {
        fence(Ordering::SeqCst);
        Ok(())
    }

    #[inline]
    fn flush_local(&self, _target: usize) -> Result<()> {
        Ok(())
    }

    fn flush_local_all(&self) -> Result<()> {
        Ok(())
    }

    fn progress(&self) -> Result<()> {
        Ok(())
    }
}

impl<'a> Attach<'a> for ShmTransport<'a> {
    /// Nothing to register: the other ranks reach the memory by cross-memory attach at its
    /// address; this rank keeps it for its own accesses.
    fn attach(&self, mem: Mem<'a>) -> Result<(u64, u64)> {
        self.attached.borrow_mut().push(mem);
        Ok((0, 0))
    }

    fn detach(&self, addr: u64) {
        let mut attached = self.attached.borrow_mut();
        if let Some(i) = attached.iter().position(|m| m.addr() as u64 == addr) {
            attached.swap_remove(i);
        }
    }
}
