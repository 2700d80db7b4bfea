//! Accumulates emulated under the target's accumulate lock word: where an element's operation
//! cannot run as one CPU or NIC atomic (unaligned, an operation the NIC lacks, memory reached
//! only by copies), the origin takes the lock, reads, combines, writes back and releases.

use super::{Accumulate, AccumulateMany, Amo, Space, Transport, bits};
use crate::error::Result;
use crate::protocol::layout;
use crate::protocol::reduce::combine_all;

/// Read-modify-write `len` bytes at `offset` of `target`'s `space` under its accumulate
/// lock word ([`layout::ACC_LOCK`]): take it (compare-and-swap 0 to 1), read the bytes, let
/// `update` change a copy, write it back if it differs and complete it at the target, release;
/// returns the old bytes. Works at any offset and on memory that `t` reaches only by copies,
/// and is atomic with respect to every other accumulate on the bytes as long as every origin
/// takes this path for them (each transport decides by the element's address and the window,
/// the same way on every rank). `watch` fails once a rank the wait for the lock depends on is
/// gone.
///
/// # MPI-4.1: 12.7.1 (atomicity of accumulates to the same location and datatype)
fn locked(
    t: &dyn Transport,
    watch: &dyn Fn() -> Result<()>,
    target: usize,
    space: Space,
    offset: usize,
    len: usize,
    update: impl FnOnce(&mut [u8]),
) -> Result<Vec<u8>> {
    under_acc_lock(t, watch, target, || {
        let mut old = vec![0u8; len];
        t.get(target, space, offset, &mut old)?;
        let mut new = old.clone();
        update(&mut new);
        if new != old {
            t.put(target, space, offset, &new)?;
            t.flush(target)?;
        }
        Ok(old)
    })
}

/// Run `body` holding `target`'s accumulate lock word ([`layout::ACC_LOCK`]): take it
/// (compare-and-swap 0 to 1, retried until it is free), run, release; the lock is released
/// also when `body` fails. `watch` as in [`locked`].
pub(crate) fn under_acc_lock<R>(
    t: &dyn Transport,
    watch: &dyn Fn() -> Result<()>,
    target: usize,
    body: impl FnOnce() -> Result<R>,
) -> Result<R> {
    let lock = |op| t.amo(target, Space::Control, layout::ACC_LOCK, op);
    crate::wait::retry(t, watch, || {
        Ok((lock(Amo::CompareSwap {
            compare: 0,
            swap: 1,
        })? == 0)
            .then_some(()))
    })?;
    let done = body();
    let released = lock(Amo::CompareSwap {
        compare: 1,
        swap: 0,
    });
    let done = done?;
    released?;
    Ok(done)
}

/// One element's accumulate emulated under `target`'s accumulate lock word (see [`locked`]).
pub(crate) fn locked_accumulate(
    t: &dyn Transport,
    watch: &dyn Fn() -> Result<()>,
    target: usize,
    space: Space,
    offset: usize,
    acc: Accumulate,
) -> Result<u64> {
    let size = acc.elem.size();
    let old = locked(t, watch, target, space, offset, size, |b| {
        b.copy_from_slice(&acc.next(bits(b)).to_le_bytes()[..size]);
    })?;
    Ok(bits(&old))
}

/// Many elements' accumulates emulated under `target`'s accumulate lock word, taken once per
/// `acc.granularity` bytes (once for the call where that is 0; see [`locked`]); the old bytes
/// land in `fetched` when given.
pub(crate) fn locked_accumulate_many(
    t: &dyn Transport,
    watch: &dyn Fn() -> Result<()>,
    target: usize,
    space: Space,
    offset: usize,
    acc: AccumulateMany<'_>,
    mut fetched: Option<&mut [u8]>,
) -> Result<()> {
    let len = acc.operands.len();
    let chunk = acc.piece(len);
    for start in (0..len).step_by(chunk) {
        let end = (start + chunk).min(len);
        let part = AccumulateMany {
            operands: &acc.operands[start..end],
            ..acc
        };
        let old = locked(t, watch, target, space, offset + start, end - start, |b| {
            combine_all(part.elem, part.op, b, part.operands)
        })?;
        if let Some(f) = fetched.as_deref_mut() {
            f[start..end].copy_from_slice(&old);
        }
    }
    Ok(())
}
