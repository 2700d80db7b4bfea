//! The bookkeeping of work in flight, free of I/O: which work requests each queue pair has
//! outstanding, in the order they were posted, which of them ask for a completion (selective
//! signalling), and what a completion retires.
//!
//! A reliable-connected queue pair completes its send queue in order, so a completion retires
//! its own request and every unsignalled one posted before it on that queue pair. An error
//! completion breaks the queue pair: the device flushes everything after it, and the queue
//! stays broken. Each operation holds what it carries (a staging buffer) until it is retired;
//! then the buffer goes back, unless the operation is kept for its owner, who takes it.

use std::collections::VecDeque;

/// Where an operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Posted; not yet retired.
    Flight,
    /// Completed successfully.
    Done,
    /// Completed with this error status, or flushed after one.
    Failed(u32),
}

/// `IBV_WC_WR_FLUSH_ERR`: what work after a failed request ends with.
pub(crate) const FLUSHED: u32 = crate::sys::IBV_WC_WR_FLUSH_ERR;

struct Op<B> {
    /// Bumped each time the slot is reused: a completion naming an older use is stale.
    generation: u32,
    queue: u32,
    phase: Phase,
    signaled: bool,
    /// The owner takes the outcome and the buffer ([`Ledger::take`]); else both go when the
    /// operation is retired.
    kept: bool,
    buf: Option<B>,
    in_use: bool,
}

#[derive(Default)]
struct Queue {
    /// Outstanding operations, oldest first.
    order: VecDeque<u32>,
    /// Unsignalled operations posted since the last signalled one.
    unsignaled: u32,
    /// The status that broke the queue pair.
    broken: Option<u32>,
}

/// Operations in flight on every queue pair of an endpoint; `B` is what an operation carries.
pub(crate) struct Ledger<B> {
    ops: Vec<Op<B>>,
    free: Vec<u32>,
    queues: Vec<Queue>,
    /// Operations outstanding on every queue together.
    outstanding: usize,
}

/// Signal one request in this many at least, so that unsignalled ones are retired (and their
/// send queue entries and buffers freed) while a queue of `depth` entries still has room.
pub(crate) fn signal_every(depth: u32) -> u32 {
    (depth / 4).max(1)
}

impl<B> Ledger<B> {
    pub(crate) fn new() -> Ledger<B> {
        Ledger {
            ops: Vec::new(),
            free: Vec::new(),
            queues: Vec::new(),
            outstanding: 0,
        }
    }

    fn queue_mut(&mut self, q: u32) -> &mut Queue {
        let i = q as usize;
        if self.queues.len() <= i {
            self.queues.resize_with(i + 1, Queue::default);
        }
        &mut self.queues[i]
    }

    /// Operations outstanding on queue `q`.
    pub(crate) fn queued(&self, q: u32) -> usize {
        self.queues.get(q as usize).map_or(0, |q| q.order.len())
    }

    /// Operations outstanding on every queue.
    pub(crate) fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// The status that broke queue `q`, if it is broken.
    pub(crate) fn broken(&self, q: u32) -> Option<u32> {
        self.queues.get(q as usize).and_then(|q| q.broken)
    }

    /// Whether the newest operation of queue `q` is signalled (its completion retires all).
    pub(crate) fn newest_signaled(&self, q: u32) -> bool {
        let newest = self.queues.get(q as usize).and_then(|q| q.order.back());
        newest.is_some_and(|&i| self.ops[i as usize].signaled)
    }

    /// Record an operation about to be posted on queue `q` (of `depth` entries), carrying `buf`;
    /// `kept`: its owner will take it. Signalled where `signal`, where the queue is idle (the
    /// first request of a burst: a put followed by a flush then waits for its own completion, no
    /// marker behind it) or where the queue's run of unsignalled requests is due. The work
    /// request id and whether to signal it.
    pub(crate) fn begin(
        &mut self,
        q: u32,
        depth: u32,
        buf: Option<B>,
        kept: bool,
        signal: bool,
    ) -> (u64, bool) {
        let every = signal_every(depth);
        let queue = self.queue_mut(q);
        let signaled = signal || queue.order.is_empty() || queue.unsignaled + 1 >= every;
        queue.unsignaled = if signaled { 0 } else { queue.unsignaled + 1 };
        let op = Op {
            generation: 0,
            queue: q,
            phase: Phase::Flight,
            signaled,
            kept,
            buf,
            in_use: true,
        };
        let index = match self.free.pop() {
            Some(i) => {
                let slot = &mut self.ops[i as usize];
                let generation = slot.generation.wrapping_add(1);
                *slot = Op { generation, ..op };
                i
            }
            None => {
                self.ops.push(op);
                (self.ops.len() - 1) as u32
            }
        };
        self.queues[q as usize].order.push_back(index);
        self.outstanding += 1;
        (id(index, self.ops[index as usize].generation), signaled)
    }

    /// The operation `wr_id` was never posted (the post failed): forget it; its buffer.
    pub(crate) fn undo(&mut self, wr_id: u64) -> Option<B> {
        let index = self.live(wr_id)?;
        let q = self.ops[index as usize].queue as usize;
        if let Some(at) = self.queues[q].order.iter().rposition(|&i| i == index) {
            self.queues[q].order.remove(at);
            self.outstanding -= 1;
        }
        self.release(index)
    }

    /// The slot of `wr_id` if that use of it is live.
    fn live(&self, wr_id: u64) -> Option<u32> {
        let (index, generation) = split(wr_id);
        let op = self.ops.get(index as usize)?;
        (op.in_use && op.generation == generation).then_some(index)
    }

    fn release(&mut self, index: u32) -> Option<B> {
        let op = &mut self.ops[index as usize];
        op.in_use = false;
        self.free.push(index);
        op.buf.take()
    }

    /// A completion of `wr_id` with `status` (`None`: success): retire it and the unsignalled
    /// operations before it on its queue; after an error, fail everything left on the queue.
    /// The buffers of retired operations nobody keeps go to `give`.
    pub(crate) fn complete(&mut self, wr_id: u64, status: Option<u32>, mut give: impl FnMut(B)) {
        let Some(index) = self.live(wr_id) else {
            return; // a flushed request of an operation already failed and released
        };
        let op = &self.ops[index as usize];
        // A live operation is on its queue's list exactly while it is in flight.
        if op.phase != Phase::Flight {
            return;
        }
        let q = op.queue as usize;
        while let Some(i) = self.queues[q].order.pop_front() {
            self.outstanding -= 1;
            let phase = match (i == index, status) {
                (true, Some(s)) => Phase::Failed(s),
                _ => Phase::Done,
            };
            self.settle(i, phase, &mut give);
            if i == index {
                break;
            }
        }
        if let Some(s) = status {
            self.break_queue(q as u32, s, give);
        }
    }

    /// Queue `q` is broken with `status`: everything outstanding on it fails, and its
    /// buffers go to `give` (the queue pair must be in the error state, where the device no
    /// longer touches them).
    pub(crate) fn break_queue(&mut self, q: u32, status: u32, mut give: impl FnMut(B)) {
        let queue = self.queue_mut(q);
        queue.broken.get_or_insert(status);
        let left: Vec<u32> = queue.order.drain(..).collect();
        self.outstanding -= left.len();
        for i in left {
            self.settle(i, Phase::Failed(FLUSHED), &mut give);
        }
    }

    fn settle(&mut self, index: u32, phase: Phase, give: &mut impl FnMut(B)) {
        let op = &mut self.ops[index as usize];
        op.phase = phase;
        if !op.kept
            && let Some(b) = self.release(index)
        {
            give(b);
        }
    }

    /// Where `wr_id` is (`Failed(FLUSHED)` for an id not live: taken already).
    pub(crate) fn phase(&self, wr_id: u64) -> Phase {
        match self.live(wr_id) {
            Some(i) => self.ops[i as usize].phase,
            None => Phase::Failed(FLUSHED),
        }
    }

    /// Take a kept operation that is retired: its outcome and buffer; `None` while in flight.
    pub(crate) fn take(&mut self, wr_id: u64) -> Option<(Phase, Option<B>)> {
        let index = self.live(wr_id)?;
        let phase = self.ops[index as usize].phase;
        if phase == Phase::Flight {
            return None;
        }
        Some((phase, self.release(index)))
    }

    /// The owner of a kept operation no longer wants it: released now if retired (its buffer
    /// returned), else when it is.
    pub(crate) fn forget(&mut self, wr_id: u64) -> Option<B> {
        let index = self.live(wr_id)?;
        let op = &mut self.ops[index as usize];
        op.kept = false;
        match op.phase {
            Phase::Flight => None,
            _ => self.release(index),
        }
    }
}

fn id(index: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(index)
}

fn split(wr_id: u64) -> (u32, u32) {
    (wr_id as u32, (wr_id >> 32) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEPTH: u32 = 16;

    #[test]
    fn the_first_of_a_burst_and_one_in_four_are_signalled_and_retire_those_before_them() {
        let mut l = Ledger::<u32>::new();
        let mut ids = Vec::new();
        for b in 0..6 {
            let (id, signaled) = l.begin(0, DEPTH, Some(b), false, false);
            assert_eq!(signaled, b == 0 || b == 4, "request {b}");
            ids.push(id);
        }
        assert_eq!(l.queued(0), 6);
        assert!(!l.newest_signaled(0), "a flush now needs a marker");
        let mut given = Vec::new();
        l.complete(ids[4], None, |b| given.push(b));
        assert_eq!(given, [0, 1, 2, 3, 4], "every buffer back, oldest first");
        assert_eq!((l.queued(0), l.outstanding()), (1, 1));
        let (marker, signaled) = l.begin(0, DEPTH, None, false, true);
        assert!(signaled && l.newest_signaled(0));
        l.complete(marker, None, |b| given.push(b));
        assert_eq!(given, [0, 1, 2, 3, 4, 5]);
        assert_eq!((l.queued(0), l.outstanding()), (0, 0));
        let (_, signaled) = l.begin(0, DEPTH, Some(6), false, false);
        assert!(signaled, "idle again: the next burst's first is signalled");
    }

    #[test]
    fn a_kept_operation_waits_for_its_owner() {
        let mut l = Ledger::<u32>::new();
        let (w, _) = l.begin(1, DEPTH, Some(10), false, false);
        let (r, signaled) = l.begin(1, DEPTH, Some(11), true, true);
        assert!(signaled);
        assert_eq!(l.take(r), None, "in flight");
        let mut given = Vec::new();
        l.complete(r, None, |b| given.push(b));
        assert_eq!(given, [10]);
        assert_eq!(
            l.phase(w),
            Phase::Failed(FLUSHED),
            "released: no longer live"
        );
        assert_eq!(l.take(r), Some((Phase::Done, Some(11))));
        assert_eq!(l.take(r), None, "taken once");
    }

    #[test]
    fn an_error_fails_the_rest_of_its_queue_and_breaks_it() {
        let mut l = Ledger::<u32>::new();
        let (a, _) = l.begin(2, DEPTH, Some(1), false, true);
        let (b, _) = l.begin(2, DEPTH, Some(2), true, true);
        let (c, _) = l.begin(2, DEPTH, Some(3), true, true);
        let (other, _) = l.begin(3, DEPTH, Some(4), false, true);
        let mut given = Vec::new();
        l.complete(b, Some(5), |x| given.push(x));
        assert_eq!(given, [1], "the one before retired as done, not kept");
        assert_eq!(l.take(b), Some((Phase::Failed(5), Some(2))));
        assert_eq!(l.take(c), Some((Phase::Failed(FLUSHED), Some(3))));
        assert_eq!(l.broken(2), Some(5));
        assert_eq!(l.broken(3), None);
        // The flushed completion of `c` arrives after it was taken: stale, ignored.
        l.complete(c, Some(FLUSHED), |x| given.push(x));
        l.complete(a, None, |x| given.push(x));
        assert_eq!(given, [1]);
        assert_eq!(l.outstanding(), 1);
        l.complete(other, None, |x| given.push(x));
        assert_eq!(given, [1, 4]);
    }

    #[test]
    fn a_forgotten_operation_is_released_when_it_retires() {
        let mut l = Ledger::<u32>::new();
        let (r, _) = l.begin(0, DEPTH, Some(7), true, true);
        assert_eq!(l.forget(r), None, "in flight: kept until retired");
        let mut given = Vec::new();
        l.complete(r, None, |b| given.push(b));
        assert_eq!(given, [7]);
        let (s, _) = l.begin(0, DEPTH, Some(8), true, true);
        assert_ne!(r, s, "a reused slot has a new id");
        l.complete(r, None, |b| given.push(b));
        assert_eq!(
            l.phase(s),
            Phase::Flight,
            "a stale completion retires nothing"
        );
        l.complete(s, None, |b| given.push(b));
        assert_eq!(l.forget(s), Some(8), "retired: released at once");
    }

    #[test]
    fn undo_forgets_a_request_that_was_never_posted() {
        let mut l = Ledger::<u32>::new();
        let (a, _) = l.begin(0, DEPTH, Some(1), false, false);
        assert_eq!(l.undo(a), Some(1));
        assert_eq!((l.queued(0), l.outstanding()), (0, 0));
    }
}
