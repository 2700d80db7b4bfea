//! Buffers the endpoint owns for operations that outlive the call that posted them (request
//! operations): the provider reads from and writes into them, never into memory that the caller
//! could free before the operation settles. A buffer is handed back only once every operation
//! using it has settled; one whose operations never settle is leaked, not freed.
//!
//! Buffers of [`POOLED`] bytes and more are kept for reuse, up to [`POOL_BYTES`] per endpoint
//! ([`Pool`]): fresh memory of that size is mapped, faulted in page by page and unmapped again
//! for every operation, which held `rput` of 1 MiB over libfabric's shm provider to a third
//! of a blocking put's bandwidth.

use crate::error::FiError;
use crate::mr::{Local, Mr};
use crate::sys;
use onesided_shm::Mem;
use std::sync::{Arc, Mutex, MutexGuard};

/// The smallest buffer kept for reuse: smaller ones come from the allocator's heap, with no
/// page faults to save.
pub(crate) const POOLED: usize = 64 << 10;
/// The most bytes a pool keeps: a burst of larger request operations leaves at most this much
/// behind.
pub(crate) const POOL_BYTES: usize = 64 << 20;

/// An owned buffer, registered for local access where the provider demands it (`FI_MR_LOCAL`).
/// Clones share the memory (each operation of a transfer split in pieces keeps one).
#[derive(Clone)]
pub(crate) struct Staged {
    mem: Mem<'static>,
    mr: Option<Arc<Mr>>,
    /// Gives the buffer back to the pool when the last clone goes.
    _lease: Option<Arc<Lease>>,
}

/// A buffer and its registration: the registration first, so that it is closed before the
/// memory is freed.
struct Parts {
    mr: Option<Arc<Mr>>,
    mem: Mem<'static>,
}

impl Parts {
    /// `len` bytes (at least one), registered where `register` says: cache-line aligned from
    /// [`POOLED`] bytes up; below, as the heap aligns them (16 bytes, enough for every element
    /// type), where a stricter alignment takes glibc's `posix_memalign`, about 500
    /// instructions more per operation (callgrind, an 8-byte accumulate).
    fn new(len: usize, register: Option<Local<'_>>) -> Result<Parts, FiError> {
        let align = if len >= POOLED { 64 } else { 16 };
        let mem = Mem::alloc(len.max(1), align)
            .ok_or_else(|| FiError::new("staging buffer", -(libc::ENOMEM as i64)))?;
        let mr = match register {
            // SAFETY: the memory is owned by `mem`, which is kept with the registration (in
            // `Parts` or a `Staged`) as long as it; the domain is open while the endpoint that
            // registers is, and its pool frees what it keeps when the endpoint closes.
            Some(local) => Some(Arc::new(unsafe { local.register(mem.addr(), mem.len())? })),
            None => None,
        };
        Ok(Parts { mr, mem })
    }
}

/// Hands its buffer to the pool when dropped, with the last clone of its `Staged`.
struct Lease {
    pool: Arc<Pool>,
    // A mutex only so that the lease may be shared between threads (`Mem` is not `Sync`).
    parts: Mutex<Option<Parts>>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let parts = self.parts.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = parts.take() {
            self.pool.keep(p);
        }
    }
}

/// Staging buffers whose operations have settled, kept for the next request operation of
/// their size class (a power of two).
#[derive(Default)]
pub(crate) struct Pool(Mutex<Kept>);

#[derive(Default)]
struct Kept {
    free: Vec<Parts>,
    bytes: usize,
    closed: bool,
}

impl Pool {
    fn kept(&self) -> MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A kept buffer of `class` bytes.
    fn take(&self, class: usize) -> Option<Parts> {
        let mut k = self.kept();
        let i = k.free.iter().position(|p| p.mem.len() == class)?;
        k.bytes -= class;
        Some(k.free.swap_remove(i))
    }

    /// Keep `parts` for reuse if the pool is open and has room; else it is freed.
    fn keep(&self, parts: Parts) {
        let mut k = self.kept();
        let len = parts.mem.len();
        if !k.closed && k.bytes + len <= POOL_BYTES {
            k.bytes += len;
            k.free.push(parts);
        }
    }

    /// Free every kept buffer and keep none from now on: the endpoint is closing, and a
    /// registration must not outlive it.
    pub(crate) fn close(&self) {
        let freed = {
            let mut k = self.kept();
            k.closed = true;
            k.bytes = 0;
            std::mem::take(&mut k.free)
        };
        drop(freed);
    }

    /// Bytes kept now.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.kept().bytes
    }
}

impl Staged {
    /// At least `len` bytes (at least one), registered where `register` says (an endpoint
    /// registers them where the provider demands registered local buffers) and aligned as
    /// [`Parts::new`] says: from `pool` (the endpoint's) from [`POOLED`] bytes up, rounded up
    /// to a power of two.
    pub(crate) fn new(
        pool: &Arc<Pool>,
        len: usize,
        register: Option<Local<'_>>,
    ) -> Result<Staged, FiError> {
        if len < POOLED {
            let Parts { mr, mem } = Parts::new(len, register)?;
            return Ok(Staged {
                mem,
                mr,
                _lease: None,
            });
        }
        let class = len.next_power_of_two();
        let parts = match pool.take(class) {
            Some(p) => p,
            None => Parts::new(class, register)?,
        };
        Ok(Staged {
            mem: parts.mem.clone(),
            mr: parts.mr.clone(),
            _lease: Some(Arc::new(Lease {
                pool: pool.clone(),
                parts: Mutex::new(Some(parts)),
            })),
        })
    }

    pub(crate) fn mem(&self) -> &Mem<'static> {
        &self.mem
    }

    /// The descriptor to pass with this buffer (null where none is needed).
    pub(crate) fn desc(&self) -> *mut libc::c_void {
        self.mr.as_ref().map_or(std::ptr::null_mut(), |m| m.desc())
    }

    /// The bytes at `offset`, `len` long, as read into by the provider.
    pub(crate) fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), FiError> {
        self.mem
            .read(offset, dst)
            .map_err(|_| FiError::new("staging buffer", -(sys::FI_EINVAL as i64)))
    }

    /// Copy `src` in at `offset`.
    pub(crate) fn write(&self, offset: usize, src: &[u8]) -> Result<(), FiError> {
        self.mem
            .write(offset, src)
            .map_err(|_| FiError::new("staging buffer", -(sys::FI_EINVAL as i64)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(len: usize) -> Parts {
        Parts {
            mr: None,
            mem: Mem::alloc(len, 64).unwrap(),
        }
    }

    #[test]
    fn a_settled_buffer_serves_the_next_of_its_class() {
        let pool = Arc::new(Pool::default());
        let p = parts(POOLED);
        let addr = p.mem.addr();
        let lease = Lease {
            pool: pool.clone(),
            parts: Mutex::new(Some(p)),
        };
        assert_eq!(pool.bytes(), 0, "kept only once its lease is gone");
        drop(lease);
        assert_eq!(pool.bytes(), POOLED);
        assert!(pool.take(2 * POOLED).is_none(), "another class");
        assert_eq!(pool.take(POOLED).map(|p| p.mem.addr()), Some(addr));
        assert_eq!(pool.bytes(), 0);
        assert!(pool.take(POOLED).is_none());
    }

    #[test]
    fn keeps_at_most_its_limit_and_nothing_once_closed() {
        let pool = Pool::default();
        let big = POOL_BYTES / 2;
        pool.keep(parts(big));
        pool.keep(parts(big));
        pool.keep(parts(big));
        assert_eq!(pool.bytes(), POOL_BYTES);
        pool.close();
        assert_eq!(pool.bytes(), 0);
        assert!(pool.take(big).is_none());
        pool.keep(parts(POOLED));
        assert_eq!(pool.bytes(), 0);
    }
}
