//! The put form of the rod stencil (`rod/mod.rs`), whatever synchronizes it: every iteration
//! updates this rank's cells by local loads and stores, then `exchange` opens the epoch, calls
//! [`put_boundaries`] and closes it, so that the halos hold the neighbours' new boundary cells.

use crate::rod::{Rod, step};
use onesided::{Group, Window, World};

/// What one iteration's exchange needs: the window, the problem, the neighbour group and this
/// rank's new cells.
pub type Exchange = fn(&Window<'static>, &Rod, &Group, &[f64]) -> Result<(), String>;

/// Put the first cell of `next` into the left neighbour's right halo and the last into the
/// right neighbour's left halo (inside an access epoch that covers them).
pub fn put_boundaries(win: &Window<'_>, rod: &Rod, next: &[f64]) -> Result<(), String> {
    if let Some(l) = rod.left() {
        win.put(&next[..1], l, rod.len_of(l) + 1)
            .map_err(rod.err("put to the left neighbour"))?;
    }
    if let Some(r) = rod.right() {
        win.put(&next[rod.len - 1..], r, 0)
            .map_err(rod.err("put to the right neighbour"))?;
    }
    Ok(())
}

/// Run the stencil with `exchange` and check it against the serial run as `name`.
pub fn run(name: &str, exchange: Exchange) -> Result<(), String> {
    let world = World::init().map_err(|e| format!("joining the job: {e}"))?;
    let rod = Rod::new(&world)?;
    let group = rod.neighbours(&world)?;
    let (win, mut u) = rod.window(&world)?;
    let mut next = vec![0.0f64; rod.len];
    for _ in 0..rod.iters {
        // The halos hold the neighbours' values of the previous step.
        win.read_local(0, &mut u).map_err(rod.err("load"))?;
        for (i, cell) in next.iter_mut().enumerate() {
            *cell = step(u[i], u[i + 1], u[i + 2]);
        }
        win.write_local(1, &next).map_err(rod.err("store"))?;
        exchange(&win, &rod, &group, &next)?;
    }
    let mut mine = vec![0.0f64; rod.len];
    win.read_local(1, &mut mine)
        .map_err(rod.err("final load"))?;
    win.free().map_err(rod.err("free"))?;
    rod.check(&world, name, &mine)
}
