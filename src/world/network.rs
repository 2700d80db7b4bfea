//! The network of a job's collective calls.

use crate::error::Result;
use crate::mesh::Mesh;

/// What a job's collective calls travel over: the ranks' TCP mesh, or the threads of one
/// process in the unit tests' in-process tier (`world::inproc`).
pub(crate) trait Network: Send + Sync {
    /// Allgather among `members` (world ranks, in communicator order) of communicator `comm`,
    /// call `seq`: this rank is member `index` and contributes `data`; returns every member's
    /// data in member order.
    fn allgather(
        &self,
        comm: u64,
        seq: u64,
        members: &[usize],
        index: usize,
        data: &[u8],
    ) -> Result<Vec<Vec<u8>>>;
    /// Leaves the network: the other ranks learn that this one is gone.
    fn finalize(&self);
}

impl Network for Mesh {
    fn allgather(
        &self,
        comm: u64,
        seq: u64,
        members: &[usize],
        index: usize,
        data: &[u8],
    ) -> Result<Vec<Vec<u8>>> {
        Mesh::allgather(self, comm, seq, members, index, data)
    }

    fn finalize(&self) {
        Mesh::finalize(self);
    }
}
