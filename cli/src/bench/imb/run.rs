//! `onesided bench imb [BENCHMARK...]`: the IMB-RMA benchmarks, run as IMB runs them and
//! reported in IMB's tables (or as JSON or CSV records).
//!
//! Per benchmark, every rank of the job creates one window for its largest message
//! (`MPI_Win_create` over the benchmark's memory unless `-w` says otherwise, as IMB does);
//! per mode, one table; per size, a warm-up (IMB's: a tenth of the repetitions, at least 10)
//! and the samples ([`Setup::sample`]): each rank's time per operation, gathered to rank 0,
//! which prints IMB's figures: the largest time over the ranks that time (and the bandwidth
//! from it, times the N-1 targets of the multiple transfers), or the least, largest and mean
//! time of the parallel transfers, or Truly_passive_put's t_pure and t_ovrl.

use super::super::args::Creation;
use super::super::options::Plan;
use super::super::pages::Pages;
use super::super::report::{Column, Report, Table};
use super::catalog::{Benchmark, Class, Mode};
use super::loops::{Buffers, Setup};
use super::text::{self, Block};
use onesided::{Error, ErrorClass, Info, Result, Window, World};
use std::time::Duration;

/// IMB's time column of the single and multiple transfers: the largest time per operation.
const T: Column = Column {
    head: "t[usec]",
    unit: "us",
};
/// IMB's bandwidth: bytes per microsecond (MB/s, 1 MB = 10^6 bytes).
const MBYTES: Column = Column {
    head: "Mbytes/sec",
    unit: "MB/s",
};
const T_MIN: Column = Column {
    head: "t_min[usec]",
    unit: "us t_min",
};
const T_MAX: Column = Column {
    head: "t_max[usec]",
    unit: "us t_max",
};
const T_AVG: Column = Column {
    head: "t_avg[usec]",
    unit: "us t_avg",
};
/// Truly_passive_put: put + flush (+ barrier) while the target waits in the barrier.
const T_PURE: Column = Column {
    head: "t_pure[usec]",
    unit: "us t_pure",
};
/// Truly_passive_put: the same while the target computes for t_pure first.
const T_OVRL: Column = Column {
    head: "t_ovrl[usec]",
    unit: "us t_ovrl",
};

/// The first line of the output.
const TITLE: &str = "onesided: the benchmarks of IMB-RMA (Intel(R) MPI Benchmarks, MPI-RMA part)";

/// Runs `list` in `world`, in order.
pub fn run(world: &World, plan: &Plan, list: &[Benchmark], report: &mut Report) -> Result<()> {
    let names: Vec<(&str, &[&str])> = list.iter().map(|b| (b.name(), b.comments())).collect();
    report.text(|out| text::preamble(out, TITLE, &names))?;
    for &b in list {
        benchmark(world, plan, b, report)?;
    }
    report.text(|out| text::finale(out))
}

/// The columns of a benchmark's table.
fn columns(class: Class) -> Vec<Column> {
    match class {
        Class::Single | Class::Element | Class::Multiple => vec![T, MBYTES],
        Class::Parallel => vec![T_MIN, T_MAX, T_AVG],
        Class::Overlap => vec![T_PURE, T_OVRL],
    }
}

fn table(world: &World, plan: &Plan, b: Benchmark, mode: Option<Mode>) -> Table {
    let n = world.size();
    let mode = mode.map(Mode::name);
    Table {
        name: b.name(),
        title: String::new(),
        notes: Vec::new(),
        window: Some(plan.creation.mpi_name()),
        sync: mode,
        datatype: Some(b.data().mpi_name()),
        ranks: b.active(n),
        show_ranks: false,
        columns: columns(b.class()),
        imb: Some(Block {
            name: b.name(),
            processes: b.active(n),
            idle: n - b.active(n),
            mode,
        }),
        threads: None,
    }
}

/// One benchmark: its window, then a table per mode, a row per size.
fn benchmark(world: &World, plan: &Plan, b: Benchmark, report: &mut Report) -> Result<()> {
    let (min, max) = plan.imb_sizes();
    let sizes = b.sizes(min, max);
    let largest = sizes.last().copied().unwrap_or(0);
    let bytes = b.window_bytes(largest).max(8);
    with_window(world, plan.creation, bytes, |win| {
        let mut setup = Setup {
            world,
            win,
            buffers: Buffers::new(largest),
        };
        for &mode in b.modes() {
            report.table(table(world, plan, b, mode))?;
            for &size in &sizes {
                let (warmup, iters) = plan.imb_pass(size, mode);
                let columns = samples(&mut setup, plan, b, mode, size, (warmup, iters))?;
                report.row(size, iters, &columns)?;
            }
        }
        Ok(())
    })
}

/// The warm-up and the repetitions of one size: per column, a value per repetition (rank 0's
/// figures; the other ranks' are not used).
fn samples(
    setup: &mut Setup<'_, '_>,
    plan: &Plan,
    b: Benchmark,
    mode: Option<Mode>,
    size: usize,
    (warmup, iters): (usize, usize),
) -> Result<Vec<Vec<f64>>> {
    let n = setup.world.size();
    let per_op = |t: Duration| t.as_secs_f64() * 1e6 / iters as f64;
    let mut columns = vec![Vec::new(); columns(b.class()).len()];
    if b.class() == Class::Overlap {
        if warmup > 0 {
            setup.passive(size, warmup)?;
        }
        for _ in 0..plan.repetitions {
            let (pure, ovrl) = setup.passive(size, iters)?.unwrap_or_default();
            columns[0].push(per_op(pure));
            columns[1].push(per_op(ovrl));
        }
        return Ok(columns);
    }
    if warmup > 0 {
        setup.sample(b, mode, size, warmup)?;
    }
    for _ in 0..plan.repetitions {
        let mine = setup.sample(b, mode, size, iters)?.map_or(-1.0, per_op);
        let all = setup.world.allgather(&mine.to_le_bytes())?;
        let times = decode(&all)?;
        let figures = match b.class() {
            Class::Parallel => {
                let Spread { min, max, avg } = spread(&times);
                vec![min, max, avg]
            }
            class => {
                let t = spread(&times).max;
                let targets = if class == Class::Multiple { n - 1 } else { 1 };
                vec![t, bandwidth(size * targets, t)]
            }
        };
        for (column, v) in columns.iter_mut().zip(figures) {
            column.push(v);
        }
    }
    Ok(columns)
}

/// The ranks' times, from the bytes each contributed.
fn decode(all: &[Vec<u8>]) -> Result<Vec<f64>> {
    all.iter()
        .map(|b| {
            b.as_slice()
                .try_into()
                .map(f64::from_le_bytes)
                .map_err(|_| Error::new(ErrorClass::Intern, "a time of 8 bytes"))
        })
        .collect()
}

/// The least, largest and mean time over the ranks that timed.
#[derive(Debug, PartialEq)]
struct Spread {
    min: f64,
    max: f64,
    avg: f64,
}

/// [`Spread`] of the non-negative `times` (a rank that did not time sends -1, as IMB's do);
/// zeros where none timed.
fn spread(times: &[f64]) -> Spread {
    let timed: Vec<f64> = times.iter().copied().filter(|t| *t >= 0.0).collect();
    if timed.is_empty() {
        return Spread {
            min: 0.0,
            max: 0.0,
            avg: 0.0,
        };
    }
    Spread {
        min: timed.iter().copied().fold(f64::INFINITY, f64::min),
        max: timed.iter().copied().fold(0.0, f64::max),
        avg: timed.iter().sum::<f64>() / timed.len() as f64,
    }
}

/// IMB's Mbytes/sec: bytes per microsecond, 0 for a time of 0.
fn bandwidth(bytes: usize, micros: f64) -> f64 {
    if micros > 0.0 {
        bytes as f64 / micros
    } else {
        0.0
    }
}

/// Creates a window of `bytes` bytes as `creation` says, runs `f` on it, frees it (`f`'s
/// failure after the free; a failure of one rank ends the job).
fn with_window(
    world: &World,
    creation: Creation,
    bytes: usize,
    f: impl FnOnce(&Window<'_>) -> Result<()>,
) -> Result<()> {
    let info = Info::new();
    match creation {
        Creation::Allocate => {
            let win = Window::allocate(world, bytes, 1, &info)?;
            let result = f(&win);
            win.free()?;
            result
        }
        Creation::Create => {
            let mut memory = Pages::filled(bytes, 0u8);
            Window::create(world, &mut memory[..], 1, &info, f)?
        }
        Creation::AllocMem => {
            let mut memory = world.alloc_mem::<u8>(bytes, &info)?;
            Window::create(world, &mut memory[..], 1, &info, f)?
        }
        Creation::Dynamic => Err(Error::new(
            ErrorClass::Arg,
            "the IMB-RMA benchmarks address displacement 0: not -w dynamic",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_that_do_not_time_are_left_out() {
        assert_eq!(
            spread(&[2.0, -1.0, 4.0, -1.0]),
            Spread {
                min: 2.0,
                max: 4.0,
                avg: 3.0
            }
        );
        assert_eq!(spread(&[-1.0]).max, 0.0);
    }

    #[test]
    fn bandwidth_is_bytes_per_microsecond() {
        assert_eq!(bandwidth(4096, 2.0), 2048.0);
        assert_eq!(bandwidth(0, 1.0), 0.0);
        assert_eq!(bandwidth(8, 0.0), 0.0);
    }
}
