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
        let call = Calls {
            target,
            space,
            offset,
            elem: acc.elem,
            op: acc.op,
            piece: size,
            hold: 0,
        };
        self.call(&call, &operand[..size], Some(&mut old[..size]))?;
        Ok(u64::from_le_bytes(old))
    }

    /// Many elements' accumulates, served by `target` in calls of at most one eager message
    /// each (`Resources::call_piece`), several in flight at once where pieces are short
    /// ([`in_flight`]); the target takes its lock once per call, or once per the window's
    /// accumulate granularity (rounded to whole elements) where one is set, within the call. The
    /// old values land in `fetched` when given.
    pub(super) fn served_many(
        &self,
        target: usize,
        space: Space,
        offset: usize,
        acc: AccumulateMany<'_>,
        fetched: Option<&mut [u8]>,
    ) -> Result<()> {
        let whole = AccumulateMany {
            granularity: 0,
            ..acc
        };
        let most = self.res.call_piece;
        let call = Calls {
            target,
            space,
            offset,
            elem: acc.elem,
            op: AccOp::Apply(acc.op),
            piece: whole.piece(most),
            hold: match acc.granularity {
                0 => 0,
                _ => acc.piece(most),
            },
        };
        self.call(&call, acc.operands, fetched)
    }

    /// `call.op` with `operands` to the elements at `call.offset` of the target's space, in
    /// calls of `call.piece` bytes; the old bytes into `fetched` when given.
    fn call(&self, call: &Calls, operands: &[u8], fetched: Option<&mut [u8]>) -> Result<()> {
        let (target, fetch) = (call.target, fetched.is_some());
        let mut heads = Vec::new();
        for (i, ops) in operands.chunks(call.piece).enumerate() {
            let to = self.at(target, call.space, call.offset + i * call.piece, ops.len())?;
            let request = Request {
                elem: call.elem,
                op: call.op,
                fetch,
                count: ops.len() / call.elem.size(),
                key: to.key,
                addr: to.addr,
                hold: call.hold,
            };
            heads.push((to.peer, request.header()));
        }
        let Some(&(peer, _)) = heads.first() else {
            return Ok(());
        };
        let parts: Vec<[&[u8]; 2]> = heads
            .iter()
            .zip(operands.chunks(call.piece))
            .map(|((_, h), ops)| [&h[..], ops])
            .collect();
        let bodies: Vec<&[&[u8]]> = parts.iter().map(|p| &p[..]).collect();
        let live = || self.alive(target);
        let answers = self
            .res
            .ep
            .calls(peer, self.world_rank, &bodies, in_flight(call.piece), &live)
            .map_err(fi_err)?;
        let refused = |what: &str| {
            Error::new(
                ErrorClass::Other,
                format!("rank {target} answered an accumulate with {what}"),
            )
        };
        let mut outs = fetched.map(|f| f.chunks_mut(call.piece));
        for msg in &answers {
            let (status, old) = served::read_answer(msg).ok_or_else(|| refused("no answer"))?;
            match status {
                Status::Done => {}
                Status::Range => {
                    return Err(Error::new(
                        ErrorClass::RmaRange,
                        format!(
                            "rank {target} holds no registered memory where the accumulate goes"
                        ),
                    ));
                }
                Status::Malformed => return Err(refused("\"malformed\"")),
            }
            if let Some(outs) = outs.as_mut() {
                match outs.next() {
                    Some(out) if out.len() == old.len() => out.copy_from_slice(old),
                    _ => return Err(refused("old values of the wrong length")),
                }
            }
        }
        Ok(())
    }
}

/// Calls of `piece` operand bytes to keep in flight at once: four where the eager protocol cut
/// the pieces below half of what a call carries, else one. Over tcp;ofi_rxm with 16 KiB
/// buffers four in flight took 64 KiB in 70-74 us against 89-110 one after the other; with 33
/// KiB buffers two calls of 32 KiB in flight took 69-75 us against 48-54 one after the other
/// (`acc_latency -T double`, 3 interleaved rounds).
fn in_flight(piece: usize) -> usize {
    match piece < fi::CALL_MAX / 2 {
        true => 4,
        false => 1,
    }
}

/// Where the calls of one accumulate go, and how it is cut.
struct Calls {
    target: usize,
    space: Space,
    offset: usize,
    elem: Elem,
    op: AccOp,
    /// Operand bytes per call, whole elements.
    piece: usize,
    /// Bytes the target applies per hold of its lock (0: a whole call).
    hold: usize,
}
