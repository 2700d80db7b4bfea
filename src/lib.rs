#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod alloc;
mod codec;
mod config;
mod cpu_list;
mod error;
mod group;
mod info;
mod liveness;
mod log;
mod mesh;
mod peers;
mod pm;
mod protocol;
mod transport;
mod wait;
mod window;
mod world;

// The bootstrap protocol of the `onesided` launcher: private, unless the command itself (crate
// `onesided-cli`) or its tests build this crate with the `launcher` feature.
#[cfg(not(feature = "launcher"))]
mod boot;
#[cfg(feature = "launcher")]
#[doc(hidden)]
pub mod boot;
#[cfg(feature = "launcher")]
#[doc(hidden)]
pub mod launcher;

// `#[derive(Pod)]` names `::onesided`, also for the crate's own types.
extern crate self as onesided;

pub use alloc::AllocMem;
pub use bytemuck::{Pod, Zeroable};
pub use config::{Atomics, Config, MrMode, ProcessManager, Progress, Threads, TransportChoice};
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
pub use protocol::attach::MAX_ATTACH;
pub use protocol::lockword::LockType;
pub use window::{
    Address, AtomicElem, Flavor, HandleRequest, Layout, Model, Op, Request, SharedRegion,
    TypedWindow, Window, WindowHandle,
};
pub use world::{Comm, ThreadLevel, World};
