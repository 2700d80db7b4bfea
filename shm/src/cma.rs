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

/// Where a transfer of runs `lens` bytes long stands after `moved` more bytes from `(run,
/// bytes into it)`: past every run that is complete (empty ones included).
fn advance(lens: &[usize], (mut i, mut done): (usize, usize), mut moved: usize) -> (usize, usize) {
    while i < lens.len() && (moved > 0 || lens[i] == done) {
        let step = moved.min(lens[i] - done);
        (moved, done) = (moved - step, done + step);
        if done == lens[i] {
            (i, done) = (i + 1, 0);
        }
    }
    (i, done)
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

    /// Move the bytes of `runs` (remote address, local address, length) between this process
    /// and the remote one, as many runs per system call as the kernel takes (`IOV_MAX`),
    /// calling `call` until all bytes moved (the kernel may move fewer per call).
    fn transfer(&self, runs: &[(usize, *mut u8, usize)], call: Syscall) -> Result<(), CmaError> {
        const IOV_MAX: usize = 1024;
        // The next byte to move: run `i`, `done` bytes into it.
        let lens: Vec<usize> = runs.iter().map(|r| r.2).collect();
        // The next byte to move: run `i`, `done` bytes into it.
        let (mut i, mut done) = advance(&lens, (0, 0), 0);
        while i < runs.len() {
            let batch = &runs[i..runs.len().min(i + IOV_MAX)];
            let iovs = |remote: bool| -> Vec<libc::iovec> {
                batch
                    .iter()
                    .enumerate()
                    .map(|(j, &(at, local, len))| {
                        let skip = if j == 0 { done } else { 0 };
                        libc::iovec {
                            // `skip < len`, so the pointer stays inside the run.
                            iov_base: match remote {
                                true => (at + skip) as *mut libc::c_void,
                                false => local.wrapping_add(skip).cast(),
                            },
                            iov_len: len - skip,
                        }
                    })
                    .collect()
            };
            let (l, r) = (iovs(false), iovs(true));
            // SAFETY: `l` describes the rest of live slices of the caller (readable for writes,
            // exclusively borrowed for reads); the remote ranges belong to another process and
            // are checked by the kernel, never dereferenced here.
            let n = unsafe {
                call(
                    self.pid,
                    l.as_ptr(),
                    l.len() as _,
                    r.as_ptr(),
                    r.len() as _,
                    0,
                )
            };
            if n <= 0 {
                return Err(CmaError::Os(io::Error::last_os_error()));
            }
            (i, done) = advance(&lens, (i, done), n as usize);
        }
        Ok(())
    }

    /// Copy `src` to `offset` in the remote region.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), CmaError> {
        self.write_runs(&[(offset, src)])
    }

    /// Copy each `(offset, src)` of `pieces` to that offset in the remote region, with as few
    /// system calls as the kernel allows; every range is checked before anything moves.
    pub fn write_runs(&self, pieces: &[(usize, &[u8])]) -> Result<(), CmaError> {
        let runs = pieces
            .iter()
            // process_vm_writev only reads the local buffer, so the cast to *mut is never written.
            .map(|&(offset, src)| {
                Ok((
                    self.range(offset, src.len())?,
                    src.as_ptr().cast_mut(),
                    src.len(),
                ))
            })
            .collect::<Result<Vec<_>, CmaError>>()?;
        self.transfer(&runs, libc::process_vm_writev)
    }

    /// Copy from `offset` in the remote region into `dst`.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), CmaError> {
        self.read_runs(&mut [(offset, dst)])
    }

    /// Copy from each `(offset, dst)` of `runs` in the remote region into `dst`, as
    /// [`RemoteMem::write_runs`].
    pub fn read_runs(&self, runs: &mut [(usize, &mut [u8])]) -> Result<(), CmaError> {
        let runs = runs
            .iter_mut()
            .map(|(offset, dst)| Ok((self.range(*offset, dst.len())?, dst.as_mut_ptr(), dst.len())))
            .collect::<Result<Vec<_>, CmaError>>()?;
        self.transfer(&runs, libc::process_vm_readv)
    }
}

#[cfg(test)]
mod tests {
    use super::{CmaError, RemoteMem, advance};

    #[test]
    fn a_partial_transfer_resumes_inside_its_run() {
        let lens = [0, 4, 0, 8, 2];
        assert_eq!(advance(&lens, (0, 0), 0), (1, 0), "empty runs are skipped");
        assert_eq!(advance(&lens, (1, 0), 3), (1, 3));
        assert_eq!(advance(&lens, (1, 3), 1), (3, 0), "through the empty run");
        assert_eq!(advance(&lens, (3, 0), 9), (4, 1));
        assert_eq!(advance(&lens, (4, 1), 1), (5, 0));
    }
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
