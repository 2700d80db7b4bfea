//! General active-target synchronization (post/start/complete/wait) at one rank: the counts
//! that match an origin's access epochs with its targets' exposure epochs. No I/O: the window
//! drives the counters with atomics on the control blocks
//! ([`crate::protocol::layout::posted_slot`], [`crate::protocol::layout::COMPLETES`]) and asks
//! this state what to wait for.
//!
//! Matching, as foMPI and Open MPI's osc/rdma do it, by counters in the targets' memory:
//! - `post(G)` at target `t` adds 1 to the post counter of `t` in the control block of every
//!   origin of `G`. The k-th access epoch of an origin that includes `t` matches the k-th
//!   exposure epoch of `t` that includes the origin, so `start(G)` waits until the origin's
//!   counter of each target of `G` has reached the number of epochs it started to that target.
//! - `complete` completes the origin's operations at every target of its access epoch, then
//!   adds 1 to each target's completion counter. A target's next exposure epoch can only be
//!   posted after `wait` returns, and no origin can complete toward it before that post, so
//!   the counter needs no origin's name: `wait` waits until it has grown by the size of the
//!   exposure group.
//!
//! With MPI_MODE_NOCHECK (which the standard allows on start only where every matching post
//! has it too), neither side counts posts.
//!
//! # MPI-4.1: 12.5.2

use crate::error::Result;
use crate::protocol::sync_err;

/// What `start` must wait for: the post counter of `target` in this rank's control block
/// reaching `posts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostWait {
    pub target: usize,
    pub posts: u64,
}

/// Post/start/complete/wait state of one window at one rank.
#[derive(Debug, Clone)]
pub struct Pscw {
    /// Access epochs started (without NOCHECK) toward each target.
    started: Vec<u64>,
    /// The targets of the open access epoch, in increasing order.
    access: Option<Vec<usize>>,
    /// The number of origins of the open exposure epoch.
    exposure: Option<u64>,
    /// Completions of earlier exposure epochs, consumed by their waits.
    completed: u64,
}

impl Pscw {
    /// No epoch open, in a window of `n` ranks.
    pub fn new(n: usize) -> Pscw {
        Pscw {
            started: vec![0; n],
            access: None,
            exposure: None,
            completed: 0,
        }
    }

    /// Whether an access epoch (start .. complete) is open.
    pub fn accessing(&self) -> bool {
        self.access.is_some()
    }

    /// Whether an exposure epoch (post .. wait) is open.
    pub fn exposing(&self) -> bool {
        self.exposure.is_some()
    }

    /// Whether the open access epoch covers `target`.
    #[inline]
    pub fn covers(&self, target: usize) -> bool {
        self.access
            .as_ref()
            .is_some_and(|g| g.binary_search(&target).is_ok())
    }

    /// Open an access epoch to `targets` (distinct ranks of the window); returns the posts to
    /// wait for (none with `nocheck`). A refused call changes nothing.
    pub fn start(&mut self, targets: &[usize], nocheck: bool) -> Result<Vec<PostWait>> {
        if self.access.is_some() {
            return Err(sync_err("start while an access epoch of start is open"));
        }
        let mut group = targets.to_vec();
        group.sort_unstable();
        let waits = match nocheck {
            true => Vec::new(),
            false => group
                .iter()
                .map(|&t| {
                    self.started[t] += 1;
                    PostWait {
                        target: t,
                        posts: self.started[t],
                    }
                })
                .collect(),
        };
        self.access = Some(group);
        Ok(waits)
    }

    /// Close the access epoch; returns its targets, whose operations must complete and whose
    /// completion counters get 1 each.
    pub fn complete(&mut self) -> Result<Vec<usize>> {
        self.access
            .take()
            .ok_or_else(|| sync_err("complete without a matching start"))
    }

    /// Open an exposure epoch to `origins` ranks.
    pub fn post(&mut self, origins: usize) -> Result<()> {
        if self.exposure.is_some() {
            return Err(sync_err("post while an exposure epoch of post is open"));
        }
        self.exposure = Some(origins as u64);
        Ok(())
    }

    /// The value this rank's completion counter must reach before the exposure epoch can end.
    pub fn completions_due(&self) -> Result<u64> {
        match self.exposure {
            Some(origins) => Ok(self.completed + origins),
            None => Err(sync_err("wait or test without a matching post")),
        }
    }

    /// The completion counter read `count`: close the exposure epoch if every origin has
    /// completed; returns whether it did.
    pub fn try_end_exposure(&mut self, count: u64) -> Result<bool> {
        let due = self.completions_due()?;
        if count < due {
            return Ok(false);
        }
        self.completed = due;
        self.exposure = None;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    #[test]
    fn starts_wait_for_one_more_post_of_each_target_every_time() {
        let mut p = Pscw::new(4);
        let w = p.start(&[3, 1], false).unwrap();
        assert_eq!(
            w,
            [
                PostWait {
                    target: 1,
                    posts: 1
                },
                PostWait {
                    target: 3,
                    posts: 1
                }
            ]
        );
        assert!(p.covers(1) && p.covers(3) && !p.covers(2) && !p.covers(0));
        assert_eq!(p.complete().unwrap(), [1, 3]);
        assert!(!p.covers(1));
        let w = p.start(&[1, 2], false).unwrap();
        assert_eq!(
            w[0].posts, 2,
            "the second epoch to 1 waits for its second post"
        );
        assert_eq!(w[1].posts, 1);
    }

    #[test]
    fn nocheck_counts_no_posts() {
        let mut p = Pscw::new(2);
        assert!(p.start(&[1], true).unwrap().is_empty());
        p.complete().unwrap();
        assert_eq!(p.start(&[1], false).unwrap()[0].posts, 1);
    }

    #[test]
    fn nested_or_unmatched_calls_are_rma_sync() {
        let mut p = Pscw::new(2);
        assert_eq!(p.complete().unwrap_err().class(), ErrorClass::RmaSync);
        assert_eq!(
            p.completions_due().unwrap_err().class(),
            ErrorClass::RmaSync
        );
        p.start(&[0], false).unwrap();
        let before = p.clone();
        assert_eq!(
            p.start(&[1], false).unwrap_err().class(),
            ErrorClass::RmaSync
        );
        assert_eq!(p.started, before.started, "a refused start counts nothing");
        p.post(2).unwrap();
        assert_eq!(p.post(1).unwrap_err().class(), ErrorClass::RmaSync);
    }

    #[test]
    fn wait_consumes_one_completion_per_origin() {
        let mut p = Pscw::new(3);
        p.post(2).unwrap();
        assert_eq!(p.completions_due().unwrap(), 2);
        assert!(!p.try_end_exposure(1).unwrap());
        assert!(p.exposing());
        assert!(p.try_end_exposure(2).unwrap());
        assert!(!p.exposing());
        p.post(3).unwrap();
        assert_eq!(p.completions_due().unwrap(), 5);
        assert!(!p.try_end_exposure(4).unwrap());
        assert!(p.try_end_exposure(5).unwrap());
        p.post(0).unwrap();
        assert!(
            p.try_end_exposure(5).unwrap(),
            "an empty group ends at once"
        );
    }
}
