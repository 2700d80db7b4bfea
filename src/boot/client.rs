//! The rank side of the bootstrap: the job environment and the connection to the hub.
//!
//! A [`BootClient`] may be shared by threads running collectives of different communicators at
//! the same time: requests are written under a lock, and a receiver thread files every answer
//! under its `(comm, seq)` for the caller waiting for it.

use std::collections::HashMap;
use std::fmt;
use std::io::BufReader;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::wire::{self, HUB_FRAME_LIMIT, MAX_FRAME, Msg};
use super::{ENV_BOOT, ENV_JOB, ENV_NODE, ENV_RANK, ENV_SECRET, ENV_SIZE, Secret};
use crate::error::{Error, ErrorClass, Result};
use crate::liveness::Liveness;

/// How long connecting to the hub and getting its welcome may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest welcome frame body read while connecting.
const WELCOME_LIMIT: usize = 64;

/// What the launcher told this process about its job (the `ONESIDED_*` environment variables).
#[derive(Clone, PartialEq, Eq)]
pub struct JobEnv {
    /// This process's rank, `0..size`.
    pub rank: usize,
    /// Number of ranks of the job.
    pub size: usize,
    /// Job id, which names the job's shared-memory segments.
    pub job: String,
    /// Simulated node name, if the launcher simulates several nodes.
    pub node: Option<String>,
    addr: SocketAddr,
    secret: Secret,
}

impl fmt::Debug for JobEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobEnv")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("job", &self.job)
            .field("node", &self.node)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

fn arg_error(msg: String) -> Error {
    Error::new(ErrorClass::Arg, msg)
}

/// The value of environment variable `name`, which must be set and valid Unicode.
fn required(name: &str) -> Result<String> {
    std::env::var(name).map_err(|e| arg_error(format!("{name}: {e}")))
}

fn parse_count(name: &str) -> Result<usize> {
    let value = required(name)?;
    value
        .parse()
        .map_err(|_| arg_error(format!("{name}={value:?} is not a number")))
}

impl JobEnv {
    /// The job secret.
    pub(crate) fn secret(&self) -> Secret {
        self.secret
    }

    /// Reads the job environment. `Ok(None)` when `ONESIDED_RANK` is unset: the program was run
    /// directly, as a world of size 1. Missing or malformed variables are an
    /// [`ErrorClass::Arg`] error.
    pub fn from_env() -> Result<Option<JobEnv>> {
        if std::env::var_os(ENV_RANK).is_none() {
            return Ok(None);
        }
        let rank = parse_count(ENV_RANK)?;
        let size = parse_count(ENV_SIZE)?;
        if rank >= size {
            return Err(arg_error(format!(
                "{ENV_RANK}={rank} not below {ENV_SIZE}={size}"
            )));
        }
        let boot = required(ENV_BOOT)?;
        let addr = boot
            .parse()
            .map_err(|_| arg_error(format!("{ENV_BOOT}={boot:?} is not an address")))?;
        let secret = super::secret_from_hex(&required(ENV_SECRET)?)
            .ok_or_else(|| arg_error(format!("{ENV_SECRET} is not 64 hex digits")))?;
        let job = required(ENV_JOB)?;
        if job.is_empty() || job.contains('/') {
            return Err(arg_error(format!("{ENV_JOB}={job:?} is not a job id")));
        }
        let node = match std::env::var(ENV_NODE) {
            Ok(node) => Some(node),
            Err(std::env::VarError::NotPresent) => None,
            Err(e) => return Err(arg_error(format!("{ENV_NODE}: {e}"))),
        };
        Ok(Some(JobEnv {
            rank,
            size,
            job,
            node,
            addr,
            secret,
        }))
    }
}

/// An answer filed by the receiver thread.
enum Reply {
    Gathered(Vec<Vec<u8>>),
    Rejected(String),
}

#[derive(Default)]
struct InboxState {
    replies: HashMap<(u64, u64), Reply>,
    /// Set once the hub reports a failed rank or the connection breaks.
    failure: Option<Error>,
}

#[derive(Default)]
struct Inbox {
    state: Mutex<InboxState>,
    changed: Condvar,
    /// Where failures the hub reports are recorded for the rest of the library.
    liveness: Option<Arc<Liveness>>,
}

impl Inbox {
    fn lock(&self) -> MutexGuard<'_, InboxState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn lost(detail: impl fmt::Display) -> Error {
    Error::new(
        ErrorClass::ProcFailed,
        format!("lost the connection to the bootstrap hub: {detail}"),
    )
}

/// A rank's connection to the bootstrap hub. `Send + Sync`: threads may run collectives of
/// different communicators concurrently.
pub struct BootClient {
    writer: Mutex<TcpStream>,
    inbox: Arc<Inbox>,
    /// The receiver thread; taken by [`BootClient::finalize`].
    receiver: Mutex<Option<JoinHandle<()>>>,
}

impl BootClient {
    /// Connects to the hub of `env`'s job and authenticates as `env.rank`. Fails if the hub
    /// cannot be reached or refuses the connection (wrong secret, rank already connected).
    #[cfg(feature = "launcher")]
    pub fn connect(env: &JobEnv) -> Result<BootClient> {
        BootClient::connect_watched(env, None)
    }

    /// Like [`BootClient::connect`]; failures the hub reports are also recorded in `liveness`.
    pub(crate) fn connect_watched(
        env: &JobEnv,
        liveness: Option<Arc<Liveness>>,
    ) -> Result<BootClient> {
        let what = format!("connecting to the bootstrap hub at {}", env.addr);
        let os = |e| Error::os(&what, e);
        let stream = TcpStream::connect_timeout(&env.addr, CONNECT_TIMEOUT).map_err(os)?;
        stream.set_nodelay(true).map_err(os)?;
        let hello = Msg::Hello {
            secret: env.secret,
            rank: u32::try_from(env.rank).map_err(|_| arg_error(format!("rank {}", env.rank)))?,
            pid: std::process::id(),
        };
        wire::write_frame(&mut &stream, &hello.encode().map_err(os)?).map_err(os)?;
        stream.set_read_timeout(Some(CONNECT_TIMEOUT)).map_err(os)?;
        match wire::read_msg(&mut &stream, WELCOME_LIMIT) {
            Ok(Some(Msg::Welcome)) => {}
            Ok(_) | Err(_) => {
                return Err(Error::new(
                    ErrorClass::Other,
                    format!(
                        "the bootstrap hub at {} refused rank {} (wrong secret or rank already \
                         connected)",
                        env.addr, env.rank
                    ),
                ));
            }
        }
        stream.set_read_timeout(None).map_err(os)?;
        let incoming = stream.try_clone().map_err(os)?;
        let inbox = Arc::new(Inbox {
            liveness,
            ..Inbox::default()
        });
        let filing = Arc::clone(&inbox);
        let receiver = thread::Builder::new()
            .name("onesided-boot".into())
            .spawn(move || receive(incoming, &filing))
            .map_err(|e| Error::os("starting the bootstrap receiver thread", e))?;
        Ok(BootClient {
            writer: Mutex::new(stream),
            inbox,
            receiver: Mutex::new(Some(receiver)),
        })
    }

    /// Allgather among the `members` ranks of communicator `comm`: every member calls it with
    /// the same `(comm, seq, members)`, its own `index` in `0..members` and its `data`; returns
    /// all members' data ordered by index. Each `(comm, seq)` names one collective.
    ///
    /// Fails with [`ErrorClass::ProcFailed`] if a rank of the job failed or the hub connection
    /// broke, with [`ErrorClass::Arg`] if the members disagree on the collective, `index` is out
    /// of range, or the hub refuses it (more members than the job has ranks, a contribution of
    /// more than 4 MiB, too many collectives open at once), and with [`ErrorClass::Other`] after
    /// [`BootClient::finalize`].
    pub fn allgather(
        &self,
        comm: u64,
        seq: u64,
        members: usize,
        index: usize,
        data: &[u8],
    ) -> Result<Vec<Vec<u8>>> {
        let (Ok(members32), Ok(index32)) = (u32::try_from(members), u32::try_from(index)) else {
            return Err(arg_error(format!(
                "allgather members {members} index {index}"
            )));
        };
        if index >= members {
            return Err(arg_error(format!(
                "allgather index {index} not below {members}"
            )));
        }
        if members == 1 {
            self.check_usable()?;
            return Ok(vec![data.to_vec()]);
        }
        let request = Msg::Allgather {
            comm,
            seq,
            members: members32,
            index: index32,
            data: data.to_vec(),
        };
        let frame = request
            .encode()
            .map_err(|e| arg_error(format!("allgather contribution: {e}")))?;
        if frame.len() - 4 > HUB_FRAME_LIMIT {
            return Err(arg_error(format!(
                "allgather contribution of {} bytes: the hub takes at most {HUB_FRAME_LIMIT}",
                data.len()
            )));
        }
        {
            let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
            self.check_usable()?;
            wire::write_frame(&mut *writer, &frame).map_err(lost)?;
        }
        let mut state = self.inbox.lock();
        loop {
            match state.replies.remove(&(comm, seq)) {
                Some(Reply::Gathered(parts)) if parts.len() == members => return Ok(parts),
                Some(Reply::Gathered(parts)) => {
                    let msg = format!("hub gathered {} parts for {members} members", parts.len());
                    return Err(Error::new(ErrorClass::Intern, msg));
                }
                Some(Reply::Rejected(reason)) => {
                    return Err(arg_error(format!("allgather ({comm}, {seq}): {reason}")));
                }
                None => {}
            }
            if let Some(failure) = &state.failure {
                return Err(failure.clone());
            }
            state = self
                .inbox
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Fails after [`BootClient::finalize`] or once the job has failed.
    fn check_usable(&self) -> Result<()> {
        let receiver = self.receiver.lock().unwrap_or_else(PoisonError::into_inner);
        if receiver.is_none() {
            return Err(Error::new(
                ErrorClass::Other,
                "bootstrap used after finalize",
            ));
        }
        match &self.inbox.lock().failure {
            Some(failure) => Err(failure.clone()),
            None => Ok(()),
        }
    }

    /// Tells the hub that this rank leaves cleanly, then closes the connection. Later calls do
    /// nothing; dropping the client calls it if it was not called.
    pub fn finalize(&self) -> Result<()> {
        let writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(receiver) = self
            .receiver
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return Ok(());
        };
        let sent = Msg::Finalize
            .encode()
            .and_then(|frame| wire::write_frame(&mut &*writer, &frame))
            .and_then(|()| writer.shutdown(Shutdown::Write));
        if sent.is_err() {
            let _ = writer.shutdown(Shutdown::Both);
        }
        let _ = receiver.join();
        sent.map_err(|e| Error::os("finalizing the bootstrap connection", e))
    }
}

impl Drop for BootClient {
    fn drop(&mut self) {
        let _ = self.finalize();
    }
}

/// Receiver thread: files the hub's answers until the connection closes.
fn receive(stream: TcpStream, inbox: &Inbox) {
    let mut reader = BufReader::with_capacity(1 << 16, stream);
    loop {
        let msg = wire::read_msg(&mut reader, MAX_FRAME);
        let mut state = inbox.lock();
        let done = match msg {
            Ok(Some(Msg::Gathered { comm, seq, parts })) => {
                state.replies.insert((comm, seq), Reply::Gathered(parts));
                false
            }
            Ok(Some(Msg::Rejected { comm, seq, reason })) => {
                state.replies.insert((comm, seq), Reply::Rejected(reason));
                false
            }
            Ok(Some(Msg::Failed { rank, reason })) => {
                if let Some(l) = &inbox.liveness {
                    l.fail(rank.map(|r| r as usize), &reason);
                }
                let msg = match rank {
                    Some(rank) => format!("rank {rank} failed: {reason}"),
                    None => format!("a rank failed: {reason}"),
                };
                state
                    .failure
                    .get_or_insert(Error::new(ErrorClass::ProcFailed, msg));
                false
            }
            Ok(Some(_)) => {
                state.failure.get_or_insert(lost("unexpected frame"));
                true
            }
            Ok(None) => {
                state.failure.get_or_insert(lost("closed by the hub"));
                true
            }
            Err(e) => {
                state.failure.get_or_insert(lost(e));
                true
            }
        };
        inbox.changed.notify_all();
        if done {
            return;
        }
    }
}
