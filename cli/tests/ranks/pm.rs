//! The process managers the suite runs its scenarios under: onesided's own launcher, Slurm's
//! `srun` with its PMIx and PMI-2 plugins (a private one-node cluster, `tests/cluster`), Open
//! MPI's `mpirun` (PMIx) and MPICH's hydra `mpiexec` (PMI-1), each started as a user would.

use crate::harness;
use crate::slurm;
use std::path::Path;
use std::process::Command;

/// A process manager of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pm {
    /// `onesided run -n N`.
    Onesided,
    /// `srun --mpi=pmix -n N`.
    SrunPmix,
    /// `srun --mpi=pmi2 -n N`.
    SrunPmi2,
    /// `mpirun.openmpi -np N` (PMIx).
    Mpirun,
    /// `mpiexec.mpich -n N` (hydra, PMI-1).
    Mpiexec,
}

/// Every process manager, in the order trials list them.
pub const ALL_PMS: &[Pm] = &[
    Pm::Onesided,
    Pm::SrunPmix,
    Pm::SrunPmi2,
    Pm::Mpirun,
    Pm::Mpiexec,
];

/// Whether `program` is on `PATH`.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

impl Pm {
    /// The name trials carry (none for onesided's launcher, whose trials keep their names).
    pub fn name(self) -> &'static str {
        match self {
            Pm::Onesided => "onesided",
            Pm::SrunPmix => "srun_pmix",
            Pm::SrunPmi2 => "srun_pmi2",
            Pm::Mpirun => "mpirun",
            Pm::Mpiexec => "mpiexec",
        }
    }

    /// Whether the process manager ends the whole job when a rank dies (otherwise the other
    /// ranks must end by themselves, as under `srun` without `--kill-on-bad-exit`).
    pub fn kills_job(self) -> bool {
        matches!(self, Pm::Onesided | Pm::Mpirun | Pm::Mpiexec)
    }

    /// Whether the process manager kills the remaining ranks with SIGKILL the moment one dies
    /// (hydra does), so that they cannot say what their blocked calls returned.
    pub fn kills_survivors_at_once(self) -> bool {
        self == Pm::Mpiexec
    }

    /// Why this process manager cannot run here, if it cannot. Under
    /// `ONESIDED_REQUIRE_CLUSTER=1` the trials run anyway and fail, so CI cannot skip them.
    pub fn missing(self) -> Option<String> {
        if std::env::var("ONESIDED_REQUIRE_CLUSTER").as_deref() == Ok("1") {
            return None;
        }
        let needs_pmix = matches!(self, Pm::SrunPmix | Pm::Mpirun);
        if needs_pmix && onesided_pmix::BUILT_WITH.is_none() {
            return Some("onesided was built without PMIx (apt-get install libpmix-dev)".into());
        }
        match self {
            Pm::Onesided => None,
            Pm::SrunPmix | Pm::SrunPmi2 => slurm::installed().err(),
            Pm::Mpirun => (!on_path("mpirun.openmpi"))
                .then(|| "no mpirun.openmpi (apt-get install openmpi-bin)".into()),
            Pm::Mpiexec => (!on_path("mpiexec.mpich"))
                .then(|| "no mpiexec.mpich (apt-get install mpich)".into()),
        }
    }

    /// The command starting `program` as `n` ranks; `launch` are extra arguments of
    /// onesided's launcher (which the others do not take).
    pub fn command(self, n: usize, launch: &[&str], program: &Path) -> Result<Command, String> {
        let count = n.to_string();
        let mut cmd = match self {
            Pm::Onesided => return Ok(harness::launcher(n, launch, program)),
            Pm::SrunPmix | Pm::SrunPmi2 => {
                let mut cmd = slurm::shared()?.srun();
                let mpi = if self == Pm::SrunPmix { "pmix" } else { "pmi2" };
                cmd.args([&format!("--mpi={mpi}"), "-n", &count]);
                cmd
            }
            Pm::Mpirun => {
                let mut cmd = Command::new("mpirun.openmpi");
                cmd.args([
                    "--allow-run-as-root",
                    "--oversubscribe",
                    "--bind-to",
                    "none",
                ])
                .args(["-np", &count]);
                cmd
            }
            Pm::Mpiexec => {
                let mut cmd = Command::new("mpiexec.mpich");
                cmd.args(["-n", &count]);
                cmd
            }
        };
        for var in harness::BOOT_VARS {
            cmd.env_remove(var);
        }
        cmd.arg(program);
        Ok(cmd)
    }
}
