//! Batches of blocking transfers: many reads (or writes) posted together, zero-copy, and waited
//! for together, so that the operations overlap where one blocking call after another would
//! wait a round trip each.
//!
//! A batch borrows every buffer for the whole call and returns after the last completion, so the
//! provider writes into (or reads from) the caller's memory directly, as a single blocking
//! [`Endpoint::read`] does: no copy through memory the endpoint owns, which the request forms
//! need because a request may outlive the borrow of its buffer. Where the provider demands
//! registered local buffers (`FI_MR_LOCAL`), each part goes as [`Endpoint::read`] would lend it
//! (its region, or registered for the call), except those the bounce buffer would carry, which
//! serves one at a time: they start as requests, through buffers the endpoint owns, and are in
//! flight with the rest. So does a read small enough to be gathered with its neighbours
//! (`gather.rs`), whose few bytes are copied out of the gathered read.
//!
//! Transfers next to each other in the batch that go to one peer share an operation, each its
//! own local buffer and remote range, as many as the provider's `iov_limit` and `rma_iov_limit`
//! allow (4 for tcp;ofi_rxm and shm in libfabric 1.17): providers that serve each operation at
//! the target in software then have fewer to serve. Writes share up to [`SHARED_MAX`] bytes,
//! reads up to [`SHARED_READ_MAX`] (over tcp the medians of 5 runs of `get_bw` from 1 to 32 KiB
//! moved 2.0–3.1x the bytes so, 64 KiB alike). Over the shm provider reads do
//! not share: a read into several local buffers loses the single `process_vm_readv` of a read
//! into one, made in the posting call (8 KiB to 1 MiB gets fell from 2.6–7.5 GB/s to 1.5–2.8).

use crate::endpoint::Endpoint;
use crate::error::FiError;
use crate::joint::READ_MAX;
use crate::lent::Lent;
use crate::ops::Way;
use crate::patience::Waiting;
use crate::remote::{Remote, range};
use crate::runs::batches;
use crate::sys;
use crate::track::Slot;
use std::ptr;

/// The most bytes writes share an operation with: larger ones go alone, as several in flight
/// moved more than one operation of all of them (over tcp, 1 MiB writes four to an operation
/// moved 0.71–1.03x the bytes per second of one each).
const SHARED_MAX: usize = 1 << 20;

/// The most bytes reads share an operation with.
const SHARED_READ_MAX: usize = 64 << 10;

impl Endpoint {
    /// Read every `(dst, from)` of `parts`, the reads in flight together; returns with the data
    /// in every `dst`, or the first failure once nothing is in flight into them any more.
    /// Reads small enough to share a round trip start as requests first, so that those to
    /// nearby addresses of a peer are gathered into one read (`gather.rs`): 64 reads of 8 bytes
    /// are then a few reads, not 64 that a provider serving its peers' reads one after the other
    /// answers in turn.
    pub fn read_all(
        &self,
        parts: &mut [(&mut [u8], Remote)],
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        let mut started = Vec::new();
        for (i, (dst, from)) in parts.iter().enumerate() {
            if (1..=READ_MAX).contains(&dst.len()) {
                started.push((i, self.start_read(dst.len(), *from, keep_waiting)?));
            }
        }
        let spans = parts
            .iter_mut()
            .enumerate()
            .filter(|(_, (dst, _))| dst.len() > READ_MAX)
            .map(|(i, (dst, from))| (i, (dst.as_mut_ptr() as usize, dst.len(), *from)));
        let stage = |i: usize, len: usize, from: Remote| {
            started.push((i, self.start_read(len, from, keep_waiting)?));
            Ok(())
        };
        // SAFETY: every `dst` is borrowed, writable, until this call returns, after the waits of
        // `post_all`.
        let mut first = unsafe { self.post_all(Way::Read, spans, stage, keep_waiting) };
        // Every request is finished, also after a failure; the first failure returns.
        for (i, ticket) in started {
            let done = self.finish(ticket, Some(&mut *parts[i].0), keep_waiting);
            first = first.and(done);
        }
        first
    }

    /// Write every `(src, to)` of `parts`, the writes in flight together; returns when every
    /// `src` may be reused (small ones are injected and counted for the peer's flush, as
    /// [`Endpoint::write`] does), or with the first failure once nothing is in flight from them.
    pub fn write_all(
        &self,
        parts: &[(&[u8], Remote)],
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        let spans = parts
            .iter()
            .enumerate()
            .map(|(i, &(src, to))| (i, (src.as_ptr() as usize, src.len(), to)));
        let mut started = Vec::new();
        let stage = |i: usize, _: usize, to: Remote| {
            started.push(self.start_write(parts[i].0, to, keep_waiting)?);
            Ok(())
        };
        let way = Way::Write {
            inject: false,
            data: None,
        };
        // SAFETY: every `src` is borrowed until this call returns, after the waits of `post_all`.
        let mut first = unsafe { self.post_all(way, spans, stage, keep_waiting) };
        for ticket in started {
            first = first.and(self.finish(ticket, None, keep_waiting));
        }
        first
    }

    /// Post a transfer `way` for every `(index, (addr, len, remote))` of `spans` (writes up to
    /// the inject size injected), then wait for all of them. A span that would go through the
    /// bounce buffer (`FI_MR_LOCAL`, not in registered memory, small enough) is handed to
    /// `stage(index, len, remote)` instead, to start as a request through a buffer the endpoint
    /// owns: in flight with the others, where the bounce buffer carries one after the other.
    ///
    /// # Safety
    /// Every span's memory must stay valid (writable, for reads) until this call returns.
    unsafe fn post_all(
        &self,
        way: Way,
        spans: impl IntoIterator<Item = (usize, (usize, usize, Remote))>,
        mut stage: impl FnMut(usize, usize, Remote) -> Result<(), FiError>,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        let (mut held, mut pieces) = (Vec::new(), Vec::new());
        let mut slots = Vec::new();
        let sorted = spans.into_iter().try_for_each(|(i, (addr, len, to))| {
            if len == 0 {
                return Ok(());
            }
            if way != Way::Read && len <= self.inject {
                let inject = Way::Write {
                    inject: true,
                    data: None,
                };
                let mut rma = [range(to, len)];
                let desc = ptr::null_mut();
                self.rma_msg(
                    inject,
                    addr,
                    len,
                    desc,
                    to.peer,
                    &mut rma,
                    None,
                    keep_waiting,
                )?;
                return Ok(());
            }
            // SAFETY: guaranteed by the caller; the waits below come before this call returns.
            let lent = unsafe { self.lend(addr, len)? };
            if matches!(lent, Lent::Bounce) {
                return stage(i, len, to);
            }
            pieces.push(Piece {
                addr,
                len,
                to,
                desc: lent.desc(),
            });
            held.push(lent);
            Ok(())
        });
        let posted = sorted.and_then(|()| self.post_pieces(way, &pieces, &mut slots, keep_waiting));
        let waited = self.wait_all(&slots, keep_waiting);
        drop(held);
        posted.and(waited)
    }

    /// Post `pieces`, each cut into pieces of the largest message first: those next to each
    /// other in the list that go to one peer together, as few operations as the provider's
    /// limits and [`SHARED_MAX`] (reads: [`SHARED_READ_MAX`]) allow; their slots go to `slots`.
    fn post_pieces(
        &self,
        way: Way,
        pieces: &[Piece],
        slots: &mut Vec<Slot>,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<(), FiError> {
        let step = self.step();
        let (limit, shared) = match way {
            Way::Read => (self.read_iov, SHARED_READ_MAX),
            Way::Write { .. } => (self.write_iov, SHARED_MAX),
        };
        let cut: Vec<Piece> = pieces
            .iter()
            .flat_map(|p| {
                (0..p.len).step_by(step).map(move |at| Piece {
                    addr: p.addr + at,
                    len: step.min(p.len - at),
                    to: p.to.at(at),
                    desc: p.desc,
                })
            })
            .collect();
        for same in cut.chunk_by(|a, b| a.to.peer.index == b.to.peer.index) {
            let lens: Vec<usize> = same.iter().map(|p| p.len).collect();
            for group in batches(&lens, limit, step.min(shared)) {
                let group = &same[group];
                let mut local: Vec<libc::iovec> = group
                    .iter()
                    .map(|p| libc::iovec {
                        iov_base: p.addr as *mut libc::c_void,
                        iov_len: p.len,
                    })
                    .collect();
                let mut descs: Vec<*mut libc::c_void> = group.iter().map(|p| p.desc).collect();
                let mut rma: Vec<sys::fi_rma_iov> =
                    group.iter().map(|p| range(p.to, p.len)).collect();
                let peer = group[0].to.peer;
                let slot = self.rma_msgv(
                    way,
                    &mut local,
                    &mut descs,
                    peer,
                    &mut rma,
                    None,
                    keep_waiting,
                );
                slots.extend(slot?);
            }
        }
        Ok(())
    }
}

/// One transfer of a batch, its local memory lent to the NIC.
struct Piece {
    addr: usize,
    len: usize,
    to: Remote,
    desc: *mut libc::c_void,
}
