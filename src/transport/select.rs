//! Which transport serves which target, decided from the transports' declared [`Caps`] alone:
//! free of I/O, so that every rule is unit-tested.
//!
//! A window lists its transports in order of preference (shared memory first) and asks
//! [`select`] for a transport index per target and one index for every atomic. Data goes
//! through the first transport that reaches the target; atomics, lock words included, go through
//! one transport for the whole window, since the CPU atomics of shared memory and a NIC's
//! atomics are not atomic with respect to each other (MPICH decides the same way per window):
//! the data transport when every target uses the same one, else the first that reaches every
//! target.

use super::{Caps, Reach};

/// The transport index of each target's data, and of every atomic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Selection {
    pub(crate) data: Vec<usize>,
    pub(crate) atomics: usize,
}

/// Choose among `transports` (in order of preference) for `targets` ranks, of which `on_node`
/// tells those on this rank's node. `None` when some target is reached by none.
pub(crate) fn select(
    transports: &[&Caps],
    targets: usize,
    on_node: impl Fn(usize) -> bool,
) -> Option<Selection> {
    let reaches = |c: &Caps, r: usize| match c.reach {
        Reach::Node => on_node(r),
        #[cfg(any(have_nic, test))]
        Reach::Any => true,
    };
    let data = (0..targets)
        .map(|r| transports.iter().position(|c| reaches(c, r)))
        .collect::<Option<Vec<usize>>>()?;
    let atomics = match data.split_first() {
        Some((&first, rest)) if rest.iter().all(|&t| t == first) => first,
        _ => transports
            .iter()
            .position(|c| (0..targets).all(|r| reaches(c, r)))
            .unwrap_or(0),
    };
    Some(Selection { data, atomics })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(name: &'static str, reach: Reach) -> Caps {
        Caps {
            name,
            reach,
            load_store: reach == Reach::Node,
            needs_target_progress: false,
            wakes_sleepers: false,
            wakes_by_completion: false,
            atomics_order_prior: false,
            inject: 0,
            max_msg: usize::MAX,
            local_mr: false,
            native_atomics: crate::protocol::native::NativeOps::NONE,
            cpu_atomics: reach == Reach::Node,
        }
    }

    #[test]
    fn one_node_is_shared_memory_throughout() {
        let (shm, net) = (caps("shm", Reach::Node), caps("fabric", Reach::Any));
        let s = select(&[&shm, &net], 4, |_| true).unwrap();
        assert_eq!(s.data, vec![0; 4]);
        assert_eq!(s.atomics, 0);
    }

    #[test]
    fn targets_off_node_take_the_fabric_and_so_do_all_atomics() {
        let (shm, net) = (caps("shm", Reach::Node), caps("fabric", Reach::Any));
        let s = select(&[&shm, &net], 4, |r| r < 2).unwrap();
        assert_eq!(s.data, vec![0, 0, 1, 1]);
        assert_eq!(s.atomics, 1, "one transport for every atomic");
    }

    #[test]
    fn a_forced_fabric_is_a_list_without_shared_memory() {
        let net = caps("fabric", Reach::Any);
        let s = select(&[&net], 3, |_| true).unwrap();
        assert_eq!(s.data, vec![0; 3]);
        assert_eq!(s.atomics, 0);
    }

    #[test]
    fn a_target_nothing_reaches_is_no_selection() {
        let shm = caps("shm", Reach::Node);
        assert_eq!(select(&[&shm], 3, |r| r != 1), None);
    }
}
