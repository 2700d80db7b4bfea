//! The world of ranks and its communicators.
//!
//! A program started by `onesided run` (or by `onesided bench`) joins its job through the
//! bootstrap; a program run directly is a world of size 1. [`Comm`] is a communicator: an ordered
//! set of world ranks with collectives (barrier, broadcast, allgather of bytes), as
//! MPI_COMM_WORLD and the communicators derived from it.
//!
//! # MPI-4.1: 6.4 (communicators), 7.4.2 (MPI_COMM_SPLIT_TYPE)

use crate::boot::{BootClient, JobEnv};
use crate::error::{Error, ErrorClass, Result};
use crate::group::Group;
use std::cell::Cell;
use std::ops::Deref;
use std::rc::Rc;
use std::sync::Arc;

/// What every communicator of this process shares: the job and the node and pid of every rank.
pub(crate) struct Job {
    boot: Option<BootClient>,
    /// Job id, unique on this machine; names shared-memory segments.
    pub(crate) id: String,
    /// Node name of every world rank.
    pub(crate) nodes: Vec<String>,
    /// Process id of every world rank.
    pub(crate) pids: Vec<u32>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("id", &self.id)
            .field("launched", &self.boot.is_some())
            .field("nodes", &self.nodes)
            .finish()
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Some(boot) = &self.boot {
            let _ = boot.finalize();
        }
    }
}

/// The world: every rank of the job. Dereferences to its [`Comm`].
#[derive(Debug, Clone)]
pub struct World {
    comm: Comm,
}

fn this_node() -> String {
    if let Ok(node) = std::env::var(crate::boot::ENV_NODE) {
        return node;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    format!("{}/{}", host.trim(), boot.trim())
}

fn random_hex() -> String {
    let mut b = [0u8; 4];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut b);
    }
    crate::boot::to_hex(&b)
}

impl World {
    /// Join the job this process was started in, or become a world of size 1.
    ///
    /// # MPI-4.1: 11.2.1 (MPI_INIT)
    pub fn init() -> Result<World> {
        onesided_shm::process::allow_ptrace_from_any()
            .map_err(|e| Error::os("allowing sibling ranks cross-memory attach", e))?;
        let node = this_node();
        let pid = std::process::id();
        let Some(env) = JobEnv::from_env()? else {
            let job = Job {
                boot: None,
                id: format!("{pid}-{}", random_hex()),
                nodes: vec![node],
                pids: vec![pid],
            };
            return Ok(World {
                comm: Comm::new(Arc::new(job), 0, vec![0], 0),
            });
        };
        let boot = BootClient::connect(&env)?;
        let mine = crate::codec::Enc::new().u64(pid as u64).str(&node).finish();
        let all = boot.allgather(0, 0, env.size, env.rank, &mine)?;
        let mut nodes = Vec::with_capacity(env.size);
        let mut pids = Vec::with_capacity(env.size);
        for bytes in &all {
            let mut d = crate::codec::Dec::new(bytes);
            pids.push(d.u64()? as u32);
            nodes.push(d.str()?);
        }
        let job = Job {
            boot: Some(boot),
            id: env.job.clone(),
            nodes,
            pids,
        };
        let comm = Comm::new(Arc::new(job), 0, (0..env.size).collect(), env.rank);
        comm.inner.seq.set(1);
        Ok(World { comm })
    }

    /// The world communicator.
    pub fn comm(&self) -> &Comm {
        &self.comm
    }
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

    /// A fresh id of this communicator's next collective call, unique in the job.
    pub(crate) fn next_seq(&self) -> u64 {
        let s = self.inner.seq.get();
        self.inner.seq.set(s + 1);
        s
    }

    /// Every rank's `data`, in rank order.
    pub fn allgather(&self, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        let seq = self.next_seq();
        match &self.inner.job.boot {
            Some(boot) => boot.allgather(self.inner.id, seq, self.size(), self.rank(), data),
            None => Ok(vec![data.to_vec()]),
        }
    }

    /// Wait until every rank has called `barrier`. # MPI-4.1: 6.3 (MPI_BARRIER)
    pub fn barrier(&self) -> Result<()> {
        self.allgather(&[]).map(drop)
    }

    /// Rank `root`'s `data` on every rank (`data` is ignored elsewhere).
    ///
    /// # MPI-4.1: 6.4 (MPI_BCAST)
    pub fn broadcast(&self, root: usize, data: &[u8]) -> Result<Vec<u8>> {
        self.world_rank(root)?;
        let mine = if self.rank() == root { data } else { &[] };
        let mut all = self.allgather(mine)?;
        Ok(std::mem::take(&mut all[root]))
    }

    /// Every rank's `ok`: the first failure as an error on every rank, so that all ranks of a
    /// collective call return the same outcome instead of some waiting for the others forever.
    pub(crate) fn agree<T>(&self, what: &str, mine: Result<T>) -> Result<T> {
        let flag = match &mine {
            Ok(_) => Vec::new(),
            Err(e) => crate::codec::Enc::new()
                .u64(e.class().to_wire())
                .str(e.message())
                .finish(),
        };
        let all = self.allgather(&flag)?;
        let mine = mine?;
        for (rank, bytes) in all.iter().enumerate() {
            if !bytes.is_empty() {
                let mut d = crate::codec::Dec::new(bytes);
                let class = ErrorClass::from_wire(d.u64()?);
                let msg = d.str()?;
                return Err(Error::new(
                    class,
                    format!("{what} failed on rank {rank}: {msg}"),
                ));
            }
        }
        Ok(mine)
    }

    /// The ranks on this rank's node, as a new communicator ordered by rank.
    ///
    /// # MPI-4.1: 7.4.2 (MPI_COMM_SPLIT_TYPE with MPI_COMM_TYPE_SHARED)
    pub fn split_shared(&self) -> Result<Comm> {
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
    }
}
