//! Verbs devices: what `ibv_devinfo -v` tells of each (ports, link layer, state, GIDs, limits,
//! atomic capability), an opened device context, and which port and GID a queue pair uses.

use crate::error::VerbsError;
use crate::library::{Library, library};
use crate::sys;
use std::ffi::CStr;
use std::path::Path;

/// How a port's link runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkLayer {
    /// InfiniBand: peers are addressed by LID.
    InfiniBand,
    /// Ethernet (RoCE, rxe): peers are addressed by GID, every packet with a global route header.
    Ethernet,
    /// Unreported.
    Unspecified,
}

impl LinkLayer {
    fn from_raw(v: u8) -> LinkLayer {
        match v as u32 {
            sys::IBV_LINK_LAYER_INFINIBAND => LinkLayer::InfiniBand,
            sys::IBV_LINK_LAYER_ETHERNET => LinkLayer::Ethernet,
            _ => LinkLayer::Unspecified,
        }
    }

    /// Its name, as `ibv_devinfo` prints it.
    pub fn name(self) -> &'static str {
        match self {
            LinkLayer::InfiniBand => "InfiniBand",
            LinkLayer::Ethernet => "Ethernet",
            LinkLayer::Unspecified => "unspecified",
        }
    }
}

/// One entry of a port's GID table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidEntry {
    /// Its index in the table.
    pub index: u32,
    /// The GID.
    pub gid: [u8; 16],
    /// Its type where the kernel reports it (`IB/RoCE v1`, `RoCE v2`).
    pub kind: Option<String>,
}

impl GidEntry {
    /// Whether the GID holds an IPv4 address (`::ffff:a.b.c.d`).
    pub fn is_ipv4(&self) -> bool {
        self.gid[..10].iter().all(|&b| b == 0) && self.gid[10..12] == [0xff, 0xff]
    }

    /// Whether its type is RoCE v2 (routable, over UDP).
    pub fn is_roce_v2(&self) -> bool {
        self.kind.as_deref().is_some_and(|k| k.contains("v2"))
    }

    /// The GID in the usual notation (eight groups of four hex digits).
    pub fn text(&self) -> String {
        let groups: Vec<String> = self
            .gid
            .chunks(2)
            .map(|p| format!("{:02x}{:02x}", p[0], p[1]))
            .collect();
        groups.join(":")
    }
}

/// One port of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// Its number (from 1).
    pub number: u8,
    /// Its state (`ACTIVE`, `DOWN`, ...).
    pub state: &'static str,
    /// Whether it can carry traffic.
    pub active: bool,
    /// How its link runs.
    pub link_layer: LinkLayer,
    /// Its LID (InfiniBand).
    pub lid: u16,
    /// The MTU in use, in bytes.
    pub active_mtu: u32,
    /// The largest message, in bytes.
    pub max_msg: u32,
    /// The non-zero entries of its GID table.
    pub gids: Vec<GidEntry>,
}

/// A device and its limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Its name (`mlx5_0`, `rxe0`).
    pub name: String,
    /// Firmware version.
    pub firmware: String,
    /// Queue pairs, and work requests per queue.
    pub max_qp: u32,
    /// Work requests per queue.
    pub max_qp_wr: u32,
    /// Entries per completion queue.
    pub max_cqe: u32,
    /// Work requests per shared receive queue (0 where the device has none).
    pub max_srq_wr: u32,
    /// Memory regions.
    pub max_mr: u32,
    /// Bytes per memory region.
    pub max_mr_size: u64,
    /// Scatter-gather entries per work request.
    pub max_sge: u32,
    /// RDMA reads and atomics in flight per queue pair, as initiator.
    pub max_qp_rd_atom: u32,
    /// The atomic capability: `none`, `hca` (atomic with respect to the device's own atomics),
    /// `global` (also with respect to the CPU's).
    pub atomic_cap: &'static str,
    /// The largest payload a write carries inline in its work request (probed by creating a
    /// queue pair; 0 where none could be created).
    pub max_inline: u32,
    /// Its ports.
    pub ports: Vec<PortInfo>,
}

impl DeviceInfo {
    /// Whether it runs 8-byte compare-and-swap and fetch-and-add.
    pub fn has_atomics(&self) -> bool {
        self.atomic_cap != "none"
    }

    /// The first port that is active, if any.
    pub fn active_port(&self) -> Option<&PortInfo> {
        self.ports.iter().find(|p| p.active)
    }
}

/// Every device, opened, with what it offers (its inline size not probed: 0).
pub(crate) fn opened() -> Result<Vec<(Context, DeviceInfo)>, VerbsError> {
    let lib = library()?;
    let mut out = Vec::new();
    for name in device_names(lib)? {
        let ctx = Context::open(&name)?;
        let info = ctx.describe()?;
        out.push((ctx, info));
    }
    Ok(out)
}

/// The fewest completion-queue entries of the devices with an active port (where libibverbs
/// loads and lists one).
pub(crate) fn completion_limit() -> Option<u32> {
    let names = device_names(library().ok()?).ok()?;
    names
        .iter()
        .filter_map(|name| {
            let ctx = Context::open(name).ok()?;
            let attr = ctx.query().ok()?;
            let active = (1..=attr.phys_port_cnt)
                .any(|p| ctx.port(p).is_ok_and(|a| a.state == sys::IBV_PORT_ACTIVE));
            active.then_some(attr.max_cqe.max(0) as u32)
        })
        .min()
}

/// The names of the devices libibverbs lists.
pub(crate) fn device_names(lib: &Library) -> Result<Vec<String>, VerbsError> {
    let mut n = 0;
    // SAFETY: `n` is a valid out pointer; the list is freed below after its names are copied.
    let list = unsafe { (lib.get_device_list)(&mut n) };
    if list.is_null() {
        return Err(VerbsError::last("ibv_get_device_list"));
    }
    let mut names = Vec::with_capacity(n.max(0) as usize);
    for i in 0..n.max(0) as usize {
        // SAFETY: the list holds `n` valid device pointers; each name is a NUL-terminated string
        // owned by the device, copied at once.
        let name = unsafe { CStr::from_ptr((lib.get_device_name)(*list.add(i))) };
        names.push(name.to_string_lossy().into_owned());
    }
    // SAFETY: `list` came from ibv_get_device_list and is freed once.
    unsafe { (lib.free_device_list)(list) };
    Ok(names)
}

/// An opened device: its context, closed on drop.
pub(crate) struct Context {
    pub(crate) lib: &'static Library,
    pub(crate) raw: *mut sys::ibv_context,
    pub(crate) name: String,
}

// SAFETY: a context is a pointer to libibverbs' context of an opened device, which libibverbs
// lets any thread use (its calls on one context and its objects may come from several threads
// at once), with the library's table of calls (`&'static`, never changed) and a name. Closed
// once, when the last `Arc` of it is dropped.
unsafe impl Send for Context {}
// SAFETY: as for `Send`.
unsafe impl Sync for Context {}

impl Context {
    /// Open the device named `name`.
    pub(crate) fn open(name: &str) -> Result<Context, VerbsError> {
        let lib = library()?;
        let mut n = 0;
        // SAFETY: as in `device_names`.
        let list = unsafe { (lib.get_device_list)(&mut n) };
        if list.is_null() {
            return Err(VerbsError::last("ibv_get_device_list"));
        }
        let mut raw = std::ptr::null_mut();
        for i in 0..n.max(0) as usize {
            // SAFETY: the list holds `n` valid device pointers with NUL-terminated names.
            let dev = unsafe { *list.add(i) };
            // SAFETY: as above.
            let dev_name = unsafe { CStr::from_ptr((lib.get_device_name)(dev)) };
            if dev_name.to_bytes() == name.as_bytes() {
                // SAFETY: `dev` is a device of the live list; the context it opens stays valid
                // after the list is freed (libibverbs keeps the device referenced).
                raw = unsafe { (lib.open_device)(dev) };
                if raw.is_null() {
                    let e = VerbsError::last(format!("ibv_open_device {name}"));
                    // SAFETY: freed once.
                    unsafe { (lib.free_device_list)(list) };
                    return Err(e);
                }
                break;
            }
        }
        // SAFETY: freed once, after the context was opened.
        unsafe { (lib.free_device_list)(list) };
        if raw.is_null() {
            return Err(VerbsError::new(
                format!("no verbs device named {name:?}"),
                libc::ENODEV,
            ));
        }
        Ok(Context {
            lib,
            raw,
            name: name.to_owned(),
        })
    }

    /// The device's attributes.
    pub(crate) fn query(&self) -> Result<sys::ibv_device_attr, VerbsError> {
        let mut attr = sys::ibv_device_attr::default();
        // SAFETY: `raw` is an open context and `attr` a valid out pointer.
        let rc = unsafe { (self.lib.query_device)(self.raw, &mut attr) };
        if rc != 0 {
            return Err(VerbsError::new("ibv_query_device", rc));
        }
        Ok(attr)
    }

    /// Port `port`'s attributes.
    pub(crate) fn port(&self, port: u8) -> Result<sys::ibv_port_attr, VerbsError> {
        let mut attr = sys::ibv_port_attr::default();
        // SAFETY: `raw` is an open context; the exported call fills the leading, compatible
        // part of the zeroed `ibv_port_attr` (as `verbs.h`'s inline fallback passes it).
        let rc = unsafe {
            (self.lib.query_port)(
                self.raw,
                port,
                (&mut attr as *mut sys::ibv_port_attr).cast(),
            )
        };
        if rc != 0 {
            return Err(VerbsError::new(
                format!("ibv_query_port {}:{port}", self.name),
                rc,
            ));
        }
        Ok(attr)
    }

    /// Entry `index` of port `port`'s GID table.
    pub(crate) fn gid(&self, port: u8, index: i32) -> Result<[u8; 16], VerbsError> {
        let mut gid = sys::ibv_gid::default();
        // SAFETY: `raw` is an open context and `gid` a valid out pointer.
        let rc = unsafe { (self.lib.query_gid)(self.raw, port, index, &mut gid) };
        if rc != 0 {
            return Err(VerbsError::new("ibv_query_gid", rc));
        }
        // SAFETY: every bit pattern of the union is a valid byte array.
        Ok(unsafe { gid.raw })
    }

    /// Port `number` as [`PortInfo`] describes it.
    pub(crate) fn port_info(&self, number: u8) -> Result<PortInfo, VerbsError> {
        let attr = self.port(number)?;
        let mut gids = Vec::new();
        for index in 0..attr.gid_tbl_len.max(0) {
            let Ok(gid) = self.gid(number, index) else {
                continue;
            };
            if gid.iter().all(|&b| b == 0) {
                continue;
            }
            let types = format!(
                "/sys/class/infiniband/{}/ports/{number}/gid_attrs/types/{index}",
                self.name
            );
            let kind = std::fs::read_to_string(Path::new(&types))
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty());
            gids.push(GidEntry {
                index: index as u32,
                gid,
                kind,
            });
        }
        Ok(PortInfo {
            number,
            state: port_state(attr.state),
            active: attr.state == sys::IBV_PORT_ACTIVE,
            link_layer: LinkLayer::from_raw(attr.link_layer),
            lid: attr.lid,
            active_mtu: mtu_bytes(attr.active_mtu),
            max_msg: attr.max_msg_sz,
            gids,
        })
    }

    /// The device as [`DeviceInfo`] describes it, its inline size not probed (0).
    pub(crate) fn describe(&self) -> Result<DeviceInfo, VerbsError> {
        let attr = self.query()?;
        let ports = (1..=attr.phys_port_cnt)
            .map(|p| self.port_info(p))
            .collect::<Result<Vec<_>, _>>()?;
        // SAFETY: fw_ver is a NUL-terminated array filled by the query.
        let firmware = unsafe { CStr::from_ptr(attr.fw_ver.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Ok(DeviceInfo {
            name: self.name.clone(),
            firmware,
            max_qp: attr.max_qp.max(0) as u32,
            max_qp_wr: attr.max_qp_wr.max(0) as u32,
            max_cqe: attr.max_cqe.max(0) as u32,
            max_srq_wr: match attr.max_srq {
                0 => 0,
                _ => attr.max_srq_wr.max(0) as u32,
            },
            max_mr: attr.max_mr.max(0) as u32,
            max_mr_size: attr.max_mr_size,
            max_sge: attr.max_sge.max(0) as u32,
            max_qp_rd_atom: attr.max_qp_rd_atom.max(0) as u32,
            atomic_cap: match attr.atomic_cap {
                sys::IBV_ATOMIC_HCA => "hca",
                sys::IBV_ATOMIC_GLOB => "global",
                _ => "none",
            },
            max_inline: 0,
            ports,
        })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: `raw` was opened by ibv_open_device and is closed once, after every object
        // made from it (their owners hold the context alive through `Arc`).
        unsafe { (self.lib.close_device)(self.raw) };
    }
}

/// A port state's name, as `ibv_devinfo` prints it.
fn port_state(state: sys::ibv_port_state) -> &'static str {
    match state {
        sys::IBV_PORT_DOWN => "DOWN",
        sys::IBV_PORT_INIT => "INIT",
        sys::IBV_PORT_ARMED => "ARMED",
        sys::IBV_PORT_ACTIVE => "ACTIVE",
        sys::IBV_PORT_ACTIVE_DEFER => "ACTIVE_DEFER",
        _ => "NOP",
    }
}

/// Bytes of an `ibv_mtu` (256 to 4096).
pub(crate) fn mtu_bytes(mtu: sys::ibv_mtu) -> u32 {
    match mtu {
        1..=5 => 128 << mtu,
        _ => 0,
    }
}

/// The `ibv_mtu` of `bytes` (the largest not above it; 256 at least).
pub(crate) fn mtu_of(bytes: u32) -> sys::ibv_mtu {
    (1..=5).rev().find(|&m| 128 << m <= bytes).unwrap_or(1)
}

/// The GID a queue pair on a port with `gids` and `link` uses, or `None` to address by LID
/// alone (InfiniBand within a subnet): on Ethernet, a RoCE v2 GID holding an IPv4 address,
/// else any RoCE v2 GID, else the first GID (RoCE v1). Every rank of a job picks the same way,
/// so both ends of a connection speak the same RoCE version.
pub fn choose_gid(gids: &[GidEntry], link: LinkLayer) -> Option<u32> {
    if link == LinkLayer::InfiniBand {
        return None;
    }
    gids.iter()
        .find(|g| g.is_roce_v2() && g.is_ipv4())
        .or_else(|| gids.iter().find(|g| g.is_roce_v2()))
        .or_else(|| gids.first())
        .map(|g| g.index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gid(index: u32, last: [u8; 6], kind: &str) -> GidEntry {
        let mut g = [0u8; 16];
        if last[0] == 0xfe {
            g[0] = 0xfe;
            g[1] = 0x80;
        }
        g[10..].copy_from_slice(&last);
        GidEntry {
            index,
            gid: g,
            kind: Some(kind.to_owned()),
        }
    }

    #[test]
    fn roce_v2_with_an_ipv4_address_is_preferred() {
        let gids = [
            gid(0, [0xfe, 0, 1, 2, 3, 4], "IB/RoCE v1"),
            gid(1, [0xfe, 0, 1, 2, 3, 4], "RoCE v2"),
            gid(2, [0xff, 0xff, 10, 9, 0, 1], "IB/RoCE v1"),
            gid(3, [0xff, 0xff, 10, 9, 0, 1], "RoCE v2"),
        ];
        assert!(gids[3].is_ipv4() && gids[3].is_roce_v2());
        assert_eq!(choose_gid(&gids, LinkLayer::Ethernet), Some(3));
        assert_eq!(choose_gid(&gids[..2], LinkLayer::Ethernet), Some(1));
        assert_eq!(choose_gid(&gids[..1], LinkLayer::Ethernet), Some(0));
        assert_eq!(choose_gid(&gids, LinkLayer::InfiniBand), None);
        assert_eq!(choose_gid(&[], LinkLayer::Ethernet), None);
    }

    #[test]
    fn mtus_convert_both_ways() {
        assert_eq!(mtu_bytes(sys::IBV_MTU_1024), 1024);
        assert_eq!(mtu_bytes(sys::IBV_MTU_4096), 4096);
        assert_eq!(mtu_of(1024), sys::IBV_MTU_1024);
        assert_eq!(mtu_of(1500), sys::IBV_MTU_1024);
        assert_eq!(mtu_of(100), sys::IBV_MTU_256);
        assert_eq!(
            gid(3, [0xff, 0xff, 10, 9, 0, 1], "RoCE v2").text(),
            "0000:0000:0000:0000:0000:ffff:0a09:0001"
        );
    }
}
