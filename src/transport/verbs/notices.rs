//! The sleep notices of this rank's control block: each rank of a window sets its own there
//! while it sleeps on its completion channel ([`layout::asleep_slot`]), so that a signal to it
//! is followed by a wake.

use crate::protocol::layout;
use onesided_shm::Mem;
use std::sync::atomic::Ordering;

/// Whether `target`'s sleep notice in `ctrl`, this rank's control block in a window of `ranks`
/// ranks, is set.
pub(super) fn asleep(ctrl: &Mem<'_>, ranks: usize, target: usize) -> bool {
    let word = ctrl.atomic_u64(layout::asleep_slot(ranks, target));
    word.is_ok_and(|w| w.load(Ordering::Acquire) != 0)
}
