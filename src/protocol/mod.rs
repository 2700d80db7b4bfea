//! Protocol logic free of I/O: what the synchronization calls decide, separate from how the
//! transports move bytes. Everything here is unit-tested without processes.

pub mod assert;
pub mod attach;
pub mod barrier;
pub mod elements;
pub mod epoch;
pub mod layout;
pub mod lockword;
pub mod native;
pub mod passive;
pub mod pscw;
pub mod reduce;
#[cfg(any(have_libfabric, test))]
pub mod served;

use crate::error::{Error, ErrorClass};

/// MPI_ERR_RMA_SYNC: a synchronization or RMA call at the wrong time.
pub(crate) fn sync_err(msg: impl Into<String>) -> Error {
    Error::new(ErrorClass::RmaSync, msg)
}
