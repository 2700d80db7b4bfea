//! Registrations made ahead of windows: memory from `Comm::alloc_mem` is registered with this
//! thread's endpoint when it is allocated (where the job uses the fabric), and a window created
//! over it later (or over part of it) publishes that registration's key instead of registering
//! again.

use super::names::fi_err;
use super::resources::{Resources, resources};
use crate::config::FabricConfig;
use crate::error::Result;
use crate::protocol::layout::offset_in;
use onesided_fabric as fi;
use onesided_shm::Mem;
use std::cell::RefCell;
use std::rc::Rc;

/// One registration of alloc_mem memory, closed on drop.
#[derive(Debug)]
pub(crate) struct Prereg {
    region: fi::Region<'static>,
    /// The endpoint it was made on (after the region: closed after it).
    _res: Rc<Resources>,
}

/// A live registration as windows look for it.
struct Known {
    addr: usize,
    len: usize,
    /// The endpoint's identity.
    res: *const Resources,
    key: fi::RegionKey,
}

thread_local! {
    static KNOWN: RefCell<Vec<Known>> = const { RefCell::new(Vec::new()) };
}

/// Register `mem` with this thread's endpoint for `config`.
pub(crate) fn register(config: &FabricConfig, mem: Mem<'static>) -> Result<Prereg> {
    let res = resources(config)?;
    let (addr, len) = (mem.addr(), mem.len());
    let region = res.ep.register(mem).map_err(fi_err)?;
    let key = region.key().map_err(fi_err)?;
    KNOWN.with(|k| {
        k.borrow_mut().push(Known {
            addr,
            len,
            res: Rc::as_ptr(&res),
            key,
        })
    });
    Ok(Prereg { region, _res: res })
}

impl Drop for Prereg {
    fn drop(&mut self) {
        let addr = self.region.mem().addr();
        KNOWN.with(|k| k.borrow_mut().retain(|r| r.addr != addr));
    }
}

/// The key of the `len` bytes at `addr` where a registration on `res` holds them (a raw key
/// is tied to its region's base, so only plain keys are reused).
pub(super) fn find(res: &Rc<Resources>, addr: usize, len: usize) -> Option<fi::RegionKey> {
    KNOWN.with(|k| {
        k.borrow().iter().find_map(|r| {
            let off = offset_in(r.addr as u64, r.len as u64, addr as u64, len as u64)?;
            (!r.key.raw && std::ptr::eq(r.res, Rc::as_ptr(res))).then(|| fi::RegionKey {
                base: r.key.base + off,
                ..r.key.clone()
            })
        })
    })
}
