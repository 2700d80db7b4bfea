//! Process managers: how a rank learns its place in the job and finds the other ranks.
//!
//! A process manager is used only for wire-up: rank, size, a job id, the job secret, and one
//! exchange in which every rank publishes its collective-network [`Card`](crate::mesh::Card)
//! (PMIx: put, commit, fence with data collection; PMI-1: put, barrier; onesided's launcher:
//! one allgather through its hub). Everything after that runs over the ranks' own connections
//! (`crate::mesh`), so no central server carries the job's collectives.
//!
//! [`detect`] picks the process manager from the environment; see
//! [`ProcessManager`](crate::config::ProcessManager) for the order.

mod launcher;
mod pmi;
#[cfg(have_pmix)]
mod pmix;
mod wireup;

use crate::config::ProcessManager;
use crate::error::{Error, ErrorClass, Result};
use crate::liveness::Liveness;
use crate::mesh::{Card, Directory};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
pub(crate) use wireup::WireUp;

/// Joins the job through the process manager `asked` names, or the one detected from the
/// environment; `None` for a world of size 1. Failures the process manager reports go to
/// `liveness`.
pub(crate) fn join(
    asked: Option<ProcessManager>,
    liveness: &Arc<Liveness>,
) -> Result<Option<Arc<dyn WireUp>>> {
    let var = |k: &str| std::env::var(k).ok();
    Ok(match detect_from_env(asked)? {
        ProcessManager::Singleton => None,
        ProcessManager::Onesided => Some(Arc::new(launcher::Launcher::join(liveness)?)),
        ProcessManager::Pmi => Some(Arc::new(pmi::Pmi::join(&var)?)),
        ProcessManager::Pmix => Some(join_pmix(liveness)?),
    })
}

#[cfg(have_pmix)]
fn join_pmix(liveness: &Arc<Liveness>) -> Result<Arc<dyn WireUp>> {
    Ok(Arc::new(pmix::Pmix::join(liveness)?))
}

#[cfg(not(have_pmix))]
fn join_pmix(_: &Arc<Liveness>) -> Result<Arc<dyn WireUp>> {
    Err(Error::new(
        ErrorClass::Other,
        "this process was started by a PMIx process manager (srun --mpi=pmix, mpirun), but \
         onesided was built without PMIx: install libpmix-dev and rebuild, or start the job \
         with srun --mpi=pmi2 or MPICH's mpiexec",
    ))
}

/// The process manager [`join`] joins, from this process's environment.
pub(crate) fn detect_from_env(asked: Option<ProcessManager>) -> Result<ProcessManager> {
    detect(asked, &|k| std::env::var(k).ok())
}

/// The process manager to join: the one asked for, else the one whose variables `var` shows.
/// Signs of a parallel launch without a process manager this library can use are an error.
pub(crate) fn detect(
    asked: Option<ProcessManager>,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<ProcessManager> {
    if let Some(pm) = asked {
        return Ok(pm);
    }
    let set = |k: &str| var(k).is_some_and(|v| !v.is_empty());
    if set(crate::boot::ENV_RANK) {
        return Ok(ProcessManager::Onesided);
    }
    if set("PMIX_NAMESPACE") && set("PMIX_RANK") {
        return Ok(ProcessManager::Pmix);
    }
    if set("PMI_FD") || set("PMI_PORT") {
        return Ok(ProcessManager::Pmi);
    }
    let many = |k: &str| {
        var(k)
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 1)
    };
    let unreachable = if let Some(n) = many("SLURM_STEP_NUM_TASKS") {
        format!(
            "srun started {n} tasks (SLURM_STEP_NUM_TASKS={n}) without a PMI plugin: pass \
             --mpi=pmix (or --mpi=pmi2) to srun, or set MpiDefault=pmix in slurm.conf"
        )
    } else if let Some(n) = many("OMPI_COMM_WORLD_SIZE") {
        format!(
            "mpirun started {n} processes (OMPI_COMM_WORLD_SIZE={n}) but set no PMIX_NAMESPACE \
             and PMIX_RANK: use an mpirun with PMIx (Open MPI 4 or later)"
        )
    } else if let Some(n) = many("PMI_SIZE") {
        format!("PMI_SIZE={n} is set, but neither PMI_FD nor PMI_PORT")
    } else {
        return Ok(ProcessManager::Singleton);
    };
    Err(Error::new(
        ErrorClass::Other,
        format!(
            "{unreachable}; without them every process would run as a separate world of size 1 \
             (set ONESIDED_PM=singleton if that is what you want)"
        ),
    ))
}

/// The cards of the job, looked up through the process manager once each.
pub(crate) struct Cards {
    pm: Arc<dyn WireUp>,
    known: Mutex<HashMap<usize, Card>>,
}

impl Cards {
    pub(crate) fn new(pm: Arc<dyn WireUp>) -> Cards {
        Cards {
            pm,
            known: Mutex::new(HashMap::new()),
        }
    }
}

impl Directory for Cards {
    fn card(&self, rank: usize) -> Result<Card> {
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = known.get(&rank) {
            return Ok(c.clone());
        }
        let card = Card::decode(&self.pm.card(rank)?)?;
        known.insert(rank, card.clone());
        Ok(card)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProcessManager::*;

    fn detect_in(vars: &[(&str, &str)]) -> Result<ProcessManager> {
        let map: HashMap<&str, &str> = vars.iter().copied().collect();
        detect(None, &|k| map.get(k).map(|v| v.to_string()))
    }

    #[test]
    fn detection_follows_the_documented_order() {
        assert_eq!(detect_in(&[]).unwrap(), Singleton);
        let pmix = [("PMIX_NAMESPACE", "slurm.pmix.2.0"), ("PMIX_RANK", "1")];
        assert_eq!(detect_in(&pmix).unwrap(), Pmix);
        let pmi = [("PMI_FD", "6"), ("PMI_RANK", "0"), ("PMI_SIZE", "2")];
        assert_eq!(detect_in(&pmi).unwrap(), Pmi);
        assert_eq!(detect_in(&[("PMI_PORT", "host:1")]).unwrap(), Pmi);
        let both = [pmix[0], pmix[1], pmi[0], ("ONESIDED_RANK", "0")];
        assert_eq!(detect_in(&both).unwrap(), Onesided);
        assert_eq!(detect_in(&[pmix[0], pmix[1], pmi[0]]).unwrap(), Pmix);
        assert_eq!(detect(Some(Pmi), &|_| None).unwrap(), Pmi);
    }

    #[test]
    fn a_parallel_launch_without_pmi_is_refused() {
        let e = detect_in(&[("SLURM_STEP_NUM_TASKS", "4"), ("SLURM_PROCID", "2")]).unwrap_err();
        assert!(e.message().contains("--mpi=pmix"), "{e}");
        assert!(e.message().contains("SLURM_STEP_NUM_TASKS=4"), "{e}");
        assert_eq!(
            detect_in(&[("SLURM_STEP_NUM_TASKS", "1")]).unwrap(),
            Singleton
        );
        assert!(detect_in(&[("OMPI_COMM_WORLD_SIZE", "3")]).is_err());
        assert!(detect_in(&[("PMI_SIZE", "2")]).is_err());
        let forced = detect(Some(Singleton), &|k| {
            (k == "SLURM_STEP_NUM_TASKS").then(|| "4".to_string())
        });
        assert_eq!(forced.unwrap(), Singleton);
    }
}
