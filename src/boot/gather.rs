//! The hub's allgathers, free of I/O: the contributions it holds, what completes a collective,
//! and the limits that bound what it holds by the job it serves.
//!
//! A collective `(comm, seq)` may have at most as many members as the job has ranks, and each
//! rank may have at most [`OPEN_LIMIT`] contributions waiting. Contributions are kept by index
//! as they arrive, so that nothing is allocated for members that have not contributed: what the
//! hub holds is bounded by `size * OPEN_LIMIT` contributions, each bounded by the frame limit.

use std::collections::{BTreeMap, HashMap};

use super::wire::Msg;

/// Most contributions one rank may have waiting in collectives that are not complete.
pub(crate) const OPEN_LIMIT: usize = 16;

/// The collectives of one job, each identified by `(comm, seq)`. `W` names a connection to
/// answer.
pub(crate) struct Gathers<W> {
    /// Number of ranks of the job.
    size: usize,
    open: HashMap<(u64, u64), Pending<W>>,
    /// Per rank: contributions waiting.
    held: Vec<usize>,
}

struct Pending<W> {
    members: usize,
    /// Contributions by index.
    parts: BTreeMap<usize, Vec<u8>>,
    /// The contributing ranks and their connections.
    waiting: Vec<(usize, W)>,
}

/// A contribution to collective `(comm, seq)` from the member at `index` of `members`.
pub(crate) struct Contribution {
    pub(crate) comm: u64,
    pub(crate) seq: u64,
    pub(crate) members: u32,
    pub(crate) index: u32,
    pub(crate) data: Vec<u8>,
}

impl<W> Gathers<W> {
    /// No collectives yet, for a job of `size` ranks.
    pub(crate) fn new(size: usize) -> Gathers<W> {
        Gathers {
            size,
            open: HashMap::new(),
            held: vec![0; size],
        }
    }

    /// Drops every collective waiting (the job failed).
    pub(crate) fn clear(&mut self) {
        self.open.clear();
        self.held.fill(0);
    }

    /// Records `rank`'s contribution `c`, answered on `from`; returns the connections to answer
    /// and the answer: `Gathered` to every member when `c` completes the collective, `Rejected`
    /// to `rank` alone when `c` breaks a limit (nothing is kept), `Rejected` to every member
    /// so far when the members disagree (the collective is dropped), and `None` while the
    /// collective waits for more contributions.
    pub(crate) fn contribute(
        &mut self,
        rank: usize,
        from: W,
        c: Contribution,
    ) -> Option<(Vec<W>, Msg)> {
        let Contribution {
            comm,
            seq,
            members,
            index,
            data,
        } = c;
        let (members, index) = (members as usize, index as usize);
        let reject = |to: Vec<W>, reason: String| Some((to, Msg::Rejected { comm, seq, reason }));
        let refusal = if members > self.size {
            Some(format!(
                "{members} members exceed the job's {} ranks",
                self.size
            ))
        } else if index >= members {
            Some(format!("index {index} not below {members}"))
        } else if self.held.get(rank).is_none_or(|&h| h >= OPEN_LIMIT) {
            Some(format!(
                "rank {rank} has {OPEN_LIMIT} collectives open already"
            ))
        } else {
            None
        };
        if let Some(reason) = refusal {
            return reject(vec![from], reason);
        }
        let pending = self.open.entry((comm, seq)).or_insert_with(|| Pending {
            members,
            parts: BTreeMap::new(),
            waiting: Vec::new(),
        });
        let problem = if pending.members != members {
            Some(format!(
                "members {members} differs from {}",
                pending.members
            ))
        } else if pending.parts.contains_key(&index) {
            Some(format!("index {index} contributed twice"))
        } else if pending.waiting.iter().any(|(r, _)| *r == rank) {
            Some(format!("rank {rank} contributed twice"))
        } else {
            None
        };
        if let Some(reason) = problem {
            let mut to = self.close(comm, seq).map_or_else(Vec::new, |p| p.waiting);
            to.push(from);
            return reject(to, reason);
        }
        pending.parts.insert(index, data);
        pending.waiting.push((rank, from));
        self.held[rank] += 1;
        if pending.parts.len() < members {
            return None;
        }
        let done = self.close(comm, seq)?;
        let parts = done.parts.into_values().collect();
        Some((done.waiting, Msg::Gathered { comm, seq, parts }))
    }

    /// Removes collective `(comm, seq)` and releases what its contributors held.
    fn close(&mut self, comm: u64, seq: u64) -> Option<Closed<W>> {
        let pending = self.open.remove(&(comm, seq))?;
        let waiting = pending
            .waiting
            .into_iter()
            .map(|(rank, w)| {
                self.held[rank] -= 1;
                w
            })
            .collect();
        Some(Closed {
            parts: pending.parts,
            waiting,
        })
    }
}

/// A collective taken out of the table: its contributions and the connections to answer.
struct Closed<W> {
    parts: BTreeMap<usize, Vec<u8>>,
    waiting: Vec<W>,
}

#[cfg(test)]
mod tests {
    use super::{Contribution, Gathers, OPEN_LIMIT};
    use crate::boot::wire::Msg;

    fn part(seq: u64, members: u32, index: u32, data: &[u8]) -> Contribution {
        Contribution {
            comm: 1,
            seq,
            members,
            index,
            data: data.to_vec(),
        }
    }

    fn rejected(answer: Option<(Vec<char>, Msg)>) -> (Vec<char>, String) {
        match answer {
            Some((to, Msg::Rejected { reason, .. })) => (to, reason),
            _ => panic!("not rejected"),
        }
    }

    #[test]
    fn completes_in_index_order() {
        let mut g = Gathers::new(3);
        assert!(g.contribute(2, 'c', part(0, 3, 2, b"z")).is_none());
        assert!(g.contribute(0, 'a', part(0, 3, 0, b"x")).is_none());
        let Some((to, Msg::Gathered { parts, .. })) = g.contribute(1, 'b', part(0, 3, 1, b"y"))
        else {
            panic!("not gathered");
        };
        assert_eq!(to, ['c', 'a', 'b']);
        assert_eq!(parts, [b"x", b"y", b"z"]);
        assert!(g.open.is_empty() && g.held == [0, 0, 0]);
    }

    #[test]
    fn more_members_than_ranks_are_refused_without_keeping_anything() {
        let mut g = Gathers::new(3);
        let (to, reason) = rejected(g.contribute(0, 'a', part(0, 2_000_000, 0, b"x")));
        assert_eq!(to, ['a']);
        assert_eq!(reason, "2000000 members exceed the job's 3 ranks");
        let (_, reason) = rejected(g.contribute(0, 'a', part(0, u32::MAX, 0, b"x")));
        assert!(reason.starts_with("4294967295 members"), "{reason}");
        let (_, reason) = rejected(g.contribute(0, 'a', part(0, 2, 2, b"x")));
        assert_eq!(reason, "index 2 not below 2");
        assert!(g.open.is_empty() && g.held == [0, 0, 0]);
    }

    #[test]
    fn disagreement_rejects_every_member_so_far() {
        let mut g = Gathers::new(3);
        assert!(g.contribute(0, 'a', part(0, 3, 0, b"x")).is_none());
        let (to, reason) = rejected(g.contribute(1, 'b', part(0, 2, 1, b"y")));
        assert_eq!(
            (to, reason.as_str()),
            (vec!['a', 'b'], "members 2 differs from 3")
        );
        assert!(g.contribute(0, 'a', part(1, 3, 0, b"x")).is_none());
        let (to, _) = rejected(g.contribute(1, 'b', part(1, 3, 0, b"y")));
        assert_eq!(to, ['a', 'b']);
        assert!(g.open.is_empty() && g.held == [0, 0, 0]);
    }

    #[test]
    fn a_rank_holds_at_most_the_open_limit() {
        let mut g = Gathers::new(2);
        for seq in 0..OPEN_LIMIT as u64 {
            assert!(g.contribute(0, 'a', part(seq, 2, 0, b"x")).is_none());
        }
        let (to, reason) = rejected(g.contribute(0, 'a', part(99, 2, 0, b"x")));
        assert_eq!(to, ['a']);
        assert!(reason.contains("collectives open"), "{reason}");
        assert!(g.contribute(1, 'b', part(0, 2, 1, b"y")).is_some());
        assert!(g.contribute(0, 'a', part(99, 2, 0, b"x")).is_none());
        g.clear();
        assert!(g.open.is_empty() && g.held == [0, 0]);
    }
}
