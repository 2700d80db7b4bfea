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

/// The signature shared by `process_vm_readv` and `process_vm_writev`.
type Syscall = unsafe extern "C" fn(
    libc::pid_t,
    *const libc::iovec,
    libc::c_ulong,
    *const libc::iovec,
    libc::c_ulong,
    libc::c_ulong,
) -> isize;

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

    /// Move `len` bytes between local address `local` and remote address `at`, calling
    /// `call` until all bytes moved (the kernel may move fewer per call).
    fn transfer(
        &self,
        local: *mut u8,
        at: usize,
        len: usize,
        call: Syscall,
    ) -> Result<(), CmaError> {
        let mut done = 0;
        while done < len {
            let l = libc::iovec {
                // `done < len`, so the pointer stays inside the caller's slice.
                iov_base: local.wrapping_add(done).cast(),
                iov_len: len - done,
            };
            let r = libc::iovec {
                iov_base: (at + done) as *mut libc::c_void,
                iov_len: len - done,
            };
            // SAFETY: `l` describes the rest of a live slice of the caller (readable for writes,
            // exclusively borrowed for reads); the remote range belongs to another process and
            // is checked by the kernel, never dereferenced here.
            let n = unsafe { call(self.pid, &l, 1, &r, 1, 0) };
            if n <= 0 {
                return Err(CmaError::Os(io::Error::last_os_error()));
            }
            done += n as usize;
        }
        Ok(())
    }

    /// Copy `src` to `offset` in the remote region.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), CmaError> {
        let at = self.range(offset, src.len())?;
        // process_vm_writev only reads the local buffer, so the cast to *mut is never written.
        self.transfer(
            src.as_ptr().cast_mut(),
            at,
            src.len(),
            libc::process_vm_writev,
        )
    }

    /// Copy from `offset` in the remote region into `dst`.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), CmaError> {
        let at = self.range(offset, dst.len())?;
        self.transfer(dst.as_mut_ptr(), at, dst.len(), libc::process_vm_readv)
    }
}

#[cfg(test)]
mod tests {
    use super::{CmaError, RemoteMem};
    use crate::OutOfRange;

    #[test]
    fn ranges_are_checked_before_any_system_call() {
        let me = std::process::id() as i32;
        assert!(RemoteMem::new(me, 0x1000, 16).is_err());
        let r = RemoteMem::new(me + 1, 0x1000, 16).unwrap();
        assert_eq!(r.len(), 16);
        let refused = OutOfRange {
            offset: 8,
            len: 9,
            limit: 16,
        };
        assert!(matches!(r.write(8, &[0; 9]), Err(CmaError::Range(e)) if e == refused));
        let mut buf = [0; 4];
        assert!(matches!(
            r.read(usize::MAX, &mut buf),
            Err(CmaError::Range(_))
        ));
    }
}
