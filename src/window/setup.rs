//! Collective window creation: every transport the window needs opens on each rank, the ranks
//! exchange all their keys at once, then each transport connects (the phases are those of
//! [`build`]).
//!
//! 1. Every rank checks its arguments; one exchange tells every rank the outcome (one bad
//!    argument fails the call on every rank, none waits forever), the sizes, displacement units
//!    and alignments, and which network the window takes where it needs one.
//! 2. The lowest rank of each node creates the node segment (control blocks, and the window
//!    memory unless the user lent it); the others map it. Once the keys are exchanged its name
//!    is unlinked, so nothing is left in /dev/shm even if the job is killed later.
//! 3. Each rank opens its transports (its [`ShmKey`]; the network's endpoint and registrations
//!    where the window spans nodes or the configuration names the network) and publishes all
//!    their keys in one exchange.
//! 4. Each rank connects its transports with the keys; the ranks agree on the outcome.
//!
//! # MPI-4.1: 12.2.1 (MPI_WIN_CREATE), 12.2.2 (MPI_WIN_ALLOCATE), 12.2.3 (MPI_WIN_ALLOCATE_SHARED),
//! 12.2.4 (MPI_WIN_CREATE_DYNAMIC)

use super::attached::Attached;
use super::direct::Direct;
use super::{Extent, Flavor, Window};
use crate::alloc;
use crate::codec::{Dec, Enc};
use crate::config::TransportChoice;
use crate::error::in_call;
use crate::error::{Error, ErrorClass, Result};
use crate::info::{Info, WinHints};
use crate::peers::Peers;
use crate::protocol::epoch::Epochs;
use crate::protocol::layout::{self, NodeLayout, Region};
use crate::transport::net::{self, OpenedNet};
use crate::transport::shm::{self, BlockDesc, DataDesc, ShmKey, ShmTransport};
use crate::transport::{Attach, Caps, RemoteKey, Selection, Transport, select};
use crate::world::Comm;
use bytemuck::Pod;
use onesided_shm::{Mem, Segment};
use std::borrow::Borrow;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

struct Request<'a> {
    flavor: Flavor,
    size: usize,
    disp_unit: usize,
    user: Option<Mem<'a>>,
}

impl Request<'static> {
    /// A window whose memory onesided allocates.
    fn owned(flavor: Flavor, size: usize, disp_unit: usize) -> Request<'static> {
        Request {
            flavor,
            size,
            disp_unit,
            user: None,
        }
    }
}

impl Window<'static> {
    /// Allocate `size` bytes on this rank and open them, with those of every rank of `comm`, as
    /// a window. Collective over `comm`; `disp_unit` must be positive. The memory starts on a
    /// page, or on the info key `mpi_minimum_memory_alignment` where that is larger (a power of
    /// two up to 1 GiB, else MPI_ERR_INFO).
    ///
    /// # MPI-4.1: 12.2.2 (MPI_WIN_ALLOCATE)
    pub fn allocate(
        comm: &Comm,
        size: usize,
        disp_unit: usize,
        info: &Info,
    ) -> Result<Window<'static>> {
        in_call(Some(comm.rank()), "MPI_Win_allocate", || {
            build(
                comm,
                info,
                Request::owned(Flavor::Allocate, size, disp_unit),
            )
        })
    }

    /// Like [`Window::allocate`], with memory every rank of the node can load and store through
    /// [`Window::shared_query`]. Contiguous across ranks in rank order unless the info key
    /// `alloc_shared_noncontig` is "true". Every rank of `comm` must be on one node, else
    /// MPI_ERR_RMA_SHARED. `mpi_minimum_memory_alignment` applies to the start of contiguous
    /// memory (the memory of the first rank whose size is not 0), and to every rank's memory
    /// with `alloc_shared_noncontig`.
    ///
    /// # MPI-4.1: 12.2.3 (MPI_WIN_ALLOCATE_SHARED)
    pub fn allocate_shared(
        comm: &Comm,
        size: usize,
        disp_unit: usize,
        info: &Info,
    ) -> Result<Window<'static>> {
        in_call(Some(comm.rank()), "MPI_Win_allocate_shared", || {
            build(comm, info, Request::owned(Flavor::Shared, size, disp_unit))
        })
    }
}

impl<'a> Window<'a> {
    /// Open `memory`, lent by the caller, to one-sided access by every rank of `comm`, run `body`
    /// on the window, then free it collectively and return what `body` returned. Collective.
    ///
    /// The window cannot outlive the call, so the memory is never handed back while another rank
    /// may still write into it: the free at the end waits for every rank. If that cannot be
    /// ensured (`body` panics, or a rank dies during the free while another may still be
    /// running), the process aborts instead of returning the memory. Other ranks of the node
    /// reach the memory by cross-memory attach (process_vm_writev / process_vm_readv), or map
    /// it where it came from [`Comm::alloc_mem`]; the owner reads and writes it through
    /// [`Window::read_local`] / [`Window::write_local`] inside `body`.
    ///
    /// # MPI-4.1: 12.2.1 (MPI_WIN_CREATE)
    pub fn create<T: Pod, R>(
        comm: &Comm,
        memory: &'a mut [T],
        disp_unit: usize,
        info: &Info,
        body: impl FnOnce(&Window<'a>) -> R,
    ) -> Result<R> {
        in_call(Some(comm.rank()), "MPI_Win_create", || {
            create_lent(comm, memory, disp_unit, info, |w| w, body)
        })
    }

    /// A window with no memory yet: each rank attaches memory of its own ([`Window::attach`])
    /// and detaches it ([`Window::detach`]) while `body` runs on the window; displacements are
    /// the addresses [`Window::attach`] returns. The window is freed collectively when `body`
    /// returns, and only then is the attached memory (borrowed for `'a`) handed back, as with
    /// [`Window::create`]. Collective.
    ///
    /// # MPI-4.1: 12.2.4 (MPI_WIN_CREATE_DYNAMIC)
    pub fn create_dynamic<R>(
        comm: &Comm,
        info: &Info,
        body: impl FnOnce(&Window<'a>) -> R,
    ) -> Result<R> {
        in_call(Some(comm.rank()), "MPI_Win_create_dynamic", || {
            let request = Request {
                flavor: Flavor::Dynamic,
                size: 0,
                disp_unit: 1,
                user: None,
            };
            lend(build(comm, info, request)?, body)
        })
    }
}

/// [`Window::create`] of `memory`, with the window handed to `body` as `wrap` makes it (the
/// window itself, or a typed window holding it).
pub(super) fn create_lent<'a, T: Pod, W: Borrow<Window<'a>>, R>(
    comm: &Comm,
    memory: &'a mut [T],
    disp_unit: usize,
    info: &Info,
    wrap: impl FnOnce(Window<'a>) -> W,
    body: impl FnOnce(&W) -> R,
) -> Result<R> {
    let bytes: &'a mut [u8] = bytemuck::cast_slice_mut(memory);
    let request = Request {
        flavor: Flavor::Create,
        size: bytes.len(),
        disp_unit,
        user: Some(Mem::from_slice(bytes)),
    };
    lend(wrap(build(comm, info, request)?), body)
}

/// Run `body` on `held` (a window that holds memory lent by the caller, or what holds that
/// window), then free the window; abort if the memory cannot be handed back safely (see
/// [`Window::create`]): unless every other rank is known to be gone (processes of this node
/// that exited cannot write any more, and the window's NIC registrations close with it).
fn lend<'a, W: Borrow<Window<'a>>, R>(held: W, body: impl FnOnce(&W) -> R) -> Result<R> {
    let out = {
        let _guard = AbortOnUnwind;
        body(&held)
    };
    let win: &Window<'a> = held.borrow();
    let freed = win.release();
    let me = win.rank();
    let alone = || (0..win.size_of_group()).all(|r| r == me || win.peers.gone(r));
    if !freed.quiet && !alone() {
        abort_lent(&freed.result);
    }
    drop(held);
    freed.result.map(|()| out)
}

/// Aborts the process if dropped while unwinding: memory lent to a window must not be handed
/// back while other ranks may still write into it.
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        if std::thread::panicking() {
            abort_lent(&Err(Error::new(
                ErrorClass::Other,
                "panic inside Window::create",
            )));
        }
    }
}

fn abort_lent(why: &Result<()>) -> ! {
    let why = why.as_ref().err().map_or(String::new(), |e| e.to_string());
    eprintln!(
        "onesided: aborting: memory lent to Window::create cannot be handed back while other ranks may still write into it ({why})"
    );
    // An abort runs no destructor, so libfabric's shm provider cannot remove the segments it
    // names after this process. The survivors of a node remove a dead rank's, but they may be
    // aborting too (every rank that lent memory to the window does): remove them first. Peers
    // that mapped them keep their mappings.
    let _ = onesided_shm::cleanup::remove_fabric_segments(&[std::process::id()]);
    std::process::abort()
}

/// Arguments every rank checks alone.
fn check(req: &Request<'_>, info: &Info) -> Result<WinHints> {
    if req.disp_unit == 0 {
        return Err(Error::new(
            ErrorClass::Disp,
            "displacement unit must be positive",
        ));
    }
    if req.size > isize::MAX as usize {
        return Err(Error::new(
            ErrorClass::Size,
            format!("window size {} too large", req.size),
        ));
    }
    WinHints::parse(info)
}

/// The ranks of `comm` on this rank's node. A window spanning nodes needs the fabric, and an
/// `allocate_shared` window cannot span them (MPI_ERR_RMA_SHARED). Every rank reaches the same
/// verdict.
fn node_ranks(comm: &Comm, flavor: Flavor) -> Result<Vec<usize>> {
    let mine = comm.node_of(comm.rank());
    let local: Vec<usize> = (0..comm.size())
        .filter(|&r| comm.node_of(r) == mine)
        .collect();
    let away = (0..comm.size()).find(|&r| comm.node_of(r) != mine);
    if let (Some(away), Flavor::Shared) = (away, flavor) {
        return Err(Error::new(
            ErrorClass::RmaShared,
            format!(
                "allocate_shared: rank {away} is on node {}, not on {mine}",
                comm.node_of(away)
            ),
        ));
    }
    Ok(local)
}

/// The node segment, created by the node's lowest rank (collective: the ranks agree on whether
/// that worked), then mapped by the others at an address that is a multiple of `align`. The
/// mapping is not agreed on here: it travels with the keys, after which the leader unlinks the
/// name ([`unlink_segment`]).
fn node_segment(
    comm: &Comm,
    local: &[usize],
    name: &str,
    len: usize,
    align: usize,
) -> Result<Result<Arc<Segment>>> {
    let leader = comm.rank() == local[0];
    let created = if leader {
        Segment::create(name, len, align)
            .map(Some)
            .map_err(|e| Error::os("creating the window segment", e))
    } else {
        Ok(None)
    };
    let made = matches!(created, Ok(Some(_)));
    let created = comm.agree("creating the window segment", created);
    if made && created.is_err() {
        let _ = Segment::unlink(name);
    }
    Ok(match created? {
        Some(seg) => Ok(Arc::new(seg)),
        None => Segment::open(name, len, align)
            .map(Arc::new)
            .map_err(|e| Error::os("mapping the window segment", e)),
    })
}

/// Once every rank of the node has mapped the segment or failed to (the key exchange is
/// over), its leader removes the name, so nothing is left in /dev/shm even if the job is killed
/// later.
fn unlink_segment(comm: &Comm, local: &[usize], name: &str) -> Result<()> {
    match comm.rank() == local[0] {
        true => Segment::unlink(name).map_err(|e| Error::os("unlinking the window segment", e)),
        false => Ok(()),
    }
}

/// How the node's ranks reach memory lent to `create`: mapped, where it lies in a block of
/// alloc_mem memory; by cross-memory attach otherwise.
fn lent_desc(m: &Mem<'_>) -> DataDesc {
    let pid = std::process::id();
    match alloc::lookup(m.addr(), m.len()) {
        Some((b, off)) => DataDesc::Block(BlockDesc {
            pid,
            fd: b.fd,
            id: b.id,
            block_len: b.len,
            off,
            len: m.len(),
        }),
        None => DataDesc::Process {
            pid,
            addr: m.addr(),
            len: m.len(),
        },
    }
}

/// Map the alloc_mem memory that the other ranks of the node lent to the window (`None` for
/// the others).
fn map_blocks(me: usize, keys: &[Option<ShmKey>]) -> Result<Vec<Option<Mem<'static>>>> {
    let map = |(rank, key): (usize, &Option<ShmKey>)| match key.as_ref().map(|k| &k.data) {
        Some(DataDesc::Block(b)) if rank != me => b.map().map(Some),
        _ => Ok(None),
    };
    keys.iter().enumerate().map(map).collect()
}

/// What the ranks agreed on in the first exchange of window creation.
struct Agreed {
    hints: WinHints,
    extents: Vec<Extent>,
    /// The alignment each rank asked for its memory.
    aligns: Vec<usize>,
    /// Whether every rank can open a verbs device (asked only where the answer chooses the
    /// network: [`net::asks_for_verbs`]).
    verbs_everywhere: bool,
}

/// Collective: every rank checks its arguments alone, then one exchange tells every rank the
/// outcome (one bad argument fails the call everywhere), the extents and alignments, whether
/// every rank asks for `accumulate_ops=same_op` (in effect only then: the paths of accumulates
/// depend on it, `protocol::native`), and, where `verbs` is asked, whether every rank can open
/// a verbs device. A rank that asserts same_size and same_disp_unit sends no extent: its own
/// is everyone's.
fn agree_arguments(comm: &Comm, info: &Info, req: &Request<'_>, verbs: bool) -> Result<Agreed> {
    let checked = check(req, info);
    let align = checked.as_ref().map_or(1, |h| h.alignment);
    let same = checked
        .as_ref()
        .is_ok_and(|h| h.same_size && h.same_disp_unit);
    let same_op = checked.as_ref().is_ok_and(|h| h.same_op);
    let usable = verbs && net::verbs_usable(comm);
    let flags = u64::from(same_op) | u64::from(usable) << 1;
    let mine = match same {
        true => Enc::new().u64(flags).finish(),
        false => Enc::new()
            .u64(flags)
            .u64(req.size as u64)
            .u64(req.disp_unit as u64)
            .u64(align as u64)
            .finish(),
    };
    let all = comm.agree_gather("window creation", checked.as_ref().map(|_| &mine[..]));
    let mut agreed = Agreed {
        hints: checked?,
        extents: Vec::with_capacity(comm.size()),
        aligns: Vec::with_capacity(comm.size()),
        verbs_everywhere: verbs,
    };
    for bytes in all? {
        let mut d = Dec::new(&bytes);
        let flags = d.u64()?;
        agreed.hints.same_op &= flags & 1 != 0;
        agreed.verbs_everywhere &= flags & 2 != 0;
        if d.is_empty() {
            agreed.extents.push(Extent {
                size: req.size,
                disp_unit: req.disp_unit,
            });
            agreed.aligns.push(align);
            continue;
        }
        agreed.extents.push(Extent {
            size: d.usize()?,
            disp_unit: d.usize()?,
        });
        agreed.aligns.push(d.usize()?);
    }
    Ok(agreed)
}

/// This rank's part of the node segment: its control block and, unless the user lent the
/// window's memory, its window memory; and where the others' parts lie.
struct NodeMemory {
    segment: Arc<Segment>,
    /// The segment's name, for the keys.
    name: String,
    /// Offsets of the control block and the window memory of each rank of the node, in node order.
    ctrl: Vec<usize>,
    data: Vec<usize>,
    /// This rank's place among the node's ranks.
    at: usize,
}

/// The name of a window's node segment: the job, the communicator, the window's sequence
/// number in it and the node's lowest rank.
fn segment_name(comm: &Comm, local: &[usize]) -> String {
    format!(
        "onesided-{}-{:x}-{}-{}",
        comm.job().id,
        comm.id(),
        comm.next_seq(),
        local[0]
    )
}

/// Lay out the node segment `name` of a window whose ranks on this node are `local`, create it
/// on the node's lowest rank (collective: the ranks agree on whether that worked), map it on
/// the others. The outer error is every rank's; the inner one, a failed mapping, is this
/// rank's alone and travels with the keys.
fn node_memory(
    comm: &Comm,
    req: &Request<'_>,
    agreed: &Agreed,
    local: &[usize],
    name: &str,
) -> Result<Result<NodeMemory>> {
    let in_segment = req.flavor != Flavor::Create;
    let contiguous = req.flavor == Flavor::Shared && !agreed.hints.noncontig;
    let regions: Vec<Region> = local
        .iter()
        .map(|&r| Region {
            size: agreed.extents[r].size,
            align: agreed.aligns[r],
        })
        .collect();
    let NodeLayout {
        ctrl,
        data,
        total,
        align,
    } = layout::node_layout(&regions, comm.size(), in_segment, contiguous)
        .ok_or_else(|| Error::new(ErrorClass::NoMem, "window too large for one node"))?;
    let segment = node_segment(comm, local, name, total, align)?;
    let at = local.iter().position(|&r| r == comm.rank()).unwrap_or(0);
    Ok(segment.map(|segment| NodeMemory {
        segment,
        name: name.to_owned(),
        ctrl,
        data,
        at,
    }))
}

/// What this rank opened before the key exchange: its own memory, its shared-memory key and
/// the network transport where the window needs one.
struct Opened<'a> {
    local: Mem<'a>,
    key: ShmKey,
    net: Option<OpenedNet<'a>>,
}

/// Open this rank's side of every transport the window needs: its shared-memory key, and the
/// network transport (registering its control block and window memory) where `network`.
/// Local.
fn open<'a>(
    comm: &Comm,
    req: &Request<'a>,
    node: &NodeMemory,
    network: bool,
    verbs_everywhere: bool,
    peers: &Peers,
) -> Result<Opened<'a>> {
    let whole = Mem::from_segment(node.segment.clone());
    let local = match &req.user {
        Some(m) => m.clone(),
        None => whole
            .sub(node.data[node.at], req.size)
            .map_err(|_| Error::new(ErrorClass::Intern, "own window memory outside the segment"))?,
    };
    let key = ShmKey {
        segment: node.name.clone(),
        ctrl: node.ctrl[node.at],
        data: match &req.user {
            Some(m) => lent_desc(m),
            None => DataDesc::Segment {
                off: node.data[node.at],
                len: req.size,
            },
        },
    };
    let net = match network {
        true => {
            let ctrl = whole
                .sub(node.ctrl[node.at], layout::ctrl_block(comm.size()))
                .map_err(Error::from)?;
            Some(net::open(
                comm,
                verbs_everywhere,
                ctrl,
                local.clone(),
                peers.clone(),
            )?)
        }
        false => None,
    };
    Ok(Opened { local, key, net })
}

/// Every rank's keys, from the one exchange of them.
struct Keys {
    /// The shared-memory keys of the ranks on this node (`None` for the others).
    shm: Vec<Option<ShmKey>>,
    /// The network transport's keys of every rank (empty without one).
    net: Vec<Vec<u8>>,
    /// Whether some rank meets another for the first time
    /// ([`Opened::fresh`](crate::transport::Opened::fresh)).
    fresh: bool,
}

/// Collective: one exchange of every rank's keys, or of its failure to open (which fails the
/// call on every rank).
fn exchange_keys(
    comm: &Comm,
    opened: std::result::Result<&Opened<'_>, &Error>,
    on_node: impl Fn(usize) -> bool,
) -> Result<Keys> {
    let mine = opened.map(|o| {
        let net = o.net.as_ref();
        Enc::new()
            .bytes(&o.key.encode().0)
            .bytes(&net.map(|n| n.key()).unwrap_or_default())
            .u64(net.is_some_and(|n| n.fresh()).into())
            .finish()
    });
    let all = comm.agree_gather(
        "opening the window's transports",
        mine.as_deref().map_err(|e| *e),
    )?;
    let mut keys = Keys {
        shm: Vec::with_capacity(all.len()),
        net: Vec::with_capacity(all.len()),
        fresh: false,
    };
    for (r, bytes) in all.iter().enumerate() {
        let mut d = Dec::new(bytes);
        let shm = RemoteKey(d.bytes()?.to_vec());
        keys.shm.push(match on_node(r) {
            true => Some(ShmKey::decode(&shm)?),
            false => None,
        });
        keys.net.push(d.bytes()?.to_vec());
        keys.fresh |= d.u64()? != 0;
    }
    Ok(keys)
}

/// Connect every transport with the ranks' keys: map the alloc_mem memory other ranks of the
/// node lent to the window, connect shared memory to the node's targets and the network
/// transport to every rank. Local: the window agrees on the outcome.
fn connect<'a>(
    me: usize,
    req: &mut Request<'a>,
    node: &NodeMemory,
    keys: &Keys,
    net: Option<&mut OpenedNet<'a>>,
    pids: &[u32],
    peers: &Peers,
) -> Result<(ShmTransport<'a>, Vec<Option<Mem<'static>>>)> {
    let whole = Mem::from_segment(node.segment.clone());
    let shared: Vec<Option<Mem<'static>>> = keys
        .shm
        .iter()
        .zip(map_blocks(me, &keys.shm)?)
        .map(|(k, block)| match k.as_ref().map(|k| &k.data) {
            Some(DataDesc::Segment { off, len }) => whole.sub(*off, *len).ok(),
            _ => block,
        })
        .collect();
    let shm = ShmTransport::connect(
        me,
        &keys.shm,
        &node.segment,
        &shared,
        req.user.take(),
        pids,
        peers.clone(),
    )?;
    if let Some(net) = net {
        net.connect(&keys.net)?;
    }
    Ok((shm, shared))
}

/// Collective window creation, in phases (each phase's collective fails the call on every
/// rank alike):
/// 1. the arguments, extents and the network's choice agreed in one exchange;
/// 2. the node segment created by the node's lowest rank, mapped by the others;
/// 3. every transport opened locally, and one exchange of all their keys;
/// 4. every transport connected with the keys, the outcome agreed; pairs that no window has
///    used yet connected over the network (a fifth collective, only then);
/// 5. the routes: per target, the transport that carries data, and one for the atomics.
///
/// A window within one node takes four collectives, one spanning nodes four, or five when it
/// is the first to use some pair.
fn build<'a>(comm: &Comm, info: &Info, mut req: Request<'a>) -> Result<Window<'a>> {
    let first = comm.seqs();
    let local = node_ranks(comm, req.flavor)?;
    let on_node = |r: usize| local.contains(&r);
    // The network when shared memory does not reach every target, or when the configuration
    // names one for every target (the ranks agreed on the configuration at start-up).
    let forced = comm.job().config.transport_choice() != TransportChoice::Auto;
    let network = forced || select(&[&shm::CAPS], comm.size(), on_node).is_none();

    let agreed = agree_arguments(comm, info, &req, network && net::asks_for_verbs(comm))?;
    let name = segment_name(comm, &local);
    let node = node_memory(comm, &req, &agreed, &local, &name)?;
    let pids: Vec<u32> = (0..comm.size())
        .map(|r| if on_node(r) { comm.pid_of(r) } else { 0 })
        .collect();
    let peers = Peers::new(pids.clone(), comm.job().liveness.clone());
    let opened = node.and_then(|node| {
        let opened = open(comm, &req, &node, network, agreed.verbs_everywhere, &peers)?;
        Ok((node, opened))
    });
    let keys = exchange_keys(comm, opened.as_ref().map(|(_, o)| o), on_node);
    unlink_segment(comm, &local, &name)?;
    let keys = keys?;
    let (node, mut opened) = opened?;
    let connected = connect(
        comm.rank(),
        &mut req,
        &node,
        &keys,
        opened.net.as_mut(),
        &pids,
        &peers,
    );
    let (shm, shared) = comm.agree("connecting the window's transports", connected)?;
    let others: Vec<Box<dyn Attach<'a> + 'a>> = opened
        .net
        .take()
        .map(|n| n.into_transport())
        .into_iter()
        .collect();
    if keys.fresh {
        let warmed = others.iter().try_for_each(|t| t.warm_up());
        comm.agree("connecting the network's pairs", warmed)?;
    }
    let ctrl = shm.control(comm.rank())?.clone();
    // Tests may ask for every target through a transport whose data completes at flush.
    #[cfg(test)]
    let (others, forced) = match crate::transport::deferred::wanted() {
        true => {
            let inner = ShmTransport::connect(
                comm.rank(),
                &keys.shm,
                &node.segment,
                &shared,
                None,
                &pids,
                peers.clone(),
            )?;
            let deferred = crate::transport::deferred::Deferred::new(inner, comm.size());
            (vec![Box::new(deferred) as Box<dyn Attach<'a> + 'a>], true)
        }
        false => (others, forced),
    };
    let parts = Parts {
        ctrl,
        flavor: req.flavor,
        node: local,
        hints: agreed.hints,
        extents: agreed.extents,
        local: opened.local,
        shared,
        shm,
        others,
        peers,
    };
    // Every collective took a sequence number, and so did the segment's name.
    let collectives = comm.seqs() - first - 1;
    assemble(comm, parts, forced, collectives)
}

/// What a window is made of once its transports are connected.
struct Parts<'a> {
    /// This rank's control block.
    ctrl: Mem<'static>,
    flavor: Flavor,
    /// The ranks on this node.
    node: Vec<usize>,
    hints: WinHints,
    extents: Vec<Extent>,
    local: Mem<'a>,
    shared: Vec<Option<Mem<'static>>>,
    shm: ShmTransport<'a>,
    others: Vec<Box<dyn Attach<'a> + 'a>>,
    peers: Peers,
}

/// The window: its routes chosen from the transports' caps ([`select`]; where the
/// configuration names the network, from the list without shared memory), and what it reaches
/// by loads and stores ([`Direct`]).
fn assemble<'a>(comm: &Comm, p: Parts<'a>, forced: bool, collectives: u64) -> Result<Window<'a>> {
    let me = comm.rank();
    let caps: Vec<&Caps> = std::iter::once(p.shm.caps())
        .chain(p.others.iter().map(|t| t.caps()))
        .collect();
    let skip = usize::from(forced && caps.len() > 1);
    let on_node = |r: usize| p.node.contains(&r);
    let Selection { data, atomics } = select(&caps[skip..], comm.size(), on_node)
        .map(|s| Selection {
            data: s.data.into_iter().map(|t| t + skip).collect(),
            atomics: s.atomics + skip,
        })
        .ok_or_else(|| Error::new(ErrorClass::Intern, "a target no transport reaches"))?;
    tracing::debug!(
        flavor = ?p.flavor,
        targets = comm.size(),
        network = data.iter().filter(|&&t| t != 0).count(),
        forced,
        collectives,
        "window created: targets on this node through shared memory, the others through the network"
    );
    for (i, c) in caps.iter().enumerate() {
        tracing::debug!(
            transport = c.name,
            targets = data.iter().filter(|&&t| t == i).count(),
            atomics = atomics == i,
            inject = c.inject,
            max_msg = c.max_msg,
            local_mr = c.local_mr,
            native_atomics = %c.native_atomics,
            cpu_atomics = c.cpu_atomics,
            "window transport"
        );
    }
    let atomics_ordered = caps[atomics].atomics_order_prior;
    let loaded = (0..comm.size())
        .filter(|&t| t == me || (p.flavor != Flavor::Dynamic && p.shared[t].is_some()))
        .collect();
    let shm = &p.shm;
    let direct = Direct::new(
        (0..comm.size())
            .map(|t| shm.mapped(t).filter(|_| data[t] == 0).cloned())
            .collect(),
        (0..comm.size())
            .map(|t| shm.control(t).ok().filter(|_| atomics == 0).cloned())
            .collect(),
        (0..comm.size())
            .map(|t| shm.atomic_mapped(t).filter(|_| atomics == 0).cloned())
            .collect(),
        data.iter()
            .map(|&route| route == 0 && atomics == 0)
            .collect(),
    );
    let mut transports: Vec<Box<dyn Attach<'a> + 'a>> = vec![Box::new(p.shm)];
    transports.extend(p.others);
    Ok(Window {
        comm: comm.clone(),
        ctrl: p.ctrl,
        flavor: p.flavor,
        hints: Cell::new(p.hints),
        atomics,
        atomics_ordered,
        notified: RefCell::new(Vec::new()),
        direct,
        transports,
        routes: data,
        peers: p.peers,
        epochs: RefCell::new(Epochs::new(comm.size())),
        attached: RefCell::new(Attached::new(comm.size())),
        extents: p.extents,
        local: p.local,
        loaded,
        shared: p.shared,
        barriers: Cell::new(0),
        name: RefCell::new(String::new()),
        freed: Cell::new(false),
        unreported: Default::default(),
    })
}
