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

pub use bytemuck::Pod;
pub use config::{Atomics, Config, MrMode, ProcessManager, TransportChoice};
pub use error::{Error, ErrorClass, Result};
pub use group::Group;
pub use info::Info;
pub use protocol::assert::Assert;
pub use protocol::lockword::LockType;
pub use window::{AtomicElem, Flavor, Model, Op, SharedRegion, Window};
pub use world::{Comm, World};
