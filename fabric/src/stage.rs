//! Buffers the endpoint owns for operations that outlive the call that posted them (request
//! operations): the provider reads from and writes into them, never into memory that the caller
//! could free before the operation settles. A buffer is handed back only once every operation
//! using it has settled; one whose operations never settle is leaked, not freed.

use crate::core::Core;
use crate::error::FiError;
use crate::region::{Access, Mr};
use crate::sys;
use onesided_shm::Mem;
use std::sync::Arc;

/// An owned buffer, registered for local access where the provider demands it (`FI_MR_LOCAL`).
/// Clones share the memory (each operation of a transfer split in pieces keeps one).
#[derive(Clone)]
pub(crate) struct Staged {
    mem: Mem<'static>,
    mr: Option<Arc<Mr>>,
}

impl Staged {
    /// `len` bytes (at least one), cache-line aligned, registered when `register`.
    pub(crate) fn new(core: &Core, len: usize, register: bool) -> Result<Staged, FiError> {
        let mem = Mem::alloc(len.max(1), 64)
            .ok_or_else(|| FiError::new("staging buffer", -(libc::ENOMEM as i64)))?;
        let mr = match register {
            // SAFETY: the memory is owned by `mem`, which this value holds as long as the
            // registration; the core's domain is open while the core is.
            true => Some(Arc::new(unsafe {
                Mr::register(core, mem.addr(), mem.len(), Access::Local)?
            })),
            false => None,
        };
        Ok(Staged { mem, mr })
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
