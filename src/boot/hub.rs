//! The bootstrap hub: a TCP server that the launcher runs for one job, on `127.0.0.1` unless it
//! is given another address of this host (`onesided run --boot-addr`).
//!
//! Each rank connects once and authenticates with the job secret. The hub serves allgathers:
//! it holds the contributions of each collective, identified by `(comm, seq)`, until all of its
//! members have contributed, then sends every member the gathered data. A rank whose connection
//! closes without `Finalize`, or that the launcher reports with [`Hub::fail_rank`], fails the
//! job: every pending and future collective is answered with a `Failed` frame naming it.
//!
//! One thread accepts connections and one thread serves each connection. The hub trusts no size
//! it is sent beyond what the job allows: at most [`max_connections`] connections at a time
//! (more are closed at once), frames of at most 4 MiB, each read and written whole within
//! [`DEADLINE`] of its first byte (a hello within it of the connection), and collectives of at
//! most `size` members, with at most 16 contributions of one rank waiting.

use std::io::BufReader;
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::Secret;
use super::gather::{Contribution, Gathers};
use super::paced::{self, Paced};
use super::wire::{self, HUB_FRAME_LIMIT, Msg};
use crate::error::{Error, ErrorClass, Result};

/// How long the hub waits for the whole of one message once its first byte has arrived (and for
/// a new connection's hello), and for one message it sends to be taken.
pub const DEADLINE: Duration = Duration::from_secs(5);
/// Largest hello frame body read from a not yet authenticated connection.
const HELLO_LIMIT: usize = 64;
/// Connections beyond twice the job's size that may be open at a time.
const SPARE_CONNECTIONS: usize = 16;

/// How many connections the hub of a job of `size` ranks keeps open at a time: every rank's,
/// as many again arriving at once, and 16 more.
pub fn max_connections(size: usize) -> usize {
    size.saturating_mul(2).saturating_add(SPARE_CONNECTIONS)
}

/// A running hub. Dropping it stops accepting and closes every connection.
pub struct Hub {
    shared: Arc<Shared>,
    addr: SocketAddr,
    acceptor: Option<JoinHandle<()>>,
}

/// The sending half of a rank's connection, shared by the threads that answer it.
type Writer = Arc<Mutex<TcpStream>>;

struct Shared {
    secret: Secret,
    stopping: AtomicBool,
    /// Connections open (each served by a thread).
    connections: AtomicUsize,
    state: Mutex<State>,
}

struct State {
    /// Connected ranks, indexed by rank.
    peers: Vec<Option<Writer>>,
    /// Ranks that sent `Finalize`.
    finalized: Vec<bool>,
    /// Ranks that were ever admitted.
    joined: Vec<bool>,
    /// The process id each admitted rank gave.
    pids: Vec<Option<u32>>,
    /// When the first rank was admitted.
    first_join: Option<Instant>,
    /// Collectives waiting for contributions.
    gathers: Gathers<Writer>,
    /// The first failed rank and why it failed.
    failure: Option<(usize, String)>,
}

/// One connection's claim on [`Shared::connections`], released when dropped.
struct Slot(Arc<Shared>);

impl Slot {
    /// Claims a connection, unless `limit` are open already.
    fn claim(shared: &Arc<Shared>, limit: usize) -> Option<Slot> {
        shared
            .connections
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(shared)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Locks the writers, each once even if listed twice.
fn lock_all(writers: &[Writer]) -> Vec<MutexGuard<'_, TcpStream>> {
    let mut unique: Vec<&Writer> = Vec::with_capacity(writers.len());
    for w in writers {
        if !unique.iter().any(|u| Arc::ptr_eq(u, w)) {
            unique.push(w);
        }
    }
    unique.into_iter().map(|w| lock(w)).collect()
}

/// Sends `msg` on every locked connection. A connection that does not take it within
/// [`DEADLINE`] is shut down (its own thread then fails its rank); other write errors are left
/// to that thread too. Gathered data too large for a frame is answered with `Rejected`.
fn send(outs: &mut [MutexGuard<'_, TcpStream>], msg: &Msg) {
    let frame = msg.encode().or_else(|e| match msg {
        Msg::Gathered { comm, seq, .. } => Msg::Rejected {
            comm: *comm,
            seq: *seq,
            reason: format!("gathered data too large: {e}"),
        }
        .encode(),
        _ => Err(e),
    });
    if let Ok(frame) = frame {
        for out in outs {
            if paced::write_frame_within(out, &frame, DEADLINE).is_err() {
                let _ = out.shutdown(Shutdown::Both);
            }
        }
    }
}

impl Hub {
    /// Starts a hub for a job of `size` ranks that must present `secret`, listening on an
    /// ephemeral port of `127.0.0.1`.
    pub fn start(size: usize, secret: Secret) -> Result<Hub> {
        Hub::start_on(IpAddr::V4(Ipv4Addr::LOCALHOST), size, secret)
    }

    /// Like [`Hub::start`], listening on an ephemeral port of `ip`, an address of this host.
    pub fn start_on(ip: IpAddr, size: usize, secret: Secret) -> Result<Hub> {
        if size == 0 || u32::try_from(size).is_err() {
            return Err(Error::new(
                ErrorClass::Arg,
                format!("invalid job size {size}"),
            ));
        }
        let listener = TcpListener::bind((ip, 0))
            .map_err(|e| Error::os(&format!("binding the bootstrap hub to {ip}"), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::os("bootstrap hub address", e))?;
        let shared = Arc::new(Shared {
            secret,
            stopping: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            state: Mutex::new(State {
                peers: vec![None; size],
                finalized: vec![false; size],
                joined: vec![false; size],
                pids: vec![None; size],
                first_join: None,
                gathers: Gathers::new(size),
                failure: None,
            }),
        });
        let accepting = Arc::clone(&shared);
        let limit = max_connections(size);
        let acceptor = thread::Builder::new()
            .name("onesided-hub".into())
            .spawn(move || accept_loop(&accepting, &listener, limit))
            .map_err(|e| Error::os("starting the bootstrap hub thread", e))?;
        Ok(Hub {
            shared,
            addr,
            acceptor: Some(acceptor),
        })
    }

    /// The address ranks connect to (`ONESIDED_BOOT`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The first failure of the job, as the hub saw it or was told: the rank and why it failed.
    /// The hub sees a rank fail when its connection closes without `Finalize`, which happens
    /// as the process dies, before its parent can collect its exit status.
    pub fn failure(&self) -> Option<(usize, String)> {
        lock(&self.shared.state).failure.clone()
    }

    /// The process ids the admitted ranks gave (under a wrapper, not the launcher's children).
    pub fn pids(&self) -> Vec<u32> {
        lock(&self.shared.state)
            .pids
            .iter()
            .flatten()
            .copied()
            .collect()
    }

    /// When the first rank joined (was admitted) and the ranks that have not joined since;
    /// `None` while no rank has joined.
    pub fn absent_since(&self) -> Option<(Instant, Vec<usize>)> {
        let state = lock(&self.shared.state);
        let absent = (0..state.joined.len()).filter(|&r| !state.joined[r]);
        state.first_join.map(|t| (t, absent.collect()))
    }

    /// Records that `rank` failed for `reason` (e.g. "killed by signal 9 (SIGKILL)"): every
    /// pending and future collective of the job gets an error naming it. Only the first failure
    /// of a job is kept.
    pub fn fail_rank(&self, rank: usize, reason: &str) {
        self.shared.fail(rank, reason.to_string());
    }

    /// Records that `rank`'s process exited with status 0. If it is not connected and never
    /// finalized (it exited without using the bootstrap, or without finalizing), this fails the
    /// job as [`Hub::fail_rank`] does, since a rank waiting for it would otherwise wait forever.
    pub fn rank_exited(&self, rank: usize) {
        let gone_unfinalized = {
            let state = lock(&self.shared.state);
            state.peers.get(rank).is_some_and(Option::is_none)
                && state.finalized.get(rank).is_some_and(|f| !f)
        };
        if gone_unfinalized {
            self.shared
                .fail(rank, "exited without finalizing".to_string());
        }
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take()
            && TcpStream::connect(self.addr).is_ok()
        {
            let _ = acceptor.join();
        }
        let state = lock(&self.shared.state);
        for w in state.peers.iter().flatten() {
            let _ = lock(w).shutdown(Shutdown::Both);
        }
    }
}

/// Accepts connections, each served by its own thread while fewer than `limit` are open; the
/// others are closed at once.
fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener, limit: usize) {
    for conn in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        match conn {
            Ok(stream) => {
                let Some(slot) = Slot::claim(shared, limit) else {
                    let _ = stream.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = thread::Builder::new()
                    .name("onesided-hub-conn".into())
                    .spawn(move || serve(&slot.0, stream));
            }
            Err(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Serves one connection until it closes.
fn serve(shared: &Shared, stream: TcpStream) {
    let mut paced = Paced::new(&stream, DEADLINE);
    let Some((rank, pid, writer)) = admit(shared, &stream, &mut paced) else {
        let _ = stream.shutdown(Shutdown::Both);
        return;
    };
    let mut reader = BufReader::with_capacity(1 << 16, paced);
    let mut finalized = false;
    let fault = loop {
        match paced::read_msg_within(&mut reader, HUB_FRAME_LIMIT, DEADLINE) {
            Ok(None) => break None,
            Ok(Some(Msg::Finalize)) => {
                finalized = true;
                lock(&shared.state).finalized[rank] = true;
            }
            Ok(Some(Msg::Allgather {
                comm,
                seq,
                members,
                index,
                data,
            })) if !finalized => {
                let c = Contribution {
                    comm,
                    seq,
                    members,
                    index,
                    data,
                };
                shared.contribute(rank, &writer, c);
            }
            Ok(Some(_)) => break Some("sent an unexpected bootstrap frame".to_string()),
            Err(e) => break Some(format!("broke its bootstrap connection ({e})")),
        }
    };
    {
        let mut state = lock(&shared.state);
        if state.peers[rank]
            .as_ref()
            .is_some_and(|w| Arc::ptr_eq(w, &writer))
        {
            state.peers[rank] = None;
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
    if shared.stopping.load(Ordering::SeqCst) {
        return;
    }
    match fault {
        Some(reason) => shared.fail(rank, format!("{reason} (pid {pid})")),
        None if !finalized => shared.fail(
            rank,
            format!("closed its bootstrap connection without finalizing (pid {pid})"),
        ),
        None => {}
    }
}

/// Reads the hello from `paced` (within [`DEADLINE`] of the connection) and checks it; on
/// success registers the rank, welcomes it and returns `(rank, pid, writer)`. Any failure means
/// the connection is refused.
fn admit(
    shared: &Shared,
    stream: &TcpStream,
    paced: &mut Paced<'_>,
) -> Option<(usize, u32, Writer)> {
    let Ok(Some(Msg::Hello { secret, rank, pid })) = wire::read_msg(paced, HELLO_LIMIT) else {
        return None;
    };
    if !super::same_secret(&secret, &shared.secret) {
        return None;
    }
    stream.set_nodelay(true).ok()?;
    let writer: Writer = Arc::new(Mutex::new(stream.try_clone().ok()?));
    let rank = rank as usize;
    let mut state = lock(&shared.state);
    if state.peers.get(rank)?.is_some() {
        return None;
    }
    let mut greeting = Msg::Welcome.encode().ok()?;
    if let Some((failed, reason)) = &state.failure {
        let failed_msg = Msg::Failed {
            rank: u32::try_from(*failed).ok(),
            reason: reason.clone(),
        };
        greeting.extend(failed_msg.encode().ok()?);
    }
    paced::write_frame_within(&lock(&writer), &greeting, DEADLINE).ok()?;
    state.peers[rank] = Some(Arc::clone(&writer));
    state.joined[rank] = true;
    state.pids[rank] = Some(pid);
    state.first_join.get_or_insert_with(Instant::now);
    Some((rank, pid, writer))
}

impl Shared {
    /// Adds `rank`'s contribution and sends what it leads to. The writers are locked before the
    /// state is released, so that a `Failed` frame of a later failure cannot overtake the answer
    /// of a collective that completed before it.
    fn contribute(&self, rank: usize, from: &Writer, c: Contribution) {
        let mut state = lock(&self.state);
        let answer = match &state.failure {
            Some((failed, reason)) => {
                let msg = Msg::Failed {
                    rank: u32::try_from(*failed).ok(),
                    reason: reason.clone(),
                };
                Some((vec![Arc::clone(from)], msg))
            }
            None => state.gathers.contribute(rank, Arc::clone(from), c),
        };
        let Some((writers, msg)) = answer else {
            return;
        };
        let mut outs = lock_all(&writers);
        drop(state);
        send(&mut outs, &msg);
    }

    /// Fails the job because of `rank`, unless it already failed.
    fn fail(&self, rank: usize, reason: String) {
        let writers: Vec<Writer> = {
            let mut state = lock(&self.state);
            if state.failure.is_some() {
                return;
            }
            state.failure = Some((rank, reason.clone()));
            state.gathers.clear();
            state.peers.iter().flatten().cloned().collect()
        };
        let msg = Msg::Failed {
            rank: u32::try_from(rank).ok(),
            reason,
        };
        send(&mut lock_all(&writers), &msg);
    }
}
