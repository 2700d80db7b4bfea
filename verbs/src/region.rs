//! Registered memory: window memory peers reach by RDMA, and the staging buffers of this side's
//! own operations.

use crate::error::VerbsError;
use crate::queue::Pd;
use crate::sys;
use onesided_shm::Mem;
use std::sync::Arc;

/// What a peer needs to address a region: the address of its first byte and its remote key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RegionKey {
    /// Address of byte 0 (a virtual address of the owner).
    pub addr: u64,
    /// The remote key.
    pub rkey: u32,
}

/// One registration (`ibv_reg_mr`), deregistered on drop.
pub(crate) struct Mr {
    pd: Arc<Pd>,
    raw: *mut sys::ibv_mr,
}

impl Mr {
    /// Register `len` bytes at `addr`, writable by this side's reads and, with `remote`, open to
    /// peers' writes, reads and atomics.
    ///
    /// # Safety
    /// The `len` bytes at `addr` are mapped and stay so until the registration is dropped.
    pub(crate) unsafe fn new(
        pd: Arc<Pd>,
        addr: usize,
        len: usize,
        remote: bool,
    ) -> Result<Mr, VerbsError> {
        let mut access = sys::IBV_ACCESS_LOCAL_WRITE;
        if remote {
            access |= sys::IBV_ACCESS_REMOTE_WRITE
                | sys::IBV_ACCESS_REMOTE_READ
                | sys::IBV_ACCESS_REMOTE_ATOMIC;
        }
        // SAFETY: `pd.raw` is a live domain; the caller vouches for the memory.
        let raw =
            unsafe { (pd.ctx.lib.reg_mr)(pd.raw, addr as *mut libc::c_void, len, access as i32) };
        if raw.is_null() {
            let e = VerbsError::last(format!("ibv_reg_mr of {len} bytes"));
            let hint = match e.errno() {
                libc::ENOMEM | libc::EPERM => {
                    " (the locked-memory limit, ulimit -l, may be too small: verbs pins memory)"
                }
                _ => "",
            };
            return Err(e.detail(format!("on {}{hint}", pd.ctx.name)));
        }
        Ok(Mr { pd, raw })
    }

    #[inline]
    pub(crate) fn lkey(&self) -> u32 {
        // SAFETY: `raw` is a live registration.
        unsafe { (*self.raw).lkey }
    }

    #[inline]
    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: `raw` is a live registration.
        unsafe { (*self.raw).rkey }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: registered by ibv_reg_mr and deregistered once; the domain outlives it.
        unsafe { (self.pd.ctx.lib.dereg_mr)(self.raw) };
    }
}

/// Memory registered for peers to reach: window memory, a control block, attached memory.
pub struct Region<'a> {
    mr: Mr,
    mem: Mem<'a>,
}

impl std::fmt::Debug for Region<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("addr", &self.mem.addr())
            .field("len", &self.mem.len())
            .finish()
    }
}

impl<'a> Region<'a> {
    pub(crate) fn new(pd: Arc<Pd>, mem: Mem<'a>) -> Result<Region<'a>, VerbsError> {
        // SAFETY: `mem` is mapped for `'a` and the region keeps it (dropped after `mr`).
        let mr = unsafe { Mr::new(pd, mem.addr(), mem.len(), true)? };
        Ok(Region { mr, mem })
    }

    /// What peers address it with.
    pub fn key(&self) -> RegionKey {
        RegionKey {
            addr: self.mem.addr() as u64,
            rkey: self.mr.rkey(),
        }
    }

    /// The memory.
    pub fn mem(&self) -> &Mem<'a> {
        &self.mem
    }
}
