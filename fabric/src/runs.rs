//! Scatter-gather: transfers whose remote side is several ranges of one peer's region (a
//! noncontiguous target layout). One operation reaches as many ranges as the provider allows
//! (`rma_iov_limit`, 4 for libfabric 1.17's tcp;ofi_rxm and shm), its local side one contiguous
//! piece of a buffer the endpoint owns, so that a transfer of many small ranges costs a quarter
//! of the operations (or fewer) that one per range would.

use crate::endpoint::Endpoint;
use crate::error::FiError;
use crate::ops::Way;
use crate::patience::Waiting;
use crate::remote::{Remote, range};
use crate::request::Ticket;
use crate::stage::Staged;
use crate::sys;
use std::ops::Range;

/// The operations for ranges of `lens` bytes: consecutive ranges, at most `limit` of them and
/// at most `max` bytes per operation (a range longer than `max` goes alone, which the caller
/// splits). Free of I/O.
pub(crate) fn batches(lens: &[usize], limit: usize, max: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0usize);
    for (i, &len) in lens.iter().enumerate() {
        let full = i - start == limit.max(1) || bytes.saturating_add(len) > max;
        if i > start && full {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes = bytes.saturating_add(len);
    }
    if start < lens.len() {
        out.push(start..lens.len());
    }
    out
}

impl Endpoint {
    /// Start writing each `(offset, bytes)` of `pieces` at that offset from `to`: the bytes are
    /// copied into a buffer the endpoint owns (reusable at once), then written by as few
    /// operations as the provider's `rma_iov_limit` and `max_msg_size` allow. The ticket
    /// completes when every write is complete at this origin; dropped, the writes settle on
    /// their own and the next flush of the peer reports a failure.
    pub fn start_write_runs(
        &self,
        pieces: &[(usize, &[u8])],
        to: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<Ticket, FiError> {
        let total = pieces.iter().map(|(_, b)| b.len()).sum();
        let staged = self.core.stage(total, self.local_mr)?;
        let mut at = 0;
        for (_, b) in pieces {
            staged.write(at, b)?;
            at += b.len();
        }
        let runs: Vec<(usize, usize)> = pieces.iter().map(|&(o, b)| (o, b.len())).collect();
        self.post_runs(&runs, to, staged, false, keep_waiting)
    }

    /// Start reading each `(offset, len)` of `runs` from `from` into a buffer the endpoint owns,
    /// by as few operations as [`Endpoint::start_write_runs`]; [`Endpoint::finish`] hands the
    /// bytes over in the order of `runs`.
    pub fn start_read_runs(
        &self,
        runs: &[(usize, usize)],
        from: Remote,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<Ticket, FiError> {
        let total = runs.iter().map(|&(_, n)| n).sum();
        let staged = self.core.stage(total, self.local_mr)?;
        self.post_runs(runs, from, staged, true, keep_waiting)
    }

    /// Post the operations of the `(offset, len)` ranges `runs` from `remote`, their local side
    /// consecutive in `staged`: reads when `read`, else writes. A range longer than the largest
    /// message is split first.
    fn post_runs(
        &self,
        runs: &[(usize, usize)],
        remote: Remote,
        staged: Staged,
        read: bool,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<Ticket, FiError> {
        let step = self.step();
        let ranges: Vec<(usize, usize)> = runs
            .iter()
            .flat_map(|&(o, n)| (0..n).step_by(step).map(move |k| (o + k, step.min(n - k))))
            .collect();
        let sizes: Vec<usize> = ranges.iter().map(|&(_, n)| n).collect();
        let mut t = self.ticket(read.then(|| staged.clone()), 0);
        let (base, desc) = (staged.mem().addr(), staged.desc());
        let mut local = 0;
        for b in batches(&sizes, self.rma_iov, step) {
            let mut rma: Vec<sys::fi_rma_iov> = ranges[b.clone()]
                .iter()
                .map(|&(o, n)| range(remote.at(o), n))
                .collect();
            let len: usize = sizes[b].iter().sum();
            let (buf, keep) = (base + local, Some(staged.clone()));
            let way = match read {
                true => Way::Read,
                false => Way::Write {
                    inject: false,
                    data: None,
                },
            };
            let slot = self.rma_msg(
                way,
                buf,
                len,
                desc,
                remote.peer,
                &mut rma,
                keep,
                keep_waiting,
            )?;
            t.push(slot);
            local += len;
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::batches;

    #[test]
    fn ranges_go_by_the_limit() {
        assert_eq!(batches(&[8; 10], 4, usize::MAX), vec![0..4, 4..8, 8..10]);
        assert_eq!(batches(&[8; 3], 1, usize::MAX), vec![0..1, 1..2, 2..3]);
        assert_eq!(
            batches(&[], 4, usize::MAX),
            Vec::<std::ops::Range<usize>>::new()
        );
    }

    #[test]
    fn an_operation_stays_within_the_largest_message() {
        assert_eq!(batches(&[6, 6, 6, 3], 4, 12), vec![0..2, 2..4]);
        assert_eq!(
            batches(&[20, 1], 4, 12),
            vec![0..1, 1..2],
            "a long range alone"
        );
    }
}
