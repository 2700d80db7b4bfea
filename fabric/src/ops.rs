//! RMA and atomics of an endpoint. Each returns when its local buffers may be reused: a small
//! write is injected, a larger one waited for; reads and atomics wait for their completion.
//! Where the provider demands registered local buffers (`FI_MR_LOCAL`), data and operands pass
//! through the endpoint's registered bounce buffer.

use crate::domain::{AtomicKind, AtomicOp, Datatype};
use crate::endpoint::{BOUNCE, Endpoint, Peer, Waiting};
use crate::error::FiError;
use crate::sys;
use std::ptr;

/// Offsets in the bounce buffer of atomic operand, compare value and result.
const OPERAND: usize = 0;
const COMPARE: usize = 64;
const RESULT: usize = 128;

/// Where in a peer's memory an operation goes.
#[derive(Clone, Copy)]
struct Target {
    peer: Peer,
    addr: u64,
    key: u64,
}

impl Endpoint {
    /// The largest piece one operation moves: the bounce buffer when local buffers must be
    /// registered, else the provider's limit.
    fn step(&self) -> usize {
        if self.local_mr {
            BOUNCE.min(self.max_msg)
        } else {
            self.max_msg
        }
    }

    fn bounce_desc(&self) -> *mut libc::c_void {
        if self.local_mr {
            self.bounce.desc()
        } else {
            ptr::null_mut()
        }
    }

    /// Write `src` to `addr` (in the peer's addressing) under `key`; returns when `src` may be
    /// reused. Small writes are injected; others wait for their completion.
    pub fn write(
        &self,
        src: &[u8],
        peer: Peer,
        addr: u64,
        key: u64,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        let step = self.step();
        for (i, chunk) in src.chunks(step).enumerate() {
            let at = addr + (i * step) as u64;
            if chunk.len() <= self.inject {
                self.rma_msg(
                    "fi_writemsg",
                    chunk.as_ptr() as usize,
                    chunk.len(),
                    ptr::null_mut(),
                    Target {
                        peer,
                        addr: at,
                        key,
                    },
                    sys::FI_INJECT as u64,
                    keep_waiting,
                )?;
                continue;
            }
            let (buf, desc) = if self.local_mr {
                self.bounce
                    .mem()
                    .write(0, chunk)
                    .map_err(|_| FiError::new("bounce", -(sys::FI_EINVAL as i64)))?;
                (self.bounce.mem().addr(), self.bounce.desc())
            } else {
                (chunk.as_ptr() as usize, ptr::null_mut())
            };
            let to = Target {
                peer,
                addr: at,
                key,
            };
            self.rma_msg("fi_writemsg", buf, chunk.len(), desc, to, 0, keep_waiting)?;
            self.complete(keep_waiting)?;
        }
        Ok(())
    }

    /// Read `dst.len()` bytes at `addr` under `key`; returns with the data in `dst`.
    pub fn read(
        &self,
        dst: &mut [u8],
        peer: Peer,
        addr: u64,
        key: u64,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        let step = self.step();
        for (i, chunk) in dst.chunks_mut(step).enumerate() {
            let at = addr + (i * step) as u64;
            if self.local_mr {
                let b = self.bounce.mem();
                let from = Target {
                    peer,
                    addr: at,
                    key,
                };
                self.rma_read(
                    b.addr(),
                    chunk.len(),
                    self.bounce.desc(),
                    from,
                    keep_waiting,
                )?;
                self.complete(keep_waiting)?;
                b.read(0, chunk)
                    .map_err(|_| FiError::new("bounce", -(sys::FI_EINVAL as i64)))?;
            } else {
                self.rma_read(
                    chunk.as_mut_ptr() as usize,
                    chunk.len(),
                    ptr::null_mut(),
                    Target {
                        peer,
                        addr: at,
                        key,
                    },
                    keep_waiting,
                )?;
                self.complete(keep_waiting)?;
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn rma_msg(
        &self,
        op: &str,
        buf: usize,
        len: usize,
        mut desc: *mut libc::c_void,
        to: Target,
        flags: u64,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        let Target { peer, addr, key } = to;
        let mut iov = libc::iovec {
            iov_base: buf as *mut libc::c_void,
            iov_len: len,
        };
        let mut rma = sys::fi_rma_iov { addr, len, key };
        let msg = sys::fi_msg_rma {
            msg_iov: (&raw mut iov).cast(),
            desc: &mut desc,
            iov_count: 1,
            addr: peer.0,
            rma_iov: &mut rma,
            rma_iov_count: 1,
            context: ptr::null_mut(),
            data: 0,
        };
        // SAFETY: the endpoint is open; `buf` is valid for `len` bytes until the call returns
        // (FI_INJECT copies it) or until the caller waits for completion before releasing it;
        // `msg` and what it points to live across the call.
        self.post(op, keep_waiting, || unsafe {
            sys::fi_writemsg(self.core.ep, &msg, flags | self.delivery)
        })
    }

    fn rma_read(
        &self,
        buf: usize,
        len: usize,
        desc: *mut libc::c_void,
        from: Target,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        let Target { peer, addr, key } = from;
        // SAFETY: the endpoint is open; `buf` is writable for `len` bytes and the caller waits
        // for completion before using or releasing it.
        self.post("fi_read", keep_waiting, || unsafe {
            sys::fi_read(
                self.core.ep,
                buf as *mut libc::c_void,
                len,
                desc,
                peer.0,
                addr,
                key,
                ptr::null_mut(),
            )
        })
    }

    /// `op` on one `dtype` element at `addr` with `operand` (its bytes); the old value's bytes
    /// go to `result` (`fi_fetch_atomic`; `AtomicOp::Read` fetches only). There is no
    /// non-fetching form: libfabric 1.17's shm provider completes `fi_atomic` before the target
    /// has read the operand, and a wait is needed either way for the buffer to be reused.
    #[allow(clippy::too_many_arguments)]
    pub fn fetch_atomic(
        &self,
        dtype: Datatype,
        op: AtomicOp,
        operand: &[u8],
        result: &mut [u8],
        peer: Peer,
        addr: u64,
        key: u64,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        let inputs = [(OPERAND, operand)];
        self.bounced(
            "fi_fetch_atomic",
            dtype,
            &inputs,
            result,
            keep_waiting,
            |b, desc| {
                // SAFETY: the endpoint is open; operand and result lie in the registered bounce
                // buffer, which is not reused before completion (`bounced` waits for it).
                unsafe {
                    sys::fi_fetch_atomic(
                        self.core.ep,
                        (b + OPERAND) as *const libc::c_void,
                        1,
                        desc,
                        (b + RESULT) as *mut libc::c_void,
                        desc,
                        peer.0,
                        addr,
                        key,
                        dtype.raw(),
                        op.raw(),
                        ptr::null_mut(),
                    )
                }
            },
        )
    }

    /// `op` on the `operands.len() / dtype.size()` consecutive `dtype` elements at `addr`, each
    /// atomic on its own (not the whole); their old values go to `result`, as long as
    /// `operands`. One `fi_fetch_atomic` carries as many elements as the provider allows for
    /// `(dtype, op)` (`fi_query_atomic`'s count); operands and results pass through the bounce
    /// buffer's halves, and the calls whose operands fit there together are in flight together,
    /// with one wait for them.
    #[allow(clippy::too_many_arguments)]
    pub fn fetch_atomic_many(
        &self,
        dtype: Datatype,
        op: AtomicOp,
        operands: &[u8],
        result: &mut [u8],
        peer: Peer,
        addr: u64,
        key: u64,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        const NAME: &str = "fi_fetch_atomic";
        let size = dtype.size();
        let invalid = || FiError::new(NAME, -(sys::FI_EINVAL as i64));
        if operands.len() != result.len() || !operands.len().is_multiple_of(size) {
            return Err(invalid());
        }
        let half = BOUNCE / 2;
        let max = self
            .domain()
            .atomic_count(dtype, op, AtomicKind::Fetch)
            .min(half / size);
        if max == 0 {
            return Err(FiError::new(NAME, -(sys::FI_EOPNOTSUPP as i64)));
        }
        let (piece, batch) = (max * size, half);
        let (b, desc) = (self.bounce.mem(), self.bounce_desc());
        let batches = operands.chunks(batch).zip(result.chunks_mut(batch));
        for (i, (src, dst)) in batches.enumerate() {
            b.write(0, src).map_err(|_| invalid())?;
            let posted = src.chunks(piece).enumerate().try_for_each(|(j, p)| {
                let at = j * piece;
                let to = addr + (i * batch + at) as u64;
                // SAFETY: the endpoint is open; the piece's operands and results lie in the
                // registered bounce buffer, which is not reused before the wait below (also
                // when a later piece fails to post).
                self.post(NAME, keep_waiting, || unsafe {
                    sys::fi_fetch_atomic(
                        self.core.ep,
                        (b.addr() + at) as *const libc::c_void,
                        p.len() / size,
                        desc,
                        (b.addr() + half + at) as *mut libc::c_void,
                        desc,
                        peer.0,
                        to,
                        key,
                        dtype.raw(),
                        op.raw(),
                        ptr::null_mut(),
                    )
                })
            });
            let completed = self.complete(keep_waiting);
            posted?;
            completed?;
            b.read(half, dst).map_err(|_| invalid())?;
        }
        Ok(())
    }

    /// Compare-and-swap one `dtype` element at `addr`: stores `swap` if it equals `compare`;
    /// the old value's bytes go to `result`.
    #[allow(clippy::too_many_arguments)]
    pub fn compare_swap(
        &self,
        dtype: Datatype,
        compare: &[u8],
        swap: &[u8],
        result: &mut [u8],
        peer: Peer,
        addr: u64,
        key: u64,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        let inputs = [(OPERAND, swap), (COMPARE, compare)];
        self.bounced(
            "fi_compare_atomic",
            dtype,
            &inputs,
            result,
            keep_waiting,
            |b, desc| {
                // SAFETY: the endpoint is open; swap, compare and result lie in the registered
                // bounce buffer, which is not reused before completion (`bounced` waits for it).
                unsafe {
                    sys::fi_compare_atomic(
                        self.core.ep,
                        (b + OPERAND) as *const libc::c_void,
                        1,
                        desc,
                        (b + COMPARE) as *const libc::c_void,
                        desc,
                        (b + RESULT) as *mut libc::c_void,
                        desc,
                        peer.0,
                        addr,
                        key,
                        dtype.raw(),
                        AtomicOp::Cswap.raw(),
                        ptr::null_mut(),
                    )
                }
            },
        )
    }

    /// One fetching atomic through the bounce buffer: copy each `(offset, bytes)` input there,
    /// issue `call(bounce address, descriptor)`, wait for completion, copy the old value out.
    fn bounced(
        &self,
        op: &str,
        dtype: Datatype,
        inputs: &[(usize, &[u8])],
        result: &mut [u8],
        keep_waiting: &dyn Fn() -> Waiting,
        mut call: impl FnMut(usize, *mut libc::c_void) -> isize,
    ) -> Result<(), FiError> {
        let size = dtype.size();
        let invalid = || FiError::new(op, -(sys::FI_EINVAL as i64));
        if result.len() < size || inputs.iter().any(|(_, v)| v.len() < size) {
            return Err(invalid());
        }
        let b = self.bounce.mem();
        for (at, v) in inputs {
            b.write(*at, &v[..size]).map_err(|_| invalid())?;
        }
        let desc = self.bounce_desc();
        self.post(op, keep_waiting, || call(b.addr(), desc))?;
        self.complete(keep_waiting)?;
        b.read(RESULT, &mut result[..size]).map_err(|_| invalid())
    }
}
