//! Random interleavings of exclusive lockers and lock_all epochs over a few lock words, one
//! atomic at a time: an exclusive holder is always alone on its word, nobody waits forever,
//! and every word returns to 0 once everyone has released.

use super::apply;
use crate::protocol::lockword::{Mode, Next, Taking};

const WORDS: usize = 4;
const TICKS: usize = 30_000;
/// Ticks without any lock taken or released that count as a deadlock.
const STUCK: usize = 5_000;

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Role {
    /// lock(exclusive) on one word.
    Writer,
    /// lock_all: words of memory it loads taken at once in word order, the others at their
    /// first access in any order.
    All,
}

struct Agent {
    role: Role,
    /// The words of this epoch, in the order they are taken: (word, eager).
    plan: Vec<(usize, bool)>,
    held: Vec<(usize, Mode)>,
    trying: Option<(usize, Mode, Taking)>,
    hold: usize,
}

impl Agent {
    fn new(role: Role) -> Agent {
        Agent {
            role,
            plan: Vec::new(),
            held: Vec::new(),
            trying: None,
            hold: 0,
        }
    }

    fn plan(&mut self, rng: &mut Rng) {
        self.hold = rng.below(6);
        if self.role == Role::Writer {
            self.plan = vec![(rng.below(WORDS), false)];
            return;
        }
        let mut words: Vec<usize> = (0..WORDS).filter(|_| rng.below(3) != 0).collect();
        let eager = rng.below(words.len() + 1);
        for i in (eager + 1..words.len()).rev() {
            let j = eager + rng.below(i - eager + 1);
            words.swap(i, j);
        }
        self.plan = words
            .iter()
            .enumerate()
            .map(|(i, &w)| (w, i < eager))
            .collect();
    }

    /// The mode of the next word of the plan, as the window picks it.
    fn mode(&self, eager: bool) -> Mode {
        match self.role {
            Role::Writer => Mode::Exclusive,
            Role::All if eager => Mode::Shared,
            Role::All => Mode::shared(!self.held.is_empty()),
        }
    }

    /// One step; returns whether a lock was taken or released.
    fn tick(&mut self, words: &mut [u64], rng: &mut Rng, stopping: bool) -> bool {
        if let Some((w, mode, mut t)) = self.trying.take() {
            match t.advance(apply(&mut words[w], t.amo())) {
                Next::Held => {
                    self.held.push((w, mode));
                    return true;
                }
                Next::Now | Next::Later => self.trying = Some((w, mode, t)),
            }
            return false;
        }
        if let Some(&(w, eager)) = self.plan.get(self.held.len()) {
            let mode = self.mode(eager);
            self.trying = Some((w, mode, Taking::new(mode)));
            return false;
        }
        if self.hold > 0 {
            self.hold -= 1;
            return false;
        }
        let released = !self.held.is_empty();
        for (w, mode) in self.held.drain(..) {
            apply(&mut words[w], mode.release());
        }
        self.plan.clear();
        if !stopping {
            self.plan(rng);
        }
        released
    }

    fn idle(&self) -> bool {
        self.trying.is_none() && self.held.is_empty() && self.plan.is_empty()
    }
}

/// An exclusive holder shares its word with nobody.
fn exclusion_holds(agents: &[Agent]) -> bool {
    (0..WORDS).all(|w| {
        let holders = agents.iter().flat_map(|a| &a.held).filter(|h| h.0 == w);
        let (n, exclusive) =
            holders.fold((0, false), |(n, x), h| (n + 1, x || h.1 == Mode::Exclusive));
        !exclusive || n == 1
    })
}

fn run(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut words = [0u64; WORDS];
    let roles = [
        Role::Writer,
        Role::Writer,
        Role::Writer,
        Role::All,
        Role::All,
        Role::All,
    ];
    let mut agents: Vec<Agent> = roles.iter().map(|&r| Agent::new(r)).collect();
    let (mut last, mut taken) = (0, 0);
    let mut tick = 0;
    while tick < TICKS || !agents.iter().all(Agent::idle) {
        let i = rng.below(agents.len());
        if agents[i].tick(&mut words, &mut rng, tick >= TICKS) {
            last = tick;
            taken += 1;
        }
        assert!(
            exclusion_holds(&agents),
            "seed {seed}: tick {tick}: {words:x?}"
        );
        assert!(
            tick - last < STUCK,
            "seed {seed}: nothing taken or released since tick {last}: {words:x?}"
        );
        tick += 1;
    }
    assert_eq!(words, [0; WORDS], "seed {seed}");
    assert!(taken > 1_000, "seed {seed}: {taken} locks");
}

#[test]
fn exclusive_holders_are_alone_and_nobody_waits_forever() {
    (0..50).for_each(run);
}
