//! Placement of ranks on CPUs (`--bind-to`): the CPU set each rank is bound to, the binding,
//! and the CPUs left to the ranks' progress threads.
//!
//! Without the `hwloc` feature a set is one CPU: `core` takes the CPUs this launcher may use in
//! turn. With it, `core` takes whole cores (every hardware thread of one) and `numa` the CPUs of
//! NUMA nodes, from the topology hwloc reports (`topology.rs`); `numa` without it is an error.

use std::process::Command;

use onesided::launcher::ENV_PROGRESS_CPUS;
use onesided::{Error, ErrorClass, Result};
use onesided_shm::process;

use super::job::{Bind, Job};

/// The CPU sets the ranks of a job are bound to in turn: rank r to set r modulo their number;
/// none for no binding.
pub(super) struct Placement {
    sets: Vec<process::Cpus>,
    /// The CPUs this launcher may use that it binds no rank to, as a CPU list, where there are
    /// some: where the ranks' fabric progress threads run (`ONESIDED_FABRIC_PROGRESS_CPUS`).
    spare: Option<String>,
}

impl Placement {
    /// The placement `job.bind` asks for over the CPUs this launcher may use. `numa` without the
    /// `hwloc` feature is an [`ErrorClass::Arg`] error, and so is a CPU beyond what the kernel's
    /// CPU set holds.
    pub(super) fn of(job: &Job) -> Result<Placement> {
        let allowed = process::allowed_cpus().unwrap_or_default();
        let sets = match job.bind {
            Bind::Core => cores(&allowed)?,
            Bind::Numa => numa_nodes(&allowed)?,
            Bind::Auto if allowed.len() >= job.n => one_each(&allowed),
            Bind::Auto | Bind::None => Vec::new(),
        };
        let spare = spare(&allowed, &sets, job.n);
        Ok(Placement {
            sets: sets
                .iter()
                .map(|cpus| process::Cpus::new(cpus))
                .collect::<std::io::Result<_>>()
                .map_err(|e| Error::new(ErrorClass::Arg, e.to_string()))?,
            spare: (!spare.is_empty()).then(|| {
                let names: Vec<String> = spare.iter().map(usize::to_string).collect();
                names.join(",")
            }),
        })
    }

    /// Makes the child that `cmd` will start, rank `r`, run only on its CPU set, and its fabric
    /// progress threads on the CPUs no rank is bound to, unless `ONESIDED_FABRIC_PROGRESS_CPUS`
    /// names others. A progress thread starts on its rank's CPUs: bound to the rank's one CPU,
    /// it could serve a computing rank only when the rank's time slice ends.
    pub(super) fn bind(&self, cmd: &mut Command, r: usize) {
        if let Some(&cpus) = self.sets.get(r % self.sets.len().max(1)) {
            process::bind_to_cpus(cmd, cpus);
        }
        if let Some(spare) = &self.spare
            && std::env::var_os(ENV_PROGRESS_CPUS).is_none()
        {
            cmd.env(ENV_PROGRESS_CPUS, spare);
        }
    }
}

/// The CPUs of `allowed` that none of the first `n` sets of `sets` (those `n` ranks are bound
/// to) holds; none where no rank is bound.
fn spare(allowed: &[usize], sets: &[Vec<usize>], n: usize) -> Vec<usize> {
    if sets.is_empty() {
        return Vec::new();
    }
    let taken: Vec<usize> = sets.iter().take(n).flatten().copied().collect();
    allowed
        .iter()
        .copied()
        .filter(|cpu| !taken.contains(cpu))
        .collect()
}

/// Each CPU as a set of its own.
fn one_each(cpus: &[usize]) -> Vec<Vec<usize>> {
    cpus.iter().map(|&cpu| vec![cpu]).collect()
}

/// `--bind-to core`: the allowed hardware threads of each core that has some.
#[cfg(feature = "hwloc")]
fn cores(allowed: &[usize]) -> Result<Vec<Vec<usize>>> {
    super::topology::cores(allowed)
}

/// `--bind-to core`: each allowed CPU.
#[cfg(not(feature = "hwloc"))]
fn cores(allowed: &[usize]) -> Result<Vec<Vec<usize>>> {
    Ok(one_each(allowed))
}

/// `--bind-to numa`: the allowed CPUs of each NUMA node that has some.
#[cfg(feature = "hwloc")]
fn numa_nodes(allowed: &[usize]) -> Result<Vec<Vec<usize>>> {
    super::topology::numa_nodes(allowed)
}

/// `--bind-to numa` needs the topology, which only hwloc gives.
#[cfg(not(feature = "hwloc"))]
fn numa_nodes(_allowed: &[usize]) -> Result<Vec<Vec<usize>>> {
    Err(Error::new(
        ErrorClass::Arg,
        "--bind-to numa needs the `hwloc` feature: build onesided-cli with `--features hwloc` \
         (which needs libhwloc-dev)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_threads_get_the_cpus_no_rank_is_bound_to() {
        let cpus = one_each(&[0, 1, 2, 3]);
        assert_eq!(spare(&[0, 1, 2, 3], &cpus, 2), vec![2, 3]);
        assert_eq!(spare(&[0, 1, 2, 3], &cpus, 4), Vec::<usize>::new());
        // Round robin over more ranks than sets takes them all.
        assert_eq!(spare(&[0, 1], &one_each(&[0, 1]), 3), Vec::<usize>::new());
        let nodes = vec![vec![0, 1], vec![2, 3]];
        assert_eq!(spare(&[0, 1, 2, 3], &nodes, 1), vec![2, 3]);
        // Unbound ranks' progress threads stay where their ranks run.
        assert_eq!(spare(&[0, 1, 2, 3], &[], 1), Vec::<usize>::new());
    }
}
