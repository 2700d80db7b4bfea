//! A user's own element type moved by put and get: `#[derive(onesided::Pod)]` on a
//! `#[repr(C)]` struct, with only `onesided` as a dependency. Each rank puts its particle into
//! the next rank's window under fence, reads it back from there with get, checks both, then
//! makes a deliberate mistake (a put outside any epoch) and prints the error onesided returns.
//!
//! Run: `onesided run -n 4 -- target/release/examples/particles`.

use onesided::{Assert, ErrorClass, Info, Window, World};

/// A particle: position, velocity and an id; 56 bytes without padding.
#[derive(Clone, Copy, Debug, PartialEq, onesided::Pod)]
#[repr(C)]
struct Particle {
    position: [f64; 3],
    velocity: [f64; 3],
    id: u64,
}

fn particle_of(rank: usize) -> Particle {
    let r = rank as f64;
    Particle {
        position: [r, 2.0 * r, 3.0 * r],
        velocity: [-r, 0.5, r * r],
        id: 1000 + rank as u64,
    }
}

fn main() -> onesided::Result<()> {
    let world = World::init()?;
    let (me, n) = (world.rank(), world.size());
    let size = std::mem::size_of::<Particle>();
    let win = Window::allocate(&world, size, size, &Info::new())?;
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    win.fence(Assert::NOPRECEDE)?;
    win.put(&[particle_of(me)], next, 0)?;
    win.fence(Assert::NONE)?;
    let mut mine = [particle_of(usize::MAX % 7)];
    win.read_local(0, &mut mine)?;
    let mut there = [particle_of(0)];
    win.get(&mut there, next, 0)?;
    win.fence(Assert::NOSUCCEED)?;
    assert_eq!(
        mine[0],
        particle_of(prev),
        "rank {me}: the particle put here"
    );
    assert_eq!(
        there[0],
        particle_of(me),
        "rank {me}: the particle read back"
    );
    let misuse = win.put(&[particle_of(me)], next, 0).unwrap_err();
    assert_eq!(misuse.class(), ErrorClass::RmaSync);
    println!("particles: rank {me}: a put outside any epoch: {misuse:?}");
    win.free()?;
    if me == 0 {
        println!("particles: ok ({n} ranks, {size}-byte particles)");
    }
    Ok(())
}
