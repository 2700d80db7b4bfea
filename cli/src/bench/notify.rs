//! `notify_latency`: handing `size` bytes to a consumer with notified RMA, against the way
//! MPI-4.1 offers for it.
//!
//! Per size, ranks 0 and 1 bounce the bytes back and forth inside one lock_all epoch, two ways,
//! one repetition of each in turn (so that both see the same machine):
//! - **notified**: `put_notify` to the peer, then `wait_notify` for the peer's answer;
//! - **flag**: `put`, `flush` (the data is at the target), a `put` of a flag word (a count of
//!   hand-offs) and a `flush` (MPI completes a put only at a synchronization: without it the
//!   flag may wait in the origin's queue), then read this rank's own flag word until the peer's
//!   next count is there (`sync` between reads, as MPI's memory model asks; the core yielded
//!   after each read). The second flush overlaps the peer's turn: the flag is on its way.
//!
//! Both columns are the half round trip: microseconds from one rank's hand-off to the other's
//! having the data. With `-t 1` the notified hand-offs are made by a thread of each rank through
//! the window shared with it ([`Window::share`]), as a program whose threads hand data to each
//! other would make them; the flag way stays on the ranks' own threads.

use super::args::Test;
use super::measure::{micros, timed};
use super::options::{Kind, Pass, Plan};
use super::pages::Pages;
use super::report::{Column, Report, Table};
use onesided::{Assert, Info, Result, Window, World};
use std::time::Duration;

/// The notification id of the hand-offs.
const ID: usize = 0;

/// Microseconds per hand-off with `put_notify`.
const NOTIFIED: Column = Column {
    head: "put_notify (us)",
    unit: "us",
};

/// Microseconds per hand-off with put, flush, a flag put and its flush.
const FLAGGED: Column = Column {
    head: "put+flush+flag (us)",
    unit: "us flag",
};

/// The ping-pong of both ways per size of the plan; rank 0 reports.
pub(super) fn notify_latency(world: &World, plan: &Plan, report: &mut Report) -> Result<()> {
    let threaded = plan.threads_given && plan.threads > 0;
    let mut notes = vec![
        "Half round trip of Size bytes handed over: put_notify + wait_notify, and put + flush + a \
         flag put (flushed) the target polls, in turns"
            .to_owned(),
    ];
    if threaded {
        notes.push("put_notify + wait_notify by a thread of each rank (Window::share)".to_owned());
    }
    report.table(Table {
        name: Test::NotifyLatency.name(),
        title: "onesided Notified Put Latency Test".to_owned(),
        notes,
        window: Some("MPI_Win_allocate"),
        sync: Some("MPI_Win_lock_all/unlock_all"),
        datatype: Some("MPI_CHAR"),
        ranks: 2,
        show_ranks: false,
        columns: vec![NOTIFIED, FLAGGED],
        imb: None,
        threads: threaded.then_some(1),
    })?;
    for size in plan.sizes.iter() {
        let pass = plan.pass(Kind::Latency, size);
        // The data at 0, the flag word after it, on a whole word.
        let flag = size.div_ceil(8) * 8;
        let win = Window::allocate(world, flag + 8, 1, &Info::new())?;
        let data = Pages::filled(size.max(1), 0x5au8);
        let mut ways = Ways {
            win: &win,
            data: &data[..size],
            flag,
            sent: 0,
            threaded,
        };
        let run = (|| -> Result<(Vec<Duration>, Vec<Duration>)> {
            win.lock_all(Assert::NONE)?;
            let (mut notified, mut flagged) = (Vec::new(), Vec::new());
            for r in 0..plan.repetitions {
                let p = if r == 0 { pass } else { pass.again() };
                notified.push(ways.notified(p)?);
                flagged.push(ways.flagged(p)?);
            }
            win.unlock_all()?;
            Ok((notified, flagged))
        })();
        world.barrier()?;
        win.free()?;
        let (notified, flagged) = run?;
        let half = |times: Vec<Duration>| {
            times
                .into_iter()
                .map(|t| micros(t, 2.0 * pass.iters as f64))
                .collect()
        };
        report.row(size, pass.iters, &[half(notified), half(flagged)])?;
    }
    Ok(())
}

/// One rank's side of both ways.
struct Ways<'w, 'a> {
    win: &'w Window<'a>,
    data: &'w [u8],
    /// Byte displacement of the flag word.
    flag: usize,
    /// Flag hand-offs this rank made so far (and received: the ranks alternate).
    sent: u64,
    /// The notified hand-offs are made by a thread sharing the window.
    threaded: bool,
}

impl Ways<'_, '_> {
    fn peer(&self) -> usize {
        1 - self.win.rank()
    }

    /// `put_notify`, then wait for the peer's (rank 1 in the other order).
    fn notified(&mut self, pass: Pass) -> Result<Duration> {
        let (win, peer, data) = (self.win, self.peer(), self.data);
        let first = win.rank() == 0;
        if self.threaded {
            return win.share(|h| {
                let send = || h.put_notify(data, peer, 0, ID);
                let receive = || h.wait_notify(ID, 1);
                bounce(pass, first, send, receive)
            });
        }
        let send = || win.put_notify(data, peer, 0, ID);
        let receive = || win.wait_notify(ID, 1);
        bounce(pass, first, send, receive)
    }

    /// Put, flush, flag put, flush, then poll the own flag (rank 1 in the other order).
    fn flagged(&mut self, pass: Pass) -> Result<Duration> {
        let first = self.win.rank() == 0;
        timed(pass, || {
            if first {
                self.send()?;
                self.receive()
            } else {
                self.receive()?;
                self.send()
            }
        })
    }

    fn send(&mut self) -> Result<()> {
        let (win, peer) = (self.win, self.peer());
        self.sent += 1;
        win.put(self.data, peer, 0)?;
        win.flush(peer)?;
        win.put(&[self.sent], peer, self.flag)?;
        win.flush(peer)
    }

    /// Wait until the peer's flag put of this turn is in the own flag word.
    fn receive(&self) -> Result<()> {
        // Rank 0 waits for the answer to its own count, rank 1 for the next one.
        let want = self.sent + u64::from(self.win.rank() == 1);
        let mut seen = [0u64];
        loop {
            self.win.read_local(self.flag, &mut seen)?;
            if seen[0] >= want {
                return Ok(());
            }
            self.win.sync()?;
            std::thread::yield_now();
        }
    }
}

/// `pass` timed round trips of `send` and `receive`, in that order where `first`, else the
/// other way round.
fn bounce(
    pass: Pass,
    first: bool,
    send: impl Fn() -> Result<()>,
    receive: impl Fn() -> Result<()>,
) -> Result<Duration> {
    timed(pass, || match first {
        true => send().and_then(|()| receive()),
        false => receive().and_then(|()| send()),
    })
}
