//! The network side of a window: direct verbs or the fabric transport, as the configuration and
//! the ranks' devices decide, where this build has them; a clear error where it does not.
//!
//! `ONESIDED_TRANSPORT=fabric` and `=verbs` name the transport. Under `auto` (windows spanning
//! nodes), direct verbs serves the window where every rank of it can open a verbs device, since
//! it reaches the NIC with fewer instructions per operation than libfabric's verbs;ofi_rxm and
//! needs no progress thread (`docs/transports.md`); elsewhere the fabric does.

use super::Attach;
use crate::config::TransportChoice;
use crate::error::Result;
use crate::wait::Peers;
use crate::world::Comm;
use onesided_shm::Mem;

/// Collective: connect every rank of `comm` through the network transport the configuration
/// asks for, with this rank's control block `ctrl` and window memory `data` registered. `peers`
/// watches the ranks.
pub(crate) fn connect<'a>(
    comm: &Comm,
    ctrl: Mem<'static>,
    data: Mem<'a>,
    peers: Peers,
) -> Result<Box<dyn Attach<'a> + 'a>> {
    let verbs = match comm.job().config.transport_choice() {
        TransportChoice::Verbs => true,
        TransportChoice::Fabric => false,
        TransportChoice::Auto => verbs_everywhere(comm)?,
    };
    match verbs {
        true => connect_verbs(comm, ctrl, data, peers),
        false => connect_fabric(comm, ctrl, data, peers),
    }
}

/// Collective: whether every rank of `comm` can open a verbs device.
fn verbs_everywhere(comm: &Comm) -> Result<bool> {
    let mine = verbs_usable(comm);
    let all = comm.allgather(&[mine as u8])?;
    Ok(all.iter().all(|v| v.first() == Some(&1)))
}

#[cfg(have_ibverbs)]
fn verbs_usable(comm: &Comm) -> bool {
    super::verbs::usable(comm.job().config.verbs())
}

#[cfg(not(have_ibverbs))]
fn verbs_usable(_comm: &Comm) -> bool {
    false
}

#[cfg(have_ibverbs)]
fn connect_verbs<'a>(
    comm: &Comm,
    ctrl: Mem<'static>,
    data: Mem<'a>,
    peers: Peers,
) -> Result<Box<dyn Attach<'a> + 'a>> {
    let config = comm.job().config.verbs();
    let t = super::verbs::VerbsTransport::connect(comm, config, ctrl, data, peers)?;
    Ok(Box::new(t))
}

/// Collective: fails on every rank, since this build has no verbs transport.
#[cfg(not(have_ibverbs))]
fn connect_verbs<'a>(
    comm: &Comm,
    _ctrl: Mem<'static>,
    _data: Mem<'a>,
    _peers: Peers,
) -> Result<Box<dyn Attach<'a> + 'a>> {
    missing(
        comm,
        "this window needs the verbs transport (ONESIDED_TRANSPORT=verbs), but onesided was \
         built without the libibverbs headers: install libibverbs-dev and libclang, then rebuild",
    )
}

#[cfg(have_libfabric)]
fn connect_fabric<'a>(
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
fn connect_fabric<'a>(
    comm: &Comm,
    _ctrl: Mem<'static>,
    _data: Mem<'a>,
    _peers: Peers,
) -> Result<Box<dyn Attach<'a> + 'a>> {
    missing(
        comm,
        "this window needs the fabric transport (ranks on several nodes, or \
         ONESIDED_TRANSPORT=fabric), but onesided was built without libfabric: install \
         libfabric-dev, pkg-config and libclang, then rebuild",
    )
}

/// Collective: the same error on every rank.
#[cfg(any(not(have_ibverbs), not(have_libfabric)))]
fn missing<'a>(comm: &Comm, why: &str) -> Result<Box<dyn Attach<'a> + 'a>> {
    use crate::error::{Error, ErrorClass};
    comm.agree(
        "opening the network",
        Err(Error::new(ErrorClass::Other, why)),
    )
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
    let fabric = match comm.job().config.transport_choice() {
        TransportChoice::Fabric => true,
        TransportChoice::Verbs => false,
        TransportChoice::Auto => !one_node && !verbs_usable(comm),
    };
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
