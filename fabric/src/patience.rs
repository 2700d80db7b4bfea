//! How a wait on the provider goes: what its caller says of the peers it waits for
//! ([`Waiting`]), and its pace (`Patience`): poll, back off, knock, ask the caller.

use crate::core::{Core, IDLE_NAP};
use crate::doorbell::KNOCK_AFTER;
use crate::error::FiError;
use crate::sys;
use crossbeam_utils::Backoff;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How often a waiter asks its caller whether to keep waiting.
const CHECK_EVERY: Duration = Duration::from_millis(10);
/// Rounds a waiter polls back to back before it backs off, unless told otherwise
/// ([`crate::Endpoint::set_crowded`]): a round trip over tcp or shm takes 1 to 20 us, a round a
/// fraction of one; yielding the core early cost the shm provider 25% of its latency (a
/// `sched_yield` per round).
const SPIN_ROUNDS: u32 = 1024;
/// Rounds between two looks at the clock while spinning.
const CLOCK_EVERY: u32 = 64;

/// What a wait on the provider should do, as its caller judges the peers it waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Keep polling: the peers are alive and running.
    Poll,
    /// Keep waiting, but sleep until traffic arrives between polls: a peer is alive but makes
    /// no progress (stopped), and polling would only burn the core.
    Idle,
    /// Give up: a peer the wait depends on is gone.
    GiveUp,
}

/// The pace of a wait on the provider: poll back to back for a while ([`SPIN_ROUNDS`]), then
/// spin a little and yield the core on every round (a [`Backoff`]; or block in the wait object
/// while the caller says [`Waiting::Idle`]), and every [`CHECK_EVERY`] ask the caller whether
/// and how to go on.
pub(crate) struct Patience<'a> {
    core: &'a Core,
    keep_waiting: &'a dyn Fn() -> Waiting,
    /// When `keep_waiting` was last asked (the first look at the clock, at first).
    checked: Option<Instant>,
    backoff: Backoff,
    /// A peer to ring besides those with operations in flight ([`Patience::knocking`]).
    peer: Option<u32>,
    idle: bool,
    rounds: u32,
    spin: u32,
}

impl<'a> Patience<'a> {
    /// A wait that polls back to back for [`SPIN_ROUNDS`] rounds, or none on a crowded node.
    pub(crate) fn new(core: &'a Core, keep_waiting: &'a dyn Fn() -> Waiting) -> Patience<'a> {
        let spin = match core.crowded.load(Ordering::Relaxed) {
            true => 0,
            false => SPIN_ROUNDS,
        };
        Patience {
            core,
            keep_waiting,
            checked: None,
            backoff: Backoff::new(),
            peer: None,
            idle: false,
            rounds: 0,
            spin,
        }
    }

    /// Ring peer `index` too once the wait has lasted: a call waits for the answer of a peer
    /// to which nothing of this endpoint is in flight once its request was delivered.
    pub(crate) fn knocking(mut self, index: u32) -> Patience<'a> {
        self.peer = Some(index);
        self
    }

    /// The wait is over: where it had to wait (rounds of [`Patience::tick`]), note that the
    /// owner drove the endpoint until now. A wait done at its first look notes nothing: the
    /// post of its operation noted the owner a moment before, and a flush with nothing in
    /// flight did not drive the endpoint. A note reads the time-stamp counter, about 10 ns on
    /// this VM, and a blocking atomic and its flush took five of them.
    pub(crate) fn done(&self) {
        if self.rounds > 0 {
            self.core.touch();
        }
    }

    /// One round of waiting for `op`; an error once `keep_waiting` gives up. The first round
    /// and every look at the clock note that the owner drives the endpoint, so that the
    /// progress thread stands aside during a long wait too.
    pub(crate) fn tick(&mut self, op: &str) -> Result<(), FiError> {
        let first = self.rounds == 0;
        self.rounds = self.rounds.saturating_add(1);
        let spinning = self.rounds < self.spin;
        if self.idle {
            self.core.touch();
            self.core.wait(IDLE_NAP);
        } else if !spinning {
            self.backoff.snooze();
        }
        let look = !spinning || self.idle || self.rounds.is_multiple_of(CLOCK_EVERY);
        if first || look {
            self.core.touch();
        }
        if !look {
            return Ok(());
        }
        let checked = *self.checked.get_or_insert_with(Instant::now);
        let waited = checked.elapsed();
        if waited >= KNOCK_AFTER {
            self.core.knock(self.peer);
        }
        if waited >= CHECK_EVERY {
            match (self.keep_waiting)() {
                Waiting::GiveUp => {
                    return Err(FiError::with_detail(
                        op,
                        sys::FI_ETIMEDOUT as i32,
                        "the target is gone".into(),
                    ));
                }
                w => self.idle = w == Waiting::Idle,
            }
            self.checked = Some(Instant::now());
        }
        Ok(())
    }
}
