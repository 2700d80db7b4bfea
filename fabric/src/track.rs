//! Completion bookkeeping of an endpoint, free of I/O: which operations are in flight to which
//! peer, and which of them someone waits for by name.
//!
//! Every operation carries a context value that says which peer it went to and, for an
//! operation waited for on its own (a read, an atomic, a request), which slot holds its
//! outcome. A completion read from the queue settles the operation: the peer's count moves,
//! and a slot turns done or failed. A flush of one peer waits for that peer's count only; a read
//! waits for its own slot only, not for unrelated writes. A slot may keep something alive until
//! its operation is settled (the buffer the provider writes into), also when the one who would
//! have waited for it is gone.

/// The context value of one operation: slot number + 1 in the high half (0: counted only), peer
/// in the low half.
pub(crate) type Context = u64;

/// A slot: an operation waited for on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot(u32);

/// Where a slot's operation stands. Kept apart from what the slot holds, so that the common
/// steps (issue, settle, take of an operation that keeps nothing) move one byte, not the kept
/// value (one enum holding both cost about 130 instructions per read in moves and drops).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Free,
    /// In flight.
    Pending,
    /// In flight, and nobody will take the outcome: free the slot when it settles.
    Abandoned,
    Done,
    /// Failed, with the failure in the cell.
    Failed,
}

/// A slot: its phase, the peer its operation went to, what it keeps until the operation
/// settles, and the failure of a failed operation.
#[derive(Debug)]
struct Cell<K> {
    phase: Phase,
    peer: u32,
    keep: Option<K>,
    failure: Option<String>,
}

#[derive(Debug, Default)]
struct PeerCount {
    issued: u64,
    settled: u64,
    /// The first failure of an operation counted only, reported by the next flush.
    error: Option<String>,
}

impl PeerCount {
    fn busy(&self) -> bool {
        self.settled < self.issued
    }
}

/// The outcome of a slot's operation: what the slot kept, and the failure if it failed.
pub(crate) type Outcome<K> = (Option<K>, Option<String>);

/// Operations in flight per peer, and the slots of those waited for on their own.
#[derive(Debug)]
pub(crate) struct Track<K> {
    peers: Vec<PeerCount>,
    slots: Vec<Cell<K>>,
    free: Vec<u32>,
    /// Operations in flight to all peers, and peers with a failure for their next flush: both
    /// zero, every flush would return at once ([`Track::quiet`]).
    in_flight: u64,
    failures: u32,
}

impl<K> Default for Track<K> {
    fn default() -> Self {
        Track {
            peers: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            failures: 0,
        }
    }
}

fn peer_of(ctx: Context) -> usize {
    (ctx & u64::from(u32::MAX)) as usize
}

fn slot_of(ctx: Context) -> Option<usize> {
    match ctx >> 32 {
        0 => None,
        s => Some(s as usize - 1),
    }
}

impl<K> Track<K> {
    #[inline]
    fn peer(&mut self, peer: u32) -> &mut PeerCount {
        let i = peer as usize;
        if self.peers.len() <= i {
            self.peers.resize_with(i + 1, PeerCount::default);
        }
        &mut self.peers[i]
    }

    /// Note an operation to `peer` about to be posted; with `slot`, it gets a slot that keeps
    /// `keep` until it settles. Returns its context value and its slot.
    #[inline(always)]
    pub(crate) fn issue(
        &mut self,
        peer: u32,
        slot: bool,
        keep: Option<K>,
    ) -> (Context, Option<Slot>) {
        self.peer(peer).issued += 1;
        self.in_flight += 1;
        if !slot {
            return (u64::from(peer), None);
        }
        let s = match self.free.pop() {
            Some(s) => {
                let cell = &mut self.slots[s as usize];
                cell.phase = Phase::Pending;
                cell.peer = peer;
                // A free cell keeps nothing: most operations keep nothing either.
                if keep.is_some() {
                    cell.keep = keep;
                }
                s
            }
            None => {
                self.slots.push(Cell {
                    phase: Phase::Pending,
                    peer,
                    keep,
                    failure: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        ((u64::from(s) + 1) << 32 | u64::from(peer), Some(Slot(s)))
    }

    /// Undo [`Track::issue`] for an operation the provider refused to post; returns what its
    /// slot kept.
    pub(crate) fn withdraw(&mut self, ctx: Context) -> Option<K> {
        self.peer(peer_of(ctx) as u32).issued -= 1;
        self.in_flight -= 1;
        let s = slot_of(ctx)?;
        let cell = &mut self.slots[s];
        cell.phase = Phase::Free;
        let keep = cell.keep.take();
        self.free.push(s as u32);
        keep
    }

    /// The operation of `ctx` completed (`error: None`) or failed. Returns what its slot kept
    /// when nobody will take it any more (the caller drops it); the failure of an operation
    /// counted only or abandoned goes to the next flush of its peer.
    #[inline(always)]
    pub(crate) fn settle(&mut self, ctx: Context, error: Option<String>) -> Option<K> {
        self.in_flight = self.in_flight.saturating_sub(1);
        let peer = self.peer(peer_of(ctx) as u32);
        peer.settled += 1;
        let Some(s) = slot_of(ctx) else {
            if let Some(e) = error {
                self.failed(peer_of(ctx) as u32, e);
            }
            return None;
        };
        let cell = self.slots.get_mut(s)?;
        match (cell.phase, error) {
            (Phase::Pending, None) => {
                cell.phase = Phase::Done;
                None
            }
            (Phase::Pending, Some(e)) => {
                cell.phase = Phase::Failed;
                cell.failure = Some(e);
                None
            }
            (Phase::Abandoned, error) => {
                cell.phase = Phase::Free;
                let keep = cell.keep.take();
                let peer = cell.peer;
                self.free.push(s as u32);
                if let Some(e) = error {
                    self.failed(peer, e);
                }
                keep
            }
            _ => None,
        }
    }

    /// Whether every operation to `peer` has settled: `Some(Ok)` when so, `Some(Err)` once with
    /// the first failure of a counted operation, `None` while some are in flight.
    pub(crate) fn flushed(&mut self, peer: u32) -> Option<Result<(), String>> {
        let p = self.peer(peer);
        if p.busy() {
            return None;
        }
        let error = p.error.take();
        self.failures = self.failures.saturating_sub(u32::from(error.is_some()));
        Some(error.map_or(Ok(()), Err))
    }

    /// How many operations to `peer` were issued so far, and how many of them settled: another
    /// thread that waits until as many have settled as had been issued when it looked waits
    /// for every operation issued before it looked (operations to one peer settle in order:
    /// they share one connection) however many are issued meanwhile.
    pub(crate) fn counts(&self, peer: u32) -> (u64, u64) {
        self.peers
            .get(peer as usize)
            .map_or((0, 0), |p| (p.issued, p.settled))
    }

    /// Whether nothing is in flight to any peer and no failure waits for a flush: a flush of
    /// any peer would return `Some(Ok)`.
    #[inline]
    pub(crate) fn quiet(&self) -> bool {
        self.in_flight == 0 && self.failures == 0
    }

    /// Whether operations to `peer` are in flight.
    pub(crate) fn busy(&self, peer: u32) -> bool {
        self.peers.get(peer as usize).is_some_and(PeerCount::busy)
    }

    /// The peers operations are in flight to.
    pub(crate) fn busy_peers(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.peers.len() as u32).filter(|&p| self.busy(p))
    }

    /// Whether any operation is in flight.
    pub(crate) fn in_flight(&self) -> bool {
        self.peers.iter().any(PeerCount::busy)
    }

    /// The outcome of `slot`'s operation once settled (the slot is free again then).
    #[inline]
    pub(crate) fn take(&mut self, slot: Slot) -> Option<Outcome<K>> {
        let cell = self.slots.get_mut(slot.0 as usize)?;
        if !matches!(cell.phase, Phase::Done | Phase::Failed) {
            return None;
        }
        cell.phase = Phase::Free;
        let out = (cell.keep.take(), cell.failure.take());
        self.free.push(slot.0);
        Some(out)
    }

    /// Whether `slot`'s operation has settled.
    pub(crate) fn settled(&self, slot: Slot) -> bool {
        self.slots
            .get(slot.0 as usize)
            .is_some_and(|c| matches!(c.phase, Phase::Done | Phase::Failed))
    }

    /// Nobody will take `slot`'s outcome: free it now if settled (returning what it kept, for
    /// the caller to drop), else when it settles. Its failure, if it fails, goes to the next
    /// flush of its peer.
    pub(crate) fn abandon(&mut self, slot: Slot) -> Option<K> {
        let cell = self.slots.get_mut(slot.0 as usize)?;
        match cell.phase {
            Phase::Pending => {
                cell.phase = Phase::Abandoned;
                return None;
            }
            Phase::Failed => {
                let peer = cell.peer;
                if let Some(e) = cell.failure.take() {
                    self.failed(peer, e);
                }
            }
            _ => {}
        }
        self.take(slot).and_then(|(keep, _)| keep)
    }

    /// Note `error` for the next flush of `peer`, unless an earlier failure waits there.
    fn failed(&mut self, peer: u32, error: String) {
        let p = self.peer(peer);
        if p.error.is_none() {
            p.error = Some(error);
            self.failures += 1;
        }
    }

    /// Everything the slots of operations still in flight keep, taken out so that the caller
    /// can leak it (memory the provider may still write into must never be freed).
    pub(crate) fn strand(&mut self) -> Vec<K> {
        self.slots
            .iter_mut()
            .filter(|c| matches!(c.phase, Phase::Pending | Phase::Abandoned))
            .filter_map(|c| c.keep.take())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_until_every_operation_settles_and_every_failure_is_flushed() {
        let mut t: Track<()> = Track::default();
        assert!(t.quiet());
        let (a, _) = t.issue(0, false, None);
        let (b, slot) = t.issue(1, true, None);
        assert!(!t.quiet());
        t.settle(b, None);
        assert!(!t.quiet(), "a counted operation is still in flight");
        assert!(t.take(slot.unwrap()).is_some());
        t.settle(a, Some("lost".into()));
        assert!(!t.quiet(), "a failure waits for the flush of peer 0");
        assert_eq!(t.flushed(1), Some(Ok(())));
        assert!(!t.quiet());
        assert_eq!(t.flushed(0), Some(Err("lost".into())));
        assert!(t.quiet());
        let (c, _) = t.issue(2, false, None);
        assert!(t.withdraw(c).is_none());
        assert!(t.quiet(), "a withdrawn operation is not in flight");
        let (_, slot) = t.issue(3, true, None);
        assert!(t.abandon(slot.unwrap()).is_none());
        assert!(
            !t.quiet(),
            "an abandoned operation is in flight until it settles"
        );
    }

    #[test]
    fn counts_tell_another_thread_when_what_it_saw_issued_has_settled() {
        let mut t: Track<()> = Track::default();
        assert_eq!(t.counts(5), (0, 0), "a peer never addressed");
        let (a, _) = t.issue(0, false, None);
        let (b, _) = t.issue(0, true, None);
        let (goal, _) = t.counts(0);
        assert_eq!(goal, 2);
        let (c, _) = t.issue(0, false, None);
        t.settle(a, None);
        assert!(t.counts(0).1 < goal, "one of the two seen is in flight");
        t.settle(b, Some("lost".into()));
        assert_eq!(t.counts(0), (3, 2), "both seen settled, failed or not");
        t.settle(c, None);
        let (d, _) = t.issue(0, false, None);
        assert!(t.withdraw(d).is_none());
        assert_eq!(t.counts(0), (3, 3), "a withdrawn operation is not counted");
    }

    #[test]
    fn a_flush_waits_for_its_peer_only() {
        let mut t: Track<()> = Track::default();
        let (a, _) = t.issue(0, false, None);
        let (b, _) = t.issue(1, false, None);
        assert_eq!(t.flushed(0), None);
        assert_eq!(t.flushed(1), None);
        assert!(t.busy(0) && t.busy(1));
        t.settle(b, None);
        assert_eq!(t.flushed(1), Some(Ok(())));
        assert_eq!(t.flushed(0), None);
        t.settle(a, None);
        assert_eq!(t.flushed(0), Some(Ok(())));
        assert!(!t.in_flight());
        assert!(!t.busy(0) && !t.busy(7));
        assert_eq!(t.flushed(7), Some(Ok(())), "a peer never used is flushed");
    }

    #[test]
    fn a_slot_settles_on_its_own_completion_not_on_others() {
        let mut t: Track<Vec<u8>> = Track::default();
        let (put, _) = t.issue(2, false, None);
        let (get, slot) = t.issue(2, true, Some(vec![1, 2]));
        let slot = slot.unwrap();
        assert!(!t.settled(slot));
        assert!(t.take(slot).is_none());
        t.settle(get, None);
        assert!(t.settled(slot));
        assert_eq!(t.flushed(2), None, "the put is still in flight");
        assert_eq!(t.take(slot), Some((Some(vec![1, 2]), None)));
        assert!(t.take(slot).is_none(), "an outcome is taken once");
        t.settle(put, None);
        assert_eq!(t.flushed(2), Some(Ok(())));
    }

    #[test]
    fn failures_reach_their_waiter_once() {
        let mut t: Track<()> = Track::default();
        let (a, _) = t.issue(0, false, None);
        let (b, _) = t.issue(0, false, None);
        t.settle(a, Some("first".into()));
        t.settle(b, Some("second".into()));
        assert_eq!(t.flushed(0), Some(Err("first".into())));
        assert_eq!(t.flushed(0), Some(Ok(())));
        let (c, slot) = t.issue(0, true, None);
        t.settle(c, Some("cas".into()));
        assert_eq!(
            t.flushed(0),
            Some(Ok(())),
            "a slot's failure is its waiter's"
        );
        assert_eq!(t.take(slot.unwrap()), Some((None, Some("cas".into()))));
    }

    #[test]
    fn slots_are_reused_and_abandoned_ones_freed_when_settled() {
        let mut t: Track<u32> = Track::default();
        let (a, sa) = t.issue(0, true, Some(10));
        let (b, sb) = t.issue(0, true, Some(11));
        assert_ne!(sa, sb);
        assert_eq!(t.abandon(sa.unwrap()), None, "still in flight: kept");
        assert_eq!(t.settle(a, None), Some(10), "handed back once settled");
        t.settle(b, None);
        assert_eq!(t.abandon(sb.unwrap()), Some(11));
        let (_, sc) = t.issue(0, true, None);
        assert!(sc == sa || sc == sb, "a freed slot is used again");
        assert_eq!(t.slots.len(), 2);
    }

    #[test]
    fn an_abandoned_failure_reaches_the_next_flush() {
        let mut t: Track<()> = Track::default();
        let (a, sa) = t.issue(1, true, None);
        let (b, sb) = t.issue(1, true, None);
        t.abandon(sa.unwrap());
        t.settle(a, Some("in flight".into()));
        assert_eq!(t.flushed(1), None, "b is in flight");
        t.settle(b, Some("settled".into()));
        t.abandon(sb.unwrap());
        assert_eq!(t.flushed(1), Some(Err("in flight".into())));
        assert_eq!(t.flushed(1), Some(Ok(())), "reported once");
    }

    #[test]
    fn a_withdrawn_operation_leaves_no_trace() {
        let mut t: Track<u8> = Track::default();
        let (a, _) = t.issue(3, true, Some(5));
        assert_eq!(t.withdraw(a), Some(5));
        assert_eq!(t.flushed(3), Some(Ok(())));
        assert!(!t.in_flight());
    }

    #[test]
    fn stranded_keeps_are_handed_out_for_leaking() {
        let mut t: Track<u8> = Track::default();
        let (a, _) = t.issue(0, true, Some(1));
        t.issue(0, true, Some(2));
        t.settle(a, None);
        assert_eq!(t.strand(), vec![2]);
    }
}
