//! The raw floor: the latency of the operations onesided's window layer issues, measured straight
//! on `onesided-fabric`, so window-level numbers can be compared with the floor of the same run.
//!
//! Two processes: the origin (what `cargo bench` starts) re-executes itself as a target child
//! per provider. The target registers 1 MiB and makes progress by busy polling, calling
//! `Endpoint::progress` in a loop until the origin sends `quit` on its stdin: the fastest a target
//! side can be (the progress thread every `Endpoint` starts is there too, as under the window
//! layer, and stands aside while `progress` is being called). The two exchange endpoint names and
//! the region key as hex lines over the child's stdin and stdout; the child is killed if the
//! origin fails.
//!
//! The origin times, OSU style (`RAW_FLOOR_WARMUP` untimed iterations, then `RAW_FLOOR_ITERS`
//! timed ones), the mean latency in microseconds of
//! - `put_flush`: a 1-byte and an 8-byte `write`, each followed by `complete` (the flush);
//! - `get`: an 8-byte `read`;
//! - `cas`: `compare_swap` on a u64;
//! - `fadd`: `fetch_atomic` with `AtomicOp::Sum` on a u64,
//!
//! for each provider of `RAW_FLOOR_PROVIDERS` (comma-separated, default "tcp,shm"), printing one
//! `raw_floor provider=P op=OP size=N us=X` line each after a header line. Every result is
//! checked, so a floor is never measured on operations that did not land.

#[cfg(not(have_libfabric))]
fn main() {
    println!("raw_floor: built without libfabric, nothing to measure");
}

#[cfg(have_libfabric)]
fn main() {
    if let Err(e) = floor::run() {
        eprintln!("raw_floor: {e}");
        std::process::exit(1);
    }
}

#[cfg(have_libfabric)]
mod floor {
    use onesided_fabric::{
        AtomicOp, Datatype, Domain, Endpoint, MrMode, Peer, Provider, RegionKey, Request, Waiting,
    };
    use onesided_shm::Mem;
    use onesided_shm::process::kill_on_parent_death;
    use std::cell::RefCell;
    use std::fmt::Display;
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    /// Set in the child's environment to the provider it serves as target.
    const TARGET_ENV: &str = "RAW_FLOOR_TARGET";
    /// Bytes the target registers.
    const WINDOW: usize = 1 << 20;
    /// Offsets in the target's region of the put/get word, the CAS word and the fetch-add word,
    /// each on its own cache line.
    const PUT: u64 = 0;
    const CAS: u64 = 64;
    const FADD: u64 = 128;

    type Result<T> = std::result::Result<T, String>;

    /// Prefix an error with what was being done.
    trait Context<T> {
        fn ctx(self, what: &str) -> Result<T>;
    }

    impl<T, E: Display> Context<T> for std::result::Result<T, E> {
        fn ctx(self, what: &str) -> Result<T> {
            self.map_err(|e| format!("{what}: {e}"))
        }
    }

    pub fn run() -> Result<()> {
        if let Some(bad) = std::env::args().skip(1).find(|a| a != "--bench") {
            return Err(format!(
                "unexpected argument {bad:?} (set RAW_FLOOR_PROVIDERS, RAW_FLOOR_ITERS or \
                 RAW_FLOOR_WARMUP instead)"
            ));
        }
        match std::env::var(TARGET_ENV) {
            Ok(provider) => target(&provider).ctx(&format!("{provider} target")),
            Err(_) => origin(),
        }
    }

    fn env_count(name: &str, default: u64) -> Result<u64> {
        match std::env::var(name) {
            Ok(v) => v
                .trim()
                .parse()
                .map_err(|_| format!("{name}={v:?} is not a count")),
            Err(_) => Ok(default),
        }
    }

    fn endpoint(provider: &str) -> Result<Endpoint> {
        let req = Request {
            provider: Some(provider.into()),
            mr_mode: MrMode::ALL,
            delivery_complete: true,
        };
        let p = Provider::find(&req).ctx("finding the provider")?;
        let domain = Domain::open(p).ctx("opening the domain")?;
        Endpoint::open(&domain).ctx("opening the endpoint")
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn unhex(s: &str) -> Result<Vec<u8>> {
        if !s.len().is_multiple_of(2) {
            return Err(format!("odd-length hex {s:?}"));
        }
        (0..s.len())
            .step_by(2)
            .map(|i| {
                s.get(i..i + 2)
                    .and_then(|d| u8::from_str_radix(d, 16).ok())
                    .ok_or_else(|| format!("bad hex {s:?}"))
            })
            .collect()
    }

    /// The fields of a handshake line that starts with `tag`.
    fn fields<'a>(line: &'a str, tag: &str, count: usize) -> Result<Vec<&'a str>> {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.split_first() {
            Some((t, rest)) if *t == tag && rest.len() == count => Ok(rest.to_vec()),
            _ => Err(format!("expected a {tag:?} line, got {line:?}")),
        }
    }

    /// The target: announce the endpoint and region, insert the origin, then busy-poll until the
    /// origin says `quit`.
    fn target(provider: &str) -> Result<()> {
        let ep = endpoint(provider)?;
        let mem = Mem::alloc(WINDOW, 4096).ok_or("cannot allocate the window")?;
        let region = ep.register(mem).ctx("registering the window")?;
        let key = region.key().ctx("reading the region key")?;
        let name = ep.name().ctx("reading the endpoint name")?;
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "target {} {:x} {} {}",
            hex(&name),
            key.base,
            u8::from(key.raw),
            hex(&key.key)
        )
        .and_then(|()| out.flush())
        .ctx("writing to the origin")?;

        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .ctx("reading from the origin")?;
        let origin = unhex(fields(&line, "origin", 1)?[0])?;
        ep.insert(&origin).ctx("inserting the origin")?;

        let quit = Arc::new(AtomicBool::new(false));
        let told = {
            let quit = quit.clone();
            std::thread::spawn(move || {
                let mut line = String::new();
                let read = std::io::stdin().read_line(&mut line);
                quit.store(true, Ordering::Release);
                read.is_ok() && line.trim() == "quit"
            })
        };
        while !quit.load(Ordering::Acquire) {
            ep.progress();
        }
        match told.join() {
            Ok(true) => Ok(()),
            _ => Err("the origin went away without saying quit".into()),
        }
    }

    /// A target child, killed on drop unless it exited.
    struct Target {
        child: RefCell<Child>,
        stdin: ChildStdin,
        stdout: BufReader<ChildStdout>,
    }

    impl Target {
        fn spawn(provider: &str) -> Result<Target> {
            let exe = std::env::current_exe().ctx("finding this executable")?;
            let mut cmd = Command::new(exe);
            cmd.env(TARGET_ENV, provider)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped());
            kill_on_parent_death(&mut cmd);
            let mut child = cmd.spawn().ctx("starting the target")?;
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                let _ = child.kill();
                let _ = child.wait();
                return Err("the target has no pipes".into());
            };
            Ok(Target {
                child: RefCell::new(child),
                stdin,
                stdout: BufReader::new(stdout),
            })
        }

        /// Whether the child is still running: the `keep_waiting` of every operation.
        fn running(&self) -> bool {
            matches!(self.child.borrow_mut().try_wait(), Ok(None))
        }

        fn line(&mut self) -> Result<String> {
            let mut line = String::new();
            let n = self
                .stdout
                .read_line(&mut line)
                .ctx("reading from the target")?;
            if n == 0 {
                let status = self.child.get_mut().wait().ctx("waiting for the target")?;
                return Err(format!("the target exited before it was ready ({status})"));
            }
            Ok(line)
        }

        fn send(&mut self, line: &str) -> Result<()> {
            writeln!(self.stdin, "{line}")
                .and_then(|()| self.stdin.flush())
                .ctx("writing to the target")
        }

        /// Tell the target to quit and check that it exited cleanly.
        fn finish(mut self) -> Result<()> {
            self.send("quit")?;
            let status = self.child.get_mut().wait().ctx("waiting for the target")?;
            if status.success() {
                Ok(())
            } else {
                Err(format!("the target failed ({status})"))
            }
        }
    }

    impl Drop for Target {
        fn drop(&mut self) {
            let child = self.child.get_mut();
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }

    /// The origin: measure every provider of `RAW_FLOOR_PROVIDERS` against its own target.
    fn origin() -> Result<()> {
        let providers =
            std::env::var("RAW_FLOOR_PROVIDERS").unwrap_or_else(|_| "tcp,shm".to_string());
        let iters = env_count("RAW_FLOOR_ITERS", 10_000)?;
        let warmup = env_count("RAW_FLOOR_WARMUP", 1_000)?;
        if iters == 0 {
            return Err("RAW_FLOOR_ITERS must be at least 1".into());
        }
        println!(
            "raw_floor libfabric={} iters={iters} warmup={warmup} target=busy-poll unit=us",
            onesided_fabric::version()
        );
        let timing = Timing { iters, warmup };
        for provider in providers
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            measure(provider, &timing).ctx(provider)?;
        }
        Ok(())
    }

    struct Timing {
        iters: u64,
        warmup: u64,
    }

    impl Timing {
        /// Mean microseconds of `op(i)` over the timed iterations, after the warmup ones.
        fn mean_us(&self, mut op: impl FnMut(u64) -> Result<()>) -> Result<f64> {
            let mut start = Instant::now();
            for i in 0..self.warmup + self.iters {
                if i == self.warmup {
                    start = Instant::now();
                }
                op(i)?;
            }
            Ok(start.elapsed().as_secs_f64() * 1e6 / self.iters as f64)
        }
    }

    /// The origin's side of one provider: endpoint, peer and the target region's address.
    struct Link<'t> {
        ep: Endpoint,
        peer: Peer,
        base: u64,
        key: u64,
        target: &'t Target,
    }

    impl Link<'_> {
        fn keep_waiting(&self) -> impl Fn() -> Waiting + '_ {
            || {
                if self.target.running() {
                    Waiting::Poll
                } else {
                    Waiting::GiveUp
                }
            }
        }

        fn put_flush(&self, src: &[u8]) -> Result<()> {
            let live = self.keep_waiting();
            self.ep
                .write(src, self.peer, self.base + PUT, self.key, &live)
                .ctx("write")?;
            self.ep.complete(&live).ctx("complete")
        }

        fn get(&self, expect: u64) -> Result<()> {
            let mut got = [0u8; 8];
            self.ep
                .read(
                    &mut got,
                    self.peer,
                    self.base + PUT,
                    self.key,
                    &self.keep_waiting(),
                )
                .ctx("read")?;
            check("read", u64::from_le_bytes(got), expect)
        }

        fn cas(&self, i: u64) -> Result<()> {
            let mut old = [0u8; 8];
            self.ep
                .compare_swap(
                    Datatype::U64,
                    &i.to_le_bytes(),
                    &(i + 1).to_le_bytes(),
                    &mut old,
                    self.peer,
                    self.base + CAS,
                    self.key,
                    &self.keep_waiting(),
                )
                .ctx("compare_swap")?;
            check("compare_swap", u64::from_le_bytes(old), i)
        }

        fn fadd(&self, i: u64) -> Result<()> {
            let mut old = [0u8; 8];
            self.ep
                .fetch_atomic(
                    Datatype::U64,
                    AtomicOp::Sum,
                    &1u64.to_le_bytes(),
                    &mut old,
                    self.peer,
                    self.base + FADD,
                    self.key,
                    &self.keep_waiting(),
                )
                .ctx("fetch_atomic")?;
            check("fetch_atomic", u64::from_le_bytes(old), i)
        }
    }

    fn check(op: &str, got: u64, want: u64) -> Result<()> {
        if got == want {
            Ok(())
        } else {
            Err(format!("{op} returned {got}, expected {want}"))
        }
    }

    fn measure(provider: &str, timing: &Timing) -> Result<()> {
        let mut target = Target::spawn(provider)?;
        let hello = target.line()?;
        let f = fields(&hello, "target", 4)?;
        let name = unhex(f[0])?;
        let remote = RegionKey {
            base: u64::from_str_radix(f[1], 16).map_err(|_| format!("bad base in {hello:?}"))?,
            raw: f[2] == "1",
            key: unhex(f[3])?,
        };
        {
            let ep = endpoint(provider)?;
            let peer = ep.insert(&name).ctx("inserting the target")?;
            let own = ep.name().ctx("reading the endpoint name")?;
            target.send(&format!("origin {}", hex(&own)))?;
            let key = ep.map_key(&remote).ctx("mapping the target's key")?;
            let link = Link {
                ep,
                peer,
                base: remote.base,
                key,
                target: &target,
            };
            let report = |op: &str, size: usize, us: f64| {
                println!("raw_floor provider={provider} op={op} size={size} us={us:.2}");
            };
            for size in [1, 8] {
                let us = timing.mean_us(|i| link.put_flush(&i.to_le_bytes()[..size]))?;
                report("put_flush", size, us);
            }
            let last = timing.warmup + timing.iters - 1;
            report("get", 8, timing.mean_us(|_| link.get(last))?);
            report("cas", 8, timing.mean_us(|i| link.cas(i))?);
            report("fadd", 8, timing.mean_us(|i| link.fadd(i))?);
        }
        target.finish()
    }
}
