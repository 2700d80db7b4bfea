//! Shared-memory windows: shared_query, contiguous and noncontiguous layouts, loads and stores
//! through [`onesided::SharedRegion`], and shared_query on the other flavors.
//!
//! # MPI-4.1: 12.2.3 (MPI_WIN_ALLOCATE_SHARED, MPI_WIN_SHARED_QUERY), 12.7 (memory model)

use crate::util::*;
use onesided::{Assert, Comm, ErrorClass, Flavor, Info, World};
use std::sync::atomic::Ordering;

const PAGE: usize = 4096;
/// Atomic increments per rank on the shared counter.
const INCREMENTS: u64 = 100;

/// Sizes with empty windows at rank 0 and every third rank; the others hold one u64 slot per
/// rank plus a counter. Empty windows get disp_unit 1, so that disp_unit() of a region is seen
/// to be its owner's.
fn layout(r: usize, n: usize) -> (usize, usize) {
    if r.is_multiple_of(3) {
        (0, 1)
    } else {
        (8 * (n + 1), 8)
    }
}

pub fn contiguous(world: &World, _: Flavor) -> Res {
    query_and_store(world, world.comm(), &Info::new(), false)
}

pub fn noncontiguous(world: &World, _: Flavor) -> Res {
    let info = Info::new().set("alloc_shared_noncontig", "true");
    query_and_store(world, world.comm(), &info, true)
}

/// Checks shared_query on an allocate_shared window over `comm`, then stores through the
/// regions of other ranks and loads them back elsewhere.
pub fn query_and_store(world: &World, comm: &Comm, info: &Info, noncontig: bool) -> Res {
    let (me, n) = (comm.rank(), comm.size());
    let (bytes, du) = layout(me, n);
    with_window(comm, Flavor::Shared, bytes, du, info, |win| {
        let flag = if noncontig { "true" } else { "false" };
        ensure_eq!(
            win.info().get("alloc_shared_noncontig"),
            Some(flag),
            "info alloc_shared_noncontig"
        );
        let regions = (0..n)
            .map(|r| win.shared_query(Some(r)).ctx(&format!("shared_query({r})")))
            .collect::<Result<Vec<_>, _>>()?;
        for (r, q) in regions.iter().enumerate() {
            ensure_eq!(
                (q.size(), q.disp_unit()),
                layout(r, n),
                "size and disp_unit of rank {r}'s region"
            );
            if q.size() > 0 {
                ensure!(q.base_addr() != 0, "rank {r}'s region has no address");
            }
        }
        let filled: Vec<usize> = (0..n).filter(|&r| layout(r, n).0 > 0).collect();
        for pair in filled.windows(2) {
            let (a, b) = (&regions[pair[0]], &regions[pair[1]]);
            if noncontig {
                ensure!(
                    b.base_addr() % PAGE == 0,
                    "noncontig region of rank {} at {:#x}",
                    pair[1],
                    b.base_addr()
                );
            } else {
                ensure!(
                    b.base_addr() == a.base_addr() + a.size(),
                    "contiguous layout: rank {} at {:#x}, rank {} at {:#x} + {}",
                    pair[1],
                    b.base_addr(),
                    pair[0],
                    a.base_addr(),
                    a.size()
                );
            }
        }
        let lowest = win.shared_query(None).ctx("shared_query(None)")?;
        if let Some(&first) = filled.first() {
            ensure_eq!(
                lowest.base_addr(),
                regions[first].base_addr(),
                "shared_query(None) is rank {first}"
            );
            ensure_eq!(
                lowest.size(),
                regions[first].size(),
                "size of shared_query(None)"
            );
            if noncontig {
                ensure!(
                    lowest.base_addr() % PAGE == 0,
                    "noncontig region at {:#x}",
                    lowest.base_addr()
                );
            }
        }
        expect_class(
            win.shared_query(Some(n)),
            ErrorClass::Rank,
            "shared_query(size)",
        )?;

        // Stores: every rank writes its slot of every filled region, and bumps a counter in the
        // lowest filled region with CPU atomics.
        win.lock_all(Assert::NOCHECK).ctx("lock_all")?;
        for &t in &filled {
            regions[t]
                .write(me, &[tag(me, t, 3)])
                .ctx("store through a region")?;
        }
        if let Some(&first) = filled.first() {
            let counter = regions[first].atomic_u64(8 * n).ctx("atomic_u64")?;
            for _ in 0..INCREMENTS {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        }
        win.sync().ctx("sync")?;
        comm.barrier().ctx("barrier")?;
        win.sync().ctx("sync")?;
        for &t in &filled {
            let mut got = vec![0u64; n + 1];
            regions[t].read(0, &mut got).ctx("load through a region")?;
            for (w, &slot) in got.iter().enumerate().take(n) {
                ensure_eq!(slot, tag(w, t, 3), "slot {w} of rank {t}'s region");
            }
            let want = if Some(&t) == filled.first() {
                n as u64 * INCREMENTS
            } else {
                0
            };
            ensure_eq!(got[n], want, "counter of rank {t}'s region");
            ensure!(
                regions[t]
                    .write(n + 1, &[0u64])
                    .is_err_and(|e| e.class() == ErrorClass::RmaRange),
                "a store past the end of rank {t}'s region must be RMA_RANGE"
            );
        }
        if bytes > 0 {
            let own = local_u64(win, n + 1)?;
            ensure_eq!(
                own[(me + 1) % n],
                tag((me + 1) % n, me, 3),
                "own window by read_local"
            );
        }
        win.unlock_all().ctx("unlock_all")?;
        let _ = world;
        Ok(())
    })
}

/// shared_query on allocate and create windows: the own region always; on a create window the
/// memory of other ranks is not reachable (size 0, loads fail).
pub fn other_flavors(world: &World, flavor: Flavor) -> Res {
    let (me, n) = (world.rank(), world.size());
    with_window(world, flavor, 8 * (me + 1), 8, &Info::new(), |win| {
        win.write_local(me, &[tag(me, me, 4)]).ctx("write_local")?;
        let own = win.shared_query(Some(me)).ctx("own shared_query")?;
        ensure_eq!(own.size(), 8 * (me + 1), "own region size");
        ensure_eq!(own.base_addr(), win.base_addr(), "own region base");
        let mut x = [0u64];
        own.read(me, &mut x).ctx("load of own region")?;
        ensure_eq!(x[0], tag(me, me, 4), "own region load");
        for r in (0..n).filter(|&r| r != me) {
            let q = win.shared_query(Some(r)).ctx("shared_query")?;
            ensure_eq!(q.disp_unit(), 8, "disp_unit of rank {r}'s region");
            if flavor == Flavor::Create {
                ensure_eq!(
                    q.size(),
                    0,
                    "size of rank {r}'s create memory seen by shared_query"
                );
                ensure_eq!(q.base_addr(), 0, "address of rank {r}'s create memory");
                expect_class(
                    q.read(0, &mut x),
                    ErrorClass::RmaRange,
                    "load of unreachable memory",
                )?;
            }
        }
        if flavor == Flavor::Create && n > 1 {
            let lowest = win.shared_query(None).ctx("shared_query(None)")?;
            ensure_eq!(
                lowest.size(),
                if me == 0 { 8 } else { 0 },
                "shared_query(None) on a create window"
            );
        }
        world.barrier().ctx("barrier")
    })
}
