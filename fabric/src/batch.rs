//! Batches of blocking transfers: many reads (or writes) posted together, zero-copy, and waited
//! for together, so that the operations overlap where one blocking call after another would
//! wait a round trip each.
//!
//! A batch borrows every buffer for the whole call and returns after the last completion, so the
//! provider writes into (or reads from) the caller's memory directly, as a single blocking
//! [`Endpoint::read`] does: no copy through memory the endpoint owns, which the request forms
//! need because a request may outlive the borrow of its buffer. Where the provider demands
//! registered local buffers (`FI_MR_LOCAL`), each part goes as [`Endpoint::read`] would lend it
//! (its region, or registered for the call), except that the bounce buffer serves one part at a
//! time: those small parts go one after the other once the others are complete. The exception
//! to zero-copy is a read small enough to be gathered with its neighbours (`gather.rs`): it
//! starts as a request, whose few bytes are copied out of the gathered read.

use crate::endpoint::{Endpoint, Waiting};
use crate::error::FiError;
use crate::gather::READ_MAX;
use crate::ops::{Lent, Remote, Way, range};
use std::ptr;

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
        let mut small = Vec::new();
        for (i, (dst, from)) in parts.iter().enumerate() {
            if (1..=READ_MAX).contains(&dst.len()) {
                small.push((i, self.start_read(dst.len(), *from, keep_waiting)?));
            }
        }
        let spans = parts
            .iter_mut()
            .enumerate()
            .filter(|(_, (dst, _))| dst.len() > READ_MAX)
            .map(|(i, (dst, from))| (i, (dst.as_mut_ptr() as usize, dst.len(), *from)));
        // SAFETY: every `dst` is borrowed, writable, until this call returns, after the waits of
        // `post_all`.
        let posted = unsafe { self.post_all(Way::Read, spans, keep_waiting) };
        // Every request is finished, also after a failure; the first failure returns.
        let (mut first, bounced) = match posted {
            Ok(bounced) => (Ok(()), bounced),
            Err(e) => (Err(e), Vec::new()),
        };
        for (i, ticket) in small {
            let done = self.finish(ticket, Some(&mut *parts[i].0), keep_waiting);
            first = first.and(done);
        }
        first?;
        bounced.into_iter().try_for_each(|i| {
            let (dst, from) = &mut parts[i];
            self.read(dst, *from, keep_waiting)
        })
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
        let way = Way::Write { inject: false };
        // SAFETY: every `src` is borrowed until this call returns, after the waits of `post_all`.
        let bounced = unsafe { self.post_all(way, spans, keep_waiting)? };
        bounced.into_iter().try_for_each(|i| {
            let (src, to) = parts[i];
            self.write(src, to, keep_waiting)
        })
    }

    /// Post a transfer `way` for every `(index, (addr, len, remote))` of `spans` (writes up to
    /// the inject size injected), in pieces of the provider's largest message, then wait for all
    /// of them. Returns the indices of the spans that must go through the bounce buffer, not
    /// posted.
    ///
    /// # Safety
    /// Every span's memory must stay valid (writable, for reads) until this call returns.
    unsafe fn post_all(
        &self,
        way: Way,
        mut spans: impl Iterator<Item = (usize, (usize, usize, Remote))>,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<Vec<usize>, FiError> {
        let (mut held, mut slots, mut bounced) = (Vec::new(), Vec::new(), Vec::new());
        let step = self.step();
        let mut post = |i: usize, (addr, len, to): (usize, usize, Remote)| {
            if len == 0 {
                return Ok(());
            }
            if way != Way::Read && len <= self.inject {
                let inject = Way::Write { inject: true };
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
                bounced.push(i);
                return Ok(());
            }
            for at in (0..len).step_by(step) {
                let (n, desc) = (step.min(len - at), lent.desc());
                let mut rma = [range(to.at(at), n)];
                let posted = self.rma_msg(
                    way,
                    addr + at,
                    n,
                    desc,
                    to.peer,
                    &mut rma,
                    None,
                    keep_waiting,
                );
                slots.extend(posted?);
            }
            held.push(lent);
            Ok(())
        };
        let posted = spans.try_for_each(|(i, span)| post(i, span));
        let waited = self.wait_all(&slots, keep_waiting);
        drop(held);
        posted.and(waited).map(|()| bounced)
    }
}
