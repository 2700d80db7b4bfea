//! The world and its communicators: barrier, broadcast, allgather, split_shared, and windows
//! over the node communicators of a job on simulated nodes.
//!
//! # MPI-4.1: 6.3, 6.4 (collectives), 7.4.2 (MPI_COMM_SPLIT_TYPE), 12.2.3 (RMA_SHARED)

use crate::util::*;
use onesided::{Assert, ErrorClass, Flavor, Info, ThreadLevel, Window, World};

/// Rounds of [`barrier_separates`].
const ROUNDS: u64 = 40;

/// No rank leaves a barrier before every rank has entered it: in each round every rank puts
/// the round's number into its slot at every rank (lock_all, flush_all), then meets the others
/// in a barrier, after which each finds every slot of its window at that round or later. The
/// ranks of a node meet on shared memory, the nodes (simulated ones too) over the network.
pub fn barrier_separates(world: &World, _: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let win = Window::allocate(world, 8 * n, 8, &Info::new()).ctx("allocate")?;
    for round in 1..=ROUNDS {
        win.lock_all(Assert::NONE).ctx("lock_all")?;
        for t in 0..n {
            win.put(&[round], t, me).ctx("put")?;
        }
        win.flush_all().ctx("flush_all")?;
        win.unlock_all().ctx("unlock_all")?;
        // Stagger the arrivals, so that early ones wait.
        if (round as usize + me).is_multiple_of(n) {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        world.barrier().ctx("barrier")?;
        let slots = local_u64(&win, n)?;
        if let Some(r) = (0..n).find(|&r| slots[r] < round) {
            return Err(format!(
                "round {round}: rank {me} left the barrier while rank {r}'s slot held {}",
                slots[r]
            ));
        }
    }
    world.barrier().ctx("barrier")?;
    win.free().ctx("free")
}

/// Nodes the launcher simulates in the `nodes` scenario (`--simulate-nodes`).
pub const SIM_NODES: usize = 2;

pub fn collectives(world: &World, _: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    ensure_eq!(
        world.query_thread(),
        ThreadLevel::Funneled,
        "thread support of World::init"
    );
    ensure_eq!(
        world.group().world_ranks().to_vec(),
        (0..n).collect::<Vec<_>>(),
        "world group"
    );
    for _ in 0..3 {
        world.barrier().ctx("barrier")?;
    }
    for root in 0..n {
        let msg = format!("from root {root} of {n}").into_bytes();
        let mine = if me == root {
            msg.clone()
        } else {
            b"ignored".to_vec()
        };
        ensure_eq!(
            world.broadcast(root, &mine).ctx("broadcast")?,
            msg,
            "broadcast from {root}"
        );
    }
    ensure_eq!(
        world.broadcast(n - 1, &[]).ctx("empty broadcast")?,
        Vec::<u8>::new(),
        "empty broadcast"
    );
    // Contributions of different lengths, rank 0's empty, and one large one.
    let contribution = |r: usize| -> Vec<u8> {
        let len = if r == n - 1 { 100_000 } else { r * 3 };
        (0..len).map(|i| (r * 31 + i) as u8).collect()
    };
    for round in 0..2 {
        let all = world.allgather(&contribution(me)).ctx("allgather")?;
        ensure_eq!(all.len(), n, "allgather length, round {round}");
        for (r, got) in all.iter().enumerate() {
            ensure!(
                *got == contribution(r),
                "allgather: rank {r}'s contribution differs (round {round})"
            );
        }
    }
    let node = world.split_shared().ctx("split_shared")?;
    ensure_eq!(
        (node.rank(), node.size()),
        (me, n),
        "split_shared on one node"
    );
    ensure_eq!(
        node.group(),
        world.group(),
        "group of the node communicator"
    );
    let all = node
        .allgather(&[me as u8])
        .ctx("allgather on the node comm")?;
    ensure_eq!(
        all,
        (0..n).map(|r| vec![r as u8]).collect::<Vec<_>>(),
        "node allgather"
    );
    world.barrier().ctx("barrier")
}

/// Under `--simulate-nodes 2`: allocate_shared over the world is RMA_SHARED on every rank;
/// split_shared gives the ranks of each simulated node, and shared windows over those work.
pub fn nodes(world: &World, _: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let node_of = |r: usize| r * SIM_NODES / n;
    let r = Window::allocate_shared(world, 64, 8, &Info::new()).map(drop);
    expect_class(
        r,
        ErrorClass::RmaShared,
        "allocate_shared over ranks of two nodes",
    )?;
    let r = Window::allocate_shared(
        world,
        64,
        8,
        &Info::new().set("alloc_shared_noncontig", "true"),
    )
    .map(drop);
    expect_class(
        r,
        ErrorClass::RmaShared,
        "noncontig allocate_shared over two nodes",
    )?;

    let node = world.split_shared().ctx("split_shared")?;
    let members: Vec<usize> = (0..n).filter(|&r| node_of(r) == node_of(me)).collect();
    ensure_eq!(
        node.group().world_ranks().to_vec(),
        members,
        "members of rank {me}'s node"
    );
    ensure_eq!(node.size(), members.len(), "node size");
    ensure_eq!(
        Some(node.rank()),
        members.iter().position(|&r| r == me),
        "node rank"
    );
    if n == 4 {
        ensure_eq!(node.size(), 2, "four ranks on two nodes: two per node");
    }
    let all = node.allgather(&[me as u8]).ctx("allgather on the node")?;
    ensure_eq!(
        all,
        members.iter().map(|&r| vec![r as u8]).collect::<Vec<_>>(),
        "node allgather"
    );

    crate::shared::query_and_store(world, &node, &Info::new(), false)?;
    crate::shared::query_and_store(
        world,
        &node,
        &Info::new().set("alloc_shared_noncontig", "true"),
        true,
    )?;
    // Allocate and create windows over the node communicator: a ring of puts under fence.
    for flavor in [Flavor::Allocate, Flavor::Create] {
        let (nr, nn) = (node.rank(), node.size());
        with_window(&node, flavor, 8 * nn, 8, &Info::new(), |win| {
            win.fence(Assert::NOPRECEDE).ctx("fence")?;
            win.put(&[tag(me, 0, 5)], (nr + 1) % nn, nr)
                .ctx("put on the node")?;
            win.fence(Assert::NOSUCCEED).ctx("fence")?;
            let from = (nr + nn - 1) % nn;
            ensure_eq!(
                local_u64(win, nn)?[from],
                tag(members[from], 0, 5),
                "put from node rank {from}"
            );
            Ok(())
        })?;
    }
    world.barrier().ctx("world barrier after the node windows")
}

/// The handlers [`signal_handlers_stay`] checks: installed by the rank before `World::init`.
pub static SIGNALS: std::sync::OnceLock<onesided_shm::process::TerminationSignals> =
    std::sync::OnceLock::new();

/// Handlers the program installed before `World::init` still catch SIGINT and SIGTERM once the
/// job's first window has opened its transport: over the fabric, loading libfabric loads QLogic
/// PSM's `libinfinipath` too (Debian's build links it), whose constructor replaces them with its
/// own (a backtrace file, then exit status 1) unless `IPATH_NO_BACKTRACE` is set. `World::init`
/// sets it (the launcher does too: the trials without it, `direct`, are the ones that show
/// `World::init`'s). Each rank puts to every rank, then signals itself and must see its own
/// handler record the signal.
pub fn signal_handlers_stay(world: &World, _: Flavor) -> Res {
    use onesided_shm::process::{SIGINT, SIGTERM, kill};
    let (me, n) = (world.rank(), world.size());
    let signals = SIGNALS
        .get()
        .ok_or("the rank installed no handlers before World::init")?;
    let win = Window::allocate(world, 8 * n, 8, &Info::new()).ctx("allocate")?;
    win.lock_all(Assert::NONE).ctx("lock_all")?;
    for t in 0..n {
        win.put(&[me as u64 + 1], t, me).ctx("put")?;
    }
    win.flush_all().ctx("flush_all")?;
    win.unlock_all().ctx("unlock_all")?;
    world.barrier().ctx("barrier")?;
    let slots = local_u64(&win, n)?;
    ensure_eq!(
        slots,
        (1..=n as u64).collect::<Vec<_>>(),
        "window after the puts"
    );
    for sig in [SIGINT, SIGTERM] {
        kill(std::process::id(), sig).map_err(|e| format!("signalling itself: {e}"))?;
        // The kernel runs the handler before kill returns to this thread, or on another of
        // the process's threads: give that one a moment.
        let start = std::time::Instant::now();
        let mut caught = signals.take();
        while caught.is_none() && start.elapsed() < std::time::Duration::from_secs(1) {
            std::thread::sleep(std::time::Duration::from_millis(1));
            caught = signals.take();
        }
        ensure_eq!(caught, Some(sig), "the program's handler after kill({sig})");
    }
    world.barrier().ctx("barrier")?;
    win.free().ctx("free")
}

/// A process joins its job once, as MPI initializes once: a second `World::init` under a
/// process manager fails with MPI_ERR_OTHER, saying so, and leaves the first world as it was
/// (every process manager used to answer differently: onesided's launcher refused the rank as
/// connected already, PMIx made a second world over the same job, PMI-1 found its socket
/// taken). Without a process manager it makes a new world of one rank.
///
/// # MPI-4.1: 11.2.1 (MPI_INIT)
pub fn init_once(world: &World, _: Flavor) -> Result<(), String> {
    let (me, n) = (world.rank(), world.size());
    match World::init() {
        Ok(second) if n == 1 => {
            ensure_eq!(
                (second.rank(), second.size()),
                (0, 1),
                "a second world without a process manager"
            );
            second.barrier().ctx("the second world's barrier")?;
        }
        Ok(second) => {
            return Err(format!(
                "a second World::init under a process manager gave rank {} of {}",
                second.rank(),
                second.size()
            ));
        }
        Err(e) => {
            ensure!(
                n > 1,
                "a second world without a process manager failed: {e}"
            );
            ensure_eq!(
                e.class(),
                ErrorClass::Other,
                "class of the second World::init"
            );
            let says = format!("joined its job already, as rank {me} of {n}");
            ensure!(
                e.to_string().contains(&says),
                "the error should say {says:?}: {e}"
            );
        }
    }
    let win = Window::allocate(world, 8, 8, &Info::new()).ctx("allocate after it")?;
    win.fence(Assert::NONE).ctx("fence")?;
    win.put(&[me as u64 + 1], (me + 1) % n, 0).ctx("put")?;
    win.fence(Assert::NONE).ctx("fence")?;
    let got = local_u64(&win, 1)?;
    ensure_eq!(
        got,
        vec![((me + n - 1) % n) as u64 + 1],
        "the left neighbour's put"
    );
    win.free().ctx("free")
}

/// A process the program starts after its first window inherits none of the TCP sockets the
/// window's transports opened: libfabric's tcp provider opens its sockets without
/// close-on-exec, and a child held the rank's listening socket and connections open after the
/// rank was gone. Each rank notes the TCP sockets it holds (those of its process manager among
/// them, which are not onesided's), puts to every rank, starts a shell that lists its
/// descriptors, and looks each of them up among this network namespace's TCP sockets.
pub fn children_get_no_tcp_sockets(world: &World, _: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    let before = held_tcp_sockets();
    let win = Window::allocate(world, 8 * n, 8, &Info::new()).ctx("allocate")?;
    win.fence(Assert::NONE).ctx("fence")?;
    for t in 0..n {
        win.put(&[me as u64 + 1], t, me).ctx("put")?;
    }
    win.fence(Assert::NONE).ctx("fence")?;
    let opened: Vec<String> = held_tcp_sockets()
        .into_iter()
        .filter(|s| !before.contains(s))
        .collect();
    let listed = std::process::Command::new("sh")
        .args(["-c", "for f in /proc/$$/fd/*; do readlink \"$f\"; done"])
        .output()
        .map_err(|e| format!("starting sh: {e}"))?;
    let listed = String::from_utf8_lossy(&listed.stdout);
    let inherited: Vec<&str> = listed
        .lines()
        .filter(|l| opened.iter().any(|s| s == l))
        .collect();
    ensure!(
        inherited.is_empty(),
        "rank {me}'s child inherited {inherited:?} of the {} TCP sockets the window's transports \
         opened",
        opened.len()
    );
    win.fence(Assert::NONE).ctx("fence")?;
    win.free().ctx("free")
}

/// The TCP sockets this process holds, as `/proc/self/fd` names them (`socket:[INODE]`).
fn held_tcp_sockets() -> Vec<String> {
    let tcp: Vec<String> = ["/proc/self/net/tcp", "/proc/self/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|t| {
            t.lines()
                .skip(1)
                .filter_map(|l| l.split_whitespace().nth(9).map(|i| format!("socket:[{i}]")))
                .collect::<Vec<_>>()
        })
        .collect();
    std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|l| l.to_string_lossy().into_owned())
        .filter(|l| tcp.contains(l))
        .collect()
}
