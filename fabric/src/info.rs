//! Choosing a provider: `fi_getinfo` for reliable-datagram endpoints with RMA and atomics; and
//! the library as a whole: loading it ahead of the first call that needs it, its version.

use crate::error::{FiError, check};
use crate::library::{Library, library, loaded};
use crate::sys;
use std::ffi::{CStr, CString};
use std::ptr;

/// Memory-registration mode bits (`FI_MR_*`), as requested or as a provider demands them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MrMode(pub u32);

impl MrMode {
    /// Local buffers must be registered too (`FI_MR_LOCAL`).
    pub const LOCAL: MrMode = MrMode(sys::FI_MR_LOCAL);
    /// Remote addresses are virtual addresses, not offsets (`FI_MR_VIRT_ADDR`).
    pub const VIRT_ADDR: MrMode = MrMode(sys::FI_MR_VIRT_ADDR);
    /// Only allocated, backed memory may be registered (`FI_MR_ALLOCATED`).
    pub const ALLOCATED: MrMode = MrMode(sys::FI_MR_ALLOCATED);
    /// The provider chooses keys (`FI_MR_PROV_KEY`).
    pub const PROV_KEY: MrMode = MrMode(sys::FI_MR_PROV_KEY);
    /// Regions are bound to an endpoint and enabled before use (`FI_MR_ENDPOINT`).
    pub const ENDPOINT: MrMode = MrMode(sys::FI_MR_ENDPOINT);
    /// Keys may be larger than 64 bits and are exchanged raw (`FI_MR_RAW`).
    pub const RAW: MrMode = MrMode(sys::FI_MR_RAW);
    /// What the verbs provider demands; requesting it on tcp, with
    /// [`Request::register_local`], runs the strict paths there.
    pub const VERBS: MrMode = MrMode(
        sys::FI_MR_LOCAL | sys::FI_MR_VIRT_ADDR | sys::FI_MR_ALLOCATED | sys::FI_MR_PROV_KEY,
    );
    /// Every mode onesided can honour: a request of all of them lets the provider pick.
    pub const ALL: MrMode = MrMode(
        sys::FI_MR_LOCAL
            | sys::FI_MR_VIRT_ADDR
            | sys::FI_MR_ALLOCATED
            | sys::FI_MR_PROV_KEY
            | sys::FI_MR_ENDPOINT
            | sys::FI_MR_RAW,
    );

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: MrMode) -> bool {
        self.0 & other.0 == other.0
    }

    /// The names of the set bits, e.g. "LOCAL|VIRT_ADDR".
    pub fn names(self) -> String {
        let names = [
            (Self::LOCAL, "LOCAL"),
            (Self::VIRT_ADDR, "VIRT_ADDR"),
            (Self::ALLOCATED, "ALLOCATED"),
            (Self::PROV_KEY, "PROV_KEY"),
            (Self::ENDPOINT, "ENDPOINT"),
            (Self::RAW, "RAW"),
        ];
        let set: Vec<&str> = names
            .iter()
            .filter(|(m, _)| self.contains(*m))
            .map(|(_, n)| *n)
            .collect();
        if set.is_empty() {
            "none".into()
        } else {
            set.join("|")
        }
    }
}

/// What to ask `fi_getinfo` for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Provider name ("tcp", "shm", "verbs", "tcp;ofi_rxm", ...); `None`: the best available.
    pub provider: Option<String>,
    /// MR mode bits onesided is prepared to honour.
    pub mr_mode: MrMode,
    /// Every operation delivers its data before it completes (`FI_DELIVERY_COMPLETE`).
    pub delivery_complete: bool,
    /// Give every local buffer a registration (`FI_MR_LOCAL`) also where the provider does not
    /// demand it: tcp;ofi_rxm, which demands no MR mode bit at all, then runs the paths that
    /// verbs takes (bounce buffer, registration for the call, descriptors of registered
    /// memory). Local registrations are optional elsewhere, so every provider accepts them.
    pub register_local: bool,
}

impl Default for Request {
    fn default() -> Request {
        Request {
            provider: None,
            mr_mode: MrMode::ALL,
            delivery_complete: true,
            register_local: false,
        }
    }
}

/// The libfabric API version onesided asks for.
fn api_version() -> u32 {
    (sys::FI_MAJOR_VERSION << 16) | sys::FI_MINOR_VERSION
}

/// Load libfabric now, if no call loaded it yet: the error says why it cannot be (every call
/// that needs the library would fail with it).
pub fn load() -> Result<(), FiError> {
    library()?;
    Ok(())
}

/// The version of the libfabric library loaded at run time, as "major.minor" (loading it, if
/// no provider was opened yet).
pub fn version() -> Result<String, FiError> {
    let lib = library()?;
    // SAFETY: fi_version has no preconditions.
    let v = unsafe { (lib.version)() };
    Ok(format!("{}.{}", v >> 16, v & 0xffff))
}

/// A list of `fi_info` structures owned by this value (freed with `fi_freeinfo`).
struct InfoList(*mut sys::fi_info);

impl Drop for InfoList {
    fn drop(&mut self) {
        // A list is only ever made by the loaded library.
        if let Some(lib) = loaded().filter(|_| !self.0.is_null()) {
            // SAFETY: the list came from fi_getinfo or fi_dupinfo and is freed once, here.
            unsafe { (lib.freeinfo)(self.0) }
        }
    }
}

/// A copy of the one `fi_info` at `info` (`NULL`: a fresh, zeroed one with its attribute
/// structs allocated, as `fi_allocinfo`), owned by the returned list.
fn dupinfo(lib: &Library, info: *const sys::fi_info) -> Result<InfoList, FiError> {
    // SAFETY: `info` is NULL or a valid element of a list from fi_getinfo; fi_dupinfo copies
    // only that element.
    let one = unsafe { (lib.dupinfo)(info) };
    if one.is_null() {
        return Err(FiError::new("fi_dupinfo", -(libc::ENOMEM as i64)));
    }
    Ok(InfoList(one))
}

/// Run `fi_getinfo` for `req`; `rma_atomic` asks for RMA and atomics (else any RDM provider).
fn getinfo(req: &Request, rma_atomic: bool) -> Result<InfoList, FiError> {
    let lib = library()?;
    // Freed by fi_freeinfo, which also frees prov_name: that string is given by strdup.
    let hints = dupinfo(lib, ptr::null())?;
    // SAFETY: `hints.0` and its attribute pointers are valid allocations from fi_dupinfo,
    // written only here before the call.
    unsafe {
        let h = &mut *hints.0;
        if rma_atomic {
            h.caps = (sys::FI_RMA | sys::FI_ATOMIC | sys::FI_MSG) as u64;
            (*h.tx_attr).op_flags = if req.delivery_complete {
                sys::FI_DELIVERY_COMPLETE as u64
            } else {
                0
            };
        }
        h.mode = 0;
        (*h.ep_attr).type_ = sys::fi_ep_type_FI_EP_RDM;
        (*h.domain_attr).mr_mode = req.mr_mode.0 as i32;
        (*h.domain_attr).threading = sys::fi_threading_FI_THREAD_SAFE;
        if let Some(name) = &req.provider {
            let c = CString::new(name.as_str())
                .map_err(|_| FiError::new("provider name", -(libc::EINVAL as i64)))?;
            (*h.fabric_attr).prov_name = libc::strdup(c.as_ptr());
        }
    }
    let mut out = ptr::null_mut();
    // SAFETY: hints is a valid fi_info; `out` receives a list owned by the returned InfoList.
    let ret = unsafe {
        (lib.getinfo)(
            api_version(),
            ptr::null(),
            ptr::null(),
            0,
            hints.0,
            &mut out,
        )
    };
    check("fi_getinfo", ret)?;
    Ok(InfoList(out))
}

/// One provider configuration chosen for onesided: owns a copy of its `fi_info`.
pub struct Provider {
    info: InfoList,
    /// Local buffers are registered though the provider does not demand it
    /// ([`Request::register_local`]).
    register_local: bool,
}

// SAFETY: the fi_info is plain data owned by this value, never mutated after creation.
unsafe impl Send for Provider {}
// SAFETY: as above; shared references only read it.
unsafe impl Sync for Provider {}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name())
            .field("mr_mode", &self.mr_mode().names())
            .finish()
    }
}

fn cstr(p: *const libc::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-null strings in fi_info are NUL-terminated and live as long as the info.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

impl Provider {
    /// The first provider `fi_getinfo` offers for `req`.
    pub fn find(req: &Request) -> Result<Provider, FiError> {
        let list = getinfo(req, true)?;
        if list.0.is_null() {
            return Err(FiError::new("fi_getinfo", -(sys::FI_ENODATA as i64)));
        }
        Ok(Provider {
            info: dupinfo(library()?, list.0)?,
            register_local: req.register_local,
        })
    }

    /// Every configuration `fi_getinfo` offers for `req`, in its order of preference: one per
    /// domain (NIC, interface) of each provider.
    pub fn find_all(req: &Request) -> Result<Vec<Provider>, FiError> {
        let list = getinfo(req, true)?;
        let lib = library()?;
        let mut out = Vec::new();
        let mut at = list.0;
        while !at.is_null() {
            out.push(Provider {
                info: dupinfo(lib, at)?,
                register_local: req.register_local,
            });
            // SAFETY: `at` is a valid element of the list; `next` is the following one or NULL.
            at = unsafe { (*at).next };
        }
        if out.is_empty() {
            return Err(FiError::new("fi_getinfo", -(sys::FI_ENODATA as i64)));
        }
        Ok(out)
    }

    pub(crate) fn raw(&self) -> *mut sys::fi_info {
        self.info.0
    }

    fn get(&self) -> &sys::fi_info {
        // SAFETY: non-null (checked in find) and owned by self.
        unsafe { &*self.info.0 }
    }

    /// Provider name, e.g. "tcp;ofi_rxm".
    pub fn name(&self) -> String {
        // SAFETY: fabric_attr of an fi_info from fi_getinfo is a valid pointer.
        cstr(unsafe { (*self.get().fabric_attr).prov_name })
    }

    /// Fabric name (a network for tcp, a device family for verbs).
    pub fn fabric(&self) -> String {
        // SAFETY: as in `name`.
        cstr(unsafe { (*self.get().fabric_attr).name })
    }

    /// Domain name (an interface or device).
    pub fn domain(&self) -> String {
        // SAFETY: domain_attr of an fi_info from fi_getinfo is a valid pointer.
        cstr(unsafe { (*self.get().domain_attr).name })
    }

    /// The MR mode onesided honours: what the provider demands, with `LOCAL` where the request
    /// asked to register local buffers anyway.
    pub fn mr_mode(&self) -> MrMode {
        // SAFETY: as in `domain`.
        let demanded = unsafe { (*self.get().domain_attr).mr_mode } as u32;
        match self.register_local {
            true => MrMode(demanded | MrMode::LOCAL.0),
            false => MrMode(demanded),
        }
    }

    /// Bytes of a remote key (over 8: raw keys).
    pub fn mr_key_size(&self) -> usize {
        // SAFETY: as in `domain`.
        unsafe { (*self.get().domain_attr).mr_key_size }
    }

    /// Largest payload a write may inject.
    pub fn inject_size(&self) -> usize {
        // SAFETY: tx_attr of an fi_info from fi_getinfo is a valid pointer.
        unsafe { (*self.get().tx_attr).inject_size }
    }

    /// Most local buffers one operation moves (`tx_attr->iov_limit`; at least 1).
    pub fn iov_limit(&self) -> usize {
        // SAFETY: as in `inject_size`.
        unsafe { (*self.get().tx_attr).iov_limit }.max(1)
    }

    /// Most remote ranges one RMA operation reaches (`tx_attr->rma_iov_limit`; at least 1).
    pub fn rma_iov_limit(&self) -> usize {
        // SAFETY: as in `inject_size`.
        unsafe { (*self.get().tx_attr).rma_iov_limit }.max(1)
    }

    /// Largest single message (and RMA transfer).
    pub fn max_msg_size(&self) -> usize {
        // SAFETY: ep_attr of an fi_info from fi_getinfo is a valid pointer.
        unsafe { (*self.get().ep_attr).max_msg_size }
    }

    /// Bytes of data a write may carry to the peer's completion queue (`FI_REMOTE_CQ_DATA`):
    /// the domain's `cq_data_size` (8 over tcp and shm, 4 over verbs).
    pub fn remote_data_bytes(&self) -> usize {
        // SAFETY: domain_attr of an fi_info from fi_getinfo is a valid pointer.
        unsafe { (*self.get().domain_attr).cq_data_size }.min(8)
    }

    /// The PCI address of the NIC behind the domain, where the provider reports one.
    pub fn pci_address(&self) -> Option<PciAddress> {
        let nic = self.get().nic;
        if nic.is_null() {
            return None;
        }
        // SAFETY: a non-null nic of an fi_info from fi_getinfo is valid, and so is its bus_attr
        // when non-null.
        let bus = unsafe { (*nic).bus_attr.as_ref() }?;
        if bus.bus_type != sys::fi_bus_type_FI_BUS_PCI {
            return None;
        }
        // SAFETY: the bus type says the union holds the PCI attributes.
        let pci = unsafe { bus.attr.pci };
        Some(PciAddress {
            domain: pci.domain_id,
            bus: pci.bus_id,
            device: pci.device_id,
            function: pci.function_id,
        })
    }

    /// Whether operations complete only once delivered at the target.
    pub fn delivery_complete(&self) -> bool {
        // SAFETY: as in `inject_size`.
        let flags = unsafe { (*self.get().tx_attr).op_flags };
        flags & sys::FI_DELIVERY_COMPLETE as u64 != 0
    }
}

/// Where a NIC sits on the PCI bus: `domain:bus:device.function`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciAddress {
    /// PCI domain (segment).
    pub domain: u16,
    /// Bus number.
    pub bus: u8,
    /// Device number on the bus.
    pub device: u8,
    /// Function of the device.
    pub function: u8,
}

/// One line of `onesided info`: a provider and what it offers onesided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSummary {
    /// Provider name.
    pub name: String,
    /// Fabric name.
    pub fabric: String,
    /// Domain name.
    pub domain: String,
    /// Offers RMA (FI_RMA).
    pub rma: bool,
    /// Offers atomics (FI_ATOMIC).
    pub atomics: bool,
    /// MR mode it demands.
    pub mr_mode: MrMode,
    /// Remote key size in bytes.
    pub mr_key_size: usize,
    /// Inject size in bytes.
    pub inject_size: usize,
}

/// Every RDM provider libfabric offers here, with its RMA/atomic support and MR mode. A provider
/// that adds atomics only when asked (tcp;ofi_rxm) is listed as it answers that request.
pub fn list() -> Result<Vec<ProviderSummary>, FiError> {
    let req = Request {
        provider: None,
        mr_mode: MrMode::ALL,
        delivery_complete: false,
        register_local: false,
    };
    let mut out: Vec<ProviderSummary> = Vec::new();
    for rma_atomic in [true, false] {
        let all = match getinfo(&req, rma_atomic) {
            Ok(all) => all,
            Err(e) if rma_atomic && e.code == sys::FI_ENODATA as i32 => continue,
            Err(e) => return Err(e),
        };
        let mut at = all.0;
        while !at.is_null() {
            // SAFETY: `at` walks the list owned by `all`, which outlives the loop.
            let i = unsafe { &*at };
            // SAFETY: attribute pointers of a listed fi_info are valid.
            let (d, t, f) = unsafe { (&*i.domain_attr, &*i.tx_attr, &*i.fabric_attr) };
            let p = ProviderSummary {
                name: cstr(f.prov_name),
                fabric: cstr(f.name),
                domain: cstr(d.name),
                rma: i.caps & sys::FI_RMA as u64 != 0,
                atomics: i.caps & sys::FI_ATOMIC as u64 != 0,
                mr_mode: MrMode(d.mr_mode as u32),
                mr_key_size: d.mr_key_size,
                inject_size: t.inject_size,
            };
            let seen = out
                .iter()
                .any(|q| (&q.name, &q.fabric, &q.domain) == (&p.name, &p.fabric, &p.domain));
            if !seen {
                out.push(p);
            }
            at = i.next;
        }
    }
    Ok(out)
}
