//! The launcher, `onesided run -n N PROGRAM ARGS...`: starts a job of N ranks on this machine.
//!
//! It starts a bootstrap [`Hub`], then N processes of PROGRAM, each with the parent's
//! environment plus the `ONESIDED_*` variables of `onesided::boot` and, where the environment
//! does not set them, the libfabric settings of `tuning.rs`, each the leader of its own process
//! group. It waits for all of them. When a rank exits with a non-zero status or dies by
//! a signal, it names the rank that failed first (the hub sees a rank's connection close as it
//! dies, so it tells which of several failed ranks went first), tells the hub (so the other
//! ranks' collectives fail instead of hanging), stops the ranks' process groups (`SIGTERM`, then
//! `SIGKILL` after a grace period) and exits with that rank's status, or 128 + the signal
//! number. `SIGINT`, `SIGTERM` and `SIGHUP` sent to the launcher are forwarded to the ranks'
//! process groups in the same way. Once the first rank has joined the hub, the others must join
//! within the start-up timeout ([`StartTimeout`]); those that do not are named and the job
//! stops with exit code 1. When the job is over, whatever the ranks left running in their
//! process groups is killed. Ranks are killed by the kernel if the launcher dies.
//!
//! Every way out removes the job's shared-memory segments; at start, segments of jobs whose
//! launcher is gone are removed too.
//!
//! The hub listens on `127.0.0.1` unless `--boot-addr` names another address of this host, and
//! `--node-wrap` starts the ranks of a simulated node through a command prefix such as
//! `ip netns exec NAME`: together they put the nodes of one machine on different network hosts
//! (namespaces), so that their ranks talk over a real network interface. See [`Hosts`].

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use onesided_shm::cleanup;
use onesided_shm::process::{self, SIGKILL, TerminationSignals};

use onesided::boot::{self, Hub, Secret};
use onesided::{Error, ErrorClass, Result};

mod job;
mod place;
#[cfg(feature = "hwloc")]
mod topology;
mod tuning;
mod watch;

pub use job::{Bind, Job, StartTimeout};
use place::Placement;
use watch::Rank;

/// Command-line arguments of `onesided run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Number of ranks to start.
    #[arg(short = 'n', long = "np", value_name = "N")]
    pub n: usize,
    /// Prefix every line the ranks print with `[RANK] `.
    #[arg(long)]
    pub tag_output: bool,
    /// Pretend the ranks run on K nodes: rank r gets ONESIDED_NODE=sim<r*K/N>.
    #[arg(long, value_name = "K")]
    pub simulate_nodes: Option<usize>,
    /// Bind each rank to CPUs: `core` binds rank r to the r-th CPU this launcher may use (built
    /// with the `hwloc` feature: the r-th core, all its hardware threads), `numa` to the CPUs of
    /// the r-th NUMA node (needs the `hwloc` feature), round robin when there are more ranks;
    /// `none` leaves placement to the scheduler, `auto` (the default) binds rank r to the r-th
    /// CPU when there are at least as many CPUs as ranks, as mpirun does for small jobs. The CPUs
    /// bound to no rank, where there are some, run the ranks' fabric progress threads
    /// (ONESIDED_FABRIC_PROGRESS_CPUS, unless set already).
    #[arg(long, value_enum, default_value_t = Bind::Auto)]
    pub bind_to: Bind,
    /// The address the bootstrap hub listens on and the ranks connect to [default: 127.0.0.1].
    /// It must be an address of this host that every rank can reach, e.g. the launcher's end of
    /// a veth pair when --node-wrap starts ranks in other network namespaces.
    #[arg(long, value_name = "IP")]
    pub boot_addr: Option<IpAddr>,
    /// Start the ranks of simulated node k through the k-th --node-wrap (repeatable, at most K;
    /// requires --simulate-nodes): a command prefix, split on whitespace, such as
    /// `ip netns exec NAME env FI_TCP_IFACE=veth-b`. The prefix must exec the program (as `env`
    /// and `ip netns exec` do), so that the rank keeps the pid the launcher signals and dies
    /// with the launcher. An empty prefix, or none, starts a node's ranks directly.
    #[arg(long, value_name = "CMD", requires = "simulate_nodes")]
    pub node_wrap: Vec<String>,
    /// Once the first rank has joined, how many seconds the others have to join before the
    /// launcher names them and stops the job; 0 waits forever [default: $ONESIDED_START_TIMEOUT,
    /// or 60].
    #[arg(long, value_name = "SECONDS")]
    pub start_timeout: Option<StartTimeout>,
    /// The program to run, followed by its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM"
    )]
    pub command: Vec<OsString>,
}

/// Where the ranks of a job run on the network: the hub's address and, per simulated node, the
/// command prefix its ranks are started through (`--boot-addr` and `--node-wrap`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hosts {
    /// Address the bootstrap hub listens on and the ranks connect to.
    pub boot_addr: IpAddr,
    /// Command prefix (program and arguments) of simulated node k at index k; nodes beyond the
    /// list, and empty prefixes, start their ranks directly. Needs [`Job::simulate_nodes`].
    pub node_wraps: Vec<Vec<OsString>>,
}

impl Default for Hosts {
    /// Every rank on this host, the hub on `127.0.0.1`.
    fn default() -> Hosts {
        Hosts {
            boot_addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            node_wraps: Vec::new(),
        }
    }
}

impl Hosts {
    /// The command prefix of rank `r` of `job`; empty when it is started directly.
    fn wrap_of(&self, job: &Job, r: usize) -> &[OsString] {
        job.simulate_nodes
            .and_then(|k| self.node_wraps.get(r * k / job.n))
            .map_or(&[], Vec::as_slice)
    }
}

/// Runs `onesided run` with parsed arguments; returns the process exit code. Errors are printed
/// to stderr as `onesided run: <error>`.
pub fn run_cli(args: RunArgs) -> i32 {
    let mut command = args.command.into_iter();
    let Some(program) = command.next() else {
        eprintln!("onesided run: no program given");
        return 2;
    };
    let job = Job {
        n: args.n,
        program: PathBuf::from(program),
        args: command.collect(),
        tag_output: args.tag_output,
        simulate_nodes: args.simulate_nodes,
        extra_env: Vec::new(),
        bind: args.bind_to,
    };
    let hosts = Hosts {
        boot_addr: args.boot_addr.unwrap_or(Hosts::default().boot_addr),
        node_wraps: args
            .node_wrap
            .iter()
            .map(|w| w.split_whitespace().map(OsString::from).collect())
            .collect(),
    };
    let start = match args.start_timeout.map_or_else(StartTimeout::from_env, Ok) {
        Ok(start) => start,
        Err(e) => {
            eprintln!("onesided run: {e}");
            return 2;
        }
    };
    match run_on(&job, &hosts, start) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("onesided run: {e}");
            1
        }
    }
}

/// Runs `job` to completion and returns the exit code the launcher exits with: 0 if every
/// rank exited with status 0, otherwise that of the first failure (its status, or 128 + its
/// signal, or 128 + a signal the launcher received, or 1 for ranks that did not join within the
/// start-up timeout). Errors are failures to start the job.
/// Every rank runs on this host, with the hub on `127.0.0.1`; the start-up timeout is
/// [`StartTimeout::from_env`].
pub fn run(job: &Job) -> Result<i32> {
    run_on(job, &Hosts::default(), StartTimeout::from_env()?)
}

/// Like [`run`], with the hub on `hosts.boot_addr`, each simulated node's ranks started through
/// its prefix in `hosts.node_wraps`, and the start-up timeout `start`.
pub fn run_on(job: &Job, hosts: &Hosts, start: StartTimeout) -> Result<i32> {
    if job.n == 0 || u32::try_from(job.n).is_err() {
        return Err(Error::new(
            ErrorClass::Arg,
            format!("invalid rank count {}", job.n),
        ));
    }
    if job.simulate_nodes == Some(0) {
        return Err(Error::new(
            ErrorClass::Arg,
            "--simulate-nodes must be at least 1",
        ));
    }
    check_hosts(job, hosts)?;
    if let Err(e) = cleanup::remove_stale_segments().and(cleanup::remove_dead_fabric_segments()) {
        eprintln!("onesided run: warning: removing stale shared-memory segments: {e}");
    }
    let (secret, job_id) = fresh_identity()?;
    let signals =
        TerminationSignals::install().map_err(|e| Error::os("installing signal handlers", e))?;
    let hub = Hub::start_on(hosts.boot_addr, job.n, secret)?;
    let result = supervise(job, hosts, &hub, &secret, &job_id, &signals, start);
    drop(hub);
    if let Err(e) = cleanup::remove_job_segments(&job_id) {
        eprintln!("onesided run: warning: removing the job's shared-memory segments: {e}");
    }
    result
}

/// Checks that the ranks can reach `hosts.boot_addr` and that every node prefix has its node.
fn check_hosts(job: &Job, hosts: &Hosts) -> Result<()> {
    let addr = hosts.boot_addr;
    if addr.is_unspecified() || addr.is_multicast() {
        return Err(Error::new(
            ErrorClass::Arg,
            format!("--boot-addr {addr} is not an address ranks can connect to"),
        ));
    }
    if hosts.node_wraps.is_empty() {
        return Ok(());
    }
    match job.simulate_nodes {
        None => Err(Error::new(
            ErrorClass::Arg,
            "--node-wrap needs --simulate-nodes",
        )),
        Some(k) if hosts.node_wraps.len() > k => Err(Error::new(
            ErrorClass::Arg,
            format!(
                "--node-wrap given {} times for --simulate-nodes {k}",
                hosts.node_wraps.len()
            ),
        )),
        Some(_) => Ok(()),
    }
}

/// A fresh random secret and job id `<pid>-<8 hex digits>`.
fn fresh_identity() -> Result<(Secret, String)> {
    let secret = boot::random::<{ boot::SECRET_LEN }>()?;
    let tag = boot::random::<4>()?;
    Ok((
        secret,
        format!("{}-{}", std::process::id(), boot::to_hex(&tag)),
    ))
}

/// Starts the ranks and waits for them.
fn supervise(
    job: &Job,
    hosts: &Hosts,
    hub: &Hub,
    secret: &Secret,
    job_id: &str,
    signals: &TerminationSignals,
    start: StartTimeout,
) -> Result<i32> {
    let placement = Placement::of(job)?;
    let mut ranks = Vec::with_capacity(job.n);
    let mut pumps = Vec::new();
    for r in 0..job.n {
        let mut cmd = rank_command(job, hosts.wrap_of(job, r), r, hub, secret, job_id);
        placement.bind(&mut cmd, r);
        match cmd.spawn() {
            Ok(mut child) => {
                pumps.extend(forward_streams(job.tag_output.then_some(r), &mut child));
                ranks.push(Rank::new(child));
            }
            Err(e) => {
                watch::signal_groups(&ranks, SIGKILL);
                for rank in &mut ranks {
                    let _ = rank.child.wait();
                }
                join_all(pumps);
                let what = format!("starting rank {r} ({})", command_line(job, hosts, r));
                return Err(Error::os(&what, e));
            }
        }
    }
    let code = watch::wait_all(&mut ranks, hub, signals, start);
    watch::wait_gone(&hub.pids());
    let pids: Vec<u32> = ranks.iter().map(|r| r.child.id()).collect();
    // The ranks' own pids where a wrapper started them, and whatever the ranks started: every
    // segment whose owner is gone by now.
    let removed =
        cleanup::remove_fabric_segments(&pids).and_then(|_| cleanup::remove_dead_fabric_segments());
    if let Err(e) = removed {
        eprintln!("onesided run: warning: removing the ranks' libfabric shm segments: {e}");
    }
    join_all(pumps);
    Ok(code)
}

/// The words rank `r` is started with, before the program's arguments, for error messages.
fn command_line(job: &Job, hosts: &Hosts, r: usize) -> String {
    let mut words: Vec<String> = hosts
        .wrap_of(job, r)
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    words.push(job.program.display().to_string());
    words.join(" ")
}

/// The command starting rank `r`: the program with its arguments, behind `wrap` if that is not
/// empty, with the job environment.
fn rank_command(
    job: &Job,
    wrap: &[OsString],
    r: usize,
    hub: &Hub,
    secret: &Secret,
    job_id: &str,
) -> Command {
    let mut cmd = match wrap.split_first() {
        Some((prefix, prefix_args)) => {
            let mut cmd = Command::new(prefix);
            cmd.args(prefix_args).arg(&job.program);
            cmd
        }
        None => Command::new(&job.program),
    };
    cmd.args(&job.args)
        .env(boot::ENV_RANK, r.to_string())
        .env(boot::ENV_SIZE, job.n.to_string())
        .env(boot::ENV_BOOT, hub.addr().to_string())
        .env(boot::ENV_SECRET, boot::to_hex(secret))
        .env(boot::ENV_JOB, job_id)
        // Debian's libfabric links libinfinipath, whose load-time constructor turns fatal signals
        // into a backtrace file and exit status 1 unless this is set: ranks must die by their
        // signal, so that the launcher reports it. `World::init` sets it too (for `srun` and
        // `mpirun`), with `HFI_NO_BACKTRACE` for older `libpsm2`s (`presets.rs`); here they also
        // reach rank programs that load libfabric without onesided.
        .env("IPATH_NO_BACKTRACE", "1")
        .env("HFI_NO_BACKTRACE", "1");
    match job.simulate_nodes {
        Some(k) => cmd.env(boot::ENV_NODE, format!("sim{}", r * k / job.n)),
        None => cmd.env_remove(boot::ENV_NODE),
    };
    cmd.envs(job.extra_env.iter().map(|(k, v)| (k, v)));
    tuning::apply(&mut cmd, |name| {
        std::env::var_os(name).is_some() || job.extra_env.iter().any(|(k, _)| k == name)
    });
    // Through the launcher, a line at a time, so that lines of different ranks never mix.
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    process::kill_on_parent_death(&mut cmd);
    // Its own process group, so that stopping the rank stops whatever it started.
    cmd.process_group(0);
    cmd
}

/// Starts the threads copying a rank's piped stdout and stderr, tagged with `tag` if given.
fn forward_streams(tag: Option<usize>, child: &mut Child) -> Vec<JoinHandle<()>> {
    let mut pumps = Vec::new();
    if let Some(out) = child.stdout.take() {
        pumps.push(thread::spawn(move || pump(tag, out, io::stdout())));
    }
    if let Some(err) = child.stderr.take() {
        pumps.push(thread::spawn(move || pump(tag, err, io::stderr())));
    }
    pumps
}

/// Copies `from` to `to` line by line, each line (prefixed with `[r] ` for tag `r`) written in
/// one call, so that lines of different ranks do not mix.
fn pump(tag: Option<usize>, from: impl Read, mut to: impl Write) {
    let prefix = tag.map_or(String::new(), |r| format!("[{r}] "));
    let mut from = BufReader::new(from);
    let mut line = Vec::new();
    loop {
        line.clear();
        line.extend_from_slice(prefix.as_bytes());
        match from.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        let _ = to.write_all(&line).and_then(|()| to.flush());
    }
}

/// How long the launcher waits, once the ranks are gone, for their output to drain: a process
/// that a rank started outside its process group may hold the pipes open for ever.
const DRAIN: Duration = Duration::from_secs(2);

/// Joins the output threads once they are done, or leaves them after [`DRAIN`].
fn join_all(handles: Vec<JoinHandle<()>>) {
    let deadline = Instant::now() + DRAIN;
    while handles.iter().any(|h| !h.is_finished()) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    for h in handles.into_iter().filter(|h| h.is_finished()) {
        let _ = h.join();
    }
}

#[cfg(test)]
mod tests {
    use super::StartTimeout;
    use std::time::Duration;

    #[test]
    fn start_timeout_is_seconds_and_zero_is_none() {
        let parse = |s: &str| s.parse::<StartTimeout>();
        assert_eq!(
            parse("2.5"),
            Ok(StartTimeout(Some(Duration::from_millis(2500))))
        );
        assert_eq!(parse(" 60 "), Ok(StartTimeout::default()));
        assert_eq!(parse("0"), Ok(StartTimeout(None)));
        for bad in ["-1", "soon", "inf", "NaN", ""] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
