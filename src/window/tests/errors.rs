//! Error classes of windows: ranges, ranks, creation arguments that every rank learns of, and
//! shared memory that the ranks' nodes cannot give. A refused call moves nothing.
//!
//! # MPI-4.1: 9.4, 12.8 (error classes)

use super::*;
use crate::{Assert, LockType, Op};

const SLOTS: usize = 4;

/// RMA_RANGE: puts and gets past the end (and displacements whose byte offset overflows)
/// fail, move nothing and change no epoch; a put into the last slot lands.
#[test]
fn out_of_range_access_moves_nothing() {
    let n = 3;
    for flavor in FLAVORS {
        with_window(n, flavor, SLOTS, |_, win| {
            let me = win.rank();
            let (left, right) = ((me + n - 1) % n, (me + 1) % n);
            let mine: Vec<u64> = (0..SLOTS).map(|i| tag(me, me, i)).collect();
            win.write_local(0, &mine).unwrap();
            win.fence(Assert::NOPRECEDE).unwrap();
            let bad = [
                (SLOTS, 1),
                (SLOTS - 1, 2),
                (usize::MAX, 1),
                (usize::MAX / 8 + 1, 1),
            ];
            for (disp, len) in bad {
                let data = vec![u64::MAX; len];
                refused(win.put(&data, right, disp), ErrorClass::RmaRange);
                let mut buf = vec![0x1234u64; len];
                refused(win.get(&mut buf, right, disp), ErrorClass::RmaRange);
                assert!(
                    buf.iter().all(|&x| x == 0x1234),
                    "a refused get wrote {buf:x?}"
                );
            }
            let mut big = [0u64; SLOTS + 1];
            refused(win.get(&mut big, right, 0), ErrorClass::RmaRange);
            // Nothing was issued: the epoch may still be closed with NOPRECEDE.
            win.fence(Assert::NOPRECEDE).unwrap();
            win.put(&[tag(me, right, 9)], right, SLOTS - 1).unwrap();
            win.fence(Assert::NOSUCCEED).unwrap();
            let mut want = mine;
            want[SLOTS - 1] = tag(left, me, 9);
            assert_eq!(local(win, SLOTS), want, "window of rank {me}");

            win.lock(LockType::Exclusive, right, Assert::NONE).unwrap();
            refused(win.put(&[0u64; 3], right, 2), ErrorClass::RmaRange);
            win.unlock(right).unwrap();
            refused(win.write_local(SLOTS - 1, &[0u64; 2]), ErrorClass::RmaRange);
            let mut two = [0u64; 2];
            refused(win.read_local(SLOTS - 1, &mut two), ErrorClass::RmaRange);
        });
    }
}

/// RANK: targets outside the window's group, for every call that names one.
#[test]
fn targets_outside_the_group_are_refused() {
    let n = 2;
    with_window(n, Flavor::Allocate, 1, |_, win| {
        win.fence(Assert::NOPRECEDE).unwrap();
        refused(win.put(&[1u64], n, 0), ErrorClass::Rank);
        refused(win.get(&mut [0u64], n, 0), ErrorClass::Rank);
        refused(win.fetch_and_op(1u64, n, 0, Op::Sum), ErrorClass::Rank);
        refused(win.transport_name(n), ErrorClass::Rank);
        refused(win.shared_query(Some(n)), ErrorClass::Rank);
        win.fence(Assert::NOSUCCEED).unwrap();
        refused(
            win.lock(LockType::Shared, n, Assert::NONE),
            ErrorClass::Rank,
        );
        refused(win.unlock(n), ErrorClass::Rank);
        refused(win.flush(n), ErrorClass::Rank);
    });
}

/// One rank's bad argument fails the creation on every rank, with the class of that rank's
/// error, and nobody waits forever.
#[test]
fn one_bad_creation_argument_fails_every_rank() {
    let n = 3;
    let cases: [(&str, usize, Info, ErrorClass); 3] = [
        ("displacement unit 0", 0, Info::new(), ErrorClass::Disp),
        (
            "no_locks=maybe",
            8,
            Info::new().set("no_locks", "maybe"),
            ErrorClass::Info,
        ),
        (
            "alignment 3",
            8,
            Info::new().set("mpi_minimum_memory_alignment", "3"),
            ErrorClass::Info,
        ),
    ];
    for (what, unit, info, class) in cases {
        let made = inproc::run(n, |world| {
            let (unit, info) = match world.rank() {
                1 => (unit, info.clone()),
                _ => (8, Info::new()),
            };
            window(&world, Flavor::Allocate, 64, unit, &info).map(drop)
        });
        for (r, m) in made.into_iter().enumerate() {
            let e = m.unwrap_err();
            assert_eq!(e.class(), class, "{what}, rank {r}: {e}");
            if r != 1 {
                assert!(e.message().contains("on rank 1"), "{what}, rank {r}: {e}");
            }
        }
    }
}

/// RMA_SHARED: an allocate_shared window over ranks of two nodes, on every rank. Within one
/// node, every rank's memory is directly reachable, contiguous in rank order by default.
#[test]
fn shared_memory_stops_at_the_node() {
    let made = inproc::run_on(&["a", "a", "b"], |world| {
        let across = Window::allocate_shared(&world, 64, 8, &Info::new()).map(drop);
        let node = world.split_shared().unwrap();
        let win = Window::allocate_shared(&node, 8 * (node.rank() + 1), 8, &Info::new()).unwrap();
        let bases: Vec<(usize, usize)> = (0..node.size())
            .map(|r| {
                let q = win.shared_query(Some(r)).unwrap();
                (q.base_addr(), q.size())
            })
            .collect();
        win.free().unwrap();
        (across, bases)
    });
    for (r, (across, bases)) in made.iter().enumerate() {
        let e = across.as_ref().unwrap_err();
        assert_eq!(e.class(), ErrorClass::RmaShared, "rank {r}: {e}");
        for pair in bases.windows(2) {
            assert_eq!(pair[0].0 + pair[0].1, pair[1].0, "contiguous, rank {r}");
        }
    }
    assert_eq!(made[0].1.len(), 2);
    assert_eq!(made[2].1, vec![(made[2].1[0].0, 8)]);
}
