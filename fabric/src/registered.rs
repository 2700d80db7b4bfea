//! The regions registered on an endpoint, by address range: how a local buffer finds the
//! descriptor of the region it lies in, and a call's handler the memory peers address.

use std::ptr;

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
    /// List a region: its memory, its descriptor and, for memory peers reach, its key.
    pub(crate) fn add(&mut self, addr: usize, len: usize, desc: usize, key: Option<u64>) {
        self.0.push(Listed {
            addr,
            len,
            desc,
            key,
        });
    }

    /// Take the region of that memory and descriptor off the list.
    pub(crate) fn remove(&mut self, addr: usize, len: usize, desc: usize) {
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
