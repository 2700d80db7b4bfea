//! The network side of a window: the fabric transport where this build has it, a clear error
//! where it does not.

use super::Attach;
use crate::error::Result;
use crate::wait::Peers;
use crate::world::Comm;
use onesided_shm::Mem;

/// Collective: connect every rank of `comm` through the fabric, with this rank's control block
/// `ctrl` and window memory `data` registered. `peers` watches the ranks.
#[cfg(have_libfabric)]
pub(crate) fn connect<'a>(
    comm: &Comm,
    ctrl: Mem<'static>,
    data: Mem<'a>,
    peers: Peers,
) -> Result<Box<dyn Attach<'a> + 'a>> {
    let config = comm.job().config.fabric();
    let t = super::fabric::FabricTransport::connect(comm, config, ctrl, data, peers)?;
    Ok(Box::new(t))
}

/// Collective: fails on every rank, since this build has no fabric transport.
#[cfg(not(have_libfabric))]
pub(crate) fn connect<'a>(
    comm: &Comm,
    _ctrl: Mem<'static>,
    _data: Mem<'a>,
    _peers: Peers,
) -> Result<Box<dyn Attach<'a> + 'a>> {
    use crate::error::{Error, ErrorClass};
    comm.agree(
        "opening the fabric",
        Err(Error::new(
            ErrorClass::Other,
            "this window needs the fabric transport (ranks on several nodes, or \
             ONESIDED_TRANSPORT=fabric), but onesided was built without libfabric: install \
             libfabric-dev, pkg-config and libclang, then rebuild",
        )),
    )
}

/// Memory registered with the NIC ahead of the windows that will use it (alloc_mem memory).
#[derive(Debug)]
pub(crate) struct Registered {
    #[cfg(have_libfabric)]
    _reg: super::fabric::prereg::Prereg,
}

/// Register `mem` with this thread's endpoint where windows of `comm` use the fabric (ranks on
/// several nodes, or the fabric forced); `None` where they do not, or this build has no fabric.
pub(crate) fn register_ahead(comm: &Comm, mem: Mem<'static>) -> Result<Option<Registered>> {
    use crate::config::TransportChoice;
    let me = comm.node_of(comm.rank());
    let forced = comm.job().config.transport_choice() == TransportChoice::Fabric;
    if mem.is_empty() || !forced && (0..comm.size()).all(|r| comm.node_of(r) == me) {
        return Ok(None);
    }
    #[cfg(have_libfabric)]
    {
        let config = comm.job().config.fabric();
        let reg = super::fabric::prereg::register(config, mem)?;
        Ok(Some(Registered { _reg: reg }))
    }
    #[cfg(not(have_libfabric))]
    {
        let _ = mem;
        Ok(None)
    }
}
