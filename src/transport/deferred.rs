//! A transport for tests whose data completes at flush, as a NIC's does: puts and the
//! accumulates that fetch nothing wait in a queue per target until `flush` (or `flush_all`) of
//! that target applies them, in order; gets, fetching accumulates and atomics on control words
//! complete when they return. Over the node's shared memory, between the rank threads of one
//! process (`world::inproc`), so that the window's completion logic (what it flushes before a
//! lock's release, a fence's barrier or a complete's signal) is tested without libfabric: a
//! window that forgot a flush leaves the target reading old bytes.
//!
//! It serves its accumulates as shared memory does (CPU atomics, or the target's lock word), so
//! it is atomic with every other accumulate of the window; a fetching accumulate or an atomic
//! to a target first applies what is queued for it, which keeps MPI's default accumulate
//! ordering. Signals go at once: a NIC delivers them without another call of the origin, and
//! the barrier waits for them right after sending.

use super::shm::{CAPS as SHM_CAPS, ShmTransport};
use super::{Accumulate, AccumulateMany, Amo, Attach, Caps, Reach, Space, Transport};
use crate::error::Result;
use crate::protocol::reduce::{Elem, Op};
use onesided_shm::Mem;
use std::cell::{Cell, RefCell};

thread_local! {
    /// Whether windows this rank thread creates take the deferred transport to every target.
    static WANTED: Cell<bool> = const { Cell::new(false) };
}

/// Windows created by this thread from now on take the deferred transport to every target
/// (`on`), or the usual transports.
pub(crate) fn defer_data(on: bool) {
    WANTED.with(|w| w.set(on));
}

/// Whether windows created by this thread take the deferred transport ([`defer_data`]).
pub(crate) fn wanted() -> bool {
    WANTED.with(Cell::get)
}

/// What waits for a flush of its target.
#[derive(Debug)]
enum Queued {
    Put {
        space: Space,
        offset: usize,
        bytes: Vec<u8>,
    },
    Accumulate {
        space: Space,
        offset: usize,
        elem: Elem,
        op: Op,
        operands: Vec<u8>,
        granularity: usize,
        same_op: bool,
    },
}

/// The deferred transport of one window: shared memory underneath, a queue per target.
#[derive(Debug)]
pub(crate) struct Deferred<'a> {
    inner: ShmTransport<'a>,
    queued: RefCell<Vec<Vec<Queued>>>,
    caps: Caps,
}

impl<'a> Deferred<'a> {
    /// Over `inner`, connected to every rank of the window (all on this node).
    pub(crate) fn new(inner: ShmTransport<'a>, ranks: usize) -> Deferred<'a> {
        Deferred {
            inner,
            queued: RefCell::new((0..ranks).map(|_| Vec::new()).collect()),
            caps: Caps {
                name: "deferred",
                reach: Reach::Any,
                load_store: false,
                needs_target_progress: false,
                wakes_sleepers: true,
                wakes_by_completion: false,
                atomics_order_prior: false,
                inject: 0,
                max_msg: usize::MAX,
                local_mr: false,
                native_atomics: SHM_CAPS.native_atomics,
                cpu_atomics: false,
            },
        }
    }

    /// Fails as the access would (range, rank) without touching the target.
    fn check(&self, target: usize, space: Space, offset: usize, len: usize) -> Result<()> {
        self.inner
            .get(target, space, offset, &mut vec![0; len])
            .map(drop)
    }

    /// Apply what is queued for `target`, in order.
    fn apply(&self, target: usize) -> Result<()> {
        let queued = match self.queued.borrow_mut().get_mut(target) {
            Some(q) => std::mem::take(q),
            None => return Ok(()),
        };
        for q in queued {
            match q {
                Queued::Put {
                    space,
                    offset,
                    bytes,
                } => self.inner.put(target, space, offset, &bytes)?,
                Queued::Accumulate {
                    space,
                    offset,
                    elem,
                    op,
                    operands,
                    granularity,
                    same_op,
                } => {
                    let acc = AccumulateMany {
                        elem,
                        op,
                        operands: &operands,
                        granularity,
                        same_op,
                    };
                    self.inner
                        .accumulate_many(target, space, offset, acc, None)?
                }
            }
        }
        Ok(())
    }
}

impl Transport for Deferred<'_> {
    fn caps(&self) -> &Caps {
        &self.caps
    }

    fn put(&self, target: usize, space: Space, offset: usize, src: &[u8]) -> Result<()> {
        self.check(target, space, offset, src.len())?;
        self.queued.borrow_mut()[target].push(Queued::Put {
            space,
            offset,
            bytes: src.to_vec(),
        });
        Ok(())
    }

    fn get(&self, target: usize, space: Space, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.inner.get(target, space, offset, dst)
    }

    fn amo(&self, target: usize, space: Space, offset: usize, op: Amo) -> Result<u64> {
        if space != Space::Control {
            self.apply(target)?;
        }
        self.inner.amo(target, space, offset, op)
    }

    fn accumulate(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: Accumulate,
    ) -> Result<u64> {
        self.apply(target)?;
        self.inner.accumulate(target, space, offset, acc)
    }

    fn accumulate_many(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: AccumulateMany<'_>,
        fetched: Option<&mut [u8]>,
    ) -> Result<()> {
        acc.check(fetched.as_deref())?;
        if fetched.is_some() {
            self.apply(target)?;
            return self
                .inner
                .accumulate_many(target, space, offset, acc, fetched);
        }
        self.check(target, space, offset, acc.operands.len())?;
        self.queued.borrow_mut()[target].push(Queued::Accumulate {
            space,
            offset,
            elem: acc.elem,
            op: acc.op,
            operands: acc.operands.to_vec(),
            granularity: acc.granularity,
            same_op: acc.same_op,
        });
        Ok(())
    }

    fn flush(&self, target: usize) -> Result<()> {
        self.apply(target)?;
        self.inner.flush(target)
    }

    fn flush_all(&self) -> Result<()> {
        let targets = self.queued.borrow().len();
        (0..targets).try_for_each(|t| self.apply(t))?;
        self.inner.flush_all()
    }

    /// The queue holds copies: the origin's buffers are free when a call returns.
    fn flush_local(&self, _target: usize) -> Result<()> {
        Ok(())
    }

    fn flush_local_all(&self) -> Result<()> {
        Ok(())
    }

    fn progress(&self) -> Result<()> {
        self.inner.progress()
    }
}

impl<'a> Attach<'a> for Deferred<'a> {
    fn attach(&self, mem: Mem<'a>) -> Result<(u64, u64)> {
        self.inner.attach(mem)
    }

    fn detach(&self, addr: u64) {
        self.inner.detach(addr)
    }
}
