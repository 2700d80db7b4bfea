//! Protocol logic free of I/O: what the synchronization calls decide, separate from how the
//! transports move bytes. Everything here is unit-tested without processes.

pub mod assert;
pub mod barrier;
pub mod epoch;
pub mod layout;
pub mod lockword;
pub mod pscw;
pub mod reduce;
