//! A communicator's barrier over shared memory: the ranks of one node meet on a page that the
//! node's lowest rank maps from a memory file and the others map through `/proc/PID/fd`. The
//! world's page is offered in the world's first exchange at start-up and agreed on in a second
//! (a barrier set up by collective calls of its own could hang where a rank is stopped in the
//! middle of it while others finish and leave); another communicator's is set up by its first
//! barrier.
//!
//! Each rank counts its barriers (the epoch). Arriving at epoch `e`, a rank adds 1 to the
//! page's arrival counter, which holds `L * (e + 1)` once all `L` ranks of the node are in.
//! Where the communicator lives on this node alone, the rank that completes that count
//! releases the others by storing `e + 1` in the release word; where it spans nodes, the
//! node's lowest rank waits for the count, meets the other nodes' lowest ranks over the
//! collective network, then releases. The others wait for the release word: spinning briefly,
//! then yielding, then asleep on the page's doorbell (the releaser rings it), as waits for a
//! control word do, and watching the node's processes and the job's failures meanwhile, so a
//! dead rank gives MPI_ERR_PROC_FAILED in bounded time. A failure across nodes is passed to
//! the node's ranks through the release word.
//!
//! Over the collective network alone, a barrier of 2 ranks on one node took 49 us (a message
//! each way through the kernel and two thread wake-ups); on the page, 0.07 us
//! (`onesided bench barrier_latency -n 2`).

use crate::codec::{Dec, Enc};
use crate::error::{Error, ErrorClass, Result};
use crate::peers::Peers;
use crate::protocol::layout;
use crate::wait::{self, Pace, Progress};
use onesided_shm::{FileId, Mem, Segment};
use std::cell::Cell;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The page's words, each on a line of its own; the sleepers' count and the doorbell where
/// [`wait::until`] expects them.
const LINE: usize = 64;
const ARRIVED: usize = 3 * LINE;
const RELEASED: usize = 4 * LINE;
/// The release word after a failure across nodes.
const FAILED: u64 = u64::MAX;
/// The page.
const PAGE: usize = layout::PAGE;

/// Where this rank stands among the communicator's ranks on its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Ranks of the communicator on this node.
    pub local: u64,
    /// Whether this rank is the node's lowest, which makes the page and meets other nodes.
    pub leader: bool,
    /// Whether every rank of the communicator is on this node.
    pub alone: bool,
}

/// What one rank does at an epoch once it has arrived: release the others, wait for all
/// arrivals (then meet the other nodes and release), or wait to be released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Release,
    GatherThenRelease,
    AwaitRelease,
}

/// The role of a rank of `shape` that found `before` arrivals at epoch `epoch`.
fn role(shape: Shape, epoch: u64, before: u64) -> Role {
    let last = before + 1 == shape.local * (epoch + 1);
    match (shape.alone, shape.leader) {
        (true, _) if last => Role::Release,
        (false, true) => Role::GatherThenRelease,
        _ => Role::AwaitRelease,
    }
}

/// Waits on the page need no transport's progress: sleep on its doorbell.
struct Doorbell;

impl Progress for Doorbell {
    fn poll(&self) -> Result<()> {
        Ok(())
    }

    fn pace(&self) -> Pace {
        Pace::Doorbell
    }

    /// Where a progress thread serves this process, a rank in a barrier may wait for another
    /// whose operations need that thread, which then serves back to back for a while: a
    /// waiter that yielded gave it the CPU for the rest of its time slice and saw its release
    /// late (IMB's Truly_passive_put over libfabric's tcp provider, 2 ranks on 2 cores: 600 us
    /// a put, flush and barrier, 54 us with brief waits). Asleep, it is woken at once. Where
    /// the progress threads have no CPUs of their own, the brief wait yields after all, and
    /// that thread yields after every poll too (`wait::contended`): 15 us.
    fn patient(&self) -> bool {
        !wait::progress_thread()
    }
}

/// A communicator's barrier page, mapped.
pub(crate) struct NodeBarrier {
    page: Mem<'static>,
    shape: Shape,
    /// Barriers this rank has passed.
    epoch: Cell<u64>,
    /// The node's other processes of the communicator, and the job's failures.
    peers: Peers,
}

impl std::fmt::Debug for NodeBarrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeBarrier")
            .field("shape", &self.shape)
            .field("epoch", &self.epoch.get())
            .finish_non_exhaustive()
    }
}

/// The leader's page before the others have mapped it, with the memory file they open.
pub(crate) struct Offer {
    segment: Segment,
    file: File,
}

impl Offer {
    /// A fresh page (zero-filled) for the node's ranks.
    pub(crate) fn make() -> Result<Offer> {
        let (segment, file) = Segment::anonymous(PAGE, PAGE)
            .map_err(|e| Error::os("creating the barrier page", e))?;
        Ok(Offer { segment, file })
    }

    /// How the others find it: this process, the file's descriptor and identity.
    pub(crate) fn describe(&self) -> Result<Vec<u8>> {
        let id = FileId::of(&self.file).map_err(|e| Error::os("the barrier page's file", e))?;
        Ok(Enc::new()
            .u64(std::process::id().into())
            .u64(self.file.as_raw_fd() as u64)
            .u64(id.dev)
            .u64(id.ino)
            .finish())
    }
}

/// Maps the page `desc` describes ([`Offer::describe`]).
pub(crate) fn map(desc: &[u8]) -> Result<Segment> {
    let mut d = Dec::new(desc);
    let (pid, fd) = (d.u64()? as u32, d.u64()? as i32);
    let id = FileId {
        dev: d.u64()?,
        ino: d.u64()?,
    };
    Segment::open_fd_of(pid, fd, PAGE, PAGE, id)
        .map_err(|e| Error::os("mapping the barrier page of this node", e))
}

impl NodeBarrier {
    /// The barrier on `segment` (mapped by [`map`]) for a rank of `shape`, watching `peers`.
    pub(crate) fn new(segment: Segment, shape: Shape, peers: Peers) -> NodeBarrier {
        NodeBarrier {
            page: Mem::from_segment(Arc::new(segment)),
            shape,
            epoch: Cell::new(0),
            peers,
        }
    }

    /// The leader's barrier on its own offer, and the offer's file, to keep open until the
    /// others have mapped the page.
    pub(crate) fn on_offer(offer: Offer, shape: Shape, peers: Peers) -> (NodeBarrier, File) {
        (NodeBarrier::new(offer.segment, shape, peers), offer.file)
    }

    /// One barrier: returns once every rank of the communicator has arrived. `across` meets
    /// the other nodes (called by the node's lowest rank where the communicator spans nodes).
    pub(crate) fn wait(&self, across: &dyn Fn() -> Result<()>) -> Result<()> {
        let epoch = self.epoch.get();
        self.epoch.set(epoch + 1);
        let word = |offset| self.page.atomic_u64(offset).map_err(Error::from);
        let before = word(ARRIVED)?.fetch_add(1, Ordering::AcqRel);
        let watch = || self.peers.all_alive();
        let role = role(self.shape, epoch, before);
        // The node's leader may sleep until the arrivals are complete: the last one wakes it.
        if role == Role::AwaitRelease && before + 1 == self.shape.local * (epoch + 1) {
            wait::ring(&self.page)?;
        }
        match role {
            Role::Release => self.release(epoch + 1),
            Role::GatherThenRelease => {
                let all_in = self.shape.local * (epoch + 1);
                wait::until(&self.page, ARRIVED, |v| v >= all_in, &Doorbell, &watch)?;
                match across() {
                    Ok(()) => self.release(epoch + 1),
                    Err(e) => {
                        self.release(FAILED)?;
                        Err(e)
                    }
                }
            }
            Role::AwaitRelease => {
                let released = wait::until(&self.page, RELEASED, |v| v > epoch, &Doorbell, &watch)?;
                match released {
                    FAILED => Err(Error::new(
                        ErrorClass::ProcFailed,
                        "the barrier failed on another node",
                    )),
                    _ => Ok(()),
                }
            }
        }
    }

    /// Stores `value` in the release word and wakes the sleepers.
    fn release(&self, value: u64) -> Result<()> {
        self.page
            .atomic_u64(RELEASED)
            .map_err(Error::from)?
            .store(value, Ordering::Release);
        wait::ring(&self.page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE_NODE: Shape = Shape {
        local: 3,
        leader: false,
        alone: true,
    };

    #[test]
    fn on_one_node_the_last_arrival_releases() {
        assert_eq!(role(ONE_NODE, 0, 0), Role::AwaitRelease);
        assert_eq!(role(ONE_NODE, 0, 1), Role::AwaitRelease);
        assert_eq!(role(ONE_NODE, 0, 2), Role::Release);
        // Epoch 1: arrivals 3, 4, 5.
        assert_eq!(role(ONE_NODE, 1, 4), Role::AwaitRelease);
        assert_eq!(role(ONE_NODE, 1, 5), Role::Release);
        let leader = Shape {
            leader: true,
            ..ONE_NODE
        };
        assert_eq!(role(leader, 0, 0), Role::AwaitRelease);
    }

    #[test]
    fn across_nodes_the_leader_gathers_and_releases() {
        let leader = Shape {
            local: 2,
            leader: true,
            alone: false,
        };
        assert_eq!(role(leader, 0, 0), Role::GatherThenRelease);
        assert_eq!(role(leader, 0, 1), Role::GatherThenRelease);
        let other = Shape {
            leader: false,
            ..leader
        };
        assert_eq!(role(other, 0, 1), Role::AwaitRelease);
    }
}
