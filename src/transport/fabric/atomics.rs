//! Accumulates on the NIC: one element's fetching atomic, many elements' atomics with counts,
//! and the path an accumulate takes (the NIC, or the target's accumulate lock).

use super::FabricTransport;
use super::names::{atomic_op, datatype, fi_err};
use crate::error::Result;
use crate::protocol::reduce::Elem;
use crate::transport::{AccOp, Accumulate, AccumulateMany, Kind, Path, Pending, Space, path_at};

impl FabricTransport<'_> {
    /// One element's accumulate on the NIC.
    pub(super) fn native(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: Accumulate,
    ) -> Result<u64> {
        let size = acc.elem.size();
        let to = self.at(target, space, offset, size)?;
        let (dt, live) = (datatype(acc.elem), || self.alive(target));
        let operand = acc.operand.to_le_bytes();
        let mut old = [0u8; 8];
        match acc.op {
            AccOp::CompareSwap { compare } => {
                let compare = compare.to_le_bytes();
                self.res
                    .ep
                    .compare_swap(dt, &compare, &operand, &mut old, to, &live)
            }
            AccOp::Apply(op) => {
                let result = &mut old[..];
                self.res
                    .ep
                    .fetch_atomic(dt, atomic_op(op), &operand, result, to, &live)
            }
        }
        .map_err(fi_err)?;
        Ok(u64::from_le_bytes(old))
    }

    /// The accumulates of `acc` on the NIC with element counts, all in flight; the old values
    /// fetched when `fetch` (handed over by `finish`).
    pub(super) fn start_native(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: AccumulateMany<'_>,
        fetch: bool,
    ) -> Result<Pending> {
        let to = self.at(target, space, offset, acc.operands.len())?;
        if acc.operands.is_empty() {
            return Ok(Pending::Done);
        }
        let (dt, op) = (datatype(acc.elem), atomic_op(acc.op));
        let live = || self.alive(target);
        let ep = &self.res.ep;
        // Nothing to fetch: the non-fetching form halves the bytes, where the provider allows.
        let fetch = fetch || !ep.plain_atomics();
        let t = ep.start_atomic_many(dt, op, acc.operands, fetch, to, &live);
        Ok(Pending::Started(target, Box::new(t.map_err(fi_err)?)))
    }

    /// How accumulates of `kind` on elements of `elem` at `offset` of `target`'s `space` go
    /// (`transport::path_at`: where the element lies in the target's memory decides).
    pub(super) fn path(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        elem: Elem,
        kind: Kind,
        same_op: bool,
    ) -> Result<Path> {
        let t = self.target(target)?;
        let lead = match space {
            Space::Attached(e) => e.addr,
            _ => t.lead,
        };
        let native = self.caps.native_atomics;
        Ok(path_at(
            native,
            lead.wrapping_add(offset as u64),
            elem,
            kind,
            same_op,
        ))
    }
}
