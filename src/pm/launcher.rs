//! Wire-up through onesided's own launcher: the `ONESIDED_*` variables and one allgather of the
//! cards through the launcher's hub, which also reports the ranks it sees die.

use super::wireup::WireUp;
use crate::boot::{BootClient, JobEnv, Secret};
use crate::config::ProcessManager;
use crate::error::{Error, ErrorClass, Result};
use crate::liveness::Liveness;
use std::sync::{Arc, Mutex, PoisonError};

pub(super) struct Launcher {
    env: JobEnv,
    boot: BootClient,
    cards: Mutex<Vec<Vec<u8>>>,
}

impl Launcher {
    pub(super) fn join(liveness: &Arc<Liveness>) -> Result<Launcher> {
        let env = JobEnv::from_env()?.ok_or_else(|| {
            Error::new(
                ErrorClass::Arg,
                format!(
                    "ONESIDED_PM=onesided, but {} is not set",
                    crate::boot::ENV_RANK
                ),
            )
        })?;
        let boot = BootClient::connect_watched(&env, Some(Arc::clone(liveness)))?;
        Ok(Launcher {
            env,
            boot,
            cards: Mutex::new(Vec::new()),
        })
    }
}

impl WireUp for Launcher {
    fn kind(&self) -> ProcessManager {
        ProcessManager::Onesided
    }

    fn rank(&self) -> usize {
        self.env.rank
    }

    fn size(&self) -> usize {
        self.env.size
    }

    fn job_id(&self) -> String {
        self.env.job.clone()
    }

    fn exchange(&self, card: &[u8]) -> Result<Secret> {
        let all = self
            .boot
            .allgather(0, 0, self.env.size, self.env.rank, card)?;
        *self.cards.lock().unwrap_or_else(PoisonError::into_inner) = all;
        Ok(self.env.secret())
    }

    fn card(&self, rank: usize) -> Result<Vec<u8>> {
        let cards = self.cards.lock().unwrap_or_else(PoisonError::into_inner);
        cards.get(rank).cloned().ok_or_else(|| {
            Error::new(
                ErrorClass::Intern,
                format!("no card of rank {rank} before the exchange"),
            )
        })
    }

    fn finalize(&self) -> Result<()> {
        self.boot.finalize()
    }
}
