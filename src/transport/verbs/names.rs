//! The verbs names of onesided's: a verbs failure as an MPI error, an accumulate as the NIC
//! atomic that runs it, the ranks' state as what a wait on one of them should do.

use crate::error::{Error, ErrorClass};
use crate::peers::Peers;
use crate::protocol::reduce::Op;
use crate::transport::{AccOp, Accumulate};
use onesided_verbs as ib;

/// A verbs failure as an MPI error: a peer that cannot be reached is a failed process;
/// anything else is MPI_ERR_OTHER with the device's words.
pub(super) fn ib_err(e: ib::VerbsError) -> Error {
    let class = match e.is_unreachable() {
        true => ErrorClass::ProcFailed,
        false => ErrorClass::Other,
    };
    Error::new(class, format!("verbs: {e}")).caused_by(e)
}

/// The NIC atomic of one element's accumulate (on the paths `NativeOps::verbs` allows: 64-bit
/// fetch-add, atomic read, compare-and-swap).
pub(super) fn nic_op(acc: &Accumulate) -> ib::Atomic {
    match acc.op {
        AccOp::CompareSwap { compare } => ib::Atomic::CompareSwap {
            compare,
            swap: acc.operand,
        },
        AccOp::Apply(Op::NoOp) => ib::Atomic::FetchAdd(0),
        AccOp::Apply(_) => ib::Atomic::FetchAdd(acc.operand),
    }
}

/// How a wait on `target` should go on: give up once the job has a failure or the rank's
/// process is gone.
pub(super) fn waiting(peers: &Peers, target: usize) -> ib::Waiting {
    match peers.job_alive().is_err() || peers.gone(target) {
        true => ib::Waiting::GiveUp,
        false => ib::Waiting::Poll,
    }
}
