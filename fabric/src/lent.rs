//! How a caller's buffer reaches the NIC for one blocking call ([`Lent`]): as it is, registered
//! for the call or in the registration cache (`cache.rs`), or through the bounce buffer.

use crate::mr::Mr;
use std::ptr;
use std::sync::Arc;

/// How a caller's buffer reaches the NIC for one blocking call (`Endpoint::lend`).
pub(crate) enum Lent {
    /// As it is, with this descriptor (null where none is needed).
    Direct(*mut libc::c_void),
    /// Registered for the call.
    Own(Mr),
    /// Registered in the endpoint's registration cache (`cache.rs`).
    Cached(Arc<Mr>),
    /// Copied through the endpoint's bounce buffer.
    Bounce,
}

impl Lent {
    /// The descriptor to pass with the caller's buffer (not for `Bounce`).
    pub(crate) fn desc(&self) -> *mut libc::c_void {
        match self {
            Lent::Direct(desc) => *desc,
            Lent::Own(mr) => mr.desc(),
            Lent::Cached(mr) => mr.desc(),
            Lent::Bounce => ptr::null_mut(),
        }
    }
}
