//! Registered memory: what a peer needs to reach it, and the local descriptor operations use.

use crate::core::Core;
use crate::error::{FiError, check};
use crate::info::MrMode;
use crate::mr::{Access, Mr};
use crate::sys;
use onesided_shm::Mem;
use std::sync::Arc;

/// What a peer needs to address a region: the address of its first byte as the provider
/// wants it (virtual address or 0) and the remote key (8 little-endian bytes, or raw).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RegionKey {
    /// Address of byte 0 of the region in the peer's operations.
    pub base: u64,
    /// The key bytes.
    pub key: Vec<u8>,
    /// The key is raw (`FI_MR_RAW`) and must be mapped with `fi_mr_map_raw`.
    pub raw: bool,
}

/// A registration that keeps its endpoint (and domain) open; the memory must outlive it. It is
/// listed in its core's [`Registered`](crate::registered::Registered) while it lives.
pub(crate) struct RawRegion {
    mr: Mr,
    /// Keeps the endpoint (and its domain) open while the region is.
    core: Arc<Core>,
    /// Where its memory is.
    addr: usize,
    len: usize,
}

impl Drop for RawRegion {
    fn drop(&mut self) {
        let desc = self.mr.desc() as usize;
        self.core.registered().remove(self.addr, self.len, desc);
    }
}

impl RawRegion {
    /// Register `len` bytes at `addr` on `core`'s domain, bound to its endpoint that `access`
    /// serves where the mode demands it (see [`Mr::register`]).
    ///
    /// # Safety
    /// The memory must stay valid (mapped, and not freed) until the returned region is dropped.
    pub(crate) unsafe fn register(
        core: &Arc<Core>,
        addr: usize,
        len: usize,
        access: Access,
    ) -> Result<RawRegion, FiError> {
        // Local buffers serve the endpoint that issues, remote ones the one peers address.
        let ep = match access {
            Access::Local => core.ep(),
            Access::Remote => core.addressed(),
        };
        // SAFETY: the caller keeps the memory valid; the region holds the core, so the domain
        // and the endpoint stay open.
        let mr = unsafe { Mr::register(core.domain(), ep, addr, len, access)? };
        let key = match access {
            Access::Remote if core.domain().provider().mr_key_size() <= 8 => {
                // SAFETY: the registration is open.
                Some(unsafe { sys::fi_mr_key(mr.raw()) })
            }
            _ => None,
        };
        core.registered().add(addr, len, mr.desc() as usize, key);
        Ok(RawRegion {
            mr,
            core: core.clone(),
            addr,
            len,
        })
    }

    /// The descriptor to pass with local buffers in this region.
    pub(crate) fn desc(&self) -> *mut libc::c_void {
        self.mr.desc()
    }

    fn key(&self, addr: usize) -> Result<RegionKey, FiError> {
        let p = self.core.domain().provider();
        let virt = p.mr_mode().contains(MrMode::VIRT_ADDR);
        let base = if virt { addr as u64 } else { 0 };
        if p.mr_key_size() > 8 {
            let mut size = p.mr_key_size();
            let mut key = vec![0u8; size];
            let mut raw_base = base;
            // SAFETY: the region is open; `key` has `size` writable bytes, as `size` says.
            check("fi_mr_raw_attr", unsafe {
                sys::fi_mr_raw_attr(self.mr.raw(), &mut raw_base, key.as_mut_ptr(), &mut size, 0)
            })?;
            key.truncate(size);
            return Ok(RegionKey {
                base: raw_base,
                key,
                raw: true,
            });
        }
        // SAFETY: the region is open.
        let key = unsafe { sys::fi_mr_key(self.mr.raw()) };
        Ok(RegionKey {
            base,
            key: key.to_le_bytes().to_vec(),
            raw: false,
        })
    }
}

/// Memory registered with a domain for the life of `'a` (window memory, bounce buffers).
pub struct Region<'a> {
    raw: RawRegion,
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
    pub(crate) fn new(
        core: &Arc<Core>,
        mem: Mem<'a>,
        access: Access,
    ) -> Result<Region<'a>, FiError> {
        // SAFETY: `mem` (which keeps its memory valid for 'a, e.g. by holding the segment) is
        // moved into the region and dropped after the registration.
        let raw = unsafe { RawRegion::register(core, mem.addr(), mem.len(), access)? };
        Ok(Region { raw, mem })
    }

    /// What peers need to reach this region.
    pub fn key(&self) -> Result<RegionKey, FiError> {
        self.raw.key(self.mem.addr())
    }

    /// The registered memory.
    pub fn mem(&self) -> &Mem<'a> {
        &self.mem
    }

    pub(crate) fn desc(&self) -> *mut libc::c_void {
        self.raw.desc()
    }
}
