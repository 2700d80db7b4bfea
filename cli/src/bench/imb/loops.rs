//! The timed loops of the IMB-RMA benchmarks, as IMB's `IMB_rma_*` functions run them: two
//! barriers of every rank, the benchmark's epoch and loop on the ranks it names (the others
//! wait), a barrier. Operations address displacement 0 of the target's window (IMB's default,
//! without `-off_cache`); Exchange_* put or get the right neighbour's message at `size`.

use super::super::busy;
use super::super::pages::Pages;
use super::catalog::{Benchmark, Class, Mode};
use onesided::{Assert, Error, ErrorClass, LockType, Op, Result, Window, World};
use std::time::{Duration, Instant};

const N: Assert = Assert::NONE;

/// The origin's buffers: bytes for put and get (two messages, for Exchange_*), floats for the
/// accumulates and their results.
pub struct Buffers {
    bytes: Pages<u8>,
    floats: Pages<f32>,
    results: Pages<f32>,
}

impl Buffers {
    /// Buffers for messages of up to `max` bytes.
    pub fn new(max: usize) -> Buffers {
        let floats = max.div_ceil(4).max(1);
        Buffers {
            bytes: Pages::filled(2 * max.max(1), 0x5a),
            floats: Pages::filled(floats, 1.0),
            results: Pages::filled(floats, 0.0),
        }
    }
}

/// What every loop needs: the job, the window, this rank's buffers.
pub struct Setup<'s, 'w> {
    pub world: &'s World,
    pub win: &'s Window<'w>,
    pub buffers: Buffers,
}

/// Whether the benchmark moves data into the target (put and the accumulates) rather than out.
fn is_put(b: Benchmark) -> bool {
    use Benchmark::*;
    !matches!(
        b,
        UnidirGet | BidirGet | OneGetAll | AllGetAll | GetLocal | GetAllLocal | ExchangeGet
    )
}

impl Setup<'_, '_> {
    /// The operation of one iteration at `target`: `size` bytes from (put) or into (get)
    /// the buffer at `at`, to or from window displacement `at`.
    fn op(&mut self, b: Benchmark, size: usize, target: usize, at: usize) -> Result<()> {
        let win = self.win;
        let k = size / 4;
        let buf = &mut self.buffers;
        match b {
            Benchmark::Accumulate => win.accumulate(&buf.floats[..k], target, 0, Op::Sum),
            Benchmark::GetAccumulate => {
                win.get_accumulate(&buf.floats[..k], &mut buf.results[..k], target, 0, Op::Sum)
            }
            Benchmark::FetchAndOp => win.fetch_and_op(1.0f32, target, 0, Op::Sum).map(drop),
            Benchmark::CompareAndSwap => win.compare_and_swap(0i32, 0i32, target, 0).map(drop),
            b if is_put(b) => win.put(&buf.bytes[at..at + size], target, at),
            _ => win.get(&mut buf.bytes[at..at + size], target, at),
        }
    }

    /// Completes the operations to `target`: at the origin only for the `_local` benchmarks.
    fn complete(&self, b: Benchmark, target: usize) -> Result<()> {
        match b {
            Benchmark::PutLocal | Benchmark::GetLocal => self.win.flush_local(target),
            _ => self.win.flush(target),
        }
    }

    /// One sample of `iters` iterations at `size` bytes: this rank's time, `None` where it
    /// does not time (the single transfers' target and idle ranks, the multiple transfers'
    /// targets). Collective over the job.
    pub fn sample(
        &mut self,
        b: Benchmark,
        mode: Option<Mode>,
        size: usize,
        iters: usize,
    ) -> Result<Option<Duration>> {
        let (me, n) = (self.world.rank(), self.world.size());
        self.world.barrier()?;
        self.world.barrier()?;
        let bidir = matches!(b, Benchmark::BidirPut | Benchmark::BidirGet);
        let time = match b.class() {
            Class::Single | Class::Element if me == 0 || (me == 1 && bidir) => {
                Some(self.single(b, mode, size, iters, 1 - me)?)
            }
            Class::Multiple if me == 0 => Some(self.with_every_other(b, size, iters)?),
            Class::Parallel if matches!(b, Benchmark::AllPutAll | Benchmark::AllGetAll) => {
                Some(self.with_every_other(b, size, iters)?)
            }
            Class::Parallel => {
                Some(self.exchange(b, size, iters, ((me + n - 1) % n, (me + 1) % n))?)
            }
            Class::Overlap => {
                return Err(Error::new(
                    ErrorClass::Intern,
                    "Truly_passive_put has a loop of its own",
                ));
            }
            _ => None,
        };
        self.world.barrier()?;
        Ok(time)
    }

    /// IMB_rma_single_put/get, put_local, get_local, accumulate, get_accumulate,
    /// fetch_and_op, compare_and_swap: under a shared lock, `iters` operations, completed
    /// after each (NON-AGGREGATE) or after all (AGGREGATE).
    fn single(
        &mut self,
        b: Benchmark,
        mode: Option<Mode>,
        size: usize,
        iters: usize,
        target: usize,
    ) -> Result<Duration> {
        let each = mode != Some(Mode::Aggregate);
        self.win.lock(LockType::Shared, target, N)?;
        let start = Instant::now();
        for _ in 0..iters {
            self.op(b, size, target, 0)?;
            if each {
                self.complete(b, target)?;
            }
        }
        if !each {
            self.complete(b, target)?;
        }
        let time = start.elapsed();
        self.win.unlock(target)?;
        Ok(time)
    }

    /// IMB_rma_put_all/get_all and put_all_local/get_all_local: under lock_all, `iters`
    /// rounds of one operation to every other rank (starting after this one, to spread the
    /// load), then flush_all (flush_local_all for the `_local` ones).
    fn with_every_other(&mut self, b: Benchmark, size: usize, iters: usize) -> Result<Duration> {
        let (me, n) = (self.world.rank(), self.world.size());
        self.win.lock_all(N)?;
        let start = Instant::now();
        for _ in 0..iters {
            for k in 1..n {
                self.op(b, size, (me + k) % n, 0)?;
            }
        }
        match b {
            Benchmark::PutAllLocal | Benchmark::GetAllLocal => self.win.flush_local_all()?,
            _ => self.win.flush_all()?,
        }
        let time = start.elapsed();
        self.win.unlock_all()?;
        Ok(time)
    }

    /// IMB_rma_exchange_put/get: shared locks on both neighbours; per iteration one message
    /// with each (the left one's at 0, the right one's at `size`), then a flush of each.
    fn exchange(
        &mut self,
        b: Benchmark,
        size: usize,
        iters: usize,
        (left, right): (usize, usize),
    ) -> Result<Duration> {
        let targets: &[usize] = if left == right {
            &[left]
        } else {
            &[left, right]
        };
        for &t in targets {
            self.win.lock(LockType::Shared, t, N)?;
        }
        let start = Instant::now();
        for _ in 0..iters {
            self.op(b, size, left, 0)?;
            self.op(b, size, right, size)?;
            for &t in targets {
                self.win.flush(t)?;
            }
        }
        let time = start.elapsed();
        for &t in targets {
            self.win.unlock(t)?;
        }
        Ok(time)
    }

    /// IMB_rma_passive_put: rank 0, under a shared lock on rank 1, puts `size` bytes,
    /// flushes and meets every rank in a barrier, `iters` times, while rank 1 just waits in
    /// the barriers (t_pure); then again while rank 1 computes for t_pure (outside onesided)
    /// before each barrier (t_ovrl). Rank 0's two times; `None` elsewhere.
    pub fn passive(&mut self, size: usize, iters: usize) -> Result<Option<(Duration, Duration)>> {
        let me = self.world.rank();
        self.world.barrier()?;
        let pure = self.passive_loop(size, iters, Duration::ZERO)?;
        // IMB sends t_pure from the origin to the target; every rank takes this broadcast.
        let per_iter = pure.map_or(0.0, |t| t.as_secs_f64() / iters as f64);
        let bytes = self.world.broadcast(0, &per_iter.to_le_bytes())?;
        let per_iter = bytes
            .as_slice()
            .try_into()
            .map(f64::from_le_bytes)
            .map_err(|_| Error::new(ErrorClass::Intern, "t_pure of 8 bytes"))?;
        self.world.barrier()?;
        let compute = if me == 1 {
            Duration::from_secs_f64(per_iter)
        } else {
            Duration::ZERO
        };
        let ovrl = self.passive_loop(size, iters, compute)?;
        Ok(pure.zip(ovrl))
    }

    /// One loop of Truly_passive_put: rank 0 times put, flush, barrier; rank 1 computes for
    /// `compute`, then meets it in the barrier; others just meet it.
    fn passive_loop(
        &mut self,
        size: usize,
        iters: usize,
        compute: Duration,
    ) -> Result<Option<Duration>> {
        if self.world.rank() != 0 {
            for _ in 0..iters {
                if !compute.is_zero() {
                    busy::compute(compute);
                }
                self.world.barrier()?;
            }
            return Ok(None);
        }
        self.win.lock(LockType::Shared, 1, N)?;
        let start = Instant::now();
        for _ in 0..iters {
            self.win.put(&self.buffers.bytes[..size], 1, 0)?;
            self.win.flush(1)?;
            self.world.barrier()?;
        }
        let time = start.elapsed();
        self.win.unlock(1)?;
        Ok(Some(time))
    }
}
