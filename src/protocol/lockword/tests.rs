use super::*;

/// Apply `amo` to `word` the way a NIC or CPU atomic would; returns the old value.
fn apply(word: &mut u64, amo: Amo) -> u64 {
    let old = *word;
    match amo {
        Amo::FetchAdd(v) => *word = old.wrapping_add(v),
        Amo::CompareSwap { compare, swap } if old == compare => *word = swap,
        Amo::CompareSwap { .. } | Amo::Load => {}
    }
    old
}

/// Drive `t` until it holds the lock or has to back off; returns that and the atomics issued.
fn run(word: &mut u64, t: &mut Taking) -> (Next, usize) {
    let mut amos = 0;
    loop {
        amos += 1;
        match t.advance(apply(word, t.amo())) {
            Next::Now => continue,
            next => return (next, amos),
        }
    }
}

fn take(word: &mut u64, mode: Mode) -> (Taking, Next) {
    let mut t = Taking::new(mode);
    let (next, _) = run(word, &mut t);
    (t, next)
}

fn release(word: &mut u64, mode: Mode) {
    apply(word, mode.release());
}

#[test]
fn an_uncontended_lock_is_one_atomic() {
    for mode in [Mode::Exclusive, Mode::Shared, Mode::SharedPast] {
        let mut w = 0;
        assert_eq!(run(&mut w, &mut Taking::new(mode)), (Next::Held, 1));
        assert_eq!(w, mode.unit());
        release(&mut w, mode);
        assert_eq!(w, 0);
    }
}

#[test]
fn a_standing_claim_turns_fresh_readers_away_and_waits_for_all_readers() {
    let mut w = 0;
    assert_eq!(take(&mut w, Mode::Shared).1, Next::Held);
    let (mut x, next) = take(&mut w, Mode::Exclusive);
    assert_eq!(next, Next::Later, "the claim stands");
    assert_eq!(w, SHARED | CLAIM);
    assert_eq!(take(&mut w, Mode::Shared).1, Next::Later);
    let (mut other, next) = take(&mut w, Mode::Exclusive);
    assert_eq!(next, Next::Later);
    assert_eq!(other.abandon(), None, "a lost claim backed out at once");
    assert_eq!(
        take(&mut w, Mode::SharedPast).1,
        Next::Held,
        "an origin holding other words passes the standing claim"
    );
    assert_eq!(w, SHARED | PAST | CLAIM);
    release(&mut w, Mode::Shared);
    assert_eq!(run(&mut w, &mut x).0, Next::Later, "a PAST holder is left");
    release(&mut w, Mode::SharedPast);
    assert_eq!(run(&mut w, &mut x).0, Next::Held);
    assert_eq!(w, EXCLUSIVE);
    assert_eq!(run(&mut w, &mut other).0, Next::Later);
    release(&mut w, Mode::Exclusive);
    assert_eq!(w, 0);
}

#[test]
fn a_granted_lock_turns_everyone_away_and_release_keeps_inflight_counts() {
    let mut w = 0;
    take(&mut w, Mode::Exclusive);
    for mode in [Mode::Shared, Mode::SharedPast, Mode::Exclusive] {
        assert_eq!(take(&mut w, mode).1, Next::Later, "{mode:?}");
    }
    assert_eq!(w, EXCLUSIVE);
    // A shared attempt in flight (added, not yet backed out) during the release.
    apply(&mut w, Amo::FetchAdd(SHARED));
    release(&mut w, Mode::Exclusive);
    assert_eq!(w, SHARED);
    apply(&mut w, Amo::FetchAdd(SHARED.wrapping_neg()));
    assert_eq!(w, 0);
}

#[test]
fn a_past_reader_slipping_in_before_the_grant_takes_it_back() {
    let mut w = 0;
    take(&mut w, Mode::Shared);
    let (mut x, _) = take(&mut w, Mode::Exclusive);
    release(&mut w, Mode::Shared);
    // The claim reads the drained word and is about to mark itself granted ...
    assert_eq!(x.advance(apply(&mut w, x.amo())), Next::Now);
    assert_eq!(x.amo(), Amo::FetchAdd(GRANTED));
    // ... when a lock_all epoch passes it.
    assert_eq!(take(&mut w, Mode::SharedPast).1, Next::Held);
    assert_eq!(run(&mut w, &mut x).0, Next::Later);
    assert_eq!(w, CLAIM | PAST, "the mark was taken back");
    // Transient shared attempts no longer delay the grant: only PAST holders do.
    apply(&mut w, Amo::FetchAdd(SHARED));
    release(&mut w, Mode::SharedPast);
    assert_eq!(run(&mut w, &mut x).0, Next::Held);
    apply(&mut w, Amo::FetchAdd(SHARED.wrapping_neg()));
    assert_eq!(w, EXCLUSIVE);
}

#[test]
fn an_abandoned_claim_leaves_only_the_readers() {
    let mut w = 0;
    take(&mut w, Mode::Shared);
    let (x, _) = take(&mut w, Mode::Exclusive);
    apply(&mut w, x.abandon().expect("a standing claim"));
    assert_eq!(w, SHARED);
    assert_eq!(Taking::new(Mode::Shared).abandon(), None);
}

/// The cycle the fuzz test found: two lock_all epochs each hold one word and want the other's,
/// and behind each word stands an exclusive claim waiting for that epoch's share.
#[test]
fn lock_all_epochs_pass_the_claims_that_wait_for_them() {
    let (mut b, mut d) = (0, 0);
    take(&mut b, Mode::Shared); // epoch A holds B
    take(&mut d, Mode::Shared); // epoch G holds D
    let (mut c, _) = take(&mut b, Mode::Exclusive); // C claims B, waits for A
    let (mut f, _) = take(&mut d, Mode::Exclusive); // F claims D, waits for G
    assert_eq!(take(&mut d, Mode::Shared).1, Next::Later, "the cycle");
    assert_eq!(take(&mut d, Mode::SharedPast).1, Next::Held, "A goes on");
    assert_eq!(take(&mut b, Mode::SharedPast).1, Next::Held, "G goes on");
    for w in [&mut b, &mut d] {
        release(w, Mode::Shared);
        release(w, Mode::SharedPast);
    }
    assert_eq!(run(&mut b, &mut c).0, Next::Held);
    assert_eq!(run(&mut d, &mut f).0, Next::Held);
}

#[test]
fn many_holders_never_reach_the_next_field() {
    let mut w = 0;
    for _ in 0..100_000 {
        take(&mut w, Mode::Shared);
        take(&mut w, Mode::SharedPast);
    }
    assert_eq!(w, 100_000 * (SHARED + PAST));
    assert_eq!(take(&mut w, Mode::Exclusive).1, Next::Later);
    assert_eq!(w & CLAIMS, CLAIM);
}

#[test]
fn raw_lock_types() {
    assert_eq!(
        LockType::try_from(LockType::MPI_LOCK_SHARED).unwrap(),
        LockType::Shared
    );
    let e = LockType::try_from(7).unwrap_err();
    assert_eq!(e.class(), crate::error::ErrorClass::LockType);
}

mod model;
