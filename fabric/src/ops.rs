//! RMA and atomics of an endpoint.
//!
//! The blocking forms return when their local buffers may be reused: a small write is injected
//! and counted for the peer's flush; other operations get a slot of their own and wait for it
//! alone, not for unrelated operations in flight. Where the provider demands registered local
//! buffers (`FI_MR_LOCAL`), small transfers and atomic operands pass through the endpoint's
//! registered bounce buffer, and larger transfers register the caller's memory for the call
//! (zero-copy). The request forms are in `request.rs`, batches of blocking transfers in
//! `batch.rs`.

use crate::domain::{AtomicOp, Datatype};
use crate::endpoint::{BOUNCE, Endpoint};
use crate::error::{FiError, invalid};
use crate::lent::Lent;
use crate::patience::Waiting;
use crate::peer::Peer;
use crate::remote::{Remote, range};
use crate::stage::Staged;
use crate::sys;
use crate::track::Slot;
use std::ptr;

/// Offsets in the bounce buffer of atomic operand, compare value and result.
const OPERAND: usize = 0;
const COMPARE: usize = 64;
const RESULT: usize = 128;

/// Which way an RMA operation moves data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    /// From the peer.
    Read,
    /// To the peer; `inject`: copied by the provider and counted only (no slot); `data`:
    /// delivered to the peer's completion queue once the write is there (`FI_REMOTE_CQ_DATA`).
    Write { inject: bool, data: Option<u64> },
}

impl Endpoint {
    /// The largest piece one operation moves: the provider's limit.
    pub(crate) fn step(&self) -> usize {
        self.max_msg
    }

    fn bounce_desc(&self) -> *mut libc::c_void {
        if self.local_mr {
            self.bounce.desc()
        } else {
            ptr::null_mut()
        }
    }

    /// How the `len` bytes at `addr` of the caller's memory reach the NIC for one blocking
    /// call: as they are where the provider needs no registered local buffers, or a region
    /// registered on this endpoint (window memory, alloc_mem blocks) or a registration of the
    /// cache (`cache.rs`) holds them; else through the bounce buffer when they fit (a copy
    /// measured cheaper than a registration for small transfers), else registered, and the
    /// registration kept in the cache (zero-copy).
    ///
    /// # Safety
    /// The memory must stay valid until the returned value is dropped.
    #[inline]
    pub(crate) unsafe fn lend(&self, addr: usize, len: usize) -> Result<Lent, FiError> {
        if !self.local_mr {
            return Ok(Lent::Direct(ptr::null_mut()));
        }
        // SAFETY: `lend_local` asks what `lend` asks, and the caller guarantees it.
        unsafe { self.lend_local(addr, len) }
    }

    /// [`Endpoint::lend`] where the provider needs registered local buffers.
    ///
    /// # Safety
    /// As for [`Endpoint::lend`].
    unsafe fn lend_local(&self, addr: usize, len: usize) -> Result<Lent, FiError> {
        if let Some(desc) = self.core.registered().find(addr, len) {
            return Ok(Lent::Direct(desc));
        }
        if let Some(mr) = self.core.cache.find(addr, len) {
            return Ok(Lent::Cached(mr));
        }
        if len <= BOUNCE {
            return Ok(Lent::Bounce);
        }
        // SAFETY: guaranteed by the caller; the endpoint keeps its domain open.
        unsafe { self.core.cache.register(self.core.local(), addr, len) }
    }

    /// Write `src` to `to`; returns when `src` may be reused. Small writes are injected and
    /// counted for the peer's flush; others wait for their own completion.
    pub fn write(
        &self,
        src: &[u8],
        to: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        self.write_with(src, to, None, keep_waiting)
    }

    /// [`Endpoint::write`] in one operation that delivers `data` to the peer once `src` is in
    /// its memory: its handler ([`Endpoint::on_remote_data`]) gets it from the completion the
    /// write makes there. Only where the provider carries such data
    /// ([`Endpoint::remote_data_bits`]) and `src` fits one operation (EINVAL otherwise).
    pub fn write_notify(
        &self,
        src: &[u8],
        to: Remote,
        data: u64,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        if self.remote_data_bits() == 0 || src.len() > self.step() {
            return Err(invalid("fi_writedata"));
        }
        self.write_with(src, to, Some(data), keep_waiting)
    }

    /// [`Endpoint::write`], the last piece carrying `data` where there is some.
    fn write_with(
        &self,
        src: &[u8],
        to: Remote,
        data: Option<u64>,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        if src.len() <= self.inject {
            return self.inject(src, to, data, keep_waiting);
        }
        // SAFETY: `src` is borrowed until this call returns, after the waits below.
        let lent = unsafe { self.lend(src.as_ptr() as usize, src.len())? };
        let (from, desc) = match &lent {
            Lent::Bounce => {
                let b = self.bounce.mem();
                b.write(0, src).map_err(|_| invalid("bounce"))?;
                (b.addr(), self.bounce.desc())
            }
            other => (src.as_ptr() as usize, other.desc()),
        };
        let (len, step) = (src.len(), self.step());
        let mut slots = Vec::new();
        let posted = (0..len).step_by(step).try_for_each(|at| {
            let n = step.min(len - at);
            let last = data.filter(|_| at + n == len);
            let s = self.rma_write(
                from + at,
                n,
                desc,
                to.at(at),
                None,
                false,
                last,
                keep_waiting,
            )?;
            slots.extend(s);
            Ok(())
        });
        let waited = self.wait_all(&slots, keep_waiting);
        posted.and(waited)
    }

    /// Read `dst.len()` bytes at `from`; returns with the data in `dst`.
    pub fn read(
        &self,
        dst: &mut [u8],
        from: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        let (addr, len) = (dst.as_mut_ptr() as usize, dst.len());
        // SAFETY: `dst` is borrowed until this call returns, after the waits below.
        let lent = unsafe { self.lend(addr, len)? };
        let (into, desc) = match &lent {
            Lent::Bounce => (self.bounce.mem().addr(), self.bounce.desc()),
            other => (addr, other.desc()),
        };
        let step = self.step();
        if len <= step {
            let slot = self.rma_read(into, len, desc, from, None, keep_waiting)?;
            self.wait_slot("operation", slot, keep_waiting)?;
        } else {
            let mut slots = Vec::new();
            let posted = (0..len).step_by(step).try_for_each(|at| {
                let n = step.min(len - at);
                slots.push(self.rma_read(into + at, n, desc, from.at(at), None, keep_waiting)?);
                Ok(())
            });
            let waited = self.wait_all(&slots, keep_waiting);
            posted.and(waited)?;
        }
        match lent {
            Lent::Bounce => self
                .bounce
                .mem()
                .read(0, dst)
                .map_err(|_| invalid("bounce")),
            _ => Ok(()),
        }
    }

    /// Inject `src` (at most the provider's inject size) to `to`, carrying `data` to the peer's
    /// completion queue where there is some: reusable at once, counted for the peer's flush.
    pub(crate) fn inject(
        &self,
        src: &[u8],
        to: Remote,
        data: Option<u64>,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        let (buf, len) = (src.as_ptr() as usize, src.len());
        self.rma_write(
            buf,
            len,
            ptr::null_mut(),
            to,
            None,
            true,
            data,
            keep_waiting,
        )
        .map(drop)
    }

    /// Wait for every slot of `slots`, also after a failure; the first failure is returned.
    pub(crate) fn wait_all(
        &self,
        slots: &[Slot],
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        let mut first = Ok(());
        for &s in slots {
            let waited = self.wait_slot("operation", s, keep_waiting);
            if first.is_ok() {
                first = waited.map(drop);
            }
        }
        first
    }

    /// Post one write of `len` bytes at `buf`: injected (counted only) when `inject`, else with
    /// a slot of its own, keeping `keep` until it settles; carrying `data` to the peer's
    /// completion queue where there is some.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rma_write(
        &self,
        buf: usize,
        len: usize,
        desc: *mut libc::c_void,
        to: Remote,
        keep: Option<Staged>,
        inject: bool,
        data: Option<u64>,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<Option<Slot>, FiError> {
        let mut rma = [range(to, len)];
        let way = Way::Write { inject, data };
        self.rma_msg(way, buf, len, desc, to.peer, &mut rma, keep, keep_waiting)
    }

    /// Post one read of `len` bytes into `buf`, with a slot of its own keeping `keep`.
    pub(crate) fn rma_read(
        &self,
        buf: usize,
        len: usize,
        desc: *mut libc::c_void,
        from: Remote,
        keep: Option<Staged>,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<Slot, FiError> {
        let mut rma = [range(from, len)];
        self.rma_msg(
            Way::Read,
            buf,
            len,
            desc,
            from.peer,
            &mut rma,
            keep,
            keep_waiting,
        )?
        .ok_or_else(|| invalid("fi_readmsg"))
    }

    /// Post one operation moving the `len` bytes at `buf` to (or from) the remote ranges `rma`
    /// of `peer` in turn (their lengths add up to `len`; at most the provider's
    /// `rma_iov_limit` of them): a read, or a write injected (counted only) when asked, each
    /// other operation with a slot of its own keeping `keep` until it settles.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rma_msg(
        &self,
        way: Way,
        buf: usize,
        len: usize,
        desc: *mut libc::c_void,
        peer: Peer,
        rma: &mut [sys::fi_rma_iov],
        keep: Option<Staged>,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<Option<Slot>, FiError> {
        let mut local = [libc::iovec {
            iov_base: buf as *mut libc::c_void,
            iov_len: len,
        }];
        self.rma_msgv(way, &mut local, &mut [desc], peer, rma, keep, keep_waiting)
    }

    /// As [`Endpoint::rma_msg`], from (or into) the local buffers `local` in turn, with their
    /// descriptors `descs` (at most the provider's `iov_limit` of them).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rma_msgv(
        &self,
        way: Way,
        local: &mut [libc::iovec],
        descs: &mut [*mut libc::c_void],
        peer: Peer,
        rma: &mut [sys::fi_rma_iov],
        keep: Option<Staged>,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<Option<Slot>, FiError> {
        let done = sys::FI_COMPLETION as u64;
        let (name, flags, slot) = match way {
            Way::Read => ("fi_readmsg", done, true),
            Way::Write { inject, data } => {
                let copied = if inject { sys::FI_INJECT as u64 } else { 0 };
                let carried = match data {
                    Some(_) => sys::FI_REMOTE_CQ_DATA as u64,
                    None => 0,
                };
                (
                    "fi_writemsg",
                    done | copied | carried | self.delivery,
                    !inject,
                )
            }
        };
        let data = match way {
            Way::Write { data, .. } => data.unwrap_or(0),
            Way::Read => 0,
        };
        // SAFETY: the endpoint is open; each of `local` is valid for its length (writable for a
        // read) until the call returns (FI_INJECT copies it), or is kept by the slot, or the
        // caller waits for the slot before using or releasing it; `descs` is as long as
        // `local`; `msg` and what it points to live across the call.
        self.post(name, peer, slot, keep, keep_waiting, |ctx| unsafe {
            let msg = sys::fi_msg_rma {
                msg_iov: local.as_mut_ptr().cast(),
                desc: descs.as_mut_ptr(),
                iov_count: local.len(),
                addr: peer.addr,
                rma_iov: rma.as_mut_ptr(),
                rma_iov_count: rma.len(),
                context: ctx,
                data,
            };
            match way {
                Way::Read => sys::fi_readmsg(self.core.ep(), &msg, flags),
                Way::Write { .. } => sys::fi_writemsg(self.core.ep(), &msg, flags),
            }
        })
    }

    /// `op` on one `dtype` element at `to` with `operand` (its bytes); the old value's bytes
    /// go to `result` (`fi_fetch_atomic`; `AtomicOp::Read` fetches only). One element always
    /// fetches: the old value is wanted (lock words, fetch_and_op) or costs no more than the
    /// wait that a non-fetching form would need before its operand buffer could be reused.
    pub fn fetch_atomic(
        &self,
        dtype: Datatype,
        op: AtomicOp,
        operand: &[u8],
        result: &mut [u8],
        to: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        let inputs = [(OPERAND, operand)];
        self.bounced(
            "fi_fetch_atomic",
            dtype,
            &inputs,
            result,
            to,
            keep_waiting,
            |b, desc, ctx| {
                // SAFETY: the endpoint is open; operand and result lie in the registered bounce
                // buffer, which is not reused before completion (`bounced` waits for it).
                unsafe {
                    sys::fi_fetch_atomic(
                        self.core.ep(),
                        (b + OPERAND) as *const libc::c_void,
                        1,
                        desc,
                        (b + RESULT) as *mut libc::c_void,
                        desc,
                        to.peer.addr,
                        to.addr,
                        to.key,
                        dtype.raw(),
                        op.raw(),
                        ctx,
                    )
                }
            },
        )
    }

    /// `op` on the `operands.len() / dtype.size()` consecutive `dtype` elements at `to`, each
    /// atomic on its own (not the whole); their old values go to `result`, as long as
    /// `operands`.
    pub fn fetch_atomic_many(
        &self,
        dtype: Datatype,
        op: AtomicOp,
        operands: &[u8],
        result: &mut [u8],
        to: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        if operands.len() != result.len() {
            return Err(invalid("fi_fetch_atomic"));
        }
        let t = self.start_atomic_many(dtype, op, operands, true, to, keep_waiting)?;
        self.finish(t, Some(result), keep_waiting)
    }

    /// Compare-and-swap one `dtype` element at `to`: stores `swap` if it equals `compare`;
    /// the old value's bytes go to `result`.
    pub fn compare_swap(
        &self,
        dtype: Datatype,
        compare: &[u8],
        swap: &[u8],
        result: &mut [u8],
        to: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        let inputs = [(OPERAND, swap), (COMPARE, compare)];
        self.bounced(
            "fi_compare_atomic",
            dtype,
            &inputs,
            result,
            to,
            keep_waiting,
            |b, desc, ctx| {
                // SAFETY: the endpoint is open; swap, compare and result lie in the registered
                // bounce buffer, which is not reused before completion (`bounced` waits for it).
                unsafe {
                    sys::fi_compare_atomic(
                        self.core.ep(),
                        (b + OPERAND) as *const libc::c_void,
                        1,
                        desc,
                        (b + COMPARE) as *const libc::c_void,
                        desc,
                        (b + RESULT) as *mut libc::c_void,
                        desc,
                        to.peer.addr,
                        to.addr,
                        to.key,
                        dtype.raw(),
                        AtomicOp::Cswap.raw(),
                        ctx,
                    )
                }
            },
        )
    }

    /// One fetching atomic through the bounce buffer: copy each `(offset, bytes)` input there,
    /// post `call(bounce address, descriptor, context)`, wait for its completion, copy the old
    /// value out.
    #[allow(clippy::too_many_arguments)]
    fn bounced(
        &self,
        op: &str,
        dtype: Datatype,
        inputs: &[(usize, &[u8])],
        result: &mut [u8],
        to: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
        mut call: impl FnMut(usize, *mut libc::c_void, *mut libc::c_void) -> isize,
    ) -> Result<(), FiError> {
        let size = dtype.size();
        if result.len() < size || inputs.iter().any(|(_, v)| v.len() < size) {
            return Err(invalid(op));
        }
        let b = self.bounce.mem();
        for (at, v) in inputs {
            b.write(*at, &v[..size]).map_err(|_| invalid(op))?;
        }
        let desc = self.bounce_desc();
        let slot = self.post(op, to.peer, true, None, keep_waiting, |ctx| {
            call(b.addr(), desc, ctx)
        })?;
        self.wait_slot(op, slot.ok_or_else(|| invalid(op))?, keep_waiting)?;
        b.read(RESULT, &mut result[..size]).map_err(|_| invalid(op))
    }
}
