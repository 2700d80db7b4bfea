//! The fast tier of window tests: ranks that are threads of this process
//! (`world::inproc`), running the production window code (creation over a node segment,
//! epochs, lock words, the shared-memory transport's copies and atomics). Each test asserts
//! values that only the semantics it names can give; the multi-process trials of
//! `cli/tests/ranks` stay for what needs processes. Every test runs twice: over shared memory,
//! whose operations complete when issued, then with every target through a transport whose
//! data completes only at a flush (`transport::deferred`, as a NIC's), so that a flush the
//! window forgets shows as a wrong value.

mod atomics;
mod creation;
mod deferral;
mod errors;
mod fence;
mod notify;
mod passive;
mod requests;

use super::{Flavor, Window};
use crate::error::{ErrorClass, Result};
use crate::info::Info;
use crate::protocol::layout;
use crate::protocol::lockword::Amo;
use crate::transport::{Space, deferred};
use crate::world::{Comm, World, inproc};

/// The flavors whose memory onesided allocates (create windows need processes).
const FLAVORS: [Flavor; 2] = [Flavor::Allocate, Flavor::Shared];

/// A value that names who wrote it where: slot `i` written by `origin` into `target`.
fn tag(origin: usize, target: usize, i: usize) -> u64 {
    ((origin as u64 + 1) << 48) | ((target as u64 + 1) << 32) | i as u64
}

/// A window of `flavor` over `comm`, with `bytes` bytes on this rank.
fn window(
    comm: &Comm,
    flavor: Flavor,
    bytes: usize,
    disp_unit: usize,
    info: &Info,
) -> Result<Window<'static>> {
    match flavor {
        Flavor::Shared => Window::allocate_shared(comm, bytes, disp_unit, info),
        _ => Window::allocate(comm, bytes, disp_unit, info),
    }
}

/// Run `body` on `n` ranks, each with a window of `flavor` of `slots` zeroed `u64`s (unit 8),
/// which is freed after `body` (and must free cleanly): over shared memory, then again with
/// every target through the transport whose data completes at flush
/// (`transport::deferred`); the results of the second run, in rank order.
fn with_window<R: Send>(
    n: usize,
    flavor: Flavor,
    slots: usize,
    body: impl Fn(&World, &Window<'static>) -> R + Sync,
) -> Vec<R> {
    let run = |deferred: bool| {
        inproc::run(n, |world| {
            deferred::defer_data(deferred);
            let win = window(&world, flavor, 8 * slots, 8, &Info::new()).unwrap();
            let want = if deferred { "deferred" } else { "shm" };
            assert_eq!(win.transport_name((win.rank() + 1) % n).unwrap(), want);
            let out = body(&world, &win);
            win.free().unwrap();
            deferred::defer_data(false);
            out
        })
    };
    run(false);
    run(true)
}

/// This rank's window memory as `slots` `u64`s.
fn local(win: &Window<'_>, slots: usize) -> Vec<u64> {
    let mut out = vec![0u64; slots];
    win.read_local(0, &mut out).unwrap();
    out
}

/// The lock word of `target`, read with the window's own atomics.
fn lock_word(win: &Window<'_>, target: usize) -> u64 {
    win.atomic_route()
        .amo(target, Space::Control, layout::LOCK, Amo::Load)
        .unwrap()
}

/// Asserts that `r` failed with `class`.
#[track_caller]
fn refused<T: std::fmt::Debug>(r: Result<T>, class: ErrorClass) {
    match r {
        Err(e) => assert_eq!(e.class(), class, "{e}"),
        Ok(v) => panic!("expected {class}, got Ok({v:?})"),
    }
}
