//! General active-target synchronization: post, start, complete, wait and test.
//!
//! The epochs match by counters in the control blocks ([`crate::protocol::pscw`]), driven with
//! the window's atomics, so the same code runs over shared memory and over a NIC: a post is one
//! signal (an atomic add, [`crate::transport::Transport::signal`]) per origin, a complete one per
//! target, and start and wait read this rank's own counters. A target that posts and then computes does not hold its origins up: its part is
//! over once the post's atomics have landed, and the fabric serves its memory meanwhile.
//!
//! # MPI-4.1: 12.5.2

use super::Window;
use crate::error::in_call;
use crate::error::{Error, ErrorClass, Result};
use crate::group::Group;
use crate::protocol::assert::{self, Assert};
use crate::protocol::layout;
use crate::wait;
use std::sync::atomic::{Ordering, fence};

impl Window<'_> {
    /// The window ranks of `group`'s members, or MPI_ERR_GROUP naming one that is not in the
    /// window.
    fn window_ranks(&self, group: &Group) -> Result<Vec<usize>> {
        let members: Vec<usize> = (0..group.size()).collect();
        group
            .translate_ranks(&members, &self.group())?
            .into_iter()
            .zip(group.world_ranks())
            .map(|(r, world)| {
                r.ok_or_else(|| {
                    Error::new(
                        ErrorClass::Group,
                        format!("world rank {world} of the group is not in the window"),
                    )
                })
            })
            .collect()
    }

    /// Begin an exposure epoch to the origins of `group`: they may access this rank's memory
    /// between their `start` and `complete`. Local stores made before the post are visible to
    /// them. Accepts NOCHECK (every matching start asserts it too), NOSTORE and NOPUT (others:
    /// MPI_ERR_ASSERT); a group with a rank outside the window gives MPI_ERR_GROUP.
    ///
    /// # MPI-4.1: 12.5.2 (MPI_WIN_POST)
    pub fn post(&self, group: &Group, assert: Assert) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Win_post", || {
            assert.check(assert::POST, "post")?;
            let origins = self.window_ranks(group)?;
            self.epochs.borrow_mut().post(origins.len())?;
            fence(Ordering::SeqCst);
            if assert.contains(Assert::NOCHECK) {
                return Ok(());
            }
            let me = self.rank();
            origins
                .iter()
                .try_for_each(|&o| self.atomic_route().signal(o, layout::posted_slot(me), 1))
        })
    }

    /// Begin an access epoch to the targets of `group`: RMA calls may target them until
    /// `complete`. Waits until each has posted the matching exposure epoch, unless NOCHECK
    /// says they have (the only assert accepted). A target that is gone gives
    /// MPI_ERR_PROC_FAILED, and no epoch stays open.
    ///
    /// # MPI-4.1: 12.5.2 (MPI_WIN_START)
    pub fn start(&self, group: &Group, assert: Assert) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Win_start", || {
            assert.check(assert::START, "start")?;
            let targets = self.window_ranks(group)?;
            let waits = self
                .epochs
                .borrow_mut()
                .start(&targets, assert.contains(Assert::NOCHECK))?;
            let ctrl = &self.ctrl;
            let watch = || self.watch_all();
            let posted = waits.iter().try_for_each(|w| {
                let slot = layout::posted_slot(w.target);
                wait::until(ctrl, slot, |v| v >= w.posts, self.atomic_route(), &watch).map(drop)
            });
            if posted.is_err() {
                let _ = self.epochs.borrow_mut().complete();
            }
            posted
        })
    }

    /// End the access epoch: every RMA call of it completes at origin and target, then each
    /// target learns that this origin is done.
    ///
    /// # MPI-4.1: 12.5.2 (MPI_WIN_COMPLETE)
    pub fn complete(&self) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Win_complete", || {
            let targets = self.epochs.borrow_mut().complete()?;
            targets
                .iter()
                .try_for_each(|&t| self.settle_before_signal(t))?;
            targets
                .iter()
                .try_for_each(|&t| self.atomic_route().signal(t, layout::COMPLETES, 1))
        })
    }

    /// End the exposure epoch once every origin of it has completed; the data they put is then
    /// visible to local loads. An origin that is gone gives MPI_ERR_PROC_FAILED.
    ///
    /// # MPI-4.1: 12.5.2 (MPI_WIN_WAIT)
    pub fn wait(&self) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Win_wait", || {
            let due = self.epochs.borrow().completions_due()?;
            let ctrl = &self.ctrl;
            let watch = || self.watch_all();
            let count = wait::until(
                ctrl,
                layout::COMPLETES,
                |v| v >= due,
                self.atomic_route(),
                &watch,
            )?;
            self.epochs.borrow_mut().try_end_exposure(count).map(drop)
        })
    }

    /// The nonblocking `wait`: ends the exposure epoch and returns `true` if every origin has
    /// completed, else returns `false` and the epoch stays open.
    ///
    /// # MPI-4.1: 12.5.2 (MPI_WIN_TEST)
    pub fn test(&self) -> Result<bool> {
        in_call(Some(self.rank()), "MPI_Win_test", || {
            self.epochs.borrow().completions_due()?;
            self.atomic_route().progress()?;
            let count = self
                .ctrl
                .atomic_u64(layout::COMPLETES)?
                .load(Ordering::Acquire);
            self.epochs.borrow_mut().try_end_exposure(count)
        })
    }
}
