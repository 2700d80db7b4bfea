//! Memory allocated for RMA (MPI_ALLOC_MEM, MPI_FREE_MEM).
//!
//! [`Comm::alloc_mem`] returns an [`AllocMem`]: zero-filled memory that derefs to a slice and is
//! freed when dropped. It is an anonymous shared-memory segment, so a [`Window::create`] over it
//! (or over part of it) is mapped by the other ranks of the node at window creation: they reach
//! it with loads, stores and CPU atomics, as memory of [`Window::allocate`], instead of the
//! cross-memory copies that other memory lent to `create` costs. [`Window::shared_query`] hands
//! it out to them.
//!
//! Where the job's windows use the fabric, the memory is registered with the NIC when it is
//! allocated, and a window over it publishes that registration instead of registering again.
//!
//! Info keys: `mpi_minimum_memory_alignment` (a power of two up to 1 GiB; the memory always
//! starts on a page) and `alloc_shared_noncontig` (accepted; one block is one mapping).
//!
//! # MPI-4.1: 9.2 (MPI_ALLOC_MEM, MPI_FREE_MEM)
//!
//! [`Window::create`]: crate::Window::create
//! [`Window::allocate`]: crate::Window::allocate
//! [`Window::shared_query`]: crate::Window::shared_query

use crate::error::in_call;
use crate::error::{Error, ErrorClass, Result};
use crate::info::Info;
use crate::protocol::layout::{PAGE, offset_in};
use crate::transport::net;
use crate::world::Comm;
use bytemuck::Pod;
use onesided_shm::{Block, FileId};
use std::marker::PhantomData;
use std::sync::Mutex;

/// A block this process allocated, as windows over its memory describe it to node peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Published {
    /// Address and length of the whole block.
    pub addr: usize,
    pub len: usize,
    /// The descriptor peers open, and the identity of its file.
    pub fd: i32,
    pub id: FileId,
}

/// Every live block of this process (blocks are few and long-lived; windows look them up at
/// creation).
static BLOCKS: Mutex<Vec<Published>> = Mutex::new(Vec::new());

fn blocks() -> std::sync::MutexGuard<'static, Vec<Published>> {
    BLOCKS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The live block holding the `len` bytes at `addr`, and their offset in it.
pub(crate) fn lookup(addr: usize, len: usize) -> Option<(Published, usize)> {
    if len == 0 {
        return None;
    }
    blocks().iter().find_map(|b| {
        let off = offset_in(b.addr as u64, b.len as u64, addr as u64, len as u64)?;
        Some((*b, off as usize))
    })
}

/// Memory allocated by [`Comm::alloc_mem`]: `len` elements of `T`, zero-filled, that deref to
/// a slice; freed on drop (MPI_FREE_MEM). Like the world it came from, it stays on the thread
/// that allocated it (its NIC registration is that thread's).
#[derive(Debug)]
pub struct AllocMem<T: Pod> {
    /// The NIC's registration, where windows use the fabric (closed before the block goes).
    _nic: Option<net::Registered>,
    block: Block,
    len: usize,
    _elem: PhantomData<T>,
    _thread: PhantomData<std::rc::Rc<()>>,
}

impl Comm {
    /// Allocate `len` zero-filled elements of `T` that are best for RMA: windows created over
    /// them are reached by node peers with loads, stores and CPU atomics (module docs). Local.
    /// The memory starts on a page, or on `mpi_minimum_memory_alignment` where that is larger
    /// (MPI_ERR_INFO for a value that is not a power of two up to 1 GiB); MPI_ERR_SIZE when
    /// `len` elements overflow, MPI_ERR_NO_MEM when the system has no memory for them.
    ///
    /// # MPI-4.1: 9.2 (MPI_ALLOC_MEM)
    pub fn alloc_mem<T: Pod>(&self, len: usize, info: &Info) -> Result<AllocMem<T>> {
        in_call(Some(self.rank()), "MPI_Alloc_mem", || {
            let align = info.alignment()?.max(PAGE).max(align_of::<T>());
            info.flag("alloc_shared_noncontig", false)?;
            let bytes = len
                .checked_mul(size_of::<T>())
                .filter(|&b| b <= isize::MAX as usize)
                .ok_or_else(|| {
                    Error::new(ErrorClass::Size, format!("{len} elements are too many"))
                })?;
            let block =
                Block::new(bytes, align).map_err(|e| Error::os("allocating RMA memory", e))?;
            let nic = net::register_ahead(self, block.mem())?;
            blocks().push(Published {
                addr: block.as_slice().as_ptr() as usize,
                len: bytes,
                fd: block.fd(),
                id: block.id(),
            });
            Ok(AllocMem {
                _nic: nic,
                block,
                len,
                _elem: PhantomData,
                _thread: PhantomData,
            })
        })
    }
}

impl<T: Pod> AllocMem<T> {
    /// Free the memory (what dropping it does). # MPI-4.1: 9.2 (MPI_FREE_MEM)
    pub fn free(self) {}
}

impl<T: Pod> std::ops::Deref for AllocMem<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        let bytes = &self.block.as_slice()[..self.len * size_of::<T>()];
        bytemuck::cast_slice(bytes)
    }
}

impl<T: Pod> std::ops::DerefMut for AllocMem<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        let bytes = &mut self.block.as_mut_slice()[..self.len * size_of::<T>()];
        bytemuck::cast_slice_mut(bytes)
    }
}

impl<T: Pod> Drop for AllocMem<T> {
    fn drop(&mut self) {
        let fd = self.block.fd();
        blocks().retain(|b| b.fd != fd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::inproc;

    #[test]
    fn blocks_are_found_while_they_live() {
        inproc::run(1, |world| {
            let mut a = world.alloc_mem::<u64>(1000, &Info::new()).unwrap();
            assert!(a.iter().all(|&x| x == 0));
            a[999] = 7;
            assert_eq!(a[999], 7);
            let addr = a.as_ptr() as usize;
            assert_eq!(addr % PAGE, 0);
            let (b, off) = lookup(addr + 8, 16).unwrap();
            assert_eq!((b.addr, b.len, off), (addr, 8000, 8));
            assert!(lookup(addr + 7992, 16).is_none());
            let big = Info::new().set("mpi_minimum_memory_alignment", "65536");
            let c = world.alloc_mem::<u8>(10, &big).unwrap();
            assert_eq!(c.as_ptr() as usize % 65536, 0);
            a.free();
            assert!(lookup(addr + 8, 16).is_none());
            let bad = Info::new().set("mpi_minimum_memory_alignment", "3");
            let e = world.alloc_mem::<u8>(10, &bad).unwrap_err();
            assert_eq!(e.class(), ErrorClass::Info);
            let e = world
                .alloc_mem::<u64>(usize::MAX / 4, &Info::new())
                .unwrap_err();
            assert_eq!(e.class(), ErrorClass::Size);
            drop(c);
        });
    }
}
