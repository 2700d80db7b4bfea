//! The NIC nearest to this rank (feature `hwloc`).
//!
//! Of the domains libfabric offers for the fabric transport, the candidates are those of its
//! first answer's provider and fabric (one network, so that every rank reaches every other
//! whichever it opens) with its memory-registration mode and key size (so that ranks on
//! different NICs exchange keys alike); among them the rank opens the one whose PCI device is nearest, in the
//! topology hwloc reports, to the CPUs it is bound to ([`nearest`]). Ties keep libfabric's
//! order, so a machine with one NIC, or a rank bound nowhere in particular, gets libfabric's
//! first domain as without the feature; so does a rank where hwloc cannot load the topology.

use onesided_fabric as fi;
use std::collections::{BTreeMap, BTreeSet};

use hwlocality::Topology;
use hwlocality::cpu::binding::CpuBindingFlags;
use hwlocality::object::distance::DistancesKind;
use hwlocality::object::types::ObjectType;
use hwlocality::topology::builder::TypeFilter;

/// Where a NIC or a rank sits: the CPUs (operating-system indexes) and NUMA nodes (likewise)
/// local to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Locality {
    /// CPUs local to it.
    pub(crate) cpus: BTreeSet<usize>,
    /// NUMA nodes local to it.
    pub(crate) nodes: BTreeSet<usize>,
}

/// Distances between NUMA nodes, by operating-system index: hwloc's latency matrix where the
/// machine has one (ACPI SLIT values, 10 within a node), else 10 within a node and 20 across.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Distances(pub(crate) BTreeMap<(usize, usize), u64>);

impl Distances {
    /// From node `a` to node `b`.
    fn between(&self, a: usize, b: usize) -> u64 {
        match self.0.get(&(a, b)) {
            Some(&d) => d,
            None if a == b => 10,
            None => 20,
        }
    }
}

/// The index in `nics` of the NIC nearest to `rank`: first one whose local CPUs hold all of
/// the rank's, then one sharing some of them, then the others; within each, the smallest
/// distance between a NUMA node of the rank and one of the NIC; ties and NICs whose locality is
/// unknown (`None`, ranked last) keep their order. 0 when `nics` is empty.
pub(crate) fn nearest(nics: &[Option<Locality>], rank: &Locality, distances: &Distances) -> usize {
    nics.iter()
        .enumerate()
        .min_by_key(|&(i, nic)| (closeness(nic.as_ref(), rank, distances), i))
        .map_or(0, |(i, _)| i)
}

/// How far `nic` is from `rank`, smaller is nearer: (CPU sharing tier, NUMA distance).
fn closeness(nic: Option<&Locality>, rank: &Locality, distances: &Distances) -> (u8, u64) {
    let Some(nic) = nic else {
        return (3, u64::MAX);
    };
    let tier = if !rank.cpus.is_empty() && rank.cpus.is_subset(&nic.cpus) {
        0
    } else if !rank.cpus.is_disjoint(&nic.cpus) {
        1
    } else {
        2
    };
    let distance = rank
        .nodes
        .iter()
        .flat_map(|&a| nic.nodes.iter().map(move |&b| distances.between(a, b)))
        .min()
        .unwrap_or(u64::MAX);
    (tier, distance)
}

/// The provider configuration (domain) this rank opens for `req`: libfabric's first, or the
/// nearest of the candidates when some NIC among them reports its PCI address (only then is
/// the topology loaded).
pub(crate) fn find_provider(req: &fi::Request) -> Result<fi::Provider, fi::FiError> {
    let mut all = fi::Provider::find_all(req)?.into_iter();
    let first = all.next().ok_or_else(|| fi::FiError {
        op: "fi_getinfo".into(),
        code: libc::ENODATA,
        detail: String::new(),
    })?;
    let alike = |p: &fi::Provider| {
        (p.name(), p.fabric(), p.mr_mode(), p.mr_key_size())
            == (
                first.name(),
                first.fabric(),
                first.mr_mode(),
                first.mr_key_size(),
            )
    };
    let others: Vec<fi::Provider> = all.filter(alike).collect();
    let mut candidates = vec![first];
    candidates.extend(others);
    let choice = if candidates.iter().any(|p| p.pci_address().is_some()) {
        choose(&candidates).unwrap_or(0)
    } else {
        0
    };
    Ok(candidates.swap_remove(choice))
}

/// The index of the candidate nearest to this process, from the topology with its PCI devices;
/// `None` when hwloc cannot load it.
fn choose(candidates: &[fi::Provider]) -> Option<usize> {
    let topology = Topology::builder()
        .with_io_type_filter(TypeFilter::KeepImportant)
        .ok()?
        .build()
        .ok()?;
    let nics: Vec<Option<Locality>> = candidates
        .iter()
        .map(|p| p.pci_address().and_then(|a| pci_locality(&topology, a)))
        .collect();
    let rank = rank_locality(&topology)?;
    Some(nearest(&nics, &rank, &numa_distances(&topology)))
}

/// The CPUs and NUMA nodes local to the PCI device at `addr`: those of its first ancestor that
/// is not an I/O object. `None` when hwloc does not know the device.
fn pci_locality(topology: &Topology, addr: fi::PciAddress) -> Option<Locality> {
    let device =
        topology.pci_device_by_bus_id(addr.domain, addr.bus, addr.device, addr.function)?;
    let parent = device.first_non_io_ancestor()?;
    Some(Locality {
        cpus: parent
            .cpuset()
            .map(|s| s.iter_set().map(usize::from).collect())
            .unwrap_or_default(),
        nodes: parent
            .nodeset()
            .map(|s| s.iter_set().map(usize::from).collect())
            .unwrap_or_default(),
    })
}

/// The CPUs this process is bound to and the NUMA nodes they belong to.
fn rank_locality(topology: &Topology) -> Option<Locality> {
    let bound = topology.cpu_binding(CpuBindingFlags::PROCESS).ok()?;
    let nodes = topology
        .objects_with_type(ObjectType::NUMANode)
        .filter(|node| node.cpuset().is_some_and(|s| s.intersects(&bound)))
        .filter_map(|node| node.os_index())
        .collect();
    Some(Locality {
        cpus: bound.iter_set().map(usize::from).collect(),
        nodes,
    })
}

/// hwloc's NUMA latency matrix, empty where the machine reports none.
fn numa_distances(topology: &Topology) -> Distances {
    let matrices = topology
        .distances_with_type(Some(DistancesKind::MEANS_LATENCY), ObjectType::NUMANode)
        .unwrap_or_default();
    let Some(matrix) = matrices.first() else {
        return Distances::default();
    };
    Distances(
        matrix
            .object_distances()
            .filter_map(|((a, b), d)| Some(((a?.os_index()?, b?.os_index()?), d)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(cpus: &[usize], nodes: &[usize]) -> Option<Locality> {
        Some(Locality {
            cpus: cpus.iter().copied().collect(),
            nodes: nodes.iter().copied().collect(),
        })
    }

    /// Two sockets of 4 CPUs, one NUMA node each, distance 21 across.
    fn two_sockets() -> Distances {
        Distances(BTreeMap::from([
            ((0, 0), 10),
            ((0, 1), 21),
            ((1, 0), 21),
            ((1, 1), 10),
        ]))
    }

    #[test]
    fn a_rank_gets_the_nic_of_its_socket() {
        let nics = [at(&[0, 1, 2, 3], &[0]), at(&[4, 5, 6, 7], &[1])];
        let d = two_sockets();
        for (cpu, node, want) in [(0, 0, 0), (3, 0, 0), (4, 1, 1), (7, 1, 1)] {
            let rank = at(&[cpu], &[node]).expect("some");
            assert_eq!(nearest(&nics, &rank, &d), want, "rank on CPU {cpu}");
        }
        let both = at(&[2, 3], &[0]).expect("some");
        let reversed = [nics[1].clone(), nics[0].clone()];
        assert_eq!(nearest(&reversed, &both, &d), 1, "order does not decide");
    }

    #[test]
    fn numa_distance_decides_between_nics_of_other_nodes() {
        // Four nodes on a ring: 0-1 and 0-3 are near (16), 0-2 is far (32).
        let mut d = BTreeMap::new();
        for a in 0..4usize {
            for b in 0..4usize {
                let hops = (a + 4 - b) % 4;
                d.insert((a, b), [10, 16, 32, 16][hops]);
            }
        }
        let d = Distances(d);
        let nics = [at(&[8], &[2]), at(&[4], &[1]), at(&[12], &[3])];
        let rank = at(&[0], &[0]).expect("some");
        assert_eq!(nearest(&nics, &rank, &d), 1, "nearest node, first in order");
    }

    #[test]
    fn sharing_cpus_beats_distance_and_unknown_nics_come_last() {
        let d = two_sockets();
        let rank = at(&[3, 4], &[0, 1]).expect("some");
        let nics = [
            None,
            at(&[4, 5, 6, 7], &[1]),
            at(&[0, 1, 2, 3, 4, 5, 6, 7], &[0, 1]),
        ];
        assert_eq!(nearest(&nics, &rank, &d), 2, "holds all the rank's CPUs");
        assert_eq!(nearest(&nics[..2], &rank, &d), 1, "shares some");
        assert_eq!(
            nearest(&[None, None], &rank, &d),
            0,
            "none known: the first"
        );
        assert_eq!(nearest(&[], &rank, &d), 0);
    }

    #[test]
    fn an_unbound_rank_keeps_libfabrics_order() {
        let rank = at(&[0, 1, 2, 3, 4, 5, 6, 7], &[0, 1]).expect("some");
        let nics = [at(&[4, 5, 6, 7], &[1]), at(&[0, 1, 2, 3], &[0])];
        assert_eq!(nearest(&nics, &rank, &two_sockets()), 0);
        let without_matrix = Distances::default();
        assert_eq!(nearest(&nics, &rank, &without_matrix), 0);
        let unbound_unknown = Locality::default();
        assert_eq!(nearest(&nics, &unbound_unknown, &without_matrix), 0);
    }

    /// On the machine the tests run on: where no candidate NIC has a PCI address (tcp on a
    /// virtual machine), the choice is libfabric's first.
    #[test]
    fn without_pci_addresses_the_choice_is_libfabrics_first() {
        let req = fi::Request {
            provider: Some("tcp".into()),
            ..fi::Request::default()
        };
        let Ok(all) = fi::Provider::find_all(&req) else {
            println!("nic: libfabric offers no tcp provider here; not tried");
            return;
        };
        if all.iter().any(|p| p.pci_address().is_some()) {
            println!("nic: a tcp domain has a PCI address here; not tried");
            return;
        }
        let chosen = find_provider(&req).expect("a tcp provider");
        let first = fi::Provider::find(&req).expect("a tcp provider");
        let what = |p: &fi::Provider| (p.name(), p.fabric(), p.domain(), p.mr_mode());
        assert_eq!(what(&chosen), what(&first));
    }

    /// On the machine the tests run on: hwloc places every PCI device it knows and this
    /// process, as the glue reads them.
    #[test]
    fn localities_of_this_machine_are_read_from_hwloc() {
        let topology = Topology::builder()
            .with_io_type_filter(TypeFilter::KeepImportant)
            .expect("I/O filter")
            .build()
            .expect("topology");
        let rank = rank_locality(&topology).expect("this process's binding");
        assert!(!rank.cpus.is_empty() && !rank.nodes.is_empty(), "{rank:?}");
        for device in topology.pci_devices() {
            let Some(hwlocality::object::attributes::ObjectAttributes::PCIDevice(pci)) =
                device.attributes()
            else {
                panic!("a PCI device without PCI attributes");
            };
            let addr = fi::PciAddress {
                domain: pci.domain(),
                bus: pci.bus_id(),
                device: pci.bus_device(),
                function: pci.function(),
            };
            let nic = pci_locality(&topology, addr).expect("a known device has a locality");
            assert!(!nic.cpus.is_empty(), "{addr:?}: {nic:?}");
        }
        let distances = numa_distances(&topology);
        assert!(distances.0.values().all(|&d| d >= 10), "{distances:?}");
    }
}
