//! Dynamic windows: memory each rank attaches and detaches while the window lives.
//!
//! A rank's attached memory stays borrowed by the window until the window is freed, detached or
//! not, so no access of another rank, however late, can reach memory handed back to the
//! program. Attaching makes the memory reachable by every transport (the fabric registers it)
//! and writes it into the rank's attach table ([`crate::protocol::attach`]); an origin reads a
//! target's table the first time it addresses memory there that it does not know, keeps the
//! copy, and checks it before every access: where the table is in mapped memory, against the
//! table's generation (a load); over the fabric and verbs, against the target's detach notice
//! in the origin's own control block (a load too). Detaching clears the slot, writes the new
//! generation into the notice word of every origin that reaches this rank through the fabric
//! or verbs and waits until each has it (a write and a flush per such rank), then closes the
//! region's registrations. So an access to detached memory after the detach returned fails at
//! the origin with MPI_ERR_RMA_RANGE and nothing reaches the target: no NIC error, no broken
//! connection. (An access racing the detach, which MPI makes erroneous, is refused by the NIC.)
//!
//! Displacements in a dynamic window are addresses ([`Address`]), as with MPI_BOTTOM.
//!
//! # MPI-4.1: 12.2.4 (MPI_WIN_CREATE_DYNAMIC, MPI_WIN_ATTACH, MPI_WIN_DETACH)

use super::{Flavor, Window};
use crate::error::in_call;
use crate::error::{Error, ErrorClass, Result};
use crate::protocol::attach::{self, Entry, Read, Since, View};
use crate::protocol::layout;
use crate::transport::{Space, Transport};
use crate::wait;
use bytemuck::Pod;
use onesided_shm::Mem;
use std::sync::atomic::Ordering;

/// The address of a byte of memory attached to a dynamic window, in its owner's process
/// (MPI_Get_address of that byte): the displacement RMA calls take for it. A plain value, to
/// send to other ranks through a window or the world; origins check it against the owner's
/// attach table, so a wrong one fails with MPI_ERR_RMA_RANGE and touches no memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, crate::Pod)]
#[repr(transparent)]
pub struct Address(u64);

impl Address {
    /// No address (0): no memory is ever attached there.
    pub const NULL: Address = Address(0);

    /// The displacement of this byte in RMA calls on the dynamic window.
    pub fn disp(self) -> usize {
        self.0 as usize
    }

    /// The address `bytes` further on (MPI_Aint_add).
    pub fn offset(self, bytes: usize) -> Address {
        Address(self.0.wrapping_add(bytes as u64))
    }

    /// Whether this is [`Address::NULL`].
    pub fn is_null(self) -> bool {
        self.0 == 0
    }
}

/// MPI_ERR_RMA_RANGE for `len` bytes at `addr` of `target`, which lie in no attached memory.
fn not_attached(target: usize, addr: u64, len: usize) -> Error {
    Error::new(
        ErrorClass::RmaRange,
        format!("{len} bytes at address {addr:#x} are not inside memory rank {target} attached"),
    )
}

impl<'a> Window<'a> {
    /// MPI_ERR_RMA_FLAVOR unless this is a dynamic window.
    fn dynamic_only(&self, call: &str) -> Result<()> {
        match self.flavor {
            Flavor::Dynamic => Ok(()),
            other => Err(Error::new(
                ErrorClass::RmaFlavor,
                format!("{call} on a window of flavor {other:?}, not a dynamic one"),
            )),
        }
    }

    /// Attach `memory` to this dynamic window, so that every rank can reach it at the
    /// [`Address`] returned (the address of its first byte). The memory stays borrowed by the
    /// window until the window is freed, even once detached. Local; MPI_ERR_RMA_FLAVOR on other
    /// windows, MPI_ERR_RMA_ATTACH once [`crate::MAX_ATTACH`] regions are attached.
    ///
    /// # MPI-4.1: 12.2.4 (MPI_WIN_ATTACH)
    pub fn attach<T: Pod>(&self, memory: &'a mut [T]) -> Result<Address> {
        in_call(Some(self.rank()), "MPI_Win_attach", || {
            self.dynamic_only("attach")?;
            let mem = Mem::from_slice(bytemuck::cast_slice_mut(memory));
            let addr = mem.addr() as u64;
            let mut entry = Entry {
                addr,
                len: mem.len() as u64,
                base: 0,
                key: 0,
            };
            // The network's base and key address it (shared memory needs none).
            let registered = self.transports.iter().try_for_each(|t| {
                let (base, key) = t.attach(mem.clone())?;
                if (base, key) != (0, 0) {
                    (entry.base, entry.key) = (base, key);
                }
                Ok(())
            });
            let slot = registered.and_then(|()| self.attached.borrow_mut().slots.attach(entry));
            match slot {
                Ok(slot) => self.publish(slot, Some(&entry)).map(|_| Address(addr)),
                Err(e) => {
                    self.unregister(addr);
                    Err(e)
                }
            }
        })
    }

    /// Detach the memory attached at `base`: no rank may reach it any more (it stays borrowed
    /// until the window is freed). Local; MPI_ERR_RMA_ATTACH where no memory attached starts at
    /// `base`, MPI_ERR_RMA_FLAVOR on other windows.
    ///
    /// # MPI-4.1: 12.2.4 (MPI_WIN_DETACH)
    pub fn detach(&self, base: Address) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Win_detach", || {
            self.dynamic_only("detach")?;
            let (slot, _) = self.attached.borrow_mut().slots.detach(base.0)?;
            let told = self
                .publish(slot, None)
                .and_then(|generation| self.announce_detach(generation));
            self.unregister(base.0);
            told
        })
    }

    /// Write `generation` (this rank's table just after a detach) into this rank's detach
    /// notice here (for its own accesses through the fabric) and at every live rank that
    /// reaches it without loads, and wait until each has it. A rank that failed is left out:
    /// it makes no more accesses.
    fn announce_detach(&self, generation: u64) -> Result<()> {
        let me = self.rank();
        let notice = layout::notice_slot(self.comm.size(), me);
        self.ctrl
            .atomic_u64(notice)?
            .store(generation, Ordering::Release);
        let word = generation.to_le_bytes();
        let told: Vec<usize> = (0..self.comm.size())
            .filter(|&t| t != me && !self.route(t).caps().load_store && !self.peers.gone(t))
            .collect();
        let mut first = Ok(());
        let mut keep = |t: usize, r: Result<()>| {
            if let Err(e) = r
                && first.is_ok()
                && !self.peers.gone(t)
            {
                first = Err(e);
            }
        };
        for &t in &told {
            keep(t, self.route(t).put(t, Space::Control, notice, &word));
        }
        for &t in &told {
            keep(t, self.route(t).flush(t));
        }
        first
    }

    /// Make the memory attached at `addr` unreachable by every transport.
    fn unregister(&self, addr: u64) {
        self.transports.iter().for_each(|t| t.detach(addr));
    }

    /// Where the attach table is in every control block of this window.
    fn attach_table(&self) -> usize {
        attach::table_offset(self.comm.size())
    }

    /// Write slot `slot` of this rank's attach table (`None`: clear it), check word last when
    /// writing and first when clearing, then bump the table's generation; the new generation.
    fn publish(&self, slot: usize, entry: Option<&Entry>) -> Result<u64> {
        let ctrl = &self.ctrl;
        let table = self.attach_table();
        let (at, check_at) = attach::slot_offset(slot);
        let check = ctrl.atomic_u64(table + check_at)?;
        match entry {
            Some(e) => {
                let bytes = e.encode();
                ctrl.write(table + at, &bytes[..check_at - at])?;
                let word = u64::from_le_bytes(bytes[check_at - at..].try_into().expect("8"));
                check.store(word, Ordering::Release);
            }
            None => check.store(0, Ordering::Release),
        }
        Ok(ctrl.atomic_u64(table)?.fetch_add(1, Ordering::SeqCst) + 1)
    }

    /// Where `len` bytes at address `addr` of `target` are: in the copy of its attach table if
    /// that still holds, else in the table read again; MPI_ERR_RMA_RANGE where no attached
    /// memory holds them.
    pub(super) fn attached_at(
        &self,
        target: usize,
        addr: u64,
        len: usize,
    ) -> Result<(Space, usize)> {
        let route = self.route(target);
        let mut known = self.attached.borrow_mut();
        let view = &mut known.views[target];
        if let Some(v) = view.as_ref()
            && !v.holds(self.since(route, target)?)
        {
            *view = None;
        }
        if let Some((e, off)) = view.as_ref().and_then(|v| v.find(addr, len)) {
            return Ok((Space::Attached(e), off));
        }
        let fresh = self.read_table(route, target)?;
        let found = fresh.find(addr, len);
        *view = Some(fresh);
        let (e, off) = found.ok_or_else(|| not_attached(target, addr, len))?;
        Ok((Space::Attached(e), off))
    }

    /// What changed in `target`'s table, as this rank can tell without a round trip: its
    /// generation, where `route` maps it; else the detach notice `target` left here.
    fn since(&self, route: &dyn Transport, target: usize) -> Result<Since> {
        if route.caps().load_store {
            let mut word = [0u8; 8];
            route.get(target, Space::Control, self.attach_table(), &mut word)?;
            return Ok(Since::Generation(u64::from_le_bytes(word)));
        }
        let notice = layout::notice_slot(self.comm.size(), target);
        let word = self.ctrl.atomic_u64(notice)?;
        Ok(Since::Detached(word.load(Ordering::Acquire)))
    }

    /// Read `target`'s attach table, again while a slot changes under the read.
    fn read_table(&self, route: &dyn Transport, target: usize) -> Result<View> {
        let table = self.attach_table();
        let mut bytes = vec![0u8; attach::TABLE_LEN];
        wait::retry(route, &|| self.peers.all_alive(), || {
            route.get(target, Space::Control, table, &mut bytes)?;
            Ok(match attach::decode(&bytes) {
                Read::Table(view) => Some(view),
                Read::Torn => None,
            })
        })
    }

    /// Where `len` bytes at address `addr` of this rank's attached memory are.
    fn own_attached(&self, addr: usize, len: usize) -> Result<(Space, usize)> {
        let found = self.attached.borrow().slots.find(addr as u64, len);
        let (e, off) = found.ok_or_else(|| not_attached(self.rank(), addr as u64, len))?;
        Ok((Space::Attached(e), off))
    }

    /// Load bytes at address `addr` of this rank's attached memory.
    pub(super) fn read_attached(&self, addr: usize, out: &mut [u8]) -> Result<()> {
        let (space, off) = self.own_attached(addr, out.len())?;
        self.node().get(self.rank(), space, off, out)
    }

    /// Store bytes at address `addr` of this rank's attached memory.
    pub(super) fn write_attached(&self, addr: usize, data: &[u8]) -> Result<()> {
        let (space, off) = self.own_attached(addr, data.len())?;
        self.node().put(self.rank(), space, off, data)
    }
}
