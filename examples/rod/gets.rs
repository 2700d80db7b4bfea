//! The split-phase get form of the rod stencil (`rod/mod.rs`), whatever synchronizes it: each
//! iteration updates the two boundary cells of this rank's block first (they need the halos),
//! then `epochs.open` begins the epochs in which the neighbours read them, the neighbours' new
//! boundary cells are got into the halos for the next iteration while the interior is updated,
//! overlapping the communication, and `epochs.close` ends the epochs. Cells of the previous
//! iteration are read from a private copy, so every cell is computed from its neighbours'
//! values of one and the same iteration, and the result equals a serial run bit for bit.

use crate::rod::{Rod, step};
use onesided::{Group, Window, World};

/// How the gets of one iteration are synchronized.
pub struct Epochs {
    /// Begin the epochs, once this rank's boundary cells are stored.
    pub open: fn(&Window<'static>, &Group) -> onesided::Result<()>,
    /// End them, once the interior is updated.
    pub close: fn(&Window<'static>) -> onesided::Result<()>,
}

/// Run the stencil with `epochs` and check it against the serial run as `name`.
pub fn run(name: &str, epochs: Epochs) -> Result<(), String> {
    let world = World::init().map_err(|e| format!("joining the job: {e}"))?;
    let rod = Rod::new(&world)?;
    let len = rod.len;
    let e = |what| rod.err(what);
    let group = rod.neighbours(&world)?;
    // The window's boundary cells are what the neighbours read; `u` holds this iteration's
    // values with halos (private), `next` the next iteration's.
    let (win, mut u) = rod.window(&world)?;
    let mut next = u.clone();
    for _ in 0..rod.iters {
        // Boundary cells first: the neighbours read them in this iteration's epoch.
        next[1] = step(u[0], u[1], u[2]);
        next[len] = step(u[len - 1], u[len], u[len + 1]);
        win.write_local(1, &next[1..2]).map_err(e("store"))?;
        win.write_local(len, &next[len..len + 1])
            .map_err(e("store"))?;
        (epochs.open)(&win, &group).map_err(e("opening the epochs"))?;
        if let Some(l) = rod.left() {
            win.get(&mut next[..1], l, rod.len_of(l))
                .map_err(e("get from the left neighbour"))?;
        }
        if let Some(r) = rod.right() {
            win.get(&mut next[len + 1..], r, 1)
                .map_err(e("get from the right neighbour"))?;
        }
        // The interior, while the epochs are open.
        for i in 2..len {
            next[i] = step(u[i - 1], u[i], u[i + 1]);
        }
        (epochs.close)(&win).map_err(e("closing the epochs"))?;
        win.write_local(2, &next[2..len.max(2)])
            .map_err(e("store"))?;
        std::mem::swap(&mut u, &mut next);
    }
    win.free().map_err(e("free"))?;
    rod.check(&world, name, &u[1..=len])
}
