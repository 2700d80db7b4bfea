//! The world of ranks and its communicators.
//!
//! A program started by `onesided run` (or by `onesided bench`) joins its job through the
//! bootstrap; a program run directly is a world of size 1. [`Comm`] is a communicator: an ordered
//! set of world ranks with collectives (barrier, broadcast, allgather of bytes), as
//! MPI_COMM_WORLD and the communicators derived from it.
//!
//! # Threads
//!
//! [`World`], [`Comm`] and [`Window`](crate::Window) stay on the thread that made them: they
//! are neither `Send` nor `Sync` (epochs and completion counters are per-thread state without
//! locks, which keeps a put at the cost of a store), so the compiler refuses to move them to
//! another thread:
//!
//! ```compile_fail
//! let world = onesided::World::init().unwrap();
//! std::thread::spawn(move || world.barrier());
//! ```
//!
//! ```compile_fail
//! let world = onesided::World::init().unwrap();
//! let win = onesided::Window::allocate(&world, 8, 8, &onesided::Info::new()).unwrap();
//! std::thread::scope(|s| {
//!     s.spawn(|| win.fence(onesided::Assert::NONE));
//! });
//! ```
//!
//! ```compile_fail
//! let world = onesided::World::init().unwrap();
//! let win = onesided::Window::allocate(&world, 8, 8, &onesided::Info::new()).unwrap();
//! win.lock_all(onesided::Assert::NONE).unwrap();
//! let mut word = [0u64];
//! let request = win.rget(&mut word, 0, 0).unwrap();
//! std::thread::scope(|s| {
//!     s.spawn(move || request.wait());
//! });
//! ```
//!
//! A [`Request`](crate::Request) borrows its window, and is neither `Send` nor `Sync` either,
//! so its future runs on a single-threaded executor.
//!
//! Other threads reach a window through [`Window::share`](crate::Window::share): it runs a body
//! with a [`WindowHandle`](crate::WindowHandle), which is `Send` and `Sync`, so any number of
//! threads (`std::thread::scope`, rayon) make RMA calls and flushes on the window at once,
//! while its own thread serves them. That is `MPI_THREAD_MULTIPLE` for RMA, and what
//! [`World::init_thread`] provides when asked for it ([`ThreadLevel`]); the world's and the
//! communicators' calls stay on their thread at every level.
//!
//! Errors ([`Error`]) are `Send + Sync`, so a worker thread can report one.
//! The library's own threads (progress, collective network, bootstrap) never touch a window.
//!
//! # MPI-4.1: 6.4 (communicators), 7.4.2 (MPI_COMM_SPLIT_TYPE), 11.6 (thread support)

use crate::codec::{Dec, Enc};
use crate::config::Config;
use crate::error::in_call;
use crate::error::{Error, ErrorClass, Result};
use crate::group::Group;
use crate::liveness::Liveness;
use crate::mesh::{Identity, Listener, Mesh};
use crate::peers::Peers;
use crate::pm::{self, WireUp};
use std::cell::{Cell, OnceCell};
use std::ops::Deref;
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[cfg(test)]
pub(crate) mod inproc;
mod network;
mod node_barrier;

use network::Network;
use node_barrier::{NodeBarrier, Offer, Shape};

/// What every communicator of this process shares: the job, its configuration, the node and
/// pid of every rank, and what is known of failed ranks.
pub(crate) struct Job {
    /// The process manager the job was wired up through (none for a world of size 1).
    pm: Option<Arc<dyn WireUp>>,
    /// The collective network (none for a world of size 1).
    network: Option<Box<dyn Network>>,
    /// Job id, unique on this machine; names shared-memory segments.
    pub(crate) id: String,
    /// Node name of every world rank.
    pub(crate) nodes: Vec<String>,
    /// Process id of every world rank.
    pub(crate) pids: Vec<u32>,
    /// The configuration every rank agreed on.
    pub(crate) config: Config,
    /// Failures of the job's ranks.
    pub(crate) liveness: Arc<Liveness>,
    /// The cleanup after a failed rank, finished before this process leaves the job.
    cleanup: Arc<Mutex<Option<JoinHandle<()>>>>,
    /// libfabric's start-up, begun by `World::init` where this rank's windows will use the
    /// fabric (`transport::which::start_fabric`), finished before this process leaves the job.
    fabric_start: Option<crate::transport::which::Started>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("id", &self.id)
            .field("pm", &self.pm.as_ref().map(|p| p.kind()))
            .field("config", &self.config)
            .field("nodes", &self.nodes)
            .finish_non_exhaustive()
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        // Its end first: nothing may run inside libfabric while the rest is closed.
        drop(self.fabric_start.take());
        // The fabric resources this thread kept for its windows: no window is left.
        #[cfg(have_libfabric)]
        crate::transport::fabric::release();
        let cleanup = self
            .cleanup
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(cleanup) = cleanup {
            let _ = cleanup.join();
        }
        if let Some(network) = &self.network {
            network.finalize();
        }
        if let Some(pm) = &self.pm {
            let _ = pm.finalize();
        }
    }
}

/// The world: every rank of the job. Dereferences to its [`Comm`].
#[derive(Debug, Clone)]
pub struct World {
    comm: Comm,
    /// The thread support provided ([`World::query_thread`]).
    threads: ThreadLevel,
}

/// MPI's levels of thread support, from the weakest (MPI_THREAD_SINGLE) to the strongest
/// (MPI_THREAD_MULTIPLE).
///
/// onesided provides every level: the thread that made a world, a communicator or a window
/// makes their calls, as the types enforce (see the module's docs), and under
/// [`ThreadLevel::Serialized`] and [`ThreadLevel::Multiple`] other threads make RMA calls on a
/// window, concurrently, through the [`WindowHandle`](crate::WindowHandle) of
/// [`Window::share`](crate::Window::share). The level a world reports is the one it was asked
/// for; the handles work at every level, since the window's own thread makes the calls it
/// cannot leave to the calling threads. At [`ThreadLevel::Multiple`] (for the process, as in
/// MPI) the direct verbs transport also gives its endpoints lanes, through which the threads
/// of a shared window put, get, make notified puts and gets and run NIC atomics themselves
/// (`ONESIDED_VERBS_LANES`).
///
/// # MPI-4.1: 11.6 (MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE)
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ThreadLevel {
    /// One thread runs in the process.
    Single,
    /// The process may have threads; only the one that initialized the world calls onesided.
    Funneled,
    /// Any thread may call onesided, one at a time.
    Serialized,
    /// Any thread may call onesided at any time.
    Multiple,
}

/// Whether a world of this process was made at [`ThreadLevel::Multiple`] (the thread level is
/// the process's, as in MPI): the direct verbs transport then gives its endpoints lanes for the
/// threads of shared windows.
static MULTIPLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The rank and size this process joined its job with, once a [`World::init`] has joined a
/// process manager: the job is joined once per process (`World::init` after it fails).
static JOINED: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();

/// Whether a world of this process was made at [`ThreadLevel::Multiple`].
#[cfg(have_ibverbs)]
pub(crate) fn threads_multiple() -> bool {
    MULTIPLE.load(std::sync::atomic::Ordering::Relaxed)
}

/// This process's node identity: ranks with the same one share memory. The host, its boot, and
/// its network namespace (ranks in different network namespaces are treated as different
/// hosts, which is how one machine simulates several); `ONESIDED_NODE` (set by
/// `onesided run --simulate-nodes`) overrides it; `machine` is [`this_machine`].
fn this_node(machine: &str) -> String {
    std::env::var(crate::boot::ENV_NODE).unwrap_or_else(|_| machine.to_owned())
}

/// The machine this process runs on (host, boot and network namespace), whatever node the
/// launcher simulates: ranks on one machine share its CPUs, simulated nodes or not.
fn this_machine() -> String {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let netns = std::fs::read_link("/proc/self/ns/net")
        .map(|l| l.display().to_string())
        .unwrap_or_default();
    format!(
        "{}/{}/{netns}",
        read("/proc/sys/kernel/hostname").trim(),
        read("/proc/sys/kernel/random/boot_id").trim()
    )
}

impl World {
    /// Join the job this process was started in, or become a world of size 1, configured by the
    /// environment ([`Config::from_env`]).
    ///
    /// The process manager is detected as [`ProcessManager`](crate::ProcessManager) describes:
    /// onesided's launcher, PMIx (`srun --mpi=pmix`, `mpirun`), PMI-1 (`mpiexec` of MPICH,
    /// `srun --mpi=pmi2`), or none. A misspelt setting, or a parallel launch without a usable
    /// process manager, is an error on every rank.
    ///
    /// A process joins its job once, as MPI initializes once: under a process manager, a
    /// second call fails with MPI_ERR_OTHER, whether the first world still lives or was dropped.
    /// Without one, every call makes a new world of one rank (as tests that each make their own
    /// do).
    ///
    /// # MPI-4.1: 11.2.1 (MPI_INIT)
    pub fn init() -> Result<World> {
        World::init_with(Config::from_env()?)
    }

    /// Like [`World::init`], asking for the thread support `required`; returns the world and
    /// the level provided, which is `required`: onesided provides every level (see
    /// [`ThreadLevel`]).
    ///
    /// # MPI-4.1: 11.6 (MPI_INIT_THREAD)
    pub fn init_thread(required: ThreadLevel) -> Result<(World, ThreadLevel)> {
        World::init_thread_with(Config::from_env()?, required)
    }

    /// Like [`World::init_thread`], with `config` instead of the environment's (as
    /// [`World::init_with`]).
    ///
    /// # MPI-4.1: 11.6 (MPI_INIT_THREAD)
    pub fn init_thread_with(config: Config, required: ThreadLevel) -> Result<(World, ThreadLevel)> {
        let provided = required;
        if provided == ThreadLevel::Multiple {
            MULTIPLE.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let world = World::init_with(config)?;
        Ok((
            World {
                threads: provided,
                ..world
            },
            provided,
        ))
    }

    /// The thread support of this world: what [`World::init_thread`] provided, and
    /// [`ThreadLevel::Funneled`] for a world from [`World::init`] or [`World::init_with`].
    ///
    /// # MPI-4.1: 11.6 (MPI_QUERY_THREAD)
    pub fn query_thread(&self) -> ThreadLevel {
        self.threads
    }

    /// Like [`World::init`], with `config` instead of the environment's. Every rank must pass
    /// the same transport and fabric settings, else every rank fails naming the differences.
    pub fn init_with(mut config: Config) -> Result<World> {
        in_call(None, "MPI_Init", || {
            if let Some((rank, size)) = JOINED.get() {
                return Err(Error::new(
                    ErrorClass::Other,
                    format!(
                        "this process joined its job already, as rank {rank} of {size}: under a \
                         process manager a process initializes its world once (MPI-4.1: 11.2.1)"
                    ),
                ));
            }
            crate::log::init()?;
            // Before the process manager's threads start: libfabric reads its variables when it
            // loads (a rank that reaches every target by direct verbs never loads it).
            #[cfg(have_libfabric)]
            if config.transport_choice() != crate::config::TransportChoice::Verbs {
                crate::transport::fabric::presets::apply();
            }
            onesided_shm::process::allow_ptrace_from_any()
                .map_err(|e| Error::os("allowing sibling ranks cross-memory attach", e))?;
            let machine = this_machine();
            let node = this_node(&machine);
            let pid = std::process::id();
            let liveness = Arc::new(Liveness::new());
            let joined = pm::join(config.requested_process_manager(), &liveness)?;
            // The CPUs this rank is bound to (every CPU if it is not), for the progress threads
            // to find the CPUs no rank of the machine is bound to.
            let own_cpus = onesided_shm::process::allowed_cpus().unwrap_or_default();
            let Some(pm) = joined else {
                crate::log::set_rank(0);
                tracing::debug!(pid, node, "no process manager: a world of one rank");
                if let Some(spare) =
                    crate::wait::unbound_cpus(&own_cpus, std::slice::from_ref(&own_cpus))
                {
                    config = config.progress_cpus_unless_set(&spare);
                }
                let tag = crate::boot::to_hex(&crate::boot::random::<4>()?);
                let fabric_start = crate::transport::which::start_fabric(&config, true);
                let job = Job {
                    pm: None,
                    network: None,
                    id: format!("{pid}-{tag}"),
                    nodes: vec![node],
                    pids: vec![pid],
                    config,
                    liveness,
                    cleanup: Arc::default(),
                    fabric_start,
                };
                return Ok(World {
                    comm: Comm::new(Arc::new(job), 0, vec![0], 0),
                    threads: ThreadLevel::Funneled,
                });
            };
            let (rank, size, job_id) = (pm.rank(), pm.size(), pm.job_id());
            let _ = JOINED.set((rank, size));
            crate::log::set_rank(rank);
            tracing::debug!(pm = ?pm.kind(), rank, size, job = job_id, pid, node, "joined the job");
            // What killed jobs of any process manager left behind (best effort: a segment of a
            // process that is gone serves nobody).
            let _ = onesided_shm::cleanup::remove_dead_fabric_segments();
            let listener = Listener::bind()?;
            let secret = pm.exchange(&listener.card(&node).encode())?;
            let id = Identity {
                rank,
                size,
                node: node.clone(),
                secret,
                silence: config.failure_timeout_value(),
            };
            let directory = Arc::new(pm::Cards::new(Arc::clone(&pm)));
            let mesh = Mesh::start(listener, id, Arc::clone(&liveness), directory)?;
            let settings = config.shared_settings();
            // Every rank offers a barrier page; its node's lowest rank keeps its own, the
            // others map that one and drop theirs (`Comm::world_barrier`).
            let offer = Offer::make().ok();
            let page = match &offer {
                Some(o) => o.describe()?,
                None => Vec::new(),
            };
            let mine = Enc::new()
                .u64(pid.into())
                .str(&node)
                .str(&machine)
                .str(&settings)
                .str(&crate::cpu_list::format(&own_cpus))
                .bytes(&page)
                .finish();
            let members: Vec<usize> = (0..size).collect();
            let all = mesh.allgather(0, 0, &members, rank, &mine)?;
            let mut nodes = Vec::with_capacity(size);
            let mut pids = Vec::with_capacity(size);
            let mut differ = Vec::new();
            let mut sharing_cpus = 0;
            let mut bound = Vec::new();
            let mut pages = Vec::with_capacity(size);
            for (r, bytes) in all.iter().enumerate() {
                let mut d = Dec::new(bytes);
                pids.push(d.u64()? as u32);
                nodes.push(d.str()?);
                let here = d.str()? == machine;
                sharing_cpus += usize::from(here);
                let theirs = d.str()?;
                if theirs != settings {
                    differ.push(format!("rank {r}: {theirs}"));
                }
                let cpus = d.str()?;
                if here {
                    bound.push(crate::cpu_list::parse(&cpus).unwrap_or_default());
                }
                pages.push(d.bytes()?);
            }
            if !differ.is_empty() {
                return Err(Error::new(
                    ErrorClass::Arg,
                    format!(
                        "the ranks' settings differ (rank {rank}: {settings}; {})",
                        differ.join("; ")
                    ),
                ));
            }
            // Ranks of simulated nodes share the machine's CPUs: crowding counts them all.
            crate::wait::set_crowded(sharing_cpus);
            if let Some(spare) = crate::wait::unbound_cpus(&own_cpus, &bound) {
                config = config.progress_cpus_unless_set(&spare);
            }
            // Where the fabric will serve, its start-up overlaps what the program does before
            // its first window. Not sooner (`transport/fabric/start.rs`): loading libfabric
            // holds up every thread that starts meanwhile, and this call starts one for each
            // connection of its collective network.
            let one_node = nodes.iter().all(|n| *n == node);
            let fabric_start = crate::transport::which::start_fabric(&config, one_node);
            let cleanup = Arc::new(Mutex::new(None));
            liveness.on_failure(remove_leftovers_of(&nodes, &pids, &node, cleanup.clone()));
            let job = Job {
                pm: Some(pm),
                network: Some(Box::new(mesh)),
                id: job_id,
                nodes,
                pids,
                config,
                liveness,
                cleanup,
                fabric_start,
            };
            let comm = Comm::new(Arc::new(job), 0, members, rank);
            comm.inner.seq.set(1);
            comm.world_barrier(offer, &pages)?;
            Ok(World {
                comm,
                threads: ThreadLevel::Funneled,
            })
        })
    }

    /// The world communicator.
    pub fn comm(&self) -> &Comm {
        &self.comm
    }
}

/// How long the cleanup after a failure waits for a dead rank's process to be gone: a killed
/// process closes its connections (which is how peers learn of its death) before it has
/// finished exiting.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// What to do when the job loses a rank: remove the libfabric shm segments that the dead
/// processes of this node leave in `/dev/shm`, once they are gone, since no process manager but
/// onesided's own launcher knows of them.
fn remove_leftovers_of(
    nodes: &[String],
    pids: &[u32],
    here: &str,
    cleanup: Arc<Mutex<Option<JoinHandle<()>>>>,
) -> Box<dyn Fn(Option<usize>) + Send + Sync> {
    let local: Vec<(usize, u32)> = (0..pids.len())
        .filter(|&r| nodes[r] == here && pids[r] != std::process::id())
        .map(|r| (r, pids[r]))
        .collect();
    Box::new(move |failed| {
        let suspects: Vec<u32> = local
            .iter()
            .filter(|(r, _)| failed.is_none_or(|f| f == *r))
            .map(|&(_, pid)| pid)
            .collect();
        let started = std::thread::Builder::new()
            .name("onesided-cleanup".into())
            .spawn(move || {
                let start = Instant::now();
                let mut left = suspects;
                while !left.is_empty() && start.elapsed() < EXIT_GRACE {
                    let (gone, running): (Vec<u32>, Vec<u32>) = left
                        .into_iter()
                        .partition(|&pid| !onesided_shm::process::pid_running(pid));
                    let _ = onesided_shm::cleanup::remove_fabric_segments(&gone);
                    left = running;
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
        *cleanup.lock().unwrap_or_else(PoisonError::into_inner) = started.ok();
    })
}

impl Deref for World {
    type Target = Comm;
    fn deref(&self) -> &Comm {
        &self.comm
    }
}

#[derive(Debug)]
struct CommInner {
    job: Arc<Job>,
    id: u64,
    members: Vec<usize>,
    rank: usize,
    seq: Cell<u64>,
    /// The barrier over shared memory: the world's set at its start, another communicator's
    /// by its first barrier (`None`: over the collective network, where some rank could not
    /// map its node's page).
    barrier: OnceCell<Option<Barrier>>,
}

/// A communicator's barrier over shared memory: the node's page, and the world ranks that
/// meet for their nodes (each node's lowest) with this rank's place among them, if it is one.
#[derive(Debug)]
struct Barrier {
    node: NodeBarrier,
    leaders: Vec<usize>,
    index: Option<usize>,
}

/// A communicator: an ordered group of world ranks with collective calls. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Comm {
    inner: Rc<CommInner>,
}

/// Mix `v` into the hash `h` (FNV-1a over the bytes), for communicator ids.
fn mix(h: u64, v: u64) -> u64 {
    v.to_le_bytes()
        .iter()
        .fold(h, |h, b| (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3))
}

impl Comm {
    fn new(job: Arc<Job>, id: u64, members: Vec<usize>, rank: usize) -> Comm {
        Comm {
            inner: Rc::new(CommInner {
                job,
                id,
                members,
                rank,
                seq: Cell::new(0),
                barrier: OnceCell::new(),
            }),
        }
    }

    /// This process's rank in the communicator.
    pub fn rank(&self) -> usize {
        self.inner.rank
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.inner.members.len()
    }

    /// The world rank of communicator rank `rank`.
    pub fn world_rank(&self, rank: usize) -> Result<usize> {
        self.inner.members.get(rank).copied().ok_or_else(|| {
            Error::new(
                ErrorClass::Rank,
                format!("rank {rank} outside a communicator of size {}", self.size()),
            )
        })
    }

    /// The world rank of each rank of this communicator, in rank order.
    #[cfg(have_nic)]
    pub(crate) fn world_ranks(&self) -> Vec<u32> {
        self.inner.members.iter().map(|&m| m as u32).collect()
    }

    /// The group of this communicator. # MPI-4.1: 7.3.1 (MPI_COMM_GROUP)
    pub fn group(&self) -> Group {
        Group::from_world_ranks(self.inner.members.clone())
    }

    /// The communicator's id, unique in the job.
    pub(crate) fn id(&self) -> u64 {
        self.inner.id
    }

    pub(crate) fn job(&self) -> &Job {
        &self.inner.job
    }

    /// The node name of communicator rank `rank` (which must be valid).
    pub(crate) fn node_of(&self, rank: usize) -> &str {
        &self.inner.job.nodes[self.inner.members[rank]]
    }

    /// The process id of communicator rank `rank` (which must be valid).
    pub(crate) fn pid_of(&self, rank: usize) -> u32 {
        self.inner.job.pids[self.inner.members[rank]]
    }

    /// How many ids of collective calls this communicator has handed out ([`Comm::next_seq`]).
    pub(crate) fn seqs(&self) -> u64 {
        self.inner.seq.get()
    }

    /// A fresh id of this communicator's next collective call, unique in the job.
    pub(crate) fn next_seq(&self) -> u64 {
        let s = self.inner.seq.get();
        self.inner.seq.set(s + 1);
        s
    }

    /// Every rank's `data`, in rank order.
    pub fn allgather(&self, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        in_call(Some(self.rank()), "MPI_Allgather", || {
            let seq = self.next_seq();
            let inner = &self.inner;
            match &inner.job.network {
                Some(network) => network.allgather(inner.id, seq, &inner.members, inner.rank, data),
                None => Ok(vec![data.to_vec()]),
            }
        })
    }

    /// Wait until every rank has called `barrier`. The ranks of a node meet on a page of shared
    /// memory, and each node's lowest rank meets the other nodes' over the network
    /// (`world/node_barrier.rs`); the world has its page from the start, and the first barrier
    /// of another communicator sets one up.
    ///
    /// # MPI-4.1: 6.3 (MPI_BARRIER)
    pub fn barrier(&self) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Barrier", || {
            let Some(network) = &self.inner.job.network else {
                return Ok(());
            };
            match self.inner.barrier.get() {
                Some(Some(b)) => {
                    let seq = self.next_seq();
                    b.node.wait(&|| {
                        let index = b.index.ok_or_else(|| {
                            Error::new(ErrorClass::Intern, "a barrier across nodes by a non-leader")
                        })?;
                        network
                            .allgather(self.inner.id, seq, &b.leaders, index, &[])
                            .map(drop)
                    })
                }
                Some(None) => self.allgather(&[]).map(drop),
                None => {
                    // The set-up's exchanges are a barrier already.
                    let b = self.setup_barrier()?;
                    let _ = self.inner.barrier.set(b);
                    Ok(())
                }
            }
        })
    }

    /// Where this rank stands on its node for barriers, and the communicator rank of the
    /// node's lowest.
    fn barrier_shape(&self) -> (Shape, usize) {
        let me = self.node_of(self.rank());
        let local: Vec<usize> = (0..self.size())
            .filter(|&r| self.node_of(r) == me)
            .collect();
        let shape = Shape {
            local: local.len() as u64,
            leader: local[0] == self.rank(),
            alone: local.len() == self.size(),
        };
        (shape, local[0])
    }

    /// The other processes of this rank's node, for a barrier's waits to watch.
    fn node_peers(&self) -> Peers {
        let me = self.node_of(self.rank());
        let pids = (0..self.size())
            .map(|r| match self.node_of(r) == me {
                true => self.pid_of(r),
                false => 0,
            })
            .collect();
        Peers::new(pids, self.inner.job.liveness.clone())
    }

    /// This rank's barrier on `node` (its node's page): the nodes' lowest ranks, which meet
    /// across nodes, and this rank's place among them.
    fn barrier_on(&self, node: NodeBarrier) -> Barrier {
        let mut leaders: Vec<usize> = Vec::new();
        for r in 0..self.size() {
            if !leaders.iter().any(|&l| self.node_of(l) == self.node_of(r)) {
                leaders.push(r);
            }
        }
        let index = leaders.iter().position(|&l| l == self.rank());
        let leaders = leaders.iter().map(|&l| self.inner.members[l]).collect();
        Barrier {
            node,
            leaders,
            index,
        }
    }

    /// The world's barrier, from every rank's offer of a page in the world's first exchange
    /// (`descs`, in rank order; empty where a rank could not make one): the node's lowest
    /// rank keeps its own, the others map it; then [`Comm::agree_on_barrier`].
    fn world_barrier(&self, offer: Option<Offer>, descs: &[&[u8]]) -> Result<()> {
        let (shape, first) = self.barrier_shape();
        let node = match shape.leader {
            true => offer,
            // Not the node's page: dropped, so that its file closes.
            false => None,
        };
        let barrier = self.agree_on_barrier(shape, node, descs[first])?;
        let _ = self.inner.barrier.set(barrier);
        Ok(())
    }

    /// The barrier page of this rank's node for a communicator other than the world: made by
    /// the node's lowest rank, described to all in one allgather; then
    /// [`Comm::agree_on_barrier`].
    fn setup_barrier(&self) -> Result<Option<Barrier>> {
        let (shape, first) = self.barrier_shape();
        // Failures to make the page are settled by the agreement, not here.
        let offer = shape.leader.then(Offer::make).and_then(Result::ok);
        let desc = match &offer {
            Some(o) => o.describe()?,
            None => Vec::new(),
        };
        let all = self.allgather(&desc)?;
        self.agree_on_barrier(shape, offer, &all[first])
    }

    /// The node's lowest rank keeps its `offer`, the others map the page `desc` describes;
    /// then an allgather says whether every rank has its node's page (the lowest keeps the
    /// page's file open until then: the others open it through it, and a rank may leave the
    /// job right after), and where one has not, all keep the network's barrier.
    fn agree_on_barrier(
        &self,
        shape: Shape,
        offer: Option<Offer>,
        desc: &[u8],
    ) -> Result<Option<Barrier>> {
        let peers = self.node_peers();
        let (node, file) = match (shape.leader, offer) {
            (true, Some(o)) => {
                let (node, file) = NodeBarrier::on_offer(o, shape, peers);
                (Ok(node), Some(file))
            }
            _ if desc.is_empty() => (
                Err(Error::new(
                    ErrorClass::Other,
                    "no barrier page on this node",
                )),
                None,
            ),
            _ => (
                node_barrier::map(desc).map(|seg| NodeBarrier::new(seg, shape, peers)),
                None,
            ),
        };
        let agreed = self.allgather(&[u8::from(node.is_ok())])?;
        drop(file);
        match (agreed.iter().all(|v| v[..] == [1]), node) {
            (true, Ok(node)) => Ok(Some(self.barrier_on(node))),
            (_, node) => {
                if let Err(e) = node {
                    tracing::debug!(error = %e, "barriers over the collective network");
                }
                Ok(None)
            }
        }
    }

    /// Rank `root`'s `data` on every rank (`data` is ignored elsewhere).
    ///
    /// # MPI-4.1: 6.4 (MPI_BCAST)
    pub fn broadcast(&self, root: usize, data: &[u8]) -> Result<Vec<u8>> {
        in_call(Some(self.rank()), "MPI_Bcast", || {
            self.world_rank(root)?;
            let mine = if self.rank() == root { data } else { &[] };
            let mut all = self.allgather(mine)?;
            Ok(std::mem::take(&mut all[root]))
        })
    }

    /// Every rank's `ok`: the first failure as an error on every rank, so that all ranks of a
    /// collective call return the same outcome instead of some waiting for the others forever.
    /// This rank's own error comes first.
    pub(crate) fn agree<T>(&self, what: &str, mine: Result<T>) -> Result<T> {
        let all = self.agree_gather(what, mine.as_ref().map(|_| &[][..]));
        let mine = mine?;
        all.map(|_| mine)
    }

    /// Allgather of every rank's `data`, or of its error: the data in rank order if every rank
    /// had some, else the first rank's error on every rank. One round of collective calls for
    /// what would otherwise be an agreement followed by an allgather.
    pub(crate) fn agree_gather(
        &self,
        what: &str,
        mine: std::result::Result<&[u8], &Error>,
    ) -> Result<Vec<Vec<u8>>> {
        let sent = match mine {
            Ok(data) => Enc::new().u64(0).bytes(data).finish(),
            Err(e) => Enc::new()
                .u64(1 + e.class().to_wire())
                .str(e.message())
                .finish(),
        };
        let mut out = Vec::with_capacity(self.size());
        for (rank, bytes) in self.allgather(&sent)?.iter().enumerate() {
            let mut d = Dec::new(bytes);
            match d.u64()? {
                0 => out.push(d.bytes()?.to_vec()),
                class => {
                    return Err(Error::new(
                        ErrorClass::from_wire(class - 1),
                        format!("{what} failed on rank {rank}: {}", d.str()?),
                    ));
                }
            }
        }
        Ok(out)
    }

    /// The ranks on this rank's node, as a new communicator ordered by rank.
    ///
    /// # MPI-4.1: 7.4.2 (MPI_COMM_SPLIT_TYPE with MPI_COMM_TYPE_SHARED)
    pub fn split_shared(&self) -> Result<Comm> {
        in_call(Some(self.rank()), "MPI_Comm_split_type", || {
            let seq = self.next_seq();
            let me = self.node_of(self.rank());
            let members: Vec<usize> = (0..self.size())
                .filter(|&r| self.node_of(r) == me)
                .map(|r| self.inner.members[r])
                .collect();
            let rank = members
                .iter()
                .position(|&w| w == self.inner.members[self.rank()])
                .ok_or_else(|| Error::new(ErrorClass::Intern, "own rank missing from its node"))?;
            let id = mix(mix(self.inner.id, seq), members[0] as u64 + 1);
            Ok(Comm::new(self.inner.job.clone(), id, members, rank))
        })
    }
}
