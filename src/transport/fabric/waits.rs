//! How a wait on the fabric for a target goes on, as the window's liveness watch says.

use crate::peers::Peers;
use onesided_fabric as fi;

/// How a wait on `target` of a window watched by `peers` should go on: give up once the job has
/// a failure or the rank's process is gone (a rank that finished and exited is no reason to
/// fail a wait on others); while a rank is stopped, sleep until traffic arrives instead of
/// polling.
pub(super) fn waiting(peers: &Peers, target: usize) -> fi::Waiting {
    if peers.job_alive().is_err() || peers.gone(target) {
        fi::Waiting::GiveUp
    } else if peers.any_stopped() {
        fi::Waiting::Idle
    } else {
        fi::Waiting::Poll
    }
}
