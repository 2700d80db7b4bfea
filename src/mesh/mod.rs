//! The collective network: the ranks' own TCP connections, over which communicators run their
//! collectives (allgather, and barrier and broadcast built on it) once the job is wired up.
//!
//! Every rank listens on a port of every IPv4 address of its host and publishes a [`Card`]
//! through the process manager; after that, no central server is involved. An allgather is
//! Bruck's algorithm ([`bruck`]): `ceil(log2 n)` rounds, in each of which a member sends what it
//! holds so far to one peer and receives from another, so a member talks to `2 log2 n` peers
//! and receives `n - 1` blocks whatever the job's size. Connections are opened on first use
//! (the world's first allgather opens those of the world's schedule) and kept.
//!
//! Failures: a connection that ends without the peer's goodbye, or that cannot be opened, makes
//! the peer failed in the job's [`Liveness`]; the first failure a rank hears of is passed on to
//! every peer it is connected to, so it floods the job. A rank waiting for a part opens a
//! connection to the sender if it has none after a moment, so that even a peer that died before
//! ever connecting is noticed.

pub(crate) mod bruck;
mod card;
mod link;
mod net;

pub(crate) use card::Card;

use crate::boot::Secret;
use crate::boot::wire::{self, Msg};
use crate::error::{Error, ErrorClass, Result};
use crate::liveness::Liveness;
pub(crate) use net::Directory;
use net::{Inbox, Net, PartKey, Writer, lock};
use std::collections::HashMap;
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long a waiter waits for a part before it connects to the sender to watch it.
const WATCH_AFTER: Duration = Duration::from_millis(100);
/// How often a waiter looks at the job's failures while it waits.
const RECHECK: Duration = Duration::from_millis(100);

/// A rank's place in the collective network.
pub(crate) struct Mesh {
    net: Arc<Net>,
    port: u16,
    acceptor: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Mesh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mesh")
            .field("rank", &self.net.me)
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

/// A bound listener, before the job's secret is known.
pub(crate) struct Listener {
    listener: TcpListener,
    port: u16,
}

impl Listener {
    /// Binds an ephemeral port on every IPv4 address of this host.
    pub(crate) fn bind() -> Result<Listener> {
        let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0))
            .map_err(|e| Error::os("binding the collective network's listener", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| Error::os("collective network address", e))?
            .port();
        Ok(Listener { listener, port })
    }

    /// This rank's card, for node `node`.
    pub(crate) fn card(&self, node: &str) -> Card {
        Card::here(node, self.port)
    }
}

/// Who this rank is in the network.
pub(crate) struct Identity {
    pub(crate) rank: usize,
    pub(crate) size: usize,
    pub(crate) node: String,
    pub(crate) secret: Secret,
    /// How long a peer's connection may stay silent (its host gone) before it counts as failed.
    pub(crate) silence: Duration,
}

impl Mesh {
    /// Starts serving `listener` for rank `id.rank` of `id.size`.
    pub(crate) fn start(
        listener: Listener,
        id: Identity,
        liveness: Arc<Liveness>,
        directory: Arc<dyn Directory>,
    ) -> Result<Mesh> {
        let net = Arc::new(Net {
            me: id.rank,
            size: id.size,
            node: id.node,
            secret: id.secret,
            silence: id.silence,
            liveness,
            directory,
            links: Mutex::new(HashMap::new()),
            conns: Mutex::new(Vec::new()),
            inbox: Mutex::new(Inbox::default()),
            arrived: Condvar::new(),
            stopping: AtomicBool::new(false),
        });
        let accepting = Arc::clone(&net);
        let Listener { listener, port } = listener;
        let acceptor = thread::Builder::new()
            .name("onesided-mesh".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if accepting.stopping() {
                        return;
                    }
                    if let Ok(s) = conn {
                        let net = Arc::clone(&accepting);
                        let _ = thread::Builder::new()
                            .name("onesided-mesh-accept".into())
                            .spawn(move || link::accept(net, s));
                    }
                }
            })
            .map_err(|e| Error::os("starting the collective network", e))?;
        Ok(Mesh {
            net,
            port,
            acceptor: Mutex::new(Some(acceptor)),
        })
    }

    /// The connection to `rank`, opened if there is none.
    fn link(&self, rank: usize) -> Result<Writer> {
        if let Some(w) = lock(&self.net.links).get(&rank) {
            return Ok(w.clone());
        }
        let card = self.net.directory.card(rank)?;
        link::connect(&self.net, rank, &card.targets(&self.net.node)).inspect_err(|e| {
            self.net.heard(Some(rank), e.message());
        })
    }

    fn send(&self, to: usize, msg: &Msg) -> Result<()> {
        let frame = msg
            .encode()
            .map_err(|e| Error::new(ErrorClass::Arg, format!("collective contribution: {e}")))?;
        let w = self.link(to)?;
        let sent = wire::write_frame(&mut *lock(&w), &frame);
        sent.map_err(|e| {
            let why = format!("sending to it failed ({e})");
            self.net.heard(Some(to), &why);
            Error::new(ErrorClass::ProcFailed, format!("rank {to}: {why}"))
        })
    }

    /// Waits for the part `key` from world rank `from`.
    fn receive(&self, key: PartKey, from: usize) -> Result<Vec<u8>> {
        let start = Instant::now();
        let mut watched = false;
        let mut inbox = lock(&self.net.inbox);
        loop {
            if let Some(data) = inbox.parts.remove(&key) {
                return Ok(data);
            }
            self.net.liveness.check()?;
            if inbox.gone(from) {
                return Err(Error::new(
                    ErrorClass::ProcFailed,
                    format!("rank {from} left the job in the middle of a collective call"),
                ));
            }
            if !watched && start.elapsed() >= WATCH_AFTER {
                watched = true;
                drop(inbox);
                self.link(from)?;
                inbox = lock(&self.net.inbox);
                continue;
            }
            inbox = self
                .net
                .arrived
                .wait_timeout(inbox, RECHECK)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Allgather among `members` (world ranks, in communicator order) of communicator `comm`,
    /// call `seq`: this rank is member `index` and contributes `data`; returns every member's
    /// data in member order.
    pub(crate) fn allgather(
        &self,
        comm: u64,
        seq: u64,
        members: &[usize],
        index: usize,
        data: &[u8],
    ) -> Result<Vec<Vec<u8>>> {
        if self.net.stopping() {
            return Err(Error::new(
                ErrorClass::Other,
                "collective call after the world was finalized",
            ));
        }
        let n = members.len();
        let mut held = vec![data.to_vec()];
        for round in bruck::rounds(n, index) {
            let part = Msg::Part {
                comm,
                seq,
                round: round.k,
                data: bruck::pack(&held[..round.count]),
            };
            self.send(members[round.send_to], &part)?;
            let from = members[round.recv_from];
            let got = self.receive((comm, seq, round.k, from), from)?;
            held.extend(bruck::unpack(&got, round.count)?);
        }
        Ok(bruck::in_order(held, index))
    }

    /// Says goodbye to every peer and stops accepting. Later collectives fail.
    pub(crate) fn finalize(&self) {
        if self.net.stopping.swap(true, Ordering::AcqRel) {
            return;
        }
        let frame = Msg::Finalize.encode().unwrap_or_default();
        let conns: Vec<Writer> = lock(&self.net.conns).clone();
        for w in conns {
            let s = lock(&w);
            let _ = wire::write_frame(&mut &*s, &frame);
            let _ = s.shutdown(Shutdown::Write);
        }
        if let Some(acceptor) = lock(&self.acceptor).take()
            && TcpStream::connect(SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))).is_ok()
        {
            let _ = acceptor.join();
        }
    }
}

impl Drop for Mesh {
    fn drop(&mut self) {
        self.finalize();
    }
}
