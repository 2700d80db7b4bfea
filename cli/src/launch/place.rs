//! Placement of ranks on CPUs (`--bind-to`): the CPU set each rank is bound to, and the binding.
//!
//! Without the `hwloc` feature a set is one CPU: `core` takes the CPUs this launcher may use in
//! turn. With it, `core` takes whole cores (every hardware thread of one) and `numa` the CPUs of
//! NUMA nodes, from the topology hwloc reports (`topology.rs`); `numa` without it is an error.

use std::process::Command;

use onesided::{Error, ErrorClass, Result};
use onesided_shm::process;

use super::job::{Bind, Job};

/// The CPU sets the ranks of a job are bound to in turn: rank r to set r modulo their number;
/// none for no binding.
pub(super) struct Placement(Vec<process::Cpus>);

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
        sets.iter()
            .map(|cpus| process::Cpus::new(cpus))
            .collect::<std::io::Result<_>>()
            .map(Placement)
            .map_err(|e| Error::new(ErrorClass::Arg, e.to_string()))
    }

    /// Makes the child that `cmd` will start, rank `r`, run only on its CPU set.
    pub(super) fn bind(&self, cmd: &mut Command, r: usize) {
        if let Some(&cpus) = self.0.get(r % self.0.len().max(1)) {
            process::bind_to_cpus(cmd, cpus);
        }
    }
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
