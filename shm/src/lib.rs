//! Raw shared-memory and process pieces of onesided. Every `unsafe` block of the project lives
//! in this crate or in `fabric/`; what it exports is safe to call.

mod aligned;
pub mod block;
pub mod cleanup;
pub mod cma;
pub mod futex;
pub mod mem;
pub mod process;
pub mod segment;

pub use block::Block;
pub use mem::{Mem, OutOfRange, SyncMem};
pub use segment::{FileId, Segment};
