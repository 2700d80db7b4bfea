//! Accumulates the target serves (`ONESIDED_FABRIC_ATOMICS=served`, and `auto` over
//! tcp;ofi_rxm): the origin sends the operands in a call (`onesided_fabric`'s
//! `Endpoint::call`), and the target applies them to its memory under one lock per endpoint,
//! plain arithmetic over the whole run, and answers with the old values where the call
//! fetches (`protocol::served`). Every accumulate of a window whose atomics go through the
//! fabric takes this path then, the target's own included, so they are atomic with each other;
//! lock words and barriers keep the provider's atomics, on other words.
//!
//! Where a provider runs atomics in software at the target anyway (tcp;ofi_rxm, shm), one
//! element costs one round trip either way; a run of elements costs the target a plain loop
//! instead of a locked compare-and-swap per element.

use super::FabricTransport;
use super::names::fi_err;
use crate::error::{Error, ErrorClass, Result};
use crate::protocol::reduce::Elem;
use crate::protocol::served::{self, Request, Status};
use crate::transport::{AccOp, Accumulate, AccumulateMany, Space};
use onesided_fabric as fi;

/// Most operand bytes of one call (whole elements of any type).
const PIECE: usize = (fi::CALL_MAX - served::HEADER) / 8 * 8;

impl FabricTransport<'_> {
    /// One element's accumulate, served by `target`; the old value's bits.
    pub(super) fn served_one(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: Accumulate,
    ) -> Result<u64> {
        let size = acc.elem.size();
        let operand = acc.operand.to_le_bytes();
        let mut old = [0u8; 8];
        self.call(
            target,
            space,
            offset,
            acc.elem,
            acc.op,
            &operand[..size],
            0,
            Some(&mut old[..size]),
        )?;
        Ok(u64::from_le_bytes(old))
    }

    /// Many elements' accumulates, served by `target` in calls of at most [`PIECE`] bytes; the
    /// target takes its lock once per call, or once per the window's accumulate granularity
    /// (rounded to whole elements) where one is set, within the call. The old values land in
    /// `fetched` when given.
    pub(super) fn served_many(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: AccumulateMany<'_>,
        mut fetched: Option<&mut [u8]>,
    ) -> Result<()> {
        let whole = AccumulateMany {
            granularity: 0,
            ..acc
        };
        let (piece, len) = (whole.piece(PIECE), acc.operands.len());
        let hold = match acc.granularity {
            0 => 0,
            _ => acc.piece(PIECE),
        };
        for start in (0..len).step_by(piece) {
            let end = (start + piece).min(len);
            let out = fetched.as_deref_mut().map(|f| &mut f[start..end]);
            let operands = &acc.operands[start..end];
            self.call(
                target,
                space,
                offset + start,
                acc.elem,
                AccOp::Apply(acc.op),
                operands,
                hold,
                out,
            )?;
        }
        Ok(())
    }

    /// One call: `op` with `operands` to the elements at `offset` of `target`'s `space`, the
    /// target holding its lock for `hold` bytes at a time (0: the whole call); the old bytes
    /// into `fetched` when given.
    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        elem: Elem,
        op: AccOp,
        operands: &[u8],
        hold: usize,
        fetched: Option<&mut [u8]>,
    ) -> Result<()> {
        let to = self.at(target, space, offset, operands.len())?;
        let request = Request {
            elem,
            op,
            fetch: fetched.is_some(),
            count: operands.len() / elem.size(),
            key: to.key,
            addr: to.addr,
            hold,
        };
        let live = || self.alive(target);
        let ep = &self.res.ep;
        let parts = [&request.header()[..], operands];
        let msg = ep
            .call(to.peer, self.world_rank, &parts, &live)
            .map_err(fi_err)?;
        let refused = |what: &str| {
            Error::new(
                ErrorClass::Other,
                format!("rank {target} answered an accumulate with {what}"),
            )
        };
        let (status, old) = served::read_answer(&msg).ok_or_else(|| refused("no answer"))?;
        match status {
            Status::Done => {}
            Status::Range => {
                return Err(Error::new(
                    ErrorClass::RmaRange,
                    format!("rank {target} holds no registered memory where the accumulate goes"),
                ));
            }
            Status::Malformed => return Err(refused("\"malformed\"")),
        }
        if let Some(f) = fetched {
            if old.len() != f.len() {
                return Err(refused("old values of the wrong length"));
            }
            f.copy_from_slice(old);
        }
        Ok(())
    }
}
