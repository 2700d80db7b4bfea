//! Two hosts on one machine: ranks in two network namespaces joined by a veth pair, so that a
//! window spanning the two simulated nodes talks over libfabric's tcp;ofi_rxm through a real
//! network interface instead of loopback or shared memory.
//!
//! Each test makes its own namespaces `a` and `b` (named after the test and this process's pid),
//! with a veth pair between them, and deletes them when it ends, also on failure. The launcher
//! runs in `a` with its hub on `a`'s address; `--node-wrap` starts node 0's ranks in `a` and
//! node 1's ranks in `b`. The same jobs also run under real launchers, as on a cluster of two
//! hosts named after the namespaces: Open MPI's `mpirun` and MPICH's hydra `mpiexec` start in
//! `a` and reach host `b` through a remote-shell agent that enters the namespace instead of
//! logging in. Ranks in different network namespaces are different nodes to onesided, so their
//! windows use the fabric over the veth.
//!
//! Where namespaces cannot be made (not root, no `ip`, no veth), or a test needs the fabric and
//! the crate was built without libfabric, the test prints `netns: skipped: <reason>` to stderr
//! and passes, unless `ONESIDED_REQUIRE_NETNS=1`, which makes it fail instead.

use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use onesided_shm::process::{SIGTERM, kill};

/// The harness of the multi-process tests: running jobs with a time limit, building examples.
#[allow(dead_code)]
#[path = "ranks/harness.rs"]
mod harness;
/// The process managers of the suite (for what each needs to run here).
#[allow(dead_code)]
#[path = "ranks/pm.rs"]
mod pm;
#[allow(dead_code)]
#[path = "cluster/slurm.rs"]
mod slurm;

use pm::Pm;

/// How long a new veth may take to become operational.
const LINK_TIMEOUT: Duration = Duration::from_secs(10);
/// Transport choices of the surrounding environment that must not reach the tests' jobs, beside
/// the bootstrap's variables (`ONESIDED_FABRIC_PROVIDER` would override `FI_PROVIDER`).
const TRANSPORT_VARS: &[&str] = &["ONESIDED_TRANSPORT", "ONESIDED_FABRIC_PROVIDER"];

/// Path of example `name` (built once by the shared harness).
fn example(name: &str) -> PathBuf {
    harness::example_exe(name).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `ip ARGS`; `Err` with the command and its stderr when it cannot start or fails.
fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `ip {}`: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`ip {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// One end of the veth pair: a namespace, its veth interface and that interface's address.
struct Host {
    netns: String,
    veth: String,
    addr: String,
    /// Whether the namespace exists (and so must be deleted).
    made: bool,
}

impl Host {
    /// The veth's attribute `name` in sysfs, e.g. `operstate`, as the namespace sees it.
    fn veth_attr(&self, name: &str) -> Result<String, String> {
        let path = format!("/sys/class/net/{}/{name}", self.veth);
        ip(&["netns", "exec", &self.netns, "cat", &path]).map(|s| s.trim().to_string())
    }

    /// Waits until the veth is operational. The kernel marks a new link up up to a second after
    /// `ip link set up`, and until then libfabric's tcp provider does not see its address: it
    /// advertises another (connecting to it fails with EINVAL or ECONNREFUSED).
    fn wait_operational(&self) -> Result<(), String> {
        let start = Instant::now();
        loop {
            let state = self.veth_attr("operstate")?;
            if state == "up" {
                return Ok(());
            }
            if start.elapsed() > LINK_TIMEOUT {
                return Err(format!(
                    "{} in {} still {state:?} after {LINK_TIMEOUT:?}",
                    self.veth, self.netns
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Namespaces `a` and `b` joined by a veth pair; dropping it deletes both namespaces (and with
/// them the veth pair).
struct TwoHosts {
    a: Host,
    b: Host,
    /// Where the real launchers' agent script and host file are written.
    dir: PathBuf,
}

impl TwoHosts {
    /// Makes the namespaces of test `tag` (one letter) and connects them. The addresses are in
    /// 10.203.0.0/24: they exist only inside the new namespaces, so they clash with nothing.
    fn create(tag: char) -> Result<TwoHosts, String> {
        let pid = std::process::id();
        let host = |side: char, last: u8| Host {
            netns: format!("onesided-{side}{tag}-{pid}"),
            veth: format!("osv{side}{tag}{pid}"),
            addr: format!("10.203.0.{last}"),
            made: false,
        };
        let dir = std::env::temp_dir().join(format!("onesided-netns-{tag}-{pid}"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("making {}: {e}", dir.display()))?;
        let mut hosts = TwoHosts {
            a: host('a', 1),
            b: host('b', 2),
            dir,
        };
        for h in [&mut hosts.a, &mut hosts.b] {
            ip(&["netns", "add", &h.netns])?;
            h.made = true;
        }
        ip(&[
            "link",
            "add",
            &hosts.a.veth,
            "netns",
            &hosts.a.netns,
            "type",
            "veth",
            "peer",
            "name",
            &hosts.b.veth,
            "netns",
            &hosts.b.netns,
        ])?;
        for h in [&hosts.a, &hosts.b] {
            let cidr = format!("{}/24", h.addr);
            ip(&["-n", &h.netns, "addr", "add", &cidr, "dev", &h.veth])?;
            ip(&["-n", &h.netns, "link", "set", &h.veth, "up"])?;
            ip(&["-n", &h.netns, "link", "set", "lo", "up"])?;
        }
        for h in [&hosts.a, &hosts.b] {
            h.wait_operational()?;
        }
        Ok(hosts)
    }

    /// Bytes `b`'s veth has received so far.
    fn rx_bytes_b(&self) -> u64 {
        let bytes = self
            .b
            .veth_attr("statistics/rx_bytes")
            .expect("reading rx_bytes");
        bytes
            .parse()
            .unwrap_or_else(|_| panic!("rx_bytes of {} is {bytes:?}", self.b.veth))
    }

    /// The prefix that starts a rank in `a`, where the launcher runs: `FI_TCP_IFACE` names the
    /// veth.
    fn in_a(&self) -> String {
        format!("env FI_TCP_IFACE={}", self.a.veth)
    }

    /// The prefix that starts a rank in `b`, with `FI_TCP_IFACE` naming the veth.
    fn in_b(&self) -> String {
        format!(
            "ip netns exec {} env FI_TCP_IFACE={}",
            self.b.netns, self.b.veth
        )
    }

    /// `ip netns exec a onesided run -n N OPTS` with `FI_PROVIDER=tcp`, the hub on `a`'s
    /// address and one simulated node per prefix of `wraps`, started through it; then `--`,
    /// `program` and its arguments `args`.
    fn launcher(
        &self,
        n: usize,
        wraps: &[String],
        opts: &[&str],
        program: &Path,
        args: &[&str],
    ) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.a.netns])
            .arg(env!("CARGO_BIN_EXE_onesided"))
            .args(["run", "-n", &n.to_string()])
            .args(["--simulate-nodes", &wraps.len().to_string()])
            .args(["--boot-addr", &self.a.addr]);
        for wrap in wraps {
            cmd.args(["--node-wrap", wrap]);
        }
        cmd.args(opts)
            .arg("--")
            .arg(program)
            .args(args)
            .env("FI_PROVIDER", "tcp");
        for var in harness::BOOT_VARS.iter().chain(TRANSPORT_VARS) {
            cmd.env_remove(var);
        }
        cmd
    }
}

impl TwoHosts {
    /// The remote-shell agent of the real launchers, called as ssh would be: `AGENT [OPTIONS]
    /// HOST COMMAND...`. It runs COMMAND in the namespace named HOST, with `FI_TCP_IFACE`
    /// naming that namespace's veth and a `TMPDIR` of that host's own: the two hosts share one
    /// /tmp and one host name, and Open MPI daemons creating the same session directory there
    /// at once now and then failed with "File exists".
    fn agent(&self) -> PathBuf {
        let path = self.dir.join("agent");
        let script = format!(
            "#!/bin/sh\n\
             while [ \"${{1#-}}\" != \"$1\" ]; do shift; done\n\
             host=$1; shift\n\
             case $host in\n\
             {a}) iface={va}; tmp={dir}/ha ;;\n\
             {b}) iface={vb}; tmp={dir}/hb ;;\n\
             *) echo \"agent: unknown host $host\" >&2; exit 1 ;;\n\
             esac\n\
             mkdir -p \"$tmp\"\n\
             exec ip netns exec \"$host\" env FI_TCP_IFACE=$iface TMPDIR=\"$tmp\" sh -c \"$*\"\n",
            a = self.a.netns,
            b = self.b.netns,
            va = self.a.veth,
            vb = self.b.veth,
            dir = self.dir.display(),
        );
        std::fs::write(&path, script).expect("writing the agent script");
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&path, mode).expect("making the agent executable");
        path
    }

    /// The real launcher `pm` (mpirun or mpiexec), started in `a`, placing `per_host` ranks of
    /// `program` on host `a` and as many on host `b`, with `FI_PROVIDER=tcp`.
    fn real_launcher(&self, pm: Pm, per_host: usize, program: &Path, args: &[&str]) -> Command {
        let agent = self.agent();
        let n = (2 * per_host).to_string();
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.a.netns]);
        if pm == Pm::Mpirun {
            let hostfile = self.dir.join("hosts");
            let hosts = format!(
                "{} slots={per_host}\n{} slots={per_host}\n",
                self.a.netns, self.b.netns
            );
            std::fs::write(&hostfile, hosts).expect("writing the host file");
            cmd.args(["mpirun.openmpi", "--allow-run-as-root", "--bind-to", "none"])
                .arg("--hostfile")
                .arg(&hostfile)
                .args(["--mca", "plm_rsh_agent"])
                .arg(&agent)
                // Open MPI 4.1's daemon maps its hwloc topology into the "biggest hole" of its
                // address space and now and then (1 run in 5 here) segfaults writing it
                // (hwloc_shmem_topology_write); `none` turns that sharing off.
                .args(["--mca", "rtc_hwloc_vmhole", "none"])
                .args(["-x", "FI_PROVIDER=tcp", "-np", &n]);
        } else {
            let hosts = format!("{}:{per_host},{}:{per_host}", self.a.netns, self.b.netns);
            cmd.args(["mpiexec.mpich", "-launcher", "ssh", "-launcher-exec"])
                .arg(&agent)
                .args(["-localhost", &self.a.addr, "-hosts", &hosts, "-n", &n]);
        }
        cmd.arg(program).args(args).env("FI_PROVIDER", "tcp");
        for var in harness::BOOT_VARS.iter().chain(TRANSPORT_VARS) {
            cmd.env_remove(var);
        }
        cmd
    }
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        for h in [&self.a, &self.b].into_iter().filter(|h| h.made) {
            if let Err(e) = ip(&["netns", "delete", &h.netns]) {
                eprintln!("netns: cleaning up: {e}");
            }
        }
    }
}

/// The two hosts of test `tag`, or `None` (after saying why on stderr) when this machine cannot
/// have them, or the test needs the fabric (`fabric`) and onesided was built without it. Under
/// `ONESIDED_REQUIRE_NETNS=1` not having them fails the test.
fn two_hosts(tag: char, fabric: bool) -> Option<TwoHosts> {
    let reason = if fabric && onesided_fabric::BUILT_WITH.is_none() {
        "onesided was built without libfabric".to_string()
    } else {
        match TwoHosts::create(tag) {
            Ok(hosts) => return Some(hosts),
            Err(e) => format!("cannot make network namespaces: {e}"),
        }
    };
    assert!(
        std::env::var("ONESIDED_REQUIRE_NETNS").as_deref() != Ok("1"),
        "netns: {reason} (and ONESIDED_REQUIRE_NETNS=1)"
    );
    // Straight to stderr: the test harness captures `eprintln!` of passing tests.
    let _ = writeln!(io::stderr(), "netns: skipped: {reason}");
    None
}

/// Runs `cmd` to completion with its output captured, killing it and failing the test after
/// the harness's job time limit (its ranks die with the launcher).
fn run(cmd: Command) -> harness::Outcome {
    harness::run(cmd, harness::JOB_TIMEOUT).unwrap_or_else(|e| panic!("{e}"))
}

/// The fence stencil on 4 ranks, 2 in each namespace: the window spans both nodes, so the
/// boundary puts and fences between ranks 1 and 2 go through the fabric over the veth. (That
/// they really cross it is shown by `puts_cross_the_veth`, whose volume is known.)
#[test]
fn stencil_runs_across_two_namespaces() {
    let Some(hosts) = two_hosts('s', true) else {
        return;
    };
    let wraps = [hosts.in_a(), hosts.in_b()];
    let before = hosts.rx_bytes_b();
    let out = run(hosts.launcher(4, &wraps, &[], &example("stencil"), &[]));
    let received = hosts.rx_bytes_b() - before;
    assert!(out.status.success(), "{}", out.describe());
    assert_eq!(
        out.stdout.matches("stencil: ok").count(),
        1,
        "{}",
        out.describe()
    );
    eprintln!("netns: stencil: {} received {received} bytes", hosts.b.veth);
}

/// Runs `put_volume` on 2 ranks on the nodes `wraps` starts; returns the bytes rank 0 put (as
/// rank 1 reports them) and the bytes `b`'s veth received meanwhile.
fn put_volume(hosts: &TwoHosts, wraps: &[String]) -> (u64, u64) {
    put_volume_by(
        hosts,
        hosts.launcher(2, wraps, &[], &example("put_volume"), &[]),
    )
}

/// Runs `cmd`, a job of `put_volume` on 2 ranks; returns the bytes rank 0 put (as rank 1
/// reports them) and the bytes `b`'s veth received meanwhile.
fn put_volume_by(hosts: &TwoHosts, cmd: Command) -> (u64, u64) {
    let before = hosts.rx_bytes_b();
    let out = run(cmd);
    let received = hosts.rx_bytes_b() - before;
    assert!(out.status.success(), "{}", out.describe());
    let put = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("put_volume: ok, "))
        .and_then(|l| l.strip_suffix(" bytes put"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no volume reported: {}", out.describe()));
    (put, received)
}

/// The data rank 0 (in `a`) puts into rank 1 (in `b`) crosses the veth: `b`'s veth receives at
/// least as many bytes as were put (frames carry the payload plus headers). As a control, the
/// same job with both ranks in `b` on one node (shared memory, only the bootstrap crossing the
/// veth) receives far less, so the check would fail if the ranks bypassed the veth.
#[test]
fn puts_cross_the_veth() {
    let Some(hosts) = two_hosts('p', true) else {
        return;
    };
    let (put, received) = put_volume(&hosts, &[hosts.in_a(), hosts.in_b()]);
    eprintln!(
        "netns: {put} bytes put from {} to {}; {} received {received} bytes",
        hosts.a.netns, hosts.b.netns, hosts.b.veth
    );
    assert!(
        received >= put,
        "{} received {received} bytes, less than the {put} bytes put",
        hosts.b.veth
    );

    let (put, received) = put_volume(&hosts, &[hosts.in_b()]);
    eprintln!("netns: control on one node: {put} bytes put, {received} bytes received");
    assert!(
        received < put / 4,
        "{} received {received} bytes although the {put} bytes put stayed in {}",
        hosts.b.veth,
        hosts.b.netns
    );
}

/// The two hosts of test `tag` for a job under the real launcher `pm`, or `None` (after saying
/// why) where it or the namespaces are not to be had.
fn two_hosts_under(pm: Pm, tag: char) -> Option<TwoHosts> {
    if let Some(why) = pm.missing() {
        let _ = writeln!(io::stderr(), "netns: skipped ({}): {why}", pm.name());
        return None;
    }
    two_hosts(tag, true)
}

/// The stencil and a 16 MiB put under `pm`, one host's ranks in each namespace: the stencil
/// passes, and `b`'s veth receives at least the bytes rank 0 (on `a`) put into rank 1 (on
/// `b`), so the window really spans two hosts.
fn across_two_hosts_under(pm: Pm, tag: char) {
    let Some(hosts) = two_hosts_under(pm, tag) else {
        return;
    };
    let out = run(hosts.real_launcher(pm, 2, &example("stencil"), &[]));
    assert!(out.status.success(), "{}", out.describe());
    assert_eq!(
        out.stdout
            .matches("stencil: ok (240 cells, 100 iterations, 4 ranks)")
            .count(),
        1,
        "{}",
        out.describe()
    );
    let job = hosts.real_launcher(pm, 1, &example("put_volume"), &[]);
    let (put, received) = put_volume_by(&hosts, job);
    eprintln!(
        "netns: {}: {put} bytes put from {} to {}; {} received {received} bytes",
        pm.name(),
        hosts.a.netns,
        hosts.b.netns,
        hosts.b.veth
    );
    assert!(
        received >= put,
        "{} received {received} bytes, less than the {put} bytes put",
        hosts.b.veth
    );
}

#[test]
fn stencil_and_puts_across_two_hosts_under_mpirun() {
    across_two_hosts_under(Pm::Mpirun, 'm');
}

#[test]
fn stencil_and_puts_across_two_hosts_under_mpiexec() {
    across_two_hosts_under(Pm::Mpiexec, 'h');
}

/// The parent pid of process `pid`.
fn parent_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
        .and_then(|ppid| ppid.parse().ok())
        .unwrap_or_else(|| panic!("no parent pid in /proc/{pid}/stat: {stat:?}"))
}

/// A running launcher, killed if the test fails while it runs.
struct Launcher(Child);

impl Drop for Launcher {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The node prefixes exec the rank: each rank is the launcher's own child, in its node's
/// namespace, and the launcher's `SIGTERM` forwarding reaches it by the pid it recorded. The
/// ranks are shells that print their pid and exec `sleep`, which keeps that pid.
#[test]
fn wrapped_ranks_are_the_launchers_children() {
    let Some(hosts) = two_hosts('w', false) else {
        return;
    };
    let wraps = [hosts.in_a(), hosts.in_b()];
    let script = "echo pid $$; exec sleep 120";
    let mut cmd = hosts.launcher(
        2,
        &wraps,
        &["--tag-output"],
        Path::new("sh"),
        &["-c", script],
    );
    let mut launcher = Launcher(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the launcher"),
    );
    let launcher = &mut launcher.0;
    let stdout = BufReader::new(launcher.stdout.take().expect("piped stdout"));
    let (lines, reported) = mpsc::channel();
    thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let mut pids = Vec::new();
    for _ in 0..2 {
        let line = reported
            .recv_timeout(harness::JOB_TIMEOUT)
            .expect("a rank reporting its pid");
        let (rank, pid) = line
            .strip_prefix('[')
            .and_then(|l| l.split_once("] pid "))
            .and_then(|(r, p)| Some((r.parse::<usize>().ok()?, p.parse::<u32>().ok()?)))
            .filter(|&(rank, _)| rank < 2)
            .unwrap_or_else(|| panic!("unexpected line {line:?}"));
        assert_eq!(
            parent_of(pid),
            launcher.id(),
            "rank {rank} (pid {pid}) is not the launcher's child"
        );
        let netns = [&hosts.a.netns, &hosts.b.netns][rank];
        let identified = ip(&["netns", "identify", &pid.to_string()]).expect("ip netns identify");
        assert_eq!(identified.trim(), netns, "namespace of rank {rank}");
        pids.push(pid);
    }
    kill(launcher.id(), SIGTERM).expect("signalling the launcher");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = launcher.try_wait().expect("waiting for the launcher") {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the launcher ignores SIGTERM"
        );
        thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(128 + SIGTERM), "launcher after SIGTERM");
    assert!(
        pids.iter().all(|&p| harness::gone(p)),
        "ranks {pids:?} survive the launcher"
    );
}

/// A host that vanishes without closing its connections (its veth goes down in the middle of
/// the stencil, as a pulled cable or a powered-off node would): the ranks on the other host must
/// not wait forever in their fences. With `ONESIDED_FAILURE_TIMEOUT=3` the job ends with
/// MPI_ERR_PROC_FAILED within a few seconds of the silence (2.5 s here; 6.8 s with 8).
#[test]
fn silent_host_fails_the_waits_within_the_timeout() {
    let Some(hosts) = two_hosts('q', true) else {
        return;
    };
    let wraps = [hosts.in_a(), hosts.in_b()];
    let mut cmd = hosts.launcher(4, &wraps, &[], &example("stencil"), &["240", "100000000"]);
    cmd.env("ONESIDED_FAILURE_TIMEOUT", "3");
    let cut = std::thread::spawn({
        let (netns, veth) = (hosts.b.netns.clone(), hosts.b.veth.clone());
        move || {
            std::thread::sleep(Duration::from_secs(3));
            ip(&["netns", "exec", &netns, "ip", "link", "set", &veth, "down"])
                .map(|_| Instant::now())
        }
    });
    let out = run(cmd);
    let cut_at = cut
        .join()
        .expect("the cutting thread")
        .expect("setting the veth down");
    let ended_after = cut_at.elapsed();
    assert!(!out.status.success(), "{}", out.describe());
    assert!(
        out.stderr.contains("MPI_ERR_PROC_FAILED"),
        "no rank reported the silent host: {}",
        out.describe()
    );
    assert!(
        ended_after < Duration::from_secs(8),
        "the job ended {ended_after:?} after the cut: {}",
        out.describe()
    );
    eprintln!("netns: silent host: the job ended {ended_after:?} after the cut");
}
