//! Wire-up cost: how long `World::init` and one `Window::allocate` (and its free) take on each
//! rank, and all of it from before `World::init` until the window is freed; rank 0 prints the
//! slowest rank's and the median rank's times. An argument, `WORK_MS`, has each rank compute
//! for that long between `World::init` and the window (outside onesided, untimed but counted in
//! the whole), as a program that prepares its data first does.
//!
//! ```sh
//! srun --mpi=pmix -n 64 target/release/examples/wireup
//! target/release/onesided run -n 16 -- target/release/examples/wireup
//! target/release/onesided run -n 8 -- target/release/examples/wireup 300
//! ```

use onesided::{Info, Result, Window, World};
use std::time::{Duration, Instant};

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Integer arithmetic for `time`, without calling onesided.
fn compute(time: Duration) {
    let start = Instant::now();
    let mut x = 1u64;
    while start.elapsed() < time {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

fn main() -> Result<()> {
    let work = match std::env::args().nth(1) {
        None => Duration::ZERO,
        Some(ms) => match ms.parse() {
            Ok(ms) => Duration::from_millis(ms),
            Err(_) => {
                eprintln!("wireup: WORK_MS must be a whole number of milliseconds, not {ms:?}");
                std::process::exit(2);
            }
        },
    };
    let begun = Instant::now();
    let world = World::init()?;
    let init = begun.elapsed();
    world.barrier()?;
    compute(work);
    let start = Instant::now();
    let win = Window::allocate(&world, 4096, 8, &Info::new())?;
    let allocate = start.elapsed();
    let start = Instant::now();
    win.free()?;
    let free = start.elapsed();
    let whole = begun.elapsed();

    let mine: Vec<u8> = [init, allocate, free, whole]
        .iter()
        .flat_map(|d| millis(*d).to_le_bytes())
        .collect();
    let all = world.allgather(&mine)?;
    if world.rank() == 0 {
        let column = |i: usize| {
            let mut v: Vec<f64> = all
                .iter()
                .map(|b| {
                    let mut x = [0u8; 8];
                    x.copy_from_slice(&b[8 * i..8 * i + 8]);
                    f64::from_le_bytes(x)
                })
                .collect();
            v.sort_by(f64::total_cmp);
            (v[v.len() - 1], v[v.len() / 2])
        };
        let (ranks, names) = (
            world.size(),
            ["World::init", "Window::allocate", "free", "all of it"],
        );
        let cells: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let (max, median) = column(i);
                format!("{name} {max:.2} ms (median {median:.2})")
            })
            .collect();
        println!("wireup: {ranks} ranks: {}", cells.join(", "));
    }
    Ok(())
}
