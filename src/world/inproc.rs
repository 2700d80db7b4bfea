//! An in-process job: several ranks as threads of one process, the unit tests' fast tier.
//!
//! Each rank is a thread with its own [`World`], made as a launched rank's is: its own [`Job`]
//! (configuration, failure state) on a node, with the collective calls of its communicators
//! going through an [`Exchange`] in memory instead of the TCP mesh. Everything above the
//! collectives is the production code: window creation lays out and maps a real node segment
//! (each rank its own mapping, as processes do), the shared-memory transport moves the data
//! and runs the atomics on it, and fence, lock words and accumulates run as between processes.
//!
//! What needs processes stays in the multi-process trials of `tests/ranks`: a killed rank, the
//! launcher and process managers, the fabric, and `Window::create`, whose memory other ranks
//! reach by cross-memory attach (which refuses the own process).

use super::{Comm, Job, Network, World};
use crate::config::Config;
use crate::error::{Error, ErrorClass, Result};
use crate::liveness::Liveness;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::Duration;

/// How often a rank waiting in a collective looks at the job's failures.
const RECHECK: Duration = Duration::from_millis(20);

/// Jobs made by this process so far: with the process id and a random tag, a job id unique on
/// this machine (segment names include it).
static JOBS: AtomicU64 = AtomicU64::new(0);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One collective call: the members' contributions, and how many members took the result.
struct Call {
    parts: Vec<Option<Vec<u8>>>,
    taken: usize,
}

/// The calls in progress, and which ranks have left.
struct Calls {
    /// By communicator and call.
    open: HashMap<(u64, u64), Call>,
    /// World ranks whose world is gone.
    left: Vec<bool>,
    /// The first rank whose thread panicked: the others' failures follow from it.
    first_panic: Option<usize>,
}

/// Where the ranks of an in-process job meet for their collective calls.
struct Exchange {
    calls: Mutex<Calls>,
    arrived: Condvar,
    /// Every rank's failure state: a rank that panics fails the others' waits.
    liveness: Vec<Arc<Liveness>>,
}

/// One rank's place in the exchange: the network of its [`Job`].
struct Member {
    exchange: Arc<Exchange>,
    rank: usize,
}

impl Network for Member {
    fn allgather(
        &self,
        comm: u64,
        seq: u64,
        members: &[usize],
        index: usize,
        data: &[u8],
    ) -> Result<Vec<Vec<u8>>> {
        let x = &self.exchange;
        let key = (comm, seq);
        let mut calls = lock(&x.calls);
        let call = calls.open.entry(key).or_insert_with(|| Call {
            parts: vec![None; members.len()],
            taken: 0,
        });
        call.parts[index] = Some(data.to_vec());
        x.arrived.notify_all();
        loop {
            let Calls { open, left, .. } = &mut *calls;
            let call = open
                .get_mut(&key)
                .ok_or_else(|| Error::new(ErrorClass::Intern, "collective call vanished"))?;
            if call.parts.iter().all(Option::is_some) {
                let all = call.parts.iter().flatten().cloned().collect();
                call.taken += 1;
                if call.taken == members.len() {
                    open.remove(&key);
                }
                return Ok(all);
            }
            x.liveness[self.rank].check()?;
            let mut parts = members.iter().zip(&call.parts);
            if let Some((gone, _)) = parts.find(|(w, p)| p.is_none() && left[**w]) {
                return Err(Error::new(
                    ErrorClass::ProcFailed,
                    format!("rank {gone} left the job in the middle of a collective call"),
                ));
            }
            calls = x
                .arrived
                .wait_timeout(calls, RECHECK)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Leaves the exchange; a rank whose thread is panicking fails the others' job, as a
    /// process that dies does.
    fn finalize(&self) {
        let x = &self.exchange;
        let panicking = thread::panicking();
        {
            let mut calls = lock(&x.calls);
            calls.left[self.rank] = true;
            if panicking {
                calls.first_panic.get_or_insert(self.rank);
            }
        }
        if panicking {
            for (r, l) in x.liveness.iter().enumerate() {
                if r != self.rank {
                    l.fail(Some(self.rank), "its thread panicked");
                }
            }
        }
        x.arrived.notify_all();
    }
}

/// The world of rank `rank` of the job whose ranks are on `nodes` and meet in `exchange`.
fn world(id: &str, nodes: &[String], exchange: &Arc<Exchange>, rank: usize) -> World {
    let n = nodes.len();
    let job = Job {
        pm: None,
        network: Some(Box::new(Member {
            exchange: Arc::clone(exchange),
            rank,
        })),
        id: id.to_owned(),
        nodes: nodes.to_vec(),
        pids: vec![std::process::id(); n],
        config: Config::default(),
        liveness: Arc::clone(&exchange.liveness[rank]),
        cleanup: Arc::default(),
        fabric_start: None,
    };
    let comm = Comm::new(Arc::new(job), 0, (0..n).collect(), rank);
    // As in a launched world, whose call 0 compared the ranks' settings.
    comm.inner.seq.set(1);
    World {
        comm,
        threads: crate::world::ThreadLevel::Funneled,
    }
}

/// Run `body` on ranks placed on `nodes` (rank `r` on node `nodes[r]`), each on a thread of its
/// own with its own [`World`]; their results in rank order. A rank that panics fails the
/// others' waits with MPI_ERR_PROC_FAILED, and once every rank has returned, the first panic
/// is passed on (not those of the ranks that failed because of it).
pub(crate) fn run_on<R: Send>(nodes: &[&str], body: impl Fn(World) -> R + Sync) -> Vec<R> {
    let n = nodes.len();
    let count = JOBS.fetch_add(1, Ordering::Relaxed);
    let tag = crate::boot::random::<4>().expect("reading /dev/urandom");
    let id = format!(
        "{}-inproc{count}-{}",
        std::process::id(),
        crate::boot::to_hex(&tag)
    );
    let nodes: Vec<String> = nodes.iter().map(|s| (*s).to_owned()).collect();
    let exchange = Arc::new(Exchange {
        calls: Mutex::new(Calls {
            open: HashMap::new(),
            left: vec![false; n],
            first_panic: None,
        }),
        arrived: Condvar::new(),
        liveness: (0..n).map(|_| Arc::new(Liveness::new())).collect(),
    });
    let body = &body;
    thread::scope(|s| {
        let ranks: Vec<_> = (0..n)
            .map(|rank| {
                let (id, nodes, exchange) = (&id, &nodes, &exchange);
                thread::Builder::new()
                    .name(format!("rank {rank}"))
                    .spawn_scoped(s, move || body(world(id, nodes, exchange, rank)))
                    .unwrap_or_else(|e| panic!("starting the thread of rank {rank}: {e}"))
            })
            .collect();
        let mut results = Vec::with_capacity(n);
        let mut panics = Vec::new();
        for (rank, r) in ranks.into_iter().enumerate() {
            match r.join() {
                Ok(v) => results.push(v),
                Err(p) => panics.push((rank, p)),
            }
        }
        let first = lock(&exchange.calls).first_panic;
        let cause = panics.iter().position(|(r, _)| Some(*r) == first);
        if let Some(i) = cause.or((!panics.is_empty()).then_some(0)) {
            std::panic::resume_unwind(panics.swap_remove(i).1);
        }
        results
    })
}

/// Run `body` on `n` ranks of one node (see [`run_on`]).
pub(crate) fn run<R: Send>(n: usize, body: impl Fn(World) -> R + Sync) -> Vec<R> {
    run_on(&vec!["node"; n], body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectives_meet_in_rank_order() {
        let got = run(3, |world| {
            let me = world.rank() as u8;
            let all = world.allgather(&[me; 2]).unwrap();
            let root = world.broadcast(2, &[40 + me]).unwrap();
            world.barrier().unwrap();
            (all, root)
        });
        for (all, root) in got {
            assert_eq!(all, vec![vec![0, 0], vec![1, 1], vec![2, 2]]);
            assert_eq!(root, vec![42]);
        }
    }

    #[test]
    fn split_shared_follows_the_nodes() {
        let got = run_on(&["a", "b", "a", "b", "b"], |world| {
            let node = world.split_shared().unwrap();
            let all = node.allgather(&[world.rank() as u8]).unwrap();
            (node.rank(), all.concat())
        });
        let want = [
            (0, vec![0, 2]),
            (0, vec![1, 3, 4]),
            (1, vec![0, 2]),
            (1, vec![1, 3, 4]),
            (2, vec![1, 3, 4]),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_rank_that_left_fails_the_collective() {
        let got = run(2, |world| match world.rank() {
            0 => Ok(()),
            _ => world.barrier(),
        });
        assert!(got[0].is_ok());
        let e = got[1].as_ref().unwrap_err();
        assert_eq!(e.class(), ErrorClass::ProcFailed);
        assert!(e.message().contains("rank 0 left"), "{e}");
    }

    #[test]
    fn a_panicking_rank_fails_the_others() {
        let panicked = std::panic::catch_unwind(|| {
            run(3, |world| {
                if world.rank() == 1 {
                    panic!("rank 1 gives up");
                }
                // Rank 0 fails because of rank 1: its panic is not the one passed on.
                let e = world.barrier().unwrap_err();
                assert_eq!(e.class(), ErrorClass::ProcFailed);
                panic!("rank {} failed: {e}", world.rank());
            })
        });
        let p = panicked.unwrap_err();
        assert_eq!(p.downcast_ref::<&str>(), Some(&"rank 1 gives up"));
    }
}
