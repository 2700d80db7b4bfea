//! Notifications that travel with the write they announce: a notified put is one write that
//! carries data to the target's completion queue, naming the target window and the
//! notification id (libfabric's `FI_REMOTE_CQ_DATA`, verbs' immediate data), and that completes
//! at the target only once its bytes are there. The target's endpoint hands that data to
//! [`Notices::deliver`] when it reads the completion, which counts it for the window. No flush,
//! no second operation, no ordering between a write and an atomic asked of the provider
//! (tcp;ofi_rxm gives none).
//!
//! The counts live in this process's memory, one per id per window, not in the control block:
//! a CPU increment there would not be atomic with a NIC's atomics on the same word. A window's
//! waits add them to the control block's counter of the id, where the notifications of origins
//! that signal with an atomic arrive.

use crate::protocol::layout::NOTIFY_IDS;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Bits of the data that hold the id.
const ID_BITS: u32 = NOTIFY_IDS.trailing_zeros();
const _: () = assert!(1 << ID_BITS == NOTIFY_IDS);

/// The data a notified put carries: the target window's tag above the id.
pub(crate) fn data(tag: u32, id: usize) -> u64 {
    (u64::from(tag) << ID_BITS) | id as u64
}

/// The notifications of one window that arrived with their writes, per id.
#[derive(Debug)]
pub(crate) struct Counts(Box<[AtomicU64]>);

impl Counts {
    /// How many of `id` arrived so far.
    pub(crate) fn of(&self, id: usize) -> u64 {
        self.0.get(id).map_or(0, |c| c.load(Ordering::Acquire))
    }
}

/// The windows of an endpoint that take notifications, by tag.
#[derive(Debug)]
pub(crate) struct Notices {
    windows: Mutex<Tags>,
    /// Tags are below this: the data's other bits, within what the provider carries.
    limit: u32,
}

/// The live windows by tag, and the tag handed out last.
#[derive(Debug, Default)]
struct Tags {
    live: HashMap<u32, Arc<Counts>>,
    last: u32,
}

impl Notices {
    /// The notices of an endpoint whose writes carry `bits` bits of data: `None` where that
    /// leaves fewer than 16 bits of tag.
    pub(crate) fn for_bits(bits: u32) -> Option<Notices> {
        (bits >= ID_BITS + 16).then(|| Notices::new(bits))
    }

    fn new(bits: u32) -> Notices {
        let tag_bits = bits.min(63).saturating_sub(ID_BITS).min(31);
        Notices {
            windows: Mutex::default(),
            limit: 1 << tag_bits,
        }
    }

    fn windows(&self) -> MutexGuard<'_, Tags> {
        self.windows.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A tag, not 0 and not held by a live window, and its counts; `None` when every tag is
    /// held.
    pub(crate) fn register(self: &Arc<Self>) -> Option<Window> {
        let mut windows = self.windows();
        for _ in 0..self.limit {
            windows.last = (windows.last + 1) % self.limit;
            let tag = windows.last;
            if tag != 0 && !windows.live.contains_key(&tag) {
                let counts = Arc::new(Counts((0..NOTIFY_IDS).map(|_| AtomicU64::new(0)).collect()));
                windows.live.insert(tag, counts.clone());
                return Some(Window {
                    tag,
                    counts,
                    notices: self.clone(),
                });
            }
        }
        None
    }

    /// Count the notification a peer's write carried; one for a window freed meanwhile (or
    /// unknown) is dropped.
    pub(crate) fn deliver(&self, data: u64) {
        let tag = u32::try_from(data >> ID_BITS).unwrap_or(0);
        let id = (data & (NOTIFY_IDS as u64 - 1)) as usize;
        if let Some(counts) = self.windows().live.get(&tag) {
            counts.0[id].fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// A window's registration: its tag and counts, given back when dropped.
#[derive(Debug)]
pub(crate) struct Window {
    pub(crate) tag: u32,
    pub(crate) counts: Arc<Counts>,
    notices: Arc<Notices>,
}

impl Drop for Window {
    fn drop(&mut self) {
        self.notices.windows().live.remove(&self.tag);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notification_counts_for_its_window_and_id_only() {
        let notices = Arc::new(Notices::new(32));
        let a = notices.register().unwrap();
        let b = notices.register().unwrap();
        assert_ne!(a.tag, b.tag);
        notices.deliver(data(a.tag, 5));
        notices.deliver(data(a.tag, 5));
        notices.deliver(data(b.tag, NOTIFY_IDS - 1));
        assert_eq!((a.counts.of(5), a.counts.of(4)), (2, 0));
        assert_eq!(b.counts.of(NOTIFY_IDS - 1), 1);
        let gone = b.tag;
        drop(b);
        notices.deliver(data(gone, 1));
        notices.deliver(data(0, 1));
        assert_eq!(a.counts.of(1), 0, "dropped, not counted elsewhere");
    }

    #[test]
    fn tags_fit_the_data_the_provider_carries_and_are_reused_once_free() {
        // 32 bits of data (verbs' immediate): 24 bits of tag.
        let notices = Arc::new(Notices::new(32));
        assert_eq!(notices.limit, 1 << 24);
        assert!(data(notices.limit - 1, NOTIFY_IDS - 1) <= u64::from(u32::MAX));
        // A provider with room for 3 tags only (1 to 3; 0 is none).
        let small = Arc::new(Notices::new(ID_BITS + 2));
        let one = small.register().unwrap();
        let two = small.register().unwrap();
        let three = small.register().unwrap();
        assert!(small.register().is_none(), "every tag held");
        let freed = two.tag;
        drop(two);
        assert_eq!(small.register().unwrap().tag, freed);
        drop((one, three));
    }
}
