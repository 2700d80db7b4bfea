//! The fabric resources of a thread of the world: per fabric configuration one domain and one
//! endpoint (with its completion queue, bounce buffer and progress thread), shared by every
//! window that thread creates and kept until the world ends ([`release`], when the job is
//! dropped) or the thread exits, so that a window created after the others were freed opens
//! nothing and connects nothing anew (reopening cost 100 ms per window over tcp at 2 ranks,
//! 670 ms at 16). A window registers its memory on the shared endpoint and inserts its ranks as
//! peers there (a rank inserted by an earlier window is the same peer, already connected);
//! nothing a later window opens replaces what an earlier one uses.
//!
//! Per thread, not per process: the endpoint is driven by the thread that owns the windows
//! (MPI_THREAD_FUNNELED), and the in-process test tier runs one world per thread.

use super::names::fi_err;
use super::names::{atomic_op, datatype};
use super::server::Server;
use crate::config::{Atomics, ENV_PROGRESS_CPUS, FabricConfig, MrMode, Progress};
use crate::cpu_list;
use crate::error::{Error, ErrorClass, Result};
use crate::protocol::native::{Kind, NativeOps};
use crate::protocol::reduce::Op;
use crate::protocol::served;
use crate::transport::Notices;
use onesided_fabric as fi;
use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;
use std::sync::Arc;

/// One endpoint and what is known of its provider.
#[derive(Debug)]
pub(crate) struct Resources {
    pub(crate) ep: fi::Endpoint,
    /// The accumulates this provider runs natively, as the configuration allows.
    pub(crate) native: NativeOps,
    /// Every accumulate is served by its target (`served.rs`).
    pub(crate) served: bool,
    /// Most operand bytes of one served call ([`piece_max`]).
    pub(crate) call_piece: usize,
    /// The world ranks this endpoint has read from: their pairs are connected
    /// (`FabricTransport::warm_up`).
    pub(crate) warmed: RefCell<HashSet<u32>>,
    /// The windows that take notifications with the writes that carry them, where the
    /// provider's writes carry data enough (`transport/notices.rs`).
    pub(crate) notices: Option<Arc<Notices>>,
}

thread_local! {
    static OPEN: RefCell<Vec<(FabricConfig, Rc<Resources>)>> = const { RefCell::new(Vec::new()) };
}

/// Most operand bytes of one served call (whole elements of any type) whose message takes at
/// most `eager` bytes of body: one message of the provider's eager protocol
/// (`Endpoint::call_eager_max`), at least one element.
fn piece_max(eager: usize) -> usize {
    (eager.saturating_sub(served::HEADER) / 8 * 8).max(8)
}

/// This thread's resources for `config`, opened at the first window that needs them.
pub(crate) fn resources(config: &FabricConfig) -> Result<Rc<Resources>> {
    OPEN.with(|open| {
        let mut open = open.borrow_mut();
        if let Some((_, r)) = open.iter().find(|(c, _)| c == config) {
            return Ok(Rc::clone(r));
        }
        let idle = match config.progress {
            Progress::Wake => fi::Idle::Wake,
            Progress::Poll => fi::Idle::Poll,
        };
        let ep = open_endpoint(&open_domain(config)?, idle)?;
        crate::wait::set_progress_thread();
        if crate::wait::crowded() {
            ep.set_crowded();
        } else if crate::wait::progress_shares_cpus() {
            ep.set_progress_shares_cpu();
        }
        if let Some(cpus) = &config.progress_cpus {
            ep.bind_progress(cpus).map_err(|e| {
                Error::new(
                    ErrorClass::Arg,
                    format!("{ENV_PROGRESS_CPUS}={}: {e}", cpu_list::format(cpus)),
                )
            })?;
        }
        let served = match config.atomics {
            Atomics::Served => true,
            Atomics::Auto => serves_better(&ep),
            Atomics::Software | Atomics::Verbs => false,
        };
        if served {
            ep.serve_calls(Arc::new(Server::default()))
                .map_err(|e| Error::new(ErrorClass::Other, format!("served accumulates: {e}")))?;
        }
        let native = match config.atomics {
            _ if served => NativeOps::NONE,
            Atomics::Software | Atomics::Served => NativeOps::NONE,
            Atomics::Auto => native_ops(&ep),
            Atomics::Verbs => native_ops(&ep).and(NativeOps::verbs()),
        };
        tracing::debug!(
            %native,
            atomics = ?config.atomics,
            served,
            "accumulates that run on the NIC (the others are served by the target, or emulated \
             under a lock)"
        );
        let call_piece = piece_max(ep.call_eager_max());
        let notices = Notices::for_bits(ep.remote_data_bits()).map(Arc::new);
        if let Some(n) = &notices {
            let n = Arc::clone(n);
            ep.on_remote_data(Arc::new(move |data| n.deliver(data)))
                .map_err(fi_err)?;
        }
        tracing::debug!(
            bits = ep.remote_data_bits(),
            notices = notices.is_some(),
            "notified puts carry their notification"
        );
        let r = Rc::new(Resources {
            ep,
            native,
            served,
            call_piece,
            warmed: RefCell::default(),
            notices,
        });
        open.push((config.clone(), Rc::clone(&r)));
        Ok(r)
    })
}

/// Close this thread's resources that no window uses any more: the world ends.
pub(crate) fn release() {
    // Taken out first: closing an endpoint must not run under the borrow.
    let unused: Vec<_> = OPEN.with(|open| {
        let mut open = open.borrow_mut();
        let (kept, unused) = std::mem::take(&mut *open)
            .into_iter()
            .partition(|(_, r)| Rc::strong_count(r) > 1);
        *open = kept;
        unused
    });
    drop(unused);
}

/// What `fi_getinfo` is asked for the domain of `config`.
pub(super) fn request(config: &FabricConfig) -> fi::Request {
    fi::Request {
        provider: config.provider.clone(),
        mr_mode: match config.mr_mode {
            MrMode::Provider => fi::MrMode::ALL,
            MrMode::Verbs => fi::MrMode::VERBS,
        },
        delivery_complete: true,
        register_local: config.mr_mode == MrMode::Verbs,
    }
}

/// Open the domain for `config`: libfabric's first provider, or with the `hwloc` feature the
/// one nearest to the CPUs this rank is bound to (`nic.rs`).
fn open_domain(config: &FabricConfig) -> Result<Arc<fi::Domain>> {
    let req = request(config);
    fi::load().map_err(|e| {
        Error::new(
            ErrorClass::Other,
            format!("the fabric transport needs libfabric, which this process cannot load: {e}"),
        )
    })?;
    #[cfg(feature = "hwloc")]
    let found = crate::transport::nic::find_provider(&req);
    #[cfg(not(feature = "hwloc"))]
    let found = fi::Provider::find(&req);
    let provider = found.map_err(|e| {
        Error::new(
            ErrorClass::Other,
            format!(
                "no libfabric provider{} offers RDM endpoints with RMA and atomics: {e}",
                config
                    .provider
                    .as_deref()
                    .map_or(String::new(), |p| format!(" named {p:?}"))
            ),
        )
    })?;
    tracing::debug!(
        provider = %provider.name(),
        fabric = %provider.fabric(),
        domain = %provider.domain(),
        mr_mode = %provider.mr_mode().names(),
        inject = provider.inject_size(),
        max_msg = provider.max_msg_size(),
        "opening the libfabric domain"
    );
    fi::Domain::open(provider).map_err(fi_err)
}

/// Whether accumulates served by the target beat the provider's own atomics on `ep`, which
/// `auto` then serves: over tcp;ofi_rxm, whose atomics the target applies in software one
/// element at a time, one element cost about the same either way and 4096 doubles half as
/// much served (`docs/transports.md`, "Accumulates served by the target"). Not where the
/// provider demands registered local buffers, which calls do not use.
fn serves_better(ep: &fi::Endpoint) -> bool {
    let name = ep.domain().provider().name();
    name.split(';').next() == Some("tcp") && !ep.local_mr()
}

/// The (element type, operation) pairs `ep`'s provider runs natively: fetching, and not
/// fetching too for operations that change the target (compare-and-swap for integers). Which of
/// them a window uses follows its `accumulate_ops` (`crate::protocol::native`).
fn native_ops(ep: &fi::Endpoint) -> NativeOps {
    let domain = ep.domain();
    NativeOps::from_fn(|e, k| {
        let dt = datatype(e);
        match k {
            Kind::CompareSwap => {
                domain.atomic_native(dt, fi::AtomicOp::Cswap, fi::AtomicKind::Compare)
            }
            Kind::Apply(op) => {
                let fop = atomic_op(op);
                let plain = op == Op::NoOp || domain.atomic_native(dt, fop, fi::AtomicKind::Plain);
                plain && domain.atomic_native(dt, fop, fi::AtomicKind::Fetch)
            }
        }
    })
}

/// Open an endpoint on `domain`. libfabric 1.17's shm provider now and then refuses to enable a
/// new endpoint with EBUSY while the region of one just closed is still being torn down; a few
/// retries ride that out.
fn open_endpoint(domain: &Arc<fi::Domain>, idle: fi::Idle) -> Result<fi::Endpoint> {
    let mut tries = 0;
    loop {
        match fi::Endpoint::open(domain, idle) {
            Err(e) if e.code == libc::EBUSY && tries < 5 => {
                tries += 1;
                tracing::debug!(tries, "endpoint busy (EBUSY), opening it again");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return r.map_err(fi_err),
        }
    }
}
