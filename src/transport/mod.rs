//! The contract between windows and transports.
//!
//! A window talks to every target through one [`Transport`], chosen per target at window
//! creation (shared memory inside a node; the NIC for other nodes). The contract is shaped for
//! both kinds: shared memory, where a put is a copy and complete when it returns, and an RDMA NIC
//! whose operations complete later and whose target may need [`Transport::progress`] calls
//! (libfabric's tcp;ofi_rxm). The four completion points are the whole contract the
//! synchronization layer relies on:
//!
//! - an operation call returns when its origin buffer may be reused (local completion of put;
//!   for get, the data is in the buffer), so that safe code can never free a buffer in use;
//! - [`Transport::flush_local`] / [`Transport::flush_local_all`]: every operation to the target is
//!   locally complete;
//! - [`Transport::flush`] / [`Transport::flush_all`]: every operation to the target is complete at
//!   the target, visible to its loads and to other origins;
//! - [`Transport::amo`] on the control space is atomic with respect to every other origin's `amo`
//!   on the same word, and returns the old value (remote completion by construction).
//!
//! Memory is exposed with a serializable [`RemoteKey`]: each rank describes its window memory and
//! control block, the keys are exchanged through the world, and each rank connects the keys of
//! the targets it reaches.

#[cfg(have_libfabric)]
pub mod fabric;
pub(crate) mod net;
#[cfg(all(have_libfabric, feature = "hwloc"))]
mod nic;
#[cfg(feature = "launcher")]
pub mod report;
pub mod shm;

use crate::error::Result;
use crate::protocol::layout;
pub use crate::protocol::lockword::Amo;
use crate::protocol::reduce::{Elem, Op, combine};

/// What one element's atomic read-modify-write does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccOp {
    /// Combine with the operand by `Op`.
    Apply(Op),
    /// Store the operand if the element equals `compare`.
    CompareSwap {
        /// The value the element must hold for the operand to be stored.
        compare: u64,
    },
}

/// An atomic read-modify-write of one element of window memory: the accumulate family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accumulate {
    /// Element type.
    pub elem: Elem,
    /// What to do.
    pub op: AccOp,
    /// The origin value's bits, in the low bytes.
    pub operand: u64,
}

impl Accumulate {
    /// The value an element holding `old` takes (the software path of every transport).
    pub fn next(&self, old: u64) -> u64 {
        match self.op {
            AccOp::Apply(op) => combine(self.elem, op, old, self.operand),
            AccOp::CompareSwap { compare } if old == compare => self.operand,
            AccOp::CompareSwap { .. } => old,
        }
    }
}

/// Which memory of a target an operation addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    /// The target's window memory.
    Data,
    /// The target's control block (lock word, barrier slots, ...).
    Control,
}

/// What a transport can do, so that windows and tests choose paths by capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caps {
    /// Transport name, e.g. "shm".
    pub name: &'static str,
    /// Target memory is directly addressable by loads and stores (MPI_Win_shared_query works).
    pub load_store: bool,
    /// The target must call [`Transport::progress`] for operations to complete.
    pub needs_target_progress: bool,
    /// Control-space atomics wake a target asleep on its doorbell, so waiters may sleep.
    pub wakes_sleepers: bool,
    /// A control-space atomic is ordered after every earlier operation of this origin to the
    /// same target, complete there (CPU atomics after plain stores): releasing a lock needs no
    /// flush before it.
    pub atomics_order_prior: bool,
}

/// A serialized description of one rank's exposed memory, meaningful to one transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteKey(pub Vec<u8>);

/// Moves bytes and atomics between this origin and the targets it serves. Offsets are bytes into
/// the target's space; the window has checked ranges already, and the transport checks again
/// (an out-of-range access fails with RMA_RANGE and touches nothing).
pub trait Transport: std::fmt::Debug {
    /// What the transport can do.
    fn caps(&self) -> &Caps;
    /// Write `src` at `offset` of `target`'s `space`; returns when `src` may be reused.
    fn put(&self, target: usize, space: Space, offset: usize, src: &[u8]) -> Result<()>;
    /// Read `dst.len()` bytes at `offset` of `target`'s `space`; returns with the data in `dst`.
    fn get(&self, target: usize, space: Space, offset: usize, dst: &mut [u8]) -> Result<()>;
    /// A 64-bit atomic on the 8-aligned word at `offset`; returns the old value.
    fn amo(&self, target: usize, space: Space, offset: usize, op: Amo) -> Result<u64>;
    /// An atomic read-modify-write of the element at `offset` of `target`'s window memory (at
    /// any offset), atomic with respect to every other `accumulate` of the window on the same
    /// element; returns the old bits.
    fn accumulate(&self, target: usize, offset: usize, acc: Accumulate) -> Result<u64>;
    /// Complete every operation to `target` at the target.
    fn flush(&self, target: usize) -> Result<()>;
    /// Complete every operation at every target.
    fn flush_all(&self) -> Result<()>;
    /// Complete every operation to `target` at this origin.
    fn flush_local(&self, target: usize) -> Result<()>;
    /// Complete every operation at this origin.
    fn flush_local_all(&self) -> Result<()>;
    /// Let the transport move pending work (for transports whose target must make progress).
    fn progress(&self) -> Result<()>;
}

/// One element's accumulate emulated under `target`'s accumulate lock word
/// ([`layout::ACC_LOCK`]): take it (compare-and-swap 0 to 1), read, combine, write, complete at
/// the target, release. Works at any offset and on memory that `t` reaches only by copies, and
/// is atomic with respect to every other accumulate on the element as long as every origin
/// takes this path for it (each transport decides by the element's address and the window, the
/// same way on every rank). `watch` fails once a rank the wait for the lock depends on is gone.
///
/// # MPI-4.1: 12.7.1 (atomicity of accumulates to the same location and datatype)
pub(crate) fn locked_accumulate(
    t: &dyn Transport,
    watch: &dyn Fn() -> Result<()>,
    target: usize,
    offset: usize,
    acc: Accumulate,
) -> Result<u64> {
    let size = acc.elem.size();
    let lock = |op| t.amo(target, Space::Control, layout::ACC_LOCK, op);
    crate::wait::retry(watch, || {
        Ok((lock(Amo::CompareSwap {
            compare: 0,
            swap: 1,
        })? == 0)
            .then_some(()))
    })?;
    let updated = (|| -> Result<u64> {
        let mut old = [0u8; 8];
        t.get(target, Space::Data, offset, &mut old[..size])?;
        let old = u64::from_le_bytes(old);
        let new = acc.next(old);
        if new != old {
            t.put(target, Space::Data, offset, &new.to_le_bytes()[..size])?;
            t.flush(target)?;
        }
        Ok(old)
    })();
    let released = lock(Amo::CompareSwap {
        compare: 1,
        swap: 0,
    });
    let old = updated?;
    released?;
    Ok(old)
}
