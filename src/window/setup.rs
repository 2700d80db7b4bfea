//! Collective window creation over the shared-memory transport.
//!
//! 1. Every rank checks its arguments; the ranks agree on the outcome (one bad argument fails
//!    the call on every rank, none waits forever).
//! 2. Sizes, displacement units and the memory alignments asked for are gathered.
//! 3. The lowest rank of each node creates the node segment (control blocks, and the window
//!    memory unless the user lent it); the others map it; then the name is unlinked at once, so
//!    nothing is left in /dev/shm even if the job is killed later.
//! 4. Every rank publishes its [`ShmKey`]; each rank connects the keys of its targets.
//!
//! # MPI-4.1: 12.2.1 (MPI_WIN_CREATE), 12.2.2 (MPI_WIN_ALLOCATE), 12.2.3 (MPI_WIN_ALLOCATE_SHARED),
//! 12.2.4 (MPI_WIN_CREATE_DYNAMIC)

use super::direct::Direct;
use super::dynamic::Attached;
use super::{Extent, Flavor, Window};
use crate::alloc;
use crate::codec::{Dec, Enc};
use crate::config::TransportChoice;
use crate::error::in_call;
use crate::error::{Error, ErrorClass, Result};
use crate::info::{Info, WinHints};
use crate::protocol::epoch::Epochs;
use crate::protocol::layout::{self, NodeLayout, Region};
use crate::transport::net;
use crate::transport::shm::{BlockDesc, DataDesc, ShmKey, ShmTransport};
use crate::transport::{Attach, Caps, RemoteKey, Selection, Transport, select};
use crate::wait::Peers;
use crate::world::Comm;
use bytemuck::Pod;
use onesided_shm::{Mem, Segment};
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
            let bytes: &'a mut [u8] = bytemuck::cast_slice_mut(memory);
            let request = Request {
                flavor: Flavor::Create,
                size: bytes.len(),
                disp_unit,
                user: Some(Mem::from_slice(bytes)),
            };
            lend(build(comm, info, request)?, body)
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

/// Run `body` on `win`, which holds memory lent by the caller, then free the window; abort
/// if the memory cannot be handed back safely (see [`Window::create`]): unless every other
/// rank is known to be gone (processes of this node that exited cannot write any more, and the
/// window's NIC registrations close with it).
fn lend<'a, R>(win: Window<'a>, body: impl FnOnce(&Window<'a>) -> R) -> Result<R> {
    let out = {
        let _guard = AbortOnUnwind;
        body(&win)
    };
    let freed = win.release();
    let me = win.rank();
    let alone = || (0..win.size_of_group()).all(|r| r == me || win.peers.gone(r));
    if !freed.quiet && !alone() {
        abort_lent(&freed.result);
    }
    drop(win);
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

/// Create (lowest node rank) or map (the others) the node segment at an address that is a
/// multiple of `align`, then unlink its name.
fn node_segment(
    comm: &Comm,
    local: &[usize],
    name: &str,
    len: usize,
    align: usize,
) -> Result<Arc<Segment>> {
    let leader = comm.rank() == local[0];
    let created = if leader {
        Segment::create(name, len, align)
            .map(Some)
            .map_err(|e| Error::os("creating the window segment", e))
    } else {
        Ok(None)
    };
    let created = comm.agree("creating the window segment", created)?;
    let mapped = match created {
        Some(seg) => Ok(seg),
        None => {
            Segment::open(name, len, align).map_err(|e| Error::os("mapping the window segment", e))
        }
    };
    let mapped = comm.agree("mapping the window segment", mapped);
    if leader {
        Segment::unlink(name).map_err(|e| Error::os("unlinking the window segment", e))?;
    }
    Ok(Arc::new(mapped?))
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

fn build<'a>(comm: &Comm, info: &Info, req: Request<'a>) -> Result<Window<'a>> {
    let checked = check(&req, info);
    let align = checked.as_ref().map_or(1, |h| h.alignment);
    // Each rank sends whether it asks for accumulate_ops=same_op (in effect only where every
    // rank asks: the paths of accumulates depend on it, `protocol::native`), then its extent;
    // a rank that asserts same_size and same_disp_unit sends no extent: its own is everyone's.
    let same = checked
        .as_ref()
        .is_ok_and(|h| h.same_size && h.same_disp_unit);
    let same_op = checked.as_ref().is_ok_and(|h| h.same_op);
    let mine = match same {
        true => Enc::new().u64(same_op.into()).finish(),
        false => Enc::new()
            .u64(same_op.into())
            .u64(req.size as u64)
            .u64(req.disp_unit as u64)
            .u64(align as u64)
            .finish(),
    };
    let all = comm.agree_gather("window creation", checked.as_ref().map(|_| &mine[..]));
    let mut hints = checked?;
    let mut extents = Vec::with_capacity(comm.size());
    let mut aligns = Vec::with_capacity(comm.size());
    for bytes in all? {
        let mut d = Dec::new(&bytes);
        hints.same_op &= d.u64()? != 0;
        if d.is_empty() {
            extents.push(Extent {
                size: req.size,
                disp_unit: req.disp_unit,
            });
            aligns.push(align);
            continue;
        }
        extents.push(Extent {
            size: d.usize()?,
            disp_unit: d.usize()?,
        });
        aligns.push(d.usize()?);
    }
    let local = node_ranks(comm, req.flavor)?;
    let in_segment = req.flavor != Flavor::Create;
    let contiguous = req.flavor == Flavor::Shared && !hints.noncontig;
    let regions: Vec<Region> = local
        .iter()
        .map(|&r| Region {
            size: extents[r].size,
            align: aligns[r],
        })
        .collect();
    let NodeLayout {
        ctrl,
        data,
        total,
        align,
    } = layout::node_layout(&regions, comm.size(), in_segment, contiguous)
        .ok_or_else(|| Error::new(ErrorClass::NoMem, "window too large for one node"))?;
    // The ranks agreed on the configuration at start-up.
    // The network forced for every target (`fabric` or `verbs`), or needed for other nodes.
    let forced = comm.job().config.transport_choice() != TransportChoice::Auto;
    let fabric = forced || local.len() < comm.size();
    let name = format!(
        "onesided-{}-{:x}-{}-{}",
        comm.job().id,
        comm.id(),
        comm.next_seq(),
        local[0]
    );
    let segment = node_segment(comm, &local, &name, total, align)?;

    let me = comm.rank();
    let at = local.iter().position(|&r| r == me).unwrap_or(0);
    let own = ShmKey {
        segment: name,
        ctrl: ctrl[at],
        data: match &req.user {
            Some(m) => lent_desc(m),
            None => DataDesc::Segment {
                off: data[at],
                len: req.size,
            },
        },
    };
    let on_node = |r: usize| local.contains(&r);
    let keys = comm
        .allgather(&own.encode().0)?
        .into_iter()
        .enumerate()
        .map(|(r, k)| match on_node(r) {
            true => ShmKey::decode(&RemoteKey(k)).map(Some),
            false => Ok(None),
        })
        .collect::<Result<Vec<_>>>()?;
    let whole = Mem::from_segment(segment.clone());
    let mapped = comm.agree(
        "mapping alloc_mem memory of the node",
        map_blocks(me, &keys),
    )?;
    let shared: Vec<Option<Mem<'static>>> = keys
        .iter()
        .zip(mapped)
        .map(|(k, block)| match k.as_ref().map(|k| &k.data) {
            Some(DataDesc::Segment { off, len }) => whole.sub(*off, *len).ok(),
            _ => block,
        })
        .collect();
    let local_mem = match &req.user {
        Some(m) => m.clone(),
        None => whole
            .sub(data[at], req.size)
            .map_err(|_| Error::new(ErrorClass::Intern, "own window memory outside the segment"))?,
    };
    let pids: Vec<u32> = (0..comm.size())
        .map(|r| if on_node(r) { comm.pid_of(r) } else { 0 })
        .collect();
    let peers = Peers::new(pids.clone(), comm.job().liveness.clone());
    let net = match fabric {
        true => {
            let ctrl_mem = whole
                .sub(ctrl[at], layout::ctrl_block(comm.size()))
                .map_err(Error::from)?;
            Some(net::connect(
                comm,
                ctrl_mem,
                local_mem.clone(),
                peers.clone(),
            )?)
        }
        false => None,
    };
    let user = req.user;
    let shm = ShmTransport::connect(me, &keys, &segment, &shared, user, &pids, peers.clone())?;
    let others: Vec<Box<dyn Attach<'a> + 'a>> = net.into_iter().collect();
    let caps: Vec<&Caps> = std::iter::once(shm.caps())
        .chain(others.iter().map(|t| (t.as_ref() as &dyn Transport).caps()))
        .collect();
    // A forced network reaches every target, the node's included.
    let Selection { data, atomics } = select(&caps, comm.size(), |r| !forced && on_node(r))
        .ok_or_else(|| Error::new(ErrorClass::Intern, "a target no transport reaches"))?;
    tracing::debug!(
        flavor = ?req.flavor,
        size = req.size,
        targets = comm.size(),
        fabric = data.iter().filter(|&&t| t != 0).count(),
        forced,
        "window created: targets on this node through shared memory, the others through the fabric"
    );
    let atomics_ordered = caps[atomics].atomics_order_prior;
    let loaded = (0..comm.size())
        .filter(|&t| t == me || (req.flavor != Flavor::Dynamic && shared[t].is_some()))
        .collect();
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
    Ok(Window {
        comm: comm.clone(),
        flavor: req.flavor,
        hints: Cell::new(hints),
        atomics,
        atomics_ordered,
        direct,
        others,
        routes: data,
        peers,
        epochs: RefCell::new(Epochs::new(comm.size())),
        attached: RefCell::new(Attached::new(comm.size())),
        extents,
        local: local_mem,
        loaded,
        shared,
        shm,
        barriers: Cell::new(0),
        name: RefCell::new(String::new()),
        freed: Cell::new(false),
    })
}
