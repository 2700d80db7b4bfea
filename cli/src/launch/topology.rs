//! CPU sets from the topology hwloc reports (feature `hwloc`): whole cores and NUMA nodes, in
//! hwloc's logical order, each cut down to the CPUs this launcher may use.

use hwlocality::Topology;
use hwlocality::object::types::ObjectType;
use onesided::{Error, ErrorClass, Result};

/// The hardware threads of each core with one in `allowed`, that far.
pub(super) fn cores(allowed: &[usize]) -> Result<Vec<Vec<usize>>> {
    sets_of(ObjectType::Core, "core", allowed)
}

/// The CPUs of each NUMA node with one in `allowed`, that far.
pub(super) fn numa_nodes(allowed: &[usize]) -> Result<Vec<Vec<usize>>> {
    sets_of(ObjectType::NUMANode, "NUMA node", allowed)
}

/// The CPU sets of the objects of type `ty` (named `what` in errors), cut to `allowed`.
fn sets_of(ty: ObjectType, what: &str, allowed: &[usize]) -> Result<Vec<Vec<usize>>> {
    let topology = Topology::new().map_err(|e| {
        Error::new(
            ErrorClass::Other,
            format!("hwloc: loading the topology: {e}"),
        )
    })?;
    let sets = topology
        .objects_with_type(ty)
        .map(|object| {
            object
                .cpuset()
                .map(|set| set.iter_set().map(usize::from).collect())
                .unwrap_or_default()
        })
        .collect();
    let sets = restrict(sets, allowed);
    if sets.is_empty() {
        return Err(Error::new(
            ErrorClass::Other,
            format!("hwloc reports no {what} with a CPU this launcher may use"),
        ));
    }
    Ok(sets)
}

/// Each of `sets` cut to the CPUs in `allowed`; those left empty are dropped.
fn restrict(sets: Vec<Vec<usize>>, allowed: &[usize]) -> Vec<Vec<usize>> {
    sets.into_iter()
        .map(|set| {
            set.into_iter()
                .filter(|cpu| allowed.contains(cpu))
                .collect()
        })
        .filter(|set: &Vec<usize>| !set.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{cores, numa_nodes, restrict};

    #[test]
    fn sets_are_cut_to_the_allowed_cpus_and_empty_ones_dropped() {
        let smt = vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]];
        assert_eq!(
            restrict(smt.clone(), &[0, 1, 2, 3, 4, 5, 6, 7]),
            smt,
            "all allowed"
        );
        assert_eq!(
            restrict(smt, &[1, 2, 5]),
            vec![vec![1, 5], vec![2]],
            "cores 0 and 3 have no allowed thread"
        );
        let nodes = vec![vec![0, 1, 2, 3], vec![], vec![4, 5, 6, 7]];
        assert_eq!(
            restrict(nodes, &[3, 4]),
            vec![vec![3], vec![4]],
            "a node without CPUs is skipped"
        );
    }

    /// On the machine the tests run on: every allowed CPU is in exactly one core and in exactly
    /// one NUMA node, and a core lies inside a node.
    #[test]
    fn cores_and_nodes_partition_the_allowed_cpus() {
        let allowed = onesided_shm::process::allowed_cpus().expect("allowed CPUs");
        let cores = cores(&allowed).expect("cores");
        let nodes = numa_nodes(&allowed).expect("NUMA nodes");
        for sets in [&cores, &nodes] {
            let mut all: Vec<usize> = sets.iter().flatten().copied().collect();
            all.sort_unstable();
            assert_eq!(all, allowed, "{sets:?}");
        }
        for core in &cores {
            assert!(
                nodes
                    .iter()
                    .any(|node| core.iter().all(|cpu| node.contains(cpu))),
                "core {core:?} spans nodes {nodes:?}"
            );
        }
    }
}
