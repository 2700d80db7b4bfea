//! What the NIC transports (fabric, direct verbs) share: which path an accumulate takes by its
//! element's address, and their errors for a rank they do not serve, an access outside a
//! target's memory and a request another transport started. Built only with one of them.

use super::{NativeOps, Path};
use crate::error::{Error, ErrorClass};
use crate::protocol::native::Kind;
use crate::protocol::reduce::Elem;

/// How accumulates of `kind` on elements of `elem` go where the first of them lies at address
/// `addr` of the target's memory: as `native` says where that element is aligned (it decides
/// for its neighbours), else under the target's accumulate lock. Every origin decides the same
/// way for an element, so accumulates that may meet on it never mix the NIC and the lock.
pub(crate) fn path_at(native: NativeOps, addr: u64, elem: Elem, kind: Kind, same_op: bool) -> Path {
    match addr.is_multiple_of(elem.size() as u64) {
        true => native.path(elem, kind, same_op),
        false => Path::Locked,
    }
}

/// MPI_ERR_RANK for a rank `transport` does not serve (out of line: the calls that check
/// inline).
#[cold]
pub(crate) fn unserved(transport: &str, target: usize) -> Error {
    Error::new(
        ErrorClass::Rank,
        format!("rank {target} not served by {transport}"),
    )
}

/// MPI_ERR_RMA_RANGE for `len` bytes at `offset` of a space of `size` bytes of `target`.
#[cold]
pub(crate) fn outside(target: usize, offset: usize, len: usize, size: usize) -> Error {
    Error::new(
        ErrorClass::RmaRange,
        format!("{len} bytes at offset {offset} outside rank {target}'s {size} bytes"),
    )
}

/// A request that another transport started, handed to `transport`.
#[cold]
pub(crate) fn foreign(transport: &str) -> Error {
    Error::new(
        ErrorClass::Intern,
        format!("a request of another transport handed to {transport}"),
    )
}
