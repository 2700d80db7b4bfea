//! The network side of a window: direct verbs or the fabric transport, as the configuration and
//! the ranks' devices decide, where this build has them; a clear error where it does not.
//!
//! `ONESIDED_TRANSPORT=fabric` and `=verbs` name the transport. Under `auto` (windows spanning
//! nodes), direct verbs serves the window where every rank of it can open a verbs device, since
//! it reaches the NIC with fewer instructions per operation than libfabric's verbs;ofi_rxm and
//! needs no progress thread (`docs/transports.md`); elsewhere the fabric does.

use super::Opened;
use super::which;
use crate::config::TransportChoice;
use crate::error::Result;
#[cfg(any(not(have_ibverbs), not(have_libfabric)))]
use crate::error::{Error, ErrorClass};
use crate::peers::Peers;
use crate::world::Comm;
use onesided_shm::Mem;

/// A network transport opened for a window, waiting for the ranks' keys.
pub(crate) type OpenedNet<'a> = Box<dyn Opened<'a> + 'a>;

/// Whether windows of `comm` that need the network must learn from every rank whether it can
/// open a verbs device (`ONESIDED_TRANSPORT=auto`); then each rank's [`verbs_usable`] goes with
/// its first contribution to window creation, and [`open`] takes verbs where all are true.
pub(crate) fn asks_for_verbs(comm: &Comm) -> bool {
    comm.job().config.transport_choice() == TransportChoice::Auto
}

/// Open the network transport for a window of `comm`, with this rank's control block `ctrl`
/// and window memory `data` registered: direct verbs where the configuration names it, or
/// under `auto` where `verbs_everywhere` (every rank can open a device), else the fabric.
/// `peers` watches the ranks. Local: the window exchanges the keys.
pub(crate) fn open<'a>(
    comm: &Comm,
    verbs_everywhere: bool,
    ctrl: Mem<'static>,
    data: Mem<'a>,
    peers: Peers,
) -> Result<OpenedNet<'a>> {
    let verbs = match comm.job().config.transport_choice() {
        TransportChoice::Verbs => true,
        TransportChoice::Fabric => false,
        TransportChoice::Auto => verbs_everywhere,
    };
    match verbs {
        true => open_verbs(comm, ctrl, data, peers),
        false => open_fabric(comm, ctrl, data, peers),
    }
}

/// Whether this rank can open a verbs device.
#[cfg(have_ibverbs)]
pub(crate) fn verbs_usable(comm: &Comm) -> bool {
    super::verbs::usable(comm.job().config.verbs())
}

/// Whether this rank can open a verbs device: never, in a build without verbs.
#[cfg(not(have_ibverbs))]
pub(crate) fn verbs_usable(_comm: &Comm) -> bool {
    false
}

#[cfg(have_ibverbs)]
fn open_verbs<'a>(
    comm: &Comm,
    ctrl: Mem<'static>,
    data: Mem<'a>,
    peers: Peers,
) -> Result<OpenedNet<'a>> {
    let config = comm.job().config.verbs();
    Ok(Box::new(super::verbs::open(
        comm, config, ctrl, data, peers,
    )?))
}

/// Fails, since this build has no verbs transport.
#[cfg(not(have_ibverbs))]
fn open_verbs<'a>(
    _comm: &Comm,
    _ctrl: Mem<'static>,
    _data: Mem<'a>,
    _peers: Peers,
) -> Result<OpenedNet<'a>> {
    Err(Error::new(
        ErrorClass::Other,
        "this window needs the verbs transport (ONESIDED_TRANSPORT=verbs), but onesided was \
         built without the libibverbs headers: install libibverbs-dev and libclang, then rebuild",
    ))
}

#[cfg(have_libfabric)]
fn open_fabric<'a>(
    comm: &Comm,
    ctrl: Mem<'static>,
    data: Mem<'a>,
    peers: Peers,
) -> Result<OpenedNet<'a>> {
    let config = comm.job().config.fabric();
    Ok(Box::new(super::fabric::open(
        comm, config, ctrl, data, peers,
    )?))
}

/// Fails, since this build has no fabric transport.
#[cfg(not(have_libfabric))]
fn open_fabric<'a>(
    _comm: &Comm,
    _ctrl: Mem<'static>,
    _data: Mem<'a>,
    _peers: Peers,
) -> Result<OpenedNet<'a>> {
    Err(Error::new(
        ErrorClass::Other,
        "this window needs the fabric transport (ranks on several nodes, or \
         ONESIDED_TRANSPORT=fabric), but onesided was built without libfabric: install \
         libfabric-dev, pkg-config and libclang, then rebuild",
    ))
}

/// Memory registered with the NIC ahead of the windows that will use it (alloc_mem memory).
#[derive(Debug)]
pub(crate) struct Registered {
    #[cfg(have_libfabric)]
    _reg: super::fabric::prereg::Prereg,
}

/// Register `mem` with this thread's fabric endpoint where windows of `comm` use the fabric
/// (ranks on several nodes with no verbs device here, or the fabric forced); `None` where they
/// do not, or this build has no fabric. Direct verbs registers alloc_mem memory with the window
/// that uses it.
pub(crate) fn register_ahead(comm: &Comm, mem: Mem<'static>) -> Result<Option<Registered>> {
    let me = comm.node_of(comm.rank());
    let one_node = (0..comm.size()).all(|r| comm.node_of(r) == me);
    let fabric = which::fabric_serves(comm.job().config.transport_choice(), one_node, || {
        verbs_usable(comm)
    });
    if mem.is_empty() || !fabric {
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
