//! Whether the fabric serves this rank's windows, as far as the configuration and the ranks'
//! nodes decide it before any window exists: for `World::init`, which begins libfabric's
//! start-up where the fabric will serve (`fabric/start.rs`), and for memory registered ahead of
//! its windows (`net.rs`).

use crate::config::{Config, TransportChoice};
use std::thread::JoinHandle;

/// Begin libfabric's start-up on a thread of its own (`fabric/start.rs`) where this rank's
/// windows will use the fabric, `one_node` saying whether the job's ranks share one node.
/// `None` where the fabric will not serve, or this build has none.
pub(crate) fn start_fabric(config: &Config, one_node: bool) -> Option<Started> {
    let choice = config.transport_choice();
    // A device with an active port, not an endpoint opened on it: that is the first window's
    // to open, where one can be.
    let now = fabric_serves(choice, one_node, || {
        onesided_verbs::active_device().is_some()
    });
    if !now {
        return None;
    }
    #[cfg(have_libfabric)]
    return super::fabric::start::begin(config.fabric()).map(|t| Started(Some(t)));
    #[cfg(not(have_libfabric))]
    None
}

/// libfabric's start-up begun on a thread of its own: dropping this waits for it to end, so
/// that no process leaves while the thread is inside libfabric (whose exit handler frees the
/// providers under it), whether `World::init` failed after beginning it or the job ends.
#[derive(Debug)]
pub(crate) struct Started(Option<JoinHandle<()>>);

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(thread) = self.0.take() {
            let _ = thread.join();
        }
    }
}

/// Whether windows spanning `one_node` or not use the fabric on this rank under `choice`:
/// where it is forced, or under `auto` across nodes where this rank cannot open a verbs device
/// (`verbs_here`, asked only then).
pub(crate) fn fabric_serves(
    choice: TransportChoice,
    one_node: bool,
    verbs_here: impl FnOnce() -> bool,
) -> bool {
    match choice {
        TransportChoice::Fabric => true,
        TransportChoice::Verbs => false,
        TransportChoice::Auto => !one_node && !verbs_here(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fabric_serves_where_forced_and_across_nodes_without_verbs() {
        let never = || -> bool { panic!("verbs asked about where they cannot matter") };
        assert!(fabric_serves(TransportChoice::Fabric, true, never));
        assert!(!fabric_serves(TransportChoice::Verbs, false, never));
        assert!(!fabric_serves(TransportChoice::Auto, true, never));
        assert!(fabric_serves(TransportChoice::Auto, false, || false));
        assert!(!fabric_serves(TransportChoice::Auto, false, || true));
    }
}
