//! libfabric's names for onesided's: a libfabric failure as an MPI error, an element type as a
//! libfabric datatype, an operation as a libfabric atomic operation.

use crate::error::{Error, ErrorClass};
use crate::protocol::reduce::{Elem, Op};
use onesided_fabric as fi;

/// Text of a libfabric failure as an MPI error: a peer that cannot be reached is a failed
/// process; anything else is MPI_ERR_OTHER with libfabric's words.
pub(super) fn fi_err(e: fi::FiError) -> Error {
    let class = if e.is_unreachable() {
        ErrorClass::ProcFailed
    } else {
        ErrorClass::Other
    };
    Error::new(class, format!("fabric: {e}")).caused_by(e)
}

/// The libfabric datatype of `e`.
pub(super) fn datatype(e: Elem) -> fi::Datatype {
    match e {
        Elem::I32 => fi::Datatype::I32,
        Elem::U32 => fi::Datatype::U32,
        Elem::I64 => fi::Datatype::I64,
        Elem::U64 => fi::Datatype::U64,
        Elem::F32 => fi::Datatype::F32,
        Elem::F64 => fi::Datatype::F64,
    }
}

/// The libfabric operation of `op`.
pub(super) fn atomic_op(op: Op) -> fi::AtomicOp {
    match op {
        Op::Sum => fi::AtomicOp::Sum,
        Op::Prod => fi::AtomicOp::Prod,
        Op::Min => fi::AtomicOp::Min,
        Op::Max => fi::AtomicOp::Max,
        Op::Band => fi::AtomicOp::Band,
        Op::Bor => fi::AtomicOp::Bor,
        Op::Bxor => fi::AtomicOp::Bxor,
        Op::Replace => fi::AtomicOp::Write,
        Op::NoOp => fi::AtomicOp::Read,
    }
}
