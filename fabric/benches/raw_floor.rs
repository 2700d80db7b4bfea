//! The raw floor: the latency of the operations onesided's window layer issues, measured straight
//! on `onesided-fabric` with criterion, so window-level numbers can be compared with the floor of
//! the same run, and the floor with `shared/floor/rmaprobe.c` (the same operations in plain C).
//!
//! Two processes: the criterion process is the origin and re-executes itself as a target child
//! per provider. The target registers 1 MiB and makes progress by busy polling, calling
//! `Endpoint::progress` in a loop until the origin sends `quit` on its stdin: the fastest a target
//! side can be (the progress thread every `Endpoint` starts is there too, as under the window
//! layer, and stands aside while `progress` is being called; both endpoints open with
//! `Idle::Poll`, so their completion queues have no wait object, as rmaprobe's). The two
//! exchange endpoint names and the region key as hex lines over the child's stdin and stdout;
//! the child is killed if the origin fails.
//!
//! For each provider of `RAW_FLOOR_PROVIDERS` (comma-separated, default "tcp,shm") the group
//! `raw_floor/P` times, per operation,
//! - `put`: an 8-byte `write` followed by `complete` (delivered at the target: rmaprobe's
//!   `put 8B FI_DELIVERY_COMPLETE`);
//! - `get`: an 8-byte `read` (`get 8B (fi_read)`);
//! - `cas`: `compare_swap` on a u64 (`CAS u64 (fi_compare_atomic)`);
//! - `fadd`: `fetch_atomic` with `AtomicOp::Sum` on a u64 (`fetch-add u64 (fi_fetch_atomic)`);
//! - `acc1` and `acc4096`: a sum into 1 and into 4096 consecutive f64, as one atomic call of that
//!   count (`fi_atomic`, or `fi_fetch_atomic` where the provider's non-fetching atomics complete
//!   before their operands are read), waited for: the floor of `onesided bench acc_latency -T
//!   double` at 8 and 32768 bytes. The pieces per call follow `fi_query_atomic`'s count, which
//!   tcp;ofi_rxm derives from `FI_OFI_RXM_BUFFER_SIZE`: set it as `onesided run` does
//!   (`cli/src/launch/tuning.rs`) to measure what its ranks get.
//!
//! Criterion reports the mean; after each operation one `raw_floor provider=P op=OP size=BYTES
//! median_us=X` line gives the median of the single operations' times, the statistic rmaprobe
//! prints. Every result is checked (the sums once the operation's timing ends, by reading every
//! element back), so a floor is never measured on operations that did not land; a failure
//! panics, which ends the benchmark (and kills the target).

#[cfg(not(have_libfabric))]
fn main() {
    println!("raw_floor: built without libfabric, nothing to measure");
}

#[cfg(have_libfabric)]
fn main() {
    if std::env::var_os(floor::TARGET_ENV).is_some() {
        if let Err(e) = floor::serve() {
            eprintln!("raw_floor: {e}");
            std::process::exit(1);
        }
        return;
    }
    let mut c = criterion::Criterion::default().configure_from_args();
    if let Err(e) = floor::origin(&mut c) {
        eprintln!("raw_floor: {e}");
        std::process::exit(1);
    }
    c.final_summary();
}

#[cfg(have_libfabric)]
mod floor {
    use criterion::Criterion;
    use onesided_fabric::{
        AtomicOp, Datatype, Domain, Endpoint, Idle, MrMode, Peer, Provider, RegionKey, Remote,
        Request, Waiting,
    };
    use onesided_shm::Mem;
    use onesided_shm::process::kill_on_parent_death;
    use std::cell::{Cell, RefCell};
    use std::fmt::Display;
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    /// Set in the child's environment to the provider it serves as target.
    pub const TARGET_ENV: &str = "RAW_FLOOR_TARGET";
    /// Bytes the target registers.
    const WINDOW: usize = 1 << 20;
    /// Offsets in the target's region of the put/get word, the CAS word and the fetch-add word,
    /// each on its own cache line.
    const PUT: u64 = 0;
    const CAS: u64 = 64;
    const FADD: u64 = 128;
    /// Offsets of the one-element sum's f64 and of the vector sum's first f64.
    const ACC_ONE: u64 = 192;
    const ACC_MANY: u64 = 4096;
    /// Elements of the vector sum.
    const ACC_ELEMS: usize = 4096;

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

    /// The target child: serve the provider named in its environment.
    pub fn serve() -> Result<()> {
        let provider = std::env::var(TARGET_ENV).ctx("reading the provider")?;
        target(&provider).ctx(&format!("{provider} target"))
    }

    fn endpoint(provider: &str) -> Result<Endpoint> {
        let req = Request {
            provider: Some(provider.into()),
            mr_mode: MrMode::ALL,
            delivery_complete: true,
            register_local: false,
        };
        let p = Provider::find(&req).ctx("finding the provider")?;
        let domain = Domain::open(p).ctx("opening the domain")?;
        Endpoint::open(&domain, Idle::Poll).ctx("opening the endpoint")
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

    /// The origin: benchmark every provider of `RAW_FLOOR_PROVIDERS` against its own target.
    pub fn origin(c: &mut Criterion) -> Result<()> {
        let providers =
            std::env::var("RAW_FLOOR_PROVIDERS").unwrap_or_else(|_| "tcp,shm".to_string());
        let version = onesided_fabric::version().ctx("libfabric")?;
        println!("raw_floor libfabric={version} target=busy-poll");
        for provider in providers
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            measure(c, provider).ctx(provider)?;
        }
        Ok(())
    }

    /// The origin's side of one provider: endpoint, peer and the target region's address, with
    /// the running values the operations check.
    struct Link<'t> {
        ep: Endpoint,
        peer: Peer,
        base: u64,
        key: u64,
        target: &'t Target,
        /// The value of the last put (what a get must read).
        put: Cell<u64>,
        /// The value the CAS word holds.
        cas: Cell<u64>,
        /// The value the fetch-add word holds.
        fadd: Cell<u64>,
        /// Sums of 1.0 made into the one-element and the vector sum's elements.
        acc_one: Cell<u64>,
        acc_many: Cell<u64>,
        /// The operands (`ACC_ELEMS` times 1.0) and the old values fetched where sums fetch.
        ones: Vec<u8>,
        old: RefCell<Vec<u8>>,
    }

    impl Link<'_> {
        fn at(&self, offset: u64) -> Remote {
            Remote {
                peer: self.peer,
                addr: self.base + offset,
                key: self.key,
            }
        }

        fn keep_waiting(&self) -> impl Fn() -> Waiting + '_ {
            || {
                if self.target.running() {
                    Waiting::Poll
                } else {
                    Waiting::GiveUp
                }
            }
        }

        fn put(&self) -> Result<()> {
            let v = self.put.get() + 1;
            let live = self.keep_waiting();
            self.ep
                .write(&v.to_le_bytes(), self.at(PUT), &live)
                .ctx("write")?;
            self.ep.flush(self.peer, &live).ctx("flush")?;
            self.put.set(v);
            Ok(())
        }

        fn get(&self) -> Result<()> {
            let mut got = [0u8; 8];
            self.ep
                .read(&mut got, self.at(PUT), &self.keep_waiting())
                .ctx("read")?;
            check("read", u64::from_le_bytes(got), self.put.get())
        }

        fn cas(&self) -> Result<()> {
            let i = self.cas.get();
            let mut old = [0u8; 8];
            self.ep
                .compare_swap(
                    Datatype::U64,
                    &i.to_le_bytes(),
                    &(i + 1).to_le_bytes(),
                    &mut old,
                    self.at(CAS),
                    &self.keep_waiting(),
                )
                .ctx("compare_swap")?;
            check("compare_swap", u64::from_le_bytes(old), i)?;
            self.cas.set(i + 1);
            Ok(())
        }

        fn fadd(&self) -> Result<()> {
            let i = self.fadd.get();
            let mut old = [0u8; 8];
            self.ep
                .fetch_atomic(
                    Datatype::U64,
                    AtomicOp::Sum,
                    &1u64.to_le_bytes(),
                    &mut old,
                    self.at(FADD),
                    &self.keep_waiting(),
                )
                .ctx("fetch_atomic")?;
            check("fetch_atomic", u64::from_le_bytes(old), i)?;
            self.fadd.set(i + 1);
            Ok(())
        }

        /// Add 1.0 to each of the `elems` f64 at `at`, `done` times summed there before.
        fn acc(&self, at: u64, elems: usize, done: &Cell<u64>) -> Result<()> {
            let fetch = !self.ep.plain_atomics();
            let live = self.keep_waiting();
            let operands = &self.ones[..elems * 8];
            let t = self
                .ep
                .start_atomic_many(
                    Datatype::F64,
                    AtomicOp::Sum,
                    operands,
                    fetch,
                    self.at(at),
                    &live,
                )
                .ctx("start_atomic_many")?;
            let mut old = self.old.borrow_mut();
            let out = fetch.then(|| &mut old[..elems * 8]);
            self.ep.finish(t, out, &live).ctx("finish the sum")?;
            if fetch {
                let first = f64::from_le_bytes(old[..8].try_into().expect("8 bytes"));
                check("the sum's fetched value", first as u64, done.get())?;
            }
            done.set(done.get() + 1);
            Ok(())
        }

        /// Read back the `elems` f64 at `at`: each must be the count of sums made into it.
        fn check_sums(&self, at: u64, elems: usize, done: &Cell<u64>) -> Result<()> {
            let mut got = vec![0u8; elems * 8];
            self.ep
                .read(&mut got, self.at(at), &self.keep_waiting())
                .ctx("reading the sums back")?;
            for v in got.chunks_exact(8) {
                let v = f64::from_le_bytes(v.try_into().expect("8 bytes"));
                check("a summed element", v as u64, done.get())?;
            }
            Ok(())
        }
    }

    fn check(op: &str, got: u64, want: u64) -> Result<()> {
        if got == want {
            Ok(())
        } else {
            Err(format!("{op} returned {got}, expected {want}"))
        }
    }

    /// Times of single operations, for the median line.
    #[derive(Default)]
    struct Samples(RefCell<Vec<Duration>>);

    impl Samples {
        /// Run `op` `iters` times, timing each; their total, for criterion. A failed operation
        /// panics: criterion has no way to stop a measurement with an error.
        fn time(&self, iters: u64, what: &str, op: impl Fn() -> Result<()>) -> Duration {
            let mut times = self.0.borrow_mut();
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                if let Err(e) = op() {
                    panic!("raw_floor {what}: {e}");
                }
                let t = start.elapsed();
                times.push(t);
                total += t;
            }
            total
        }

        /// The median in microseconds of the times taken so far, which are then forgotten.
        fn median_us(&self) -> f64 {
            let mut times = self.0.take();
            times.sort_unstable();
            times
                .get(times.len() / 2)
                .map_or(f64::NAN, |t| t.as_secs_f64() * 1e6)
        }
    }

    /// One timed operation: issue it, wait for it, check what it returned.
    type Op<'a> = dyn Fn() -> Result<()> + 'a;

    fn measure(c: &mut Criterion, provider: &str) -> Result<()> {
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
                put: Cell::new(0),
                cas: Cell::new(0),
                fadd: Cell::new(0),
                acc_one: Cell::new(0),
                acc_many: Cell::new(0),
                ones: 1f64.to_le_bytes().repeat(ACC_ELEMS),
                old: RefCell::new(vec![0; ACC_ELEMS * 8]),
            };
            let many = format!("acc{ACC_ELEMS}");
            let ops: [(&str, usize, &Op); 6] = [
                ("put", 8, &|| link.put()),
                ("get", 8, &|| link.get()),
                ("cas", 8, &|| link.cas()),
                ("fadd", 8, &|| link.fadd()),
                ("acc1", 8, &|| link.acc(ACC_ONE, 1, &link.acc_one)),
                (&many, ACC_ELEMS * 8, &|| {
                    link.acc(ACC_MANY, ACC_ELEMS, &link.acc_many)
                }),
            ];
            let samples = Samples::default();
            let mut group = c.benchmark_group(format!("raw_floor/{provider}"));
            for (op, size, run) in ops {
                let what = format!("{provider} {op}");
                group.bench_function(op, |b| b.iter_custom(|n| samples.time(n, &what, run)));
                println!(
                    "raw_floor provider={provider} op={op} size={size} median_us={:.2}",
                    samples.median_us()
                );
            }
            group.finish();
            link.check_sums(ACC_ONE, 1, &link.acc_one)?;
            link.check_sums(ACC_MANY, ACC_ELEMS, &link.acc_many)?;
        }
        target.finish()
    }
}
