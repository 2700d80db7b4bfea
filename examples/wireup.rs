//! Wire-up cost: how long `World::init` and one `Window::allocate` (and its free) take on each
//! rank; rank 0 prints the slowest rank's and the median rank's times.
//!
//! ```sh
//! srun --mpi=pmix -n 64 target/release/examples/wireup
//! target/release/onesided run -n 16 -- target/release/examples/wireup
//! ```

use onesided::{Info, Result, Window, World};
use std::time::{Duration, Instant};

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() -> Result<()> {
    let start = Instant::now();
    let world = World::init()?;
    let init = start.elapsed();
    world.barrier()?;
    let start = Instant::now();
    let win = Window::allocate(&world, 4096, 8, &Info::new())?;
    let allocate = start.elapsed();
    let start = Instant::now();
    win.free()?;
    let free = start.elapsed();

    let mine: Vec<u8> = [init, allocate, free]
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
        let (ranks, names) = (world.size(), ["World::init", "Window::allocate", "free"]);
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
