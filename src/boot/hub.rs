//! The bootstrap hub: a TCP server that the launcher runs for one job, on `127.0.0.1` unless it
//! is given another address of this host (`onesided run --boot-addr`).
//!
//! Each rank connects once and authenticates with the job secret. The hub serves allgathers:
//! it holds the contributions of each collective, identified by `(comm, seq)`, until all of its
//! members have contributed, then sends every member the gathered data. A rank whose connection
//! closes without `Finalize`, or that the launcher reports with [`Hub::fail_rank`], fails the
//! job: every pending and future collective is answered with a `Failed` frame naming it.
//!
//! One thread accepts connections and one thread serves each connection.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::io::BufReader;
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::Secret;
use super::wire::{self, MAX_FRAME, Msg};
use crate::error::{Error, ErrorClass, Result};

/// How long a new connection may take to send its hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest hello frame body read from a not yet authenticated connection.
const HELLO_LIMIT: usize = 64;

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
    state: Mutex<State>,
}

struct State {
    /// Connected ranks, indexed by rank.
    peers: Vec<Option<Writer>>,
    /// Ranks that sent `Finalize`.
    finalized: Vec<bool>,
    /// Collectives waiting for contributions.
    pending: HashMap<(u64, u64), Pending>,
    /// The first failed rank and why it failed.
    failure: Option<(usize, String)>,
}

struct Pending {
    parts: Vec<Option<Vec<u8>>>,
    arrived: usize,
    waiting: Vec<Writer>,
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

/// Sends `msg` on every locked connection; write errors are ignored (the connection's own
/// thread sees them). Gathered data too large for a frame is answered with `Rejected`.
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
            let _ = wire::write_frame(&mut **out, &frame);
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
            state: Mutex::new(State {
                peers: vec![None; size],
                finalized: vec![false; size],
                pending: HashMap::new(),
                failure: None,
            }),
        });
        let accepting = Arc::clone(&shared);
        let acceptor = thread::Builder::new()
            .name("onesided-hub".into())
            .spawn(move || accept_loop(&accepting, &listener))
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

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener) {
    for conn in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        match conn {
            Ok(stream) => {
                let serving = Arc::clone(shared);
                let _ = thread::Builder::new()
                    .name("onesided-hub-conn".into())
                    .spawn(move || serve(&serving, stream));
            }
            Err(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Serves one connection until it closes.
fn serve(shared: &Shared, stream: TcpStream) {
    let Some((rank, pid, writer)) = admit(shared, &stream) else {
        let _ = stream.shutdown(Shutdown::Both);
        return;
    };
    let mut reader = BufReader::with_capacity(1 << 16, &stream);
    let mut finalized = false;
    let fault = loop {
        match wire::read_msg(&mut reader, MAX_FRAME) {
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
                let (members, index) = (members as usize, index as usize);
                shared.contribute(&writer, comm, seq, members, index, data);
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

/// Reads and checks the hello; on success registers the rank, welcomes it and returns
/// `(rank, pid, writer)`. Any failure means the connection is refused.
fn admit(shared: &Shared, stream: &TcpStream) -> Option<(usize, u32, Writer)> {
    stream.set_read_timeout(Some(HELLO_TIMEOUT)).ok()?;
    let Ok(Some(Msg::Hello { secret, rank, pid })) = wire::read_msg(&mut &*stream, HELLO_LIMIT)
    else {
        return None;
    };
    if !super::same_secret(&secret, &shared.secret) {
        return None;
    }
    stream.set_read_timeout(None).ok()?;
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
    wire::write_frame(&mut *lock(&writer), &greeting).ok()?;
    state.peers[rank] = Some(Arc::clone(&writer));
    Some((rank, pid, writer))
}

impl Shared {
    /// Adds a contribution to collective `(comm, seq)` and sends what it leads to. The writers
    /// are locked before the state is released, so that a `Failed` frame of a later failure
    /// cannot overtake the answer of a collective that completed before it.
    fn contribute(
        &self,
        from: &Writer,
        comm: u64,
        seq: u64,
        members: usize,
        index: usize,
        data: Vec<u8>,
    ) {
        let mut state = lock(&self.state);
        let Some((writers, msg)) = state.contribute(from, comm, seq, members, index, data) else {
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
            state.pending.clear();
            state.peers.iter().flatten().cloned().collect()
        };
        let msg = Msg::Failed {
            rank: u32::try_from(rank).ok(),
            reason,
        };
        send(&mut lock_all(&writers), &msg);
    }
}

impl State {
    /// Records a contribution to collective `(comm, seq)`; returns the connections to answer and
    /// the answer, or `None` while the collective waits for more contributions.
    fn contribute(
        &mut self,
        from: &Writer,
        comm: u64,
        seq: u64,
        members: usize,
        index: usize,
        data: Vec<u8>,
    ) -> Option<(Vec<Writer>, Msg)> {
        if let Some((rank, reason)) = &self.failure {
            let msg = Msg::Failed {
                rank: u32::try_from(*rank).ok(),
                reason: reason.clone(),
            };
            return Some((vec![Arc::clone(from)], msg));
        }
        let reject = |mut waiting: Vec<Writer>, reason: String| {
            waiting.push(Arc::clone(from));
            Some((waiting, Msg::Rejected { comm, seq, reason }))
        };
        if index >= members {
            return reject(Vec::new(), format!("index {index} not below {members}"));
        }
        let mut entry = match self.pending.entry((comm, seq)) {
            Entry::Occupied(e) => e,
            Entry::Vacant(v) => v.insert_entry(Pending {
                parts: vec![None; members],
                arrived: 0,
                waiting: Vec::new(),
            }),
        };
        let pending = entry.get_mut();
        let expected = pending.parts.len();
        let problem = if expected != members {
            Some(format!("members {members} differs from {expected}"))
        } else if pending.parts[index].is_some() {
            Some(format!("index {index} contributed twice"))
        } else if pending.waiting.iter().any(|w| Arc::ptr_eq(w, from)) {
            Some("one rank contributed twice".to_string())
        } else {
            None
        };
        if let Some(reason) = problem {
            return reject(entry.remove().waiting, reason);
        }
        pending.parts[index] = Some(data);
        pending.arrived += 1;
        pending.waiting.push(Arc::clone(from));
        if pending.arrived < members {
            return None;
        }
        let done = entry.remove();
        let parts = done.parts.into_iter().flatten().collect();
        Some((done.waiting, Msg::Gathered { comm, seq, parts }))
    }
}
