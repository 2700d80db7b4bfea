//! What MPI-4.1 Examples 12.1 to 12.3 share: arrays `A` and `B` of `M` values per rank,
//! distributed in blocks (rank `r` holds elements `r * M ..`), a map of global indices, and the
//! window over each rank's block of `B`.

use onesided::{Info, Window, World};

#[path = "../outcome/mod.rs"]
mod outcome;
pub use outcome::{Res, exit};

/// Elements of each array per rank.
pub const M: usize = 32;

/// The distribution of `n` ranks.
pub struct Setup {
    pub me: usize,
    pub n: usize,
    /// Global length, `n * M`.
    pub len: usize,
    /// The multiplier of the map, coprime to `len`.
    step: usize,
}

impl Setup {
    pub fn new(world: &World) -> Setup {
        let (me, n) = (world.rank(), world.size());
        let len = n * M;
        let gcd = |mut a: usize, mut b: usize| {
            while b != 0 {
                (a, b) = (b, a % b);
            }
            a
        };
        let step = (7..).find(|&s| gcd(s, len) == 1).expect("a coprime step");
        Setup { me, n, len, step }
    }

    /// Where global element `i` of `A` maps to in `B`: a permutation of the global indices.
    pub fn map(&self, i: usize) -> usize {
        (i * self.step + 3) % self.len
    }

    /// The global index of this rank's element `k`.
    pub fn global(&self, k: usize) -> usize {
        self.me * M + k
    }

    /// The initial value of global element `j` of `B`.
    pub fn b(j: usize) -> f64 {
        (j * 5 % 13) as f64 + 0.5
    }

    /// A window over this rank's block of `B`, filled with its initial values.
    pub fn window_of_b(&self, world: &World) -> onesided::Result<Window<'static>> {
        let win = Window::allocate(world, M * 8, 8, &Info::new())?;
        let b: Vec<f64> = (0..M).map(|k| Setup::b(self.global(k))).collect();
        win.write_local(0, &b)?;
        Ok(win)
    }

    /// End the example: close the fence epoch, check `got` as [`Setup::check`] does, free
    /// the window and, once every rank has checked, print `NAME: ok` on rank 0.
    pub fn finish(
        &self,
        world: &World,
        win: Window<'static>,
        (name, what): (&str, &str),
        got: &[f64],
        want: impl Fn(usize) -> f64,
    ) -> Res {
        win.fence(onesided::Assert::NOSUCCEED)?;
        self.check(what, got, want)?;
        win.free()?;
        world.barrier()?;
        if self.me == 0 {
            println!("{name}: ok ({} elements over {} ranks)", self.len, self.n);
        }
        Ok(())
    }

    /// An error unless `got[k] == want(global(k))` bit for bit for every `k`.
    fn check(&self, what: &str, got: &[f64], want: impl Fn(usize) -> f64) -> Res {
        for (k, &v) in got.iter().enumerate() {
            let w = want(self.global(k));
            if v.to_bits() != w.to_bits() {
                let i = self.global(k);
                return Err(format!("{what}[{i}] = {v}, not {w}").into());
            }
        }
        Ok(())
    }
}
