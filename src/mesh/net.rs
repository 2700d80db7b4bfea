//! What the threads of the collective network share: the connections to each peer, the parts
//! of collectives received so far, and the failures heard of.

use super::Card;
use crate::boot::Secret;
use crate::boot::wire::{self, Msg};
use crate::error::Result;
use crate::liveness::Liveness;
use std::collections::{HashMap, HashSet};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// The sending half of a connection to a peer.
pub(super) type Writer = Arc<Mutex<TcpStream>>;

/// Where the cards of the other ranks come from (the process manager's key-value store).
pub(crate) trait Directory: Send + Sync {
    /// The card `rank` published.
    fn card(&self, rank: usize) -> Result<Card>;
}

/// A part of a collective: communicator, call, round, sending world rank.
pub(super) type PartKey = (u64, u64, u32, usize);

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Default)]
pub(super) struct Inbox {
    pub(super) parts: HashMap<PartKey, Vec<u8>>,
    /// Ranks that said goodbye.
    pub(super) departed: HashSet<usize>,
    /// Connections still being read, per peer: a peer is gone for good once it said goodbye
    /// and every connection from it has been read to its end (parts and the goodbye may travel
    /// on different connections).
    pub(super) reading: HashMap<usize, usize>,
}

impl Inbox {
    pub(super) fn gone(&self, rank: usize) -> bool {
        self.departed.contains(&rank) && self.reading.get(&rank).is_none_or(|&n| n == 0)
    }
}

/// What the threads of the network share.
pub(crate) struct Net {
    pub(super) me: usize,
    pub(super) size: usize,
    pub(super) node: String,
    pub(super) secret: Secret,
    pub(super) silence: Duration,
    pub(super) liveness: Arc<Liveness>,
    pub(super) directory: Arc<dyn Directory>,
    /// The connection that carries what is sent to each peer.
    pub(super) links: Mutex<HashMap<usize, Writer>>,
    /// Every connection (both sides may have connected at once), each to get the goodbye.
    pub(super) conns: Mutex<Vec<Writer>>,
    pub(super) inbox: Mutex<Inbox>,
    pub(super) arrived: Condvar,
    pub(super) stopping: AtomicBool,
}

impl Net {
    pub(super) fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Adds a connection to `rank`; the first one registered for a rank carries what is sent to
    /// it. Returns that one.
    pub(super) fn register(&self, rank: usize, s: TcpStream) -> Writer {
        let w = Arc::new(Mutex::new(s));
        lock(&self.conns).push(Arc::clone(&w));
        lock(&self.links).entry(rank).or_insert(w).clone()
    }

    pub(super) fn file(&self, key: PartKey, data: Vec<u8>) {
        lock(&self.inbox).parts.insert(key, data);
        self.arrived.notify_all();
    }

    pub(super) fn departed(&self, rank: usize) {
        lock(&self.inbox).departed.insert(rank);
        self.arrived.notify_all();
    }

    /// A connection from `rank` is about to be read.
    pub(super) fn reading(&self, rank: usize) {
        *lock(&self.inbox).reading.entry(rank).or_default() += 1;
    }

    /// A connection from `rank` has been read to its end.
    pub(super) fn read_out(&self, rank: usize) {
        if let Some(n) = lock(&self.inbox).reading.get_mut(&rank) {
            *n = n.saturating_sub(1);
        }
        self.arrived.notify_all();
    }

    /// Records a failure; the first one this rank hears of goes on to every peer it is
    /// connected to.
    pub(super) fn heard(&self, rank: Option<usize>, reason: &str) {
        if self.liveness.fail(rank, reason) {
            let msg = Msg::Failed {
                rank: rank.and_then(|r| u32::try_from(r).ok()),
                reason: reason.to_owned(),
            };
            if let Ok(frame) = msg.encode() {
                let links: Vec<Writer> = lock(&self.links).values().cloned().collect();
                for w in links {
                    let _ = wire::write_frame(&mut *lock(&w), &frame);
                }
            }
        }
        let _held = lock(&self.inbox);
        self.arrived.notify_all();
    }
}
