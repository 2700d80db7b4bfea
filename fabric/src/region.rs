//! Registered memory: what a peer needs to reach it, and the local descriptor operations use.

use crate::core::Core;
use crate::domain::close;
use crate::error::{FiError, check, opened};
use crate::info::MrMode;
use crate::sys;
use onesided_shm::Mem;
use std::ptr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// How registered memory may be accessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Window memory: peers read and write it, and it may be a local buffer too.
    Remote,
    /// A local buffer of this process's operations only.
    Local,
}

impl Access {
    /// Local buffers are registered readable by peers too: rxm (libfabric 1.17) enters the key of
    /// every registration in a map for its atomics and refuses a key it holds already, and a
    /// device may give a registration without remote access no key of its own (rxe gives 0), so
    /// the second local buffer failed with `FI_ENOKEY`. With remote read each has its own key.
    fn flags(self) -> u64 {
        let local = (sys::FI_READ | sys::FI_WRITE | sys::FI_REMOTE_READ) as u64;
        match self {
            Access::Remote => local | sys::FI_REMOTE_WRITE as u64,
            Access::Local => local,
        }
    }
}

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

/// Keys chosen by onesided where the provider does not choose them (no `FI_MR_PROV_KEY`).
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// One registration, closed on drop; the memory must outlive it, and the domain it was made on
/// must be open until then.
pub(crate) struct Mr(*mut sys::fid_mr);

// SAFETY: the domain is FI_THREAD_SAFE; a registration is only read (desc, key) and closed.
unsafe impl Send for Mr {}
// SAFETY: as above: shared references only read the descriptor.
unsafe impl Sync for Mr {}

impl Mr {
    /// Register `len` bytes at `addr` on `core`'s domain; binds to its endpoint and enables
    /// when the mode demands it.
    ///
    /// # Safety
    /// The memory must stay valid (mapped, and not freed) until the registration is dropped,
    /// and `core`'s domain open.
    pub(crate) unsafe fn register(
        core: &Core,
        addr: usize,
        len: usize,
        access: Access,
    ) -> Result<Mr, FiError> {
        let domain = core.domain();
        let mode = domain.provider().mr_mode();
        let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the domain is open; the caller keeps the memory valid for the registration's
        // life; the registration is closed by Drop once opened.
        let r = Mr(opened("fi_mr_reg", |raw| unsafe {
            sys::fi_mr_reg(
                domain.raw(),
                addr as *const libc::c_void,
                len,
                access.flags(),
                0,
                key,
                0,
                raw,
                ptr::null_mut(),
            )
        })?);
        if mode.contains(MrMode::ENDPOINT) {
            // Local buffers serve the endpoint that issues, remote ones the one peers address.
            let ep = match access {
                Access::Local => core.ep(),
                Access::Remote => core.addressed(),
            };
            // SAFETY: both objects are open; the endpoint is closed only after every region
            // bound to it (regions hold its core; staged buffers live in it).
            check("fi_mr_bind", unsafe {
                sys::fi_mr_bind(r.0, &mut (*ep).fid, 0)
            })?;
            // SAFETY: the registration is open and bound.
            check("fi_mr_enable", unsafe { sys::fi_mr_enable(r.0) })?;
        }
        Ok(r)
    }

    /// The descriptor to pass with local buffers in this registration.
    pub(crate) fn desc(&self) -> *mut libc::c_void {
        // SAFETY: the registration is open.
        unsafe { sys::fi_mr_desc(self.0) }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: opened by `register`, closed once here.
        unsafe { close(self.0.cast()) }
    }
}

/// The regions registered on an endpoint for as long as their memory lives (window memory,
/// alloc_mem blocks, bounce buffers), by address range: where the provider demands registered
/// local buffers (`FI_MR_LOCAL`), a buffer inside one of them goes to the NIC with that
/// region's descriptor, neither copied nor registered again. A region leaves before its
/// registration closes, so a descriptor found here is open while its region is.
#[derive(Debug, Default)]
pub(crate) struct Registered(Vec<Listed>);

/// One registered region: its memory, its descriptor, and for memory peers reach, its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Listed {
    addr: usize,
    len: usize,
    desc: usize,
    key: Option<u64>,
}

impl Registered {
    fn add(&mut self, addr: usize, len: usize, desc: usize, key: Option<u64>) {
        self.0.push(Listed {
            addr,
            len,
            desc,
            key,
        });
    }

    fn remove(&mut self, addr: usize, len: usize, desc: usize) {
        let i = self
            .0
            .iter()
            .position(|e| (e.addr, e.len, e.desc) == (addr, len, desc));
        if let Some(i) = i {
            self.0.swap_remove(i);
        }
    }

    /// The descriptor of a region holding the `len` bytes at `addr`, if one does.
    pub(crate) fn find(&self, addr: usize, len: usize) -> Option<*mut libc::c_void> {
        let end = addr.checked_add(len)?;
        self.0
            .iter()
            .find(|e| e.addr <= addr && end <= e.addr.saturating_add(e.len))
            .map(|e| e.desc as *mut libc::c_void)
    }

    /// Where in this process the `len` bytes are that peers address at `addr` with `key`
    /// (`virt`: by virtual address, else by offset from the region's start), if one region
    /// registered for peers holds them all.
    fn local(&self, key: u64, addr: u64, len: usize, virt: bool) -> Option<usize> {
        let e = self.0.iter().find(|e| e.key == Some(key))?;
        let base = if virt { e.addr as u64 } else { 0 };
        let offset = usize::try_from(addr.checked_sub(base)?).ok()?;
        (offset.checked_add(len)? <= e.len).then_some(e.addr + offset)
    }

    /// Hand `f` a copy of the `len` bytes peers address at `addr` with `key`, then write back
    /// what `f` left there; false, touching nothing, where no region registered for peers holds
    /// them all (see [`Registered::local`]).
    pub(crate) fn update(
        &self,
        key: u64,
        addr: u64,
        len: usize,
        virt: bool,
        f: impl FnOnce(&mut [u8]),
    ) -> bool {
        let Some(at) = self.local(key, addr, len, virt) else {
            return false;
        };
        // A few elements are copied onto the stack, a run to the heap (not zero-filled first:
        // a 32 KiB accumulate paid a `memset` before its copy). The range lies inside a listed
        // region, whose memory stays valid while it is listed (a region leaves this list, under
        // the lock the caller holds, before its memory goes); other processes may access the
        // bytes meanwhile, as with any RMA, so they are copied, and no reference to them is
        // made.
        let (mut small, mut large) = ([0u8; 64], Vec::new());
        let bytes: &mut [u8] = if len <= small.len() {
            // SAFETY: as said above; `small` holds `len` bytes.
            unsafe { ptr::copy_nonoverlapping(at as *const u8, small.as_mut_ptr(), len) };
            &mut small[..len]
        } else {
            large.reserve_exact(len);
            // SAFETY: as said above; `large` has room for `len` bytes, every one of them copied
            // in before its length is set.
            unsafe {
                ptr::copy_nonoverlapping(at as *const u8, large.as_mut_ptr(), len);
                large.set_len(len);
            }
            &mut large
        };
        f(bytes);
        // SAFETY: as above.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), at as *mut u8, len) };
        true
    }
}

/// A registration that keeps its endpoint (and domain) open; the memory must outlive it. It is
/// listed in its core's [`Registered`] while it lives.
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
    /// Register `len` bytes at `addr` (see [`Mr::register`]).
    ///
    /// # Safety
    /// The memory must stay valid (mapped, and not freed) until the returned region is dropped.
    pub(crate) unsafe fn register(
        core: &Arc<Core>,
        addr: usize,
        len: usize,
        access: Access,
    ) -> Result<RawRegion, FiError> {
        // SAFETY: the caller keeps the memory valid; the region holds the core, so the domain
        // stays open.
        let mr = unsafe { Mr::register(core, addr, len, access)? };
        let key = match access {
            Access::Remote if core.domain().provider().mr_key_size() <= 8 => {
                // SAFETY: the registration is open.
                Some(unsafe { sys::fi_mr_key(mr.0) })
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
                sys::fi_mr_raw_attr(self.mr.0, &mut raw_base, key.as_mut_ptr(), &mut size, 0)
            })?;
            key.truncate(size);
            return Ok(RegionKey {
                base: raw_base,
                key,
                raw: true,
            });
        }
        // SAFETY: the region is open.
        let key = unsafe { sys::fi_mr_key(self.mr.0) };
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

#[cfg(test)]
mod tests {
    use super::Registered;

    #[test]
    fn buffers_inside_a_region_find_its_descriptor() {
        let mut r = Registered::default();
        r.add(0x1000, 0x100, 7, None);
        r.add(0x4000, 0x1000, 9, Some(3));
        assert_eq!(r.find(0x1000, 0x100), Some(7 as *mut libc::c_void));
        assert_eq!(r.find(0x4800, 8), Some(9 as *mut libc::c_void));
        assert_eq!(r.find(0x10f8, 16), None, "crosses the end");
        assert_eq!(r.find(0x2000, 8), None);
        assert_eq!(r.find(usize::MAX, 2), None);
        r.remove(0x4000, 0x1000, 9);
        assert_eq!(r.find(0x4800, 8), None, "gone with its region");
    }

    #[test]
    fn peers_reach_regions_by_key_and_range_only() {
        let mut r = Registered::default();
        r.add(0x1000, 0x100, 7, None);
        r.add(0x4000, 0x1000, 9, Some(3));
        assert_eq!(r.local(3, 0x4010, 8, true), Some(0x4010));
        assert_eq!(
            r.local(3, 0x10, 8, false),
            Some(0x4010),
            "offsets from the start"
        );
        assert_eq!(r.local(3, 0x4ff8, 8, true), Some(0x4ff8));
        assert_eq!(r.local(3, 0x4ffc, 8, true), None, "crosses the end");
        assert_eq!(r.local(3, 0x3ff8, 8, true), None, "before the start");
        assert_eq!(r.local(3, u64::MAX, 8, false), None);
        assert_eq!(
            r.local(7, 0x1000, 8, true),
            None,
            "a local buffer has no key"
        );
        assert_eq!(r.local(4, 0x4000, 8, true), None);
    }
}
