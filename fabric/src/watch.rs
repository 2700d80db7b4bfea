//! The tasks waiting for an endpoint's operations: the wakers of futures whose operations were
//! still in flight when polled ([`crate::Endpoint::watch`]). Whichever thread settles
//! completions wakes them all (the progress thread, mostly, while their owner is parked in its
//! executor); each woken future polls its own operations and, if they are still in flight,
//! watches again. While any is watched, the progress thread polls back to back, and wakes them
//! all at least every [`HEARTBEAT`] even if nothing settles, so that a future whose peer died
//! looks at the peer's liveness again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::task::Waker;
use std::time::Duration;

/// How often watched futures are woken while nothing settles.
pub(crate) const HEARTBEAT: Duration = Duration::from_millis(10);

/// Wakers waiting for any completion of one endpoint.
#[derive(Debug, Default)]
pub(crate) struct Watchers {
    /// Whether `wakers` holds any: a settle that finds it false takes no lock.
    any: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl Watchers {
    /// Keep `waker` for the next settle (once, however often the same task asks); whether it
    /// is the first one kept since the last wake (the progress thread may be asleep then).
    pub(crate) fn add(&self, waker: &Waker) -> bool {
        let mut w = self.wakers.lock().unwrap_or_else(PoisonError::into_inner);
        if !w.iter().any(|k| k.will_wake(waker)) {
            w.push(waker.clone());
        }
        !self.any.swap(true, Ordering::SeqCst)
    }

    /// Whether some future waits.
    pub(crate) fn any(&self) -> bool {
        self.any.load(Ordering::Relaxed)
    }

    /// Completions were just settled under the bookkeeping's lock, given back since: wake every
    /// waiting future. No wake is lost without a fence: a watcher sets `any` before it takes
    /// that lock to look at its operations, so either its look comes after the settle and sees
    /// it, or its setting of `any` comes before the settle's taking of the lock, and so before
    /// this load.
    pub(crate) fn settled(&self) {
        if self.any.load(Ordering::Relaxed) {
            self.wake_all();
        }
    }

    /// Wake every waiting future and forget them.
    pub(crate) fn wake_all(&self) {
        let woken = {
            let mut w = self.wakers.lock().unwrap_or_else(PoisonError::into_inner);
            self.any.store(false, Ordering::Relaxed);
            std::mem::take(&mut *w)
        };
        // Outside the lock: a waker may run code that watches again.
        woken.into_iter().for_each(Waker::wake);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_settle_wakes_each_task_once_and_forgets_it() {
        let w = Watchers::default();
        let a = Arc::new(Count(AtomicUsize::new(0)));
        let b = Arc::new(Count(AtomicUsize::new(0)));
        let (wa, wb) = (Waker::from(a.clone()), Waker::from(b.clone()));
        w.settled();
        assert_eq!(a.0.load(Ordering::Relaxed), 0, "nobody watched yet");
        assert!(w.add(&wa), "the first watcher");
        assert!(!w.add(&wa));
        assert!(!w.add(&wb));
        assert!(w.any());
        w.settled();
        assert_eq!(
            a.0.load(Ordering::Relaxed),
            1,
            "the same task twice is woken once"
        );
        assert_eq!(b.0.load(Ordering::Relaxed), 1);
        assert!(!w.any());
        w.settled();
        assert_eq!(
            a.0.load(Ordering::Relaxed),
            1,
            "a woken task watches again or is gone"
        );
    }
}
