//! Wire-up through PMIx (`srun --mpi=pmix`, Open MPI's `mpirun`, PRRTE's `prterun`): each rank
//! puts its card (rank 0 also the job secret), commits, and fences with data collection, so the
//! cards are on every node when peers look them up. Failures PMIx reports go to the job's
//! liveness.

use super::wireup::{WireUp, file_safe};
use crate::boot::{SECRET_LEN, Secret};
use crate::config::ProcessManager;
use crate::error::{Error, ErrorClass, Result};
use crate::liveness::Liveness;
use onesided_pmix::{Client, PmixError};
use std::sync::{Arc, Mutex, PoisonError};

const CARD_KEY: &str = "onesided.card";
const SECRET_KEY: &str = "onesided.secret";

fn pmix_error(e: PmixError) -> Error {
    Error::new(ErrorClass::Other, format!("PMIx: {e}")).caused_by(e)
}

pub(super) struct Pmix {
    /// Taken by `finalize` (PMIx_Finalize runs when it drops).
    client: Mutex<Option<Client>>,
    rank: usize,
    size: usize,
    namespace: String,
}

impl Pmix {
    pub(super) fn join(liveness: &Arc<Liveness>) -> Result<Pmix> {
        let client = Client::init().map_err(pmix_error)?;
        let size = client.job_size().map_err(pmix_error)? as usize;
        let rank = client.rank() as usize;
        if rank >= size {
            return Err(Error::new(
                ErrorClass::Other,
                format!("PMIx: rank {rank} not below job size {size}"),
            ));
        }
        let watch = Arc::clone(liveness);
        client
            .on_failure(move |f| {
                watch.fail(f.rank.map(|r| r as usize), &f.text);
            })
            .map_err(pmix_error)?;
        Ok(Pmix {
            rank,
            size,
            namespace: client.namespace().to_owned(),
            client: Mutex::new(Some(client)),
        })
    }

    /// Runs `f` on the client, unless finalized.
    fn with<T>(&self, f: impl FnOnce(&Client) -> std::result::Result<T, PmixError>) -> Result<T> {
        let client = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        match client.as_ref() {
            Some(c) => f(c).map_err(pmix_error),
            None => Err(Error::new(ErrorClass::Other, "PMIx used after finalize")),
        }
    }
}

impl WireUp for Pmix {
    fn kind(&self) -> ProcessManager {
        ProcessManager::Pmix
    }

    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn job_id(&self) -> String {
        format!("pmix-{}", file_safe(&self.namespace))
    }

    fn exchange(&self, card: &[u8]) -> Result<Secret> {
        let fresh = match self.rank {
            0 => Some(super::wireup::fresh_secret()?),
            _ => None,
        };
        let secret = self.with(|c| {
            if let Some(s) = &fresh {
                c.put(SECRET_KEY, s)?;
            }
            c.put(CARD_KEY, card)?;
            c.commit()?;
            c.fence(true)?;
            c.get(0, SECRET_KEY)
        })?;
        <[u8; SECRET_LEN]>::try_from(secret.as_slice()).map_err(|_| {
            Error::new(
                ErrorClass::Other,
                "PMIx: the job secret has the wrong length",
            )
        })
    }

    fn card(&self, rank: usize) -> Result<Vec<u8>> {
        self.with(|c| c.get(rank as u32, CARD_KEY))
    }

    fn finalize(&self) -> Result<()> {
        drop(
            self.client
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        Ok(())
    }
}
