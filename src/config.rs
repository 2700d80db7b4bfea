//! One typed configuration, read once: how this process joins its job and reaches its targets.
//!
//! [`World::init`](crate::World::init) reads it from the environment with [`Config::from_env`]
//! and validates it there (a misspelt value fails at start-up, naming the accepted ones); a
//! program may build one instead and pass it to [`World::init_with`](crate::World::init_with).
//! The ranks agree on it once, at start-up, and the world holds it: windows read it from their
//! communicator and never look at the environment.
//!
//! | variable | values | meaning |
//! |---|---|---|
//! | `ONESIDED_TRANSPORT` | `auto` (default), `fabric`, `verbs` | shared memory inside a node and the network between nodes (direct verbs where every rank has a verbs device, else libfabric), or libfabric for every target, or direct verbs for every target (one machine then runs the network path) |
//! | `ONESIDED_FABRIC_PROVIDER`, else `FI_PROVIDER` | a libfabric provider (`tcp`, `shm`, `verbs`, ...) | unset: the first libfabric offers |
//! | `ONESIDED_MR_MODE` | `provider` (default), `verbs` | every memory-registration mode onesided honours, or only the verbs provider's demands, with local buffers registered even where the provider does not demand it (to run the strict paths on a lenient provider) |
//! | `ONESIDED_FABRIC_ATOMICS` | `auto` (default), `software`, `verbs`, `served` | NIC atomics for each (type, operation) the provider runs natively, as `accumulate_ops` allows (over tcp;ofi_rxm: `served`); the emulation for all; the NIC for only what RDMA verbs runs (64-bit fetch-add, read, compare-and-swap); or every accumulate served by the target in one message |
//! | `ONESIDED_FABRIC_PROGRESS` | `wake` (default), `poll` | how the endpoint's progress thread serves this rank's memory while the rank is outside the library: asleep until traffic arrives, in the wait object of a second endpoint that peers on other nodes address, while operations are issued on one without a wait object, which peers on this node address, ringing the process's doorbell (an operation on a computing target: 30-75 us over tcp), or polling one endpoint every millisecond (up to a millisecond; at once when a peer on the node rings the process's doorbell) |
//! | `ONESIDED_FABRIC_PROGRESS_CPUS` | a CPU list (`2-7,12`) | the CPUs the progress threads of this rank's fabric endpoints run on; unset: where this rank is bound, the CPUs of the machine no rank of the job is bound to, if there are some (found by `World::init`), else the CPUs of the thread that opened the endpoint: a launcher that binds each rank to one CPU makes that the rank's own. `onesided run` sets it to the CPUs it binds no rank to, of those it may use |
//! | `ONESIDED_FABRIC_THREADS` | `endpoints` (default), `window` | how the threads of a shared window (`Window::share`) put, get and run NIC atomics over the fabric: each through an endpoint of its own, opened at its first such call, or every call through the window's thread, one at a time |
//! | `ONESIDED_VERBS_DEVICE` | a verbs device, optionally with its port (`mlx5_0`, `rxe0:1`) | the device and port the direct verbs transport uses; unset: the first device with an active port |
//! | `ONESIDED_VERBS_GID_INDEX` | a GID table index | the GID queue pairs are addressed by; unset: on Ethernet (RoCE) a RoCE v2 GID holding an IPv4 address, else the first RoCE v2 one; on InfiniBand, none (LIDs) |
//! | `ONESIDED_VERBS_LANES` | a number from 0 to 64 | the lanes of each direct verbs endpoint of a process whose world was made at `ThreadLevel::Multiple`: endpoints of their own through which the threads of a shared window (`Window::share`) put, get, make notified puts and gets and run NIC atomics side by side, each with a queue pair to every peer; unset: one per CPU the process may use, at most 8, and fewer where the world is large (at most 4096 queue pairs of lanes per process); under other thread levels none |
//! | `ONESIDED_PM` | `onesided`, `pmix`, `pmi`, `singleton` | the process manager; unset: detected (see [`ProcessManager`]) |
//! | `ONESIDED_FAILURE_TIMEOUT` | seconds, 1 to 3600 (default 10) | how long a rank on another node may be silent (its host gone without closing its connections) before waits on it end with MPI_ERR_PROC_FAILED; a process that dies is noticed at once |

use crate::error::{Error, ErrorClass, Result};
use std::fmt;
use std::time::Duration;

/// `ONESIDED_TRANSPORT`.
pub const ENV_TRANSPORT: &str = "ONESIDED_TRANSPORT";
/// `ONESIDED_FABRIC_PROVIDER`.
pub const ENV_PROVIDER: &str = "ONESIDED_FABRIC_PROVIDER";
/// `ONESIDED_MR_MODE`.
pub const ENV_MR_MODE: &str = "ONESIDED_MR_MODE";
/// `ONESIDED_FABRIC_ATOMICS`.
pub const ENV_ATOMICS: &str = "ONESIDED_FABRIC_ATOMICS";
/// `ONESIDED_FABRIC_PROGRESS`.
pub const ENV_PROGRESS: &str = "ONESIDED_FABRIC_PROGRESS";
/// `ONESIDED_FABRIC_PROGRESS_CPUS`.
pub const ENV_PROGRESS_CPUS: &str = "ONESIDED_FABRIC_PROGRESS_CPUS";
/// `ONESIDED_FABRIC_THREADS`.
pub const ENV_THREADS: &str = "ONESIDED_FABRIC_THREADS";
/// `ONESIDED_VERBS_DEVICE`.
pub const ENV_VERBS_DEVICE: &str = "ONESIDED_VERBS_DEVICE";
/// `ONESIDED_VERBS_GID_INDEX`.
pub const ENV_VERBS_GID_INDEX: &str = "ONESIDED_VERBS_GID_INDEX";
/// `ONESIDED_VERBS_LANES`.
pub const ENV_VERBS_LANES: &str = "ONESIDED_VERBS_LANES";
/// The most lanes `ONESIDED_VERBS_LANES` asks for.
const MOST_VERBS_LANES: usize = 64;
/// `ONESIDED_PM`.
pub const ENV_PM: &str = "ONESIDED_PM";
/// `ONESIDED_FAILURE_TIMEOUT`.
pub const ENV_FAILURE_TIMEOUT: &str = "ONESIDED_FAILURE_TIMEOUT";
/// The default of [`Config::failure_timeout`].
pub const DEFAULT_FAILURE_TIMEOUT: Duration = Duration::from_secs(10);
/// The range [`Config::failure_timeout`] accepts, in seconds.
const FAILURE_TIMEOUT_SECS: std::ops::RangeInclusive<u64> = 1..=3600;

/// A setting with a fixed set of names.
trait Named: Copy + PartialEq + 'static {
    /// Every value with its name; the first is the default.
    const NAMES: &'static [(&'static str, Self)];

    fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, v)| *v == self)
            .map_or("?", |(n, _)| n)
    }

    /// The value named `s` (empty: the default), or MPI_ERR_ARG naming `var` and the accepted
    /// names.
    fn parse_named(var: &str, s: &str) -> Result<Self> {
        if s.is_empty() {
            return Ok(Self::NAMES[0].1);
        }
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, v)| *v)
            .ok_or_else(|| {
                let accepted: Vec<&str> = Self::NAMES.iter().map(|(n, _)| *n).collect();
                Error::new(
                    ErrorClass::Arg,
                    format!("{var}={s:?}: accepted values are {}", accepted.join(", ")),
                )
            })
    }
}

/// How targets are reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum TransportChoice {
    /// Shared memory inside a node, the network between nodes: direct verbs where every rank
    /// of the window has a verbs device, else libfabric.
    #[default]
    Auto,
    /// libfabric for every target, this rank included.
    Fabric,
    /// Direct verbs for every target, this rank included.
    Verbs,
}

impl Named for TransportChoice {
    const NAMES: &'static [(&'static str, TransportChoice)] = &[
        ("auto", TransportChoice::Auto),
        ("fabric", TransportChoice::Fabric),
        ("verbs", TransportChoice::Verbs),
    ];
}

/// The memory-registration modes requested from libfabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum MrMode {
    /// Every mode onesided honours; the provider picks.
    #[default]
    Provider,
    /// Only the verbs provider's demands (LOCAL, VIRT_ADDR, ALLOCATED, PROV_KEY).
    Verbs,
}

impl Named for MrMode {
    const NAMES: &'static [(&'static str, MrMode)] =
        &[("provider", MrMode::Provider), ("verbs", MrMode::Verbs)];
}

/// Where the fabric runs accumulates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Atomics {
    /// On the NIC for each (element type, operation) the provider runs natively, as the
    /// window's `accumulate_ops` allows (`crate::protocol::native`); over tcp;ofi_rxm, whose
    /// atomics the target applies in software one element at a time, served by the target
    /// as [`Atomics::Served`] says.
    #[default]
    Auto,
    /// Every accumulate through the software emulation.
    Software,
    /// On the NIC only for what RDMA verbs hardware runs (64-bit integer fetch-add, atomic
    /// read, compare-and-swap) where the provider runs it, the rest emulated: a provider that
    /// runs everything then takes the paths it would take on InfiniBand.
    Verbs,
    /// Every accumulate served by the target: the operands sent in a message, applied under
    /// the target's lock as one run, the old values answered (`transport/fabric/served.rs`).
    /// Not where the provider demands registered local buffers (`FI_MR_LOCAL`).
    Served,
}

impl Named for Atomics {
    const NAMES: &'static [(&'static str, Atomics)] = &[
        ("auto", Atomics::Auto),
        ("software", Atomics::Software),
        ("verbs", Atomics::Verbs),
        ("served", Atomics::Served),
    ];
}

/// How the fabric serves this rank's memory while the rank is outside the library (computing,
/// asleep): the endpoint's progress thread does, in one of two ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Progress {
    /// It sleeps in the wait object of a second endpoint, the one peers address, which the
    /// provider wakes when traffic arrives: an operation on a busy target waits for one
    /// wake-up. Operations are issued on an endpoint without a wait object, so they do not
    /// pay for it; a rank waiting inside onesided polls the serving endpoint at every round
    /// when it waits for its peers, and at every 8th when it waits for its own operations.
    #[default]
    Wake,
    /// One endpoint, with no wait object; the progress thread polls it every millisecond, or
    /// at once when an origin on the node rings its doorbell: an operation from another node
    /// on a busy target waits up to a millisecond.
    Poll,
}

impl Named for Progress {
    const NAMES: &'static [(&'static str, Progress)] =
        &[("wake", Progress::Wake), ("poll", Progress::Poll)];
}

/// How the threads of a shared window (`Window::share`) reach targets over the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Threads {
    /// Each thread puts, gets and runs NIC atomics through a libfabric endpoint of its own,
    /// opened at its first such call and closed when sharing ends, side by side with the other
    /// threads.
    #[default]
    Endpoints,
    /// Every call of a thread goes to the window's thread, which makes the calls one at a time
    /// on the window's endpoint (a job and its reply per call).
    Window,
}

impl Named for Threads {
    const NAMES: &'static [(&'static str, Threads)] = &[
        ("endpoints", Threads::Endpoints),
        ("window", Threads::Window),
    ];
}

/// The process manager a rank joins its job through.
///
/// Detected in this order unless `ONESIDED_PM` (or [`Config::process_manager`]) names one:
/// onesided's own launcher (`ONESIDED_RANK`); PMIx (`PMIX_NAMESPACE` and `PMIX_RANK`: Slurm's
/// `srun --mpi=pmix`, Open MPI's `mpirun`, PRRTE's `prterun`); the PMI-1 wire protocol
/// (`PMI_FD` or `PMI_PORT`: MPICH's hydra `mpiexec`, `srun --mpi=pmi2`); otherwise a world of
/// size 1. Signs of a parallel launch without any of them (e.g. `srun -n 4` with no PMI plugin)
/// fail instead of starting one world per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProcessManager {
    /// `onesided run`.
    Onesided,
    /// A PMIx server (through libpmix).
    Pmix,
    /// A PMI-1 server on an inherited socket or a port.
    Pmi,
    /// No process manager: a world of size 1.
    Singleton,
}

impl Named for ProcessManager {
    const NAMES: &'static [(&'static str, ProcessManager)] = &[
        ("onesided", ProcessManager::Onesided),
        ("pmix", ProcessManager::Pmix),
        ("pmi", ProcessManager::Pmi),
        ("singleton", ProcessManager::Singleton),
    ];
}

impl ProcessManager {
    /// The name `ONESIDED_PM` gives it.
    pub fn name(self) -> &'static str {
        Named::name(self)
    }
}

impl TransportChoice {
    /// Parses a `--transport` value or `ONESIDED_TRANSPORT` (empty: `auto`).
    pub fn parse(s: &str) -> Result<TransportChoice> {
        TransportChoice::parse_named(ENV_TRANSPORT, s)
    }

    /// The name, as `ONESIDED_TRANSPORT` takes it.
    pub fn as_str(self) -> &'static str {
        self.name()
    }
}

/// The fabric settings of a configuration (what the fabric transport opens its domain with).
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub(crate) struct FabricConfig {
    pub(crate) provider: Option<String>,
    pub(crate) mr_mode: MrMode,
    pub(crate) atomics: Atomics,
    pub(crate) progress: Progress,
    /// The CPUs the endpoints' progress threads run on ([`Config::progress_cpus`]); `None`:
    /// those of the thread that opens the endpoint.
    pub(crate) progress_cpus: Option<Vec<usize>>,
    pub(crate) threads: Threads,
}

/// The verbs settings of a configuration (which device, port and GID the direct verbs transport
/// opens).
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub(crate) struct VerbsConfig {
    pub(crate) device: Option<String>,
    pub(crate) port: Option<u8>,
    pub(crate) gid_index: Option<u32>,
    /// Lanes per endpoint where the world is MPI_THREAD_MULTIPLE; `None`: as many as
    /// `transport::verbs` judges.
    pub(crate) lanes: Option<usize>,
}

impl VerbsConfig {
    /// From `ONESIDED_VERBS_DEVICE` (`name` or `name:port`), `ONESIDED_VERBS_GID_INDEX` and
    /// `ONESIDED_VERBS_LANES`.
    fn parse(device: &str, gid_index: &str, lanes: &str) -> Result<VerbsConfig> {
        let bad = |var: &str, v: &str, what: &str| {
            Error::new(ErrorClass::Arg, format!("{var}={v:?}: {what}"))
        };
        let (name, port) = match device.split_once(':') {
            Some((name, port)) => {
                let port = port.parse::<u8>().ok().filter(|&p| p > 0).ok_or_else(|| {
                    bad(
                        ENV_VERBS_DEVICE,
                        device,
                        "the port after ':' is a number from 1",
                    )
                })?;
                (name, Some(port))
            }
            None => (device, None),
        };
        let gid_index = match gid_index {
            "" => None,
            s => Some(s.parse::<u32>().map_err(|_| {
                bad(
                    ENV_VERBS_GID_INDEX,
                    s,
                    "a GID table index is a number from 0",
                )
            })?),
        };
        let lanes = match lanes {
            "" => None,
            s => Some(
                s.parse::<usize>()
                    .ok()
                    .filter(|&n| n <= MOST_VERBS_LANES)
                    .ok_or_else(|| {
                        bad(
                            ENV_VERBS_LANES,
                            s,
                            &format!("lanes are a number from 0 to {MOST_VERBS_LANES}"),
                        )
                    })?,
            ),
        };
        Ok(VerbsConfig {
            device: (!name.is_empty()).then(|| name.to_owned()),
            port,
            gid_index,
            lanes,
        })
    }
}

impl fmt::Display for VerbsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.device.as_deref().unwrap_or("any"))?;
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        if let Some(g) = self.gid_index {
            write!(f, " gid_index={g}")?;
        }
        if let Some(n) = self.lanes {
            write!(f, " lanes={n}")?;
        }
        Ok(())
    }
}

/// The configuration of this process: transport, fabric and verbs settings and process manager.
///
/// ```
/// use onesided::{Config, TransportChoice};
/// let config = Config::default()
///     .transport(TransportChoice::Fabric)
///     .provider(Some("tcp"));
/// assert_eq!(
///     config.to_string(),
///     "transport=fabric provider=tcp mr_mode=provider atomics=auto pm=detect progress=wake \
///      progress_cpus=inherited threads=endpoints verbs=any"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    transport: TransportChoice,
    fabric: FabricConfig,
    verbs: VerbsConfig,
    pm: Option<ProcessManager>,
    failure_timeout: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            transport: TransportChoice::default(),
            fabric: FabricConfig::default(),
            verbs: VerbsConfig::default(),
            pm: None,
            failure_timeout: DEFAULT_FAILURE_TIMEOUT,
        }
    }
}

impl Config {
    /// The configuration the environment gives (see the module docs); an unknown value is
    /// MPI_ERR_ARG naming the variable and the accepted values.
    pub fn from_env() -> Result<Config> {
        Config::from_lookup(|k| std::env::var(k).ok())
    }

    /// Like [`Config::from_env`], reading variables through `var`.
    pub(crate) fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Config> {
        let get = |k: &str| var(k).unwrap_or_default();
        let provider = var(ENV_PROVIDER)
            .or_else(|| var("FI_PROVIDER"))
            .filter(|p| !p.is_empty());
        Ok(Config {
            transport: TransportChoice::parse_named(ENV_TRANSPORT, &get(ENV_TRANSPORT))?,
            fabric: FabricConfig {
                provider,
                mr_mode: MrMode::parse_named(ENV_MR_MODE, &get(ENV_MR_MODE))?,
                atomics: Atomics::parse_named(ENV_ATOMICS, &get(ENV_ATOMICS))?,
                progress: Progress::parse_named(ENV_PROGRESS, &get(ENV_PROGRESS))?,
                progress_cpus: parse_progress_cpus(&get(ENV_PROGRESS_CPUS))?,
                threads: Threads::parse_named(ENV_THREADS, &get(ENV_THREADS))?,
            },
            verbs: VerbsConfig::parse(
                &get(ENV_VERBS_DEVICE),
                &get(ENV_VERBS_GID_INDEX),
                &get(ENV_VERBS_LANES),
            )?,
            pm: match get(ENV_PM).as_str() {
                "" => None,
                s => Some(ProcessManager::parse_named(ENV_PM, s)?),
            },
            failure_timeout: match get(ENV_FAILURE_TIMEOUT).as_str() {
                "" => DEFAULT_FAILURE_TIMEOUT,
                s => parse_timeout(s)?,
            },
        })
    }

    /// With ranks on other nodes that stay silent for `t` (rounded to whole seconds, 1 s to an
    /// hour) counted as failed. MPI_ERR_ARG outside that range.
    pub fn failure_timeout(mut self, t: Duration) -> Result<Config> {
        self.failure_timeout = parse_timeout(&t.as_secs().to_string())?;
        Ok(self)
    }

    /// How long a rank on another node may stay silent before it counts as failed.
    pub fn failure_timeout_value(&self) -> Duration {
        self.failure_timeout
    }

    /// With targets reached as `t` says.
    pub fn transport(mut self, t: TransportChoice) -> Config {
        self.transport = t;
        self
    }

    /// With the libfabric provider `p` (`None`: the first libfabric offers).
    pub fn provider(mut self, p: Option<&str>) -> Config {
        self.fabric.provider = p.map(str::to_owned);
        self
    }

    /// With memory-registration mode `m`.
    pub fn mr_mode(mut self, m: MrMode) -> Config {
        self.fabric.mr_mode = m;
        self
    }

    /// With accumulates on the fabric run as `a` says.
    pub fn atomics(mut self, a: Atomics) -> Config {
        self.fabric.atomics = a;
        self
    }

    /// With this rank's memory served by the fabric as `p` says while the rank is outside the
    /// library.
    pub fn progress(mut self, p: Progress) -> Config {
        self.fabric.progress = p;
        self
    }

    /// With the fabric endpoints' progress threads run on `cpus`. `None` (the default): where
    /// this rank is bound to some CPUs and the machine has CPUs no rank of the job is bound to,
    /// on those ([`World::init`](crate::World::init) finds them), else on the CPUs of the thread
    /// that opens the endpoint. The kernel keeps those of `cpus` the process's CPU set allows; a
    /// window whose endpoint would be left no CPU fails with MPI_ERR_ARG.
    pub fn progress_cpus(mut self, cpus: Option<&[usize]>) -> Config {
        self.fabric.progress_cpus = cpus.map(<[usize]>::to_vec);
        self
    }

    /// With the progress threads on `cpus` where neither the environment nor the program
    /// placed them: the CPUs no rank of the machine is bound to ([`World::init`](crate::World::init)).
    pub(crate) fn progress_cpus_unless_set(mut self, cpus: &[usize]) -> Config {
        if self.fabric.progress_cpus.is_none() {
            tracing::debug!(
                cpus = %crate::cpu_list::format(cpus),
                "progress threads run on the CPUs no rank of this machine is bound to"
            );
            self.fabric.progress_cpus = Some(cpus.to_vec());
        }
        self
    }

    /// With the threads of shared windows reaching fabric targets as `t` says.
    pub fn threads(mut self, t: Threads) -> Config {
        self.fabric.threads = t;
        self
    }

    /// Joining the job through `pm` (`None`: detected).
    pub fn process_manager(mut self, pm: Option<ProcessManager>) -> Config {
        self.pm = pm;
        self
    }

    /// How targets are reached.
    pub fn transport_choice(&self) -> TransportChoice {
        self.transport
    }

    /// The process manager asked for, if any.
    pub fn requested_process_manager(&self) -> Option<ProcessManager> {
        self.pm
    }

    #[cfg(any(have_libfabric, test))]
    pub(crate) fn fabric(&self) -> &FabricConfig {
        &self.fabric
    }

    /// The verbs settings (which device, port and GID).
    #[cfg(have_ibverbs)]
    pub(crate) fn verbs(&self) -> &VerbsConfig {
        &self.verbs
    }

    /// The settings every rank must share, to compare between ranks (the process manager is
    /// shared by construction: the ranks found each other through it; how the fabric serves a
    /// rank's memory while it is away, and which verbs device a node uses, is each rank's own
    /// choice).
    pub(crate) fn shared_settings(&self) -> String {
        let full = self.to_string();
        full.rsplit_once(" pm=")
            .map_or(full.clone(), |(s, _)| s.to_owned())
    }
}

/// `ONESIDED_FABRIC_PROGRESS_CPUS`: a CPU list, or nothing.
fn parse_progress_cpus(s: &str) -> Result<Option<Vec<usize>>> {
    if s.trim().is_empty() {
        return Ok(None);
    }
    crate::cpu_list::parse(s).map(Some).ok_or_else(|| {
        Error::new(
            ErrorClass::Arg,
            format!(
                "{ENV_PROGRESS_CPUS}={s:?}: a list of CPU numbers and ranges, such as 2-7,12 \
                 (as taskset -c takes)"
            ),
        )
    })
}

/// A failure timeout in whole seconds within [`FAILURE_TIMEOUT_SECS`].
fn parse_timeout(s: &str) -> Result<Duration> {
    match s.trim().parse::<u64>() {
        Ok(secs) if FAILURE_TIMEOUT_SECS.contains(&secs) => Ok(Duration::from_secs(secs)),
        _ => Err(Error::new(
            ErrorClass::Arg,
            format!(
                "{ENV_FAILURE_TIMEOUT}={s:?}: accepted values are whole seconds from {} to {}",
                FAILURE_TIMEOUT_SECS.start(),
                FAILURE_TIMEOUT_SECS.end()
            ),
        )),
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "transport={} provider={} mr_mode={} atomics={} pm={} progress={} progress_cpus={} \
             threads={} verbs={}",
            self.transport.name(),
            self.fabric.provider.as_deref().unwrap_or("any"),
            self.fabric.mr_mode.name(),
            self.fabric.atomics.name(),
            self.pm.map_or("detect", ProcessManager::name),
            self.fabric.progress.name(),
            self.fabric
                .progress_cpus
                .as_deref()
                .map_or("inherited".to_owned(), crate::cpu_list::format),
            self.fabric.threads.name(),
            self.verbs,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn from(vars: &[(&str, &str)]) -> Result<Config> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_when_nothing_is_set() {
        assert_eq!(from(&[]).unwrap(), Config::default());
    }

    #[test]
    fn every_setting_is_read() {
        let c = from(&[
            ("ONESIDED_TRANSPORT", "fabric"),
            ("FI_PROVIDER", "tcp"),
            ("ONESIDED_MR_MODE", "verbs"),
            ("ONESIDED_FABRIC_ATOMICS", "software"),
            ("ONESIDED_FABRIC_PROGRESS", "poll"),
            ("ONESIDED_FABRIC_PROGRESS_CPUS", "6-7,2"),
            ("ONESIDED_FABRIC_THREADS", "window"),
            ("ONESIDED_PM", "pmi"),
        ])
        .unwrap();
        let built = Config::default()
            .transport(TransportChoice::Fabric)
            .provider(Some("tcp"))
            .mr_mode(MrMode::Verbs)
            .atomics(Atomics::Software)
            .progress(Progress::Poll)
            .progress_cpus(Some(&[2, 6, 7]))
            .threads(Threads::Window)
            .process_manager(Some(ProcessManager::Pmi));
        assert_eq!(c, built);
        assert_eq!(
            c.to_string(),
            "transport=fabric provider=tcp mr_mode=verbs atomics=software pm=pmi progress=poll \
             progress_cpus=2,6,7 threads=window verbs=any"
        );
    }

    #[test]
    fn onesided_provider_wins_over_fi_provider() {
        let c = from(&[("FI_PROVIDER", "tcp"), ("ONESIDED_FABRIC_PROVIDER", "shm")]).unwrap();
        assert_eq!(c.fabric().provider.as_deref(), Some("shm"));
    }

    #[test]
    fn a_misspelt_value_names_the_accepted_ones() {
        let e = from(&[("ONESIDED_TRANSPORT", "ucx")]).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Arg);
        assert!(e.message().contains("ONESIDED_TRANSPORT=\"ucx\""), "{e}");
        assert!(e.message().contains("auto, fabric, verbs"), "{e}");
        for var in [ENV_MR_MODE, ENV_ATOMICS, ENV_PM, ENV_PROGRESS_CPUS] {
            let e = from(&[(var, "nonsense")]).unwrap_err();
            assert!(e.message().starts_with(var), "{e}");
        }
    }

    #[test]
    fn the_verbs_device_port_and_gid_are_read() {
        let c = from(&[
            ("ONESIDED_TRANSPORT", "verbs"),
            (ENV_VERBS_DEVICE, "rxe0:1"),
            (ENV_VERBS_GID_INDEX, "3"),
            (ENV_VERBS_LANES, "0"),
        ])
        .unwrap();
        assert_eq!(c.transport_choice(), TransportChoice::Verbs);
        let v = &c.verbs;
        assert_eq!(
            (v.device.as_deref(), v.port, v.gid_index, v.lanes),
            (Some("rxe0"), Some(1), Some(3), Some(0))
        );
        assert!(
            c.to_string().ends_with("verbs=rxe0:1 gid_index=3 lanes=0"),
            "{c}"
        );
        assert_eq!(
            from(&[(ENV_VERBS_DEVICE, "mlx5_0")]).unwrap().verbs.port,
            None
        );
        for (var, bad) in [
            (ENV_VERBS_DEVICE, "rxe0:0"),
            (ENV_VERBS_DEVICE, "rxe0:x"),
            (ENV_VERBS_GID_INDEX, "-1"),
            (ENV_VERBS_LANES, "65"),
            (ENV_VERBS_LANES, "many"),
        ] {
            let e = from(&[(var, bad)]).unwrap_err();
            assert_eq!(e.class(), ErrorClass::Arg);
            assert!(e.message().starts_with(var), "{e}");
        }
    }

    #[test]
    fn failure_timeout_is_read_and_bounded() {
        assert_eq!(
            from(&[]).unwrap().failure_timeout_value(),
            Duration::from_secs(10)
        );
        let c = from(&[(ENV_FAILURE_TIMEOUT, "3")]).unwrap();
        assert_eq!(c.failure_timeout_value(), Duration::from_secs(3));
        assert_eq!(
            c,
            Config::default()
                .failure_timeout(Duration::from_secs(3))
                .unwrap()
        );
        for bad in ["0", "3601", "2.5", "soon"] {
            let e = from(&[(ENV_FAILURE_TIMEOUT, bad)]).unwrap_err();
            assert_eq!(e.class(), ErrorClass::Arg);
            assert!(e.message().contains("from 1 to 3600"), "{e}");
        }
        let e = Config::default()
            .failure_timeout(Duration::ZERO)
            .unwrap_err();
        assert_eq!(e.class(), ErrorClass::Arg);
    }

    #[test]
    fn shared_settings_differ_exactly_when_they_should() {
        let a = Config::default();
        let pm = a.clone().process_manager(Some(ProcessManager::Pmix));
        assert_eq!(a.shared_settings(), pm.shared_settings());
        let poll = a.clone().progress(Progress::Poll);
        assert_eq!(a.shared_settings(), poll.shared_settings());
        let pinned = a.clone().progress_cpus(Some(&[3]));
        assert_eq!(a.shared_settings(), pinned.shared_settings());
        assert_eq!(
            a.shared_settings(),
            "transport=auto provider=any mr_mode=provider atomics=auto"
        );
        let b = a.clone().transport(TransportChoice::Fabric);
        let c = a.clone().provider(Some("tcp"));
        assert_ne!(a.shared_settings(), b.shared_settings());
        assert_ne!(a.shared_settings(), c.shared_settings());
        assert_eq!(
            TransportChoice::parse("fabric").unwrap(),
            TransportChoice::Fabric
        );
    }
}
