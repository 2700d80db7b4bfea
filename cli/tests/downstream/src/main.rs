//! A user's program: a struct of its own moved between ranks by put and get, and a mistake.
//!
//! Every rank puts its `Reading` into the next rank's window under fence and reads the next
//! rank's back with get. Then each makes a put outside any epoch; rank 0 returns that error
//! from `main`, which prints it as Rust prints the error of `main`.

use onesided::{Assert, Info, Window, World};

/// A sensor reading: 24 bytes, no padding.
#[derive(Clone, Copy, Debug, PartialEq, onesided::Pod)]
#[repr(C)]
struct Reading {
    time: f64,
    value: [f32; 2],
    sensor: u64,
}

fn reading_of(rank: usize) -> Reading {
    Reading {
        time: rank as f64 * 0.5,
        value: [rank as f32, -(rank as f32)],
        sensor: 7000 + rank as u64,
    }
}

fn main() -> onesided::Result<()> {
    let world = World::init()?;
    let (me, n) = (world.rank(), world.size());
    let size = std::mem::size_of::<Reading>();
    let win = Window::allocate(&world, size, size, &Info::new())?;
    let next = (me + 1) % n;
    let prev = (me + n - 1) % n;
    win.fence(Assert::NOPRECEDE)?;
    win.put(&[reading_of(me)], next, 0)?;
    win.fence(Assert::NONE)?;
    let mut landed = [reading_of(0)];
    win.read_local(0, &mut landed)?;
    let mut fetched = [reading_of(0)];
    win.get(&mut fetched, next, 0)?;
    win.fence(Assert::NOSUCCEED)?;
    assert_eq!(landed[0], reading_of(prev), "rank {me}: the reading put here");
    assert_eq!(fetched[0], reading_of(me), "rank {me}: the reading read back");
    println!("downstream: rank {me} ok");
    let mistake = win.put(&[reading_of(me)], next, 0);
    win.free()?;
    if me == 0 {
        mistake?;
    }
    Ok(())
}
