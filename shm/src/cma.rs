//! Cross-memory attach: copies into and out of another process's memory with
//! `process_vm_writev` / `process_vm_readv`.
//!
//! This is how ranks on one node reach window memory that the user allocated (MPI_Win_create):
//! that memory is private to its process, so it cannot be mapped by the others. The kernel checks
//! ptrace access rights: the owner calls [`crate::process::allow_ptrace_from_any`] at start-up so
//! that sibling ranks of the same user may attach under Yama's restricted mode.

use crate::mem::OutOfRange;
use std::io;

/// `len` bytes at `addr` in process `pid`, as published by that process for its window.
#[derive(Debug, Clone, Copy)]
pub struct RemoteMem {
    pid: i32,
    addr: usize,
    len: usize,
}

/// Why a cross-memory copy failed.
#[derive(Debug)]
pub enum CmaError {
    /// The range is outside the published region.
    Range(OutOfRange),
    /// The kernel refused or the process is gone.
    Os(io::Error),
}

impl RemoteMem {
    /// Describe another process's memory. The own process is refused: it is reached through
    /// [`crate::Mem`], and writing through an address would bypass Rust's borrow rules.
    pub fn new(pid: i32, addr: usize, len: usize) -> io::Result<RemoteMem> {
        if pid == std::process::id() as i32 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cross-memory attach to the own process",
            ));
        }
        Ok(RemoteMem { pid, addr, len })
    }

    /// Length of the published region.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn range(&self, offset: usize, len: usize) -> Result<usize, CmaError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(self.addr + offset),
            _ => Err(CmaError::Range(OutOfRange {
                offset,
                len,
                limit: self.len,
            })),
        }
    }

    /// Copy `src` to `offset` in the remote region.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), CmaError> {
        let at = self.range(offset, src.len())?;
        let mut done = 0;
        while done < src.len() {
            let local = libc::iovec {
                iov_base: src[done..].as_ptr() as *mut libc::c_void,
                iov_len: src.len() - done,
            };
            let remote = libc::iovec {
                iov_base: (at + done) as *mut libc::c_void,
                iov_len: src.len() - done,
            };
            // SAFETY: `local` describes readable memory of `src`; the remote range belongs to
            // another process and is checked by the kernel, never dereferenced here.
            let n = unsafe { libc::process_vm_writev(self.pid, &local, 1, &remote, 1, 0) };
            if n <= 0 {
                return Err(CmaError::Os(io::Error::last_os_error()));
            }
            done += n as usize;
        }
        Ok(())
    }

    /// Copy from `offset` in the remote region into `dst`.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), CmaError> {
        let at = self.range(offset, dst.len())?;
        let mut done = 0;
        while done < dst.len() {
            let local = libc::iovec {
                iov_base: dst[done..].as_mut_ptr().cast(),
                iov_len: dst.len() - done,
            };
            let remote = libc::iovec {
                iov_base: (at + done) as *mut libc::c_void,
                iov_len: dst.len() - done,
            };
            // SAFETY: `local` describes writable memory of `dst`; the remote range is checked by
            // the kernel.
            let n = unsafe { libc::process_vm_readv(self.pid, &local, 1, &remote, 1, 0) };
            if n <= 0 {
                return Err(CmaError::Os(io::Error::last_os_error()));
            }
            done += n as usize;
        }
        Ok(())
    }
}
