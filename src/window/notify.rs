//! Notified RMA: a put or get that tells its target, with a notification id, once its data is
//! there (or has been read), and the target's waits for notifications.
//!
//! The producer/consumer pattern otherwise costs a put, a flush (a round trip) and a second put
//! to a flag the target polls. A notification is one signal that comes with or after the data,
//! as foMPI-NA made it (the MPI Forum's proposal mpi-forum/mpi-issues#59). A target counts the
//! notifications of each id, and its waits ask for as many more as they need. How a
//! notification travels depends on the route to the target:
//! - **Over the fabric and direct verbs** it rides on the write itself: one `fi_writemsg` with
//!   `FI_REMOTE_CQ_DATA`, or one RDMA write with immediate data, naming the window and the id,
//!   which completes at the target only once the bytes are there; the target's endpoint counts
//!   it in memory of its own (`transport/notices.rs`). No flush, no second operation.
//! - **Over shared memory** the put is a copy, complete when it returns; the notification is a
//!   CPU fetch-add on the target's counter of the id in its control block
//!   ([`layout::notify_slot`]), which rings the doorbell a sleeping waiter listens on.
//! - **Elsewhere** (a get, a put too large for one operation, a target whose data goes by
//!   another transport than its atomics, a provider without room for the data) the put is
//!   completed at the target first, then the counter gets an atomic add through the window's
//!   atomic route: never before the data, at the cost of a round trip.
//!
//! A wait adds both counts, so notifications of one id may come by any of these ways at once.
//!
//! Not part of MPI-4.1; the calls are named after the proposal's `MPIX_` forms in errors.

use super::Window;
use crate::error::in_call;
use crate::error::{Error, ErrorClass, Result};
use crate::protocol::layout;
use crate::transport::{Space, Transport};
use crate::wait::{self, Pace};
use bytemuck::Pod;
use std::sync::atomic::Ordering;

/// A transport driven back to back while its rank waits for notifications, where it would
/// otherwise nap or sleep on its completion channel (direct verbs: the notification that a
/// write with immediate data brings is only counted when this rank polls its completion queue):
/// a nap there added up to a millisecond to each hand-off, and over rxe a late notification
/// was seen several times later from the channel than by polling. It keeps the waiter on its
/// core, as the waits of a transport that needs target progress do.
struct Polled<'t>(&'t dyn Transport);

impl wait::Progress for Polled<'_> {
    fn poll(&self) -> Result<()> {
        self.0.progress()
    }

    fn pace(&self) -> Pace {
        match self.0.pace() {
            Pace::Nap | Pace::Completion => Pace::Serve,
            pace => pace,
        }
    }
}

impl Window<'_> {
    /// The offset of notification `id`'s counter in a control block, or MPI_ERR_ARG.
    fn notify_slot(&self, id: usize) -> Result<usize> {
        if id >= layout::NOTIFY_IDS {
            return Err(Error::new(
                ErrorClass::Arg,
                format!(
                    "notification id {id}: ids are 0 to {}",
                    layout::NOTIFY_IDS - 1
                ),
            ));
        }
        Ok(layout::notify_slot(id))
    }

    /// Add 1 to `target`'s notification counter at `slot`, after everything this rank issued
    /// to it before: right behind it where the atomic route orders atomics after the data it
    /// moved (shared memory), after completing it at the target otherwise, as the signals that
    /// end epochs go.
    fn notify(&self, target: usize, slot: usize) -> Result<()> {
        self.settle_before_signal(target)?;
        self.atomic_route().signal(target, slot, 1)
    }

    /// [`Window::put`] with a notification with id `id` (below 256) to `target`, which never
    /// arrives before the data: once [`Window::wait_notify`] at the target has counted it, the
    /// data is in the target's memory. Valid where `put` is, in every kind of epoch; an id out
    /// of range gives MPI_ERR_ARG and moves nothing. No flush is needed for the notification
    /// to arrive; as for any put, a flush (or the epoch's end) is what tells the origin that
    /// the put completed.
    pub fn put_notify<T: Pod>(
        &self,
        origin: &[T],
        target: usize,
        disp: usize,
        id: usize,
    ) -> Result<()> {
        in_call(Some(self.rank()), "MPIX_Put_notify", || {
            let slot = self.notify_slot(id)?;
            let bytes: &[u8] = bytemuck::cast_slice(origin);
            let (space, off) = self.place(target, disp, bytes.len(), false)?;
            // As `put` moves the bytes, unless the route carries the notification with them.
            let carried = match self.direct.data(target).filter(|_| space == Space::Data) {
                Some(mem) => {
                    mem.write(off, bytes)?;
                    false
                }
                None => {
                    let route = self.route(target);
                    let carried = route.put_notify(target, space, off, bytes, id)?;
                    if !carried {
                        route.put(target, space, off, bytes)?;
                    }
                    carried
                }
            };
            self.epochs.borrow_mut().issued();
            match carried {
                true => Ok(()),
                false => self.notify(target, slot),
            }
        })
    }

    /// [`Window::get`], then a notification with id `id` to `target`, which arrives once the
    /// data has been read: the target may then reuse that memory. As `put_notify` otherwise.
    pub fn get_notify<T: Pod>(
        &self,
        origin: &mut [T],
        target: usize,
        disp: usize,
        id: usize,
    ) -> Result<()> {
        in_call(Some(self.rank()), "MPIX_Get_notify", || {
            let slot = self.notify_slot(id)?;
            self.get(origin, target, disp)?;
            self.notify(target, slot)
        })
    }

    /// How many notifications of `id` arrived with their writes
    /// ([`crate::transport::Transport::put_notify`]), not in the control block.
    fn carried(&self, id: usize) -> u64 {
        self.transports().map(|t| t.notified(id)).sum()
    }

    /// How many notifications of `id` this rank's waits consumed so far.
    fn consumed(&self, id: usize) -> u64 {
        self.notified.borrow().get(id).copied().unwrap_or(0)
    }

    /// Count `count` more notifications of `id` as consumed.
    fn consume(&self, id: usize, count: u64) {
        let mut seen = self.notified.borrow_mut();
        if seen.len() <= id {
            seen.resize(id + 1, 0);
        }
        seen[id] += count;
    }

    /// Wait until `count` notifications with id `id` that no earlier wait or test consumed have
    /// arrived at this rank, from any origins, and consume them: the data of each notified put
    /// among them is then visible to this rank's loads. Needs no epoch. A rank of the window
    /// that dies meanwhile gives MPI_ERR_PROC_FAILED instead of a hang; an id out of range
    /// MPI_ERR_ARG.
    pub fn wait_notify(&self, id: usize, count: usize) -> Result<()> {
        in_call(Some(self.rank()), "MPIX_Wait_notify", || {
            let slot = self.notify_slot(id)?;
            let due = self.consumed(id) + count as u64;
            let watch = || self.watch_all();
            let there = |v: u64| v + self.carried(id) >= due;
            let polled = Polled(self.atomic_route());
            wait::until(&self.ctrl, slot, there, &polled, &watch)?;
            self.consume(id, count as u64);
            Ok(())
        })
    }

    /// The nonblocking [`Window::wait_notify`]: consumes `count` notifications of `id` and
    /// returns `true` if that many arrived, else consumes none and returns `false`.
    pub fn test_notify(&self, id: usize, count: usize) -> Result<bool> {
        in_call(Some(self.rank()), "MPIX_Test_notify", || {
            let slot = self.notify_slot(id)?;
            self.atomic_route().progress()?;
            let signalled = self.ctrl.atomic_u64(slot)?.load(Ordering::Acquire);
            let arrived = signalled + self.carried(id);
            let there = arrived >= self.consumed(id) + count as u64;
            if there {
                self.consume(id, count as u64);
            }
            Ok(there)
        })
    }
}
