//! Load/store access: this rank's own window memory, and the memory of other ranks of the node
//! through [`Window::shared_query`].
//!
//! Window memory is written by other processes while the window lives, so onesided hands out no
//! Rust references to it: reads and writes are copies of plain-old-data elements, bounds-checked,
//! and ordered with RMA by the synchronization calls (fence, lock/unlock, sync), as MPI's
//! unified memory model prescribes.
//!
//! # MPI-4.1: 12.2.3 (MPI_WIN_SHARED_QUERY), 12.7 (memory model)

use super::{Flavor, Window};
use crate::error::in_call;
use crate::error::{Error, ErrorClass, Result};
use bytemuck::Pod;
use onesided_shm::Mem;
use std::marker::PhantomData;
use std::sync::atomic::AtomicU64;

/// Copy elements at displacement `disp` (unit `unit`) of `mem` into `out`.
fn read_at<T: Pod>(mem: &Mem<'_>, unit: usize, disp: usize, out: &mut [T]) -> Result<()> {
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
    let off = disp.saturating_mul(unit);
    mem.read(off, bytes).map_err(Error::from)
}

/// Copy `data` to displacement `disp` (unit `unit`) of `mem`.
fn write_at<T: Pod>(mem: &Mem<'_>, unit: usize, disp: usize, data: &[T]) -> Result<()> {
    let off = disp.saturating_mul(unit);
    mem.write(off, bytemuck::cast_slice(data))
        .map_err(Error::from)
}

/// MPI_ERR_RMA_FLAVOR: shared_query on a dynamic window.
fn no_shared_query() -> Error {
    Error::new(
        ErrorClass::RmaFlavor,
        "shared_query on a dynamic window, which has no window memory to query",
    )
}

/// Another rank's window memory on this node, reachable by loads and stores.
#[derive(Debug)]
pub struct SharedRegion<'w> {
    mem: Option<Mem<'w>>,
    disp_unit: usize,
    _window: PhantomData<&'w ()>,
}

impl SharedRegion<'_> {
    /// Size in bytes (0 where the memory is not directly reachable).
    pub fn size(&self) -> usize {
        self.mem.as_ref().map_or(0, Mem::len)
    }

    /// The displacement unit of the rank that owns the memory.
    pub fn disp_unit(&self) -> usize {
        self.disp_unit
    }

    /// The address of the memory in this process (an identity; 0 where unreachable).
    pub fn base_addr(&self) -> usize {
        self.mem.as_ref().map_or(0, Mem::addr)
    }

    fn mem(&self) -> Result<&Mem<'_>> {
        self.mem.as_ref().ok_or_else(|| {
            Error::new(
                ErrorClass::RmaRange,
                "this rank's memory is not directly reachable",
            )
        })
    }

    /// Load elements at displacement `disp`.
    pub fn read<T: Pod>(&self, disp: usize, out: &mut [T]) -> Result<()> {
        read_at(self.mem()?, self.disp_unit, disp, out)
    }

    /// Store elements at displacement `disp`.
    pub fn write<T: Pod>(&self, disp: usize, data: &[T]) -> Result<()> {
        write_at(self.mem()?, self.disp_unit, disp, data)
    }

    /// The 64-bit atomic at byte offset `offset` (8-aligned), for CPU atomics on shared memory.
    pub fn atomic_u64(&self, offset: usize) -> Result<&AtomicU64> {
        self.mem()?.atomic_u64(offset).map_err(Error::from)
    }
}

impl<'a> Window<'a> {
    /// Load `out.len()` elements of this rank's window memory at displacement `disp` (in a
    /// dynamic window: of memory this rank attached, at address `disp`).
    pub fn read_local<T: Pod>(&self, disp: usize, out: &mut [T]) -> Result<()> {
        if self.flavor == Flavor::Dynamic {
            return self.read_attached(disp, bytemuck::cast_slice_mut(out));
        }
        read_at(&self.local, self.disp_unit(), disp, out)
    }

    /// Store `data` into this rank's window memory at displacement `disp` (in a dynamic
    /// window: into memory this rank attached, at address `disp`).
    pub fn write_local<T: Pod>(&self, disp: usize, data: &[T]) -> Result<()> {
        if self.flavor == Flavor::Dynamic {
            return self.write_attached(disp, bytemuck::cast_slice(data));
        }
        write_at(&self.local, self.disp_unit(), disp, data)
    }

    /// Direct load/store access to `rank`'s window memory; `None` asks for the lowest rank
    /// whose size is not 0 (MPI_PROC_NULL). Allowed on shared, allocate and create windows; the
    /// size is 0 where the memory is not directly reachable (another process's create memory,
    /// unless it was allocated by [`crate::Comm::alloc_mem`]).
    ///
    /// # MPI-4.1: 12.2.3 (MPI_WIN_SHARED_QUERY)
    pub fn shared_query(&self, rank: Option<usize>) -> Result<SharedRegion<'_>> {
        in_call(Some(self.rank()), "MPI_Win_shared_query", || {
            if self.flavor == Flavor::Dynamic {
                return Err(no_shared_query());
            }
            let rank = match rank {
                Some(r) => {
                    self.extent(r)?;
                    r
                }
                None => (0..self.extents.len())
                    .find(|&r| self.extents[r].size > 0)
                    .unwrap_or(0),
            };
            let mem = if rank == self.rank() {
                Some(self.local.clone())
            } else {
                self.shared[rank].clone()
            };
            Ok(SharedRegion {
                mem,
                disp_unit: self.extents[rank].disp_unit,
                _window: PhantomData,
            })
        })
    }
}
