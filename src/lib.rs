#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub mod bench;
pub mod boot;
pub mod config;
pub mod error;
pub mod group;
pub mod info;
pub mod launch;
pub mod protocol;
pub mod transport;
pub mod window;
pub mod world;

mod codec;
mod liveness;
mod mesh;
mod pm;
mod wait;

pub use bytemuck::{Pod, Zeroable};
pub use config::{Atomics, Config, MrMode, ProcessManager, TransportChoice};
pub use error::{Error, ErrorClass, Result};
pub use group::Group;
pub use info::Info;
/// `#[derive(onesided::Pod)]`: a user's element type for put and get, with only `onesided` as
/// a dependency (`examples/particles.rs` moves one between ranks). The struct needs
/// `#[repr(C)]` (or `transparent`), `Pod` fields and no padding:
///
/// ```
/// #[derive(Clone, Copy, onesided::Pod)]
/// #[repr(C)]
/// struct Sample {
///     time: f64,
///     value: [f32; 2],
/// }
/// fn moved_as_bytes<T: onesided::Pod>(_: &[T]) {}
/// moved_as_bytes(&[Sample { time: 1.0, value: [2.0, 3.0] }]);
/// assert_eq!(std::mem::size_of::<Sample>(), 16);
/// ```
///
/// Padding is refused when the program is compiled:
///
/// ```compile_fail
/// #[derive(Clone, Copy, onesided::Pod)]
/// #[repr(C)]
/// struct Padded {
///     flag: u8,
///     count: u64,
/// }
/// ```
///
/// and so is a struct whose layout the compiler may change:
///
/// ```compile_fail
/// #[derive(Clone, Copy, onesided::Pod)]
/// struct Unfixed {
///     count: u64,
/// }
/// ```
pub use onesided_derive::Pod;
pub use protocol::assert::Assert;
pub use protocol::lockword::LockType;
pub use window::{AtomicElem, Flavor, Model, Op, SharedRegion, Window};
pub use world::{Comm, World};
