//! The registration cache: where the provider demands registered local buffers
//! (`FI_MR_LOCAL`), the registration of a caller's buffer is kept for the next transfer from or
//! into it, keyed by address range (whole pages), and dropped when the memory goes away, as the
//! memory monitor (`monitor.rs`) reports: unmapped, given back to the kernel or moved. Memory
//! freed without going away (a heap block given back to the allocator) keeps its pages, so the
//! registration still holds them when the allocator hands the block out again.
//!
//! Where no monitor can be had (a kernel without `userfaultfd`, or a process not permitted to
//! open one) or the memory cannot be watched (a mapped file), a registration serves its one
//! transfer only, as it did before this cache; [`Endpoint::registration_cache`] says which.
//!
//! [`Endpoint::registration_cache`]: crate::Endpoint::registration_cache

use crate::error::FiError;
use crate::lent::Lent;
use crate::monitor::{Monitor, pages};
use crate::mr::{Local, Mr};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Registrations kept; beyond them the least recently used goes.
const KEPT: usize = 64;

/// An endpoint's cache of registrations of its callers' buffers.
#[derive(Default)]
pub(crate) struct Cache {
    /// Opened at the first registration for a transfer: the monitor, or why there is none.
    monitor: OnceLock<Result<Monitor, String>>,
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    list: Vec<Entry>,
    /// Counts look-ups, for the least recently used.
    clock: u64,
    hits: u64,
    misses: u64,
    dropped: u64,
}

struct Entry {
    start: usize,
    end: usize,
    mr: Arc<Mr>,
    used: u64,
}

/// What an endpoint's registration cache did so far ([`crate::Endpoint::registration_cache`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheReport {
    /// `None` until a transfer first needed a registration; then whether memory is watched
    /// (the cache keeps registrations) or why not (each serves one transfer).
    pub watching: Option<Result<(), String>>,
    /// Transfers that found their buffer's registration in the cache.
    pub hits: u64,
    /// Registrations made and kept.
    pub misses: u64,
    /// Registrations dropped because their memory went away.
    pub dropped: u64,
    /// Registrations kept now.
    pub entries: usize,
}

impl Entries {
    /// Drop the registrations of memory the monitor reports gone.
    fn forget(&mut self, monitor: &Monitor) {
        let Some(gone) = monitor.take() else { return };
        let before = self.list.len();
        self.list.retain(|e| !gone.overlaps(e.start, e.end));
        self.dropped += (before - self.list.len()) as u64;
    }

    fn find(&mut self, start: usize, end: usize) -> Option<Arc<Mr>> {
        self.clock += 1;
        let e = self
            .list
            .iter_mut()
            .find(|e| e.start <= start && end <= e.end)?;
        e.used = self.clock;
        self.hits += 1;
        Some(e.mr.clone())
    }

    /// Keep `mr` for `start..end`, watched; the least recently used goes when too many are
    /// kept, and its memory is no longer watched unless another registration covers some of it.
    fn insert(&mut self, start: usize, end: usize, mr: Arc<Mr>, monitor: &Monitor) {
        self.misses += 1;
        self.list.push(Entry {
            start,
            end,
            mr,
            used: self.clock,
        });
        if self.list.len() <= KEPT {
            return;
        }
        let Some(oldest) = (0..self.list.len()).min_by_key(|&i| self.list[i].used) else {
            return;
        };
        let old = self.list.swap_remove(oldest);
        if !self
            .list
            .iter()
            .any(|e| e.start < old.end && old.start < e.end)
        {
            monitor.unwatch(old.start, old.end);
        }
    }
}

impl Cache {
    fn lock(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The entries, without those of memory `monitor` reports gone.
    fn fresh(&self, monitor: &Monitor) -> MutexGuard<'_, Entries> {
        let mut entries = self.lock();
        entries.forget(monitor);
        entries
    }

    /// The kept registration that holds `addr..addr + len`, if any.
    pub(crate) fn find(&self, addr: usize, len: usize) -> Option<Arc<Mr>> {
        let monitor = self.monitor.get()?.as_ref().ok()?;
        self.fresh(monitor).find(addr, addr + len)
    }

    /// A registration, made through `local` (the endpoint's), for a transfer from or into
    /// `addr..addr + len`, where [`Cache::find`] found none, of its whole pages: kept for later
    /// transfers where the monitor watches that memory, else for this one only. An endpoint
    /// lends from its owning thread only, so no other registration of the range arrives in
    /// between.
    ///
    /// # Safety
    /// The memory must stay mapped while the transfer that uses the registration is in flight.
    /// A kept registration outlives the caller's memory (`Mr::register`'s condition) only until
    /// the monitor reports it gone, and no transfer uses it after that: a look-up first drops
    /// what went. The domain of `local` must be open while the cache keeps registrations (the
    /// endpoint clears it before it closes).
    pub(crate) unsafe fn register(
        &self,
        local: Local<'_>,
        addr: usize,
        len: usize,
    ) -> Result<Lent, FiError> {
        let Ok(monitor) = self.monitor.get_or_init(Monitor::open) else {
            // SAFETY: as the caller guarantees; the registration is dropped with the transfer.
            return unsafe { local.register(addr, len) }.map(Lent::Own);
        };
        let (start, end) = pages(addr, addr + len);
        // SAFETY: the pages hold the caller's buffer, so they are mapped; the module docs say
        // how a kept registration is dropped before its memory is used again.
        let mr = unsafe { local.register(start, end - start)? };
        if monitor.watch(start, end).is_err() {
            return Ok(Lent::Own(mr));
        }
        let mr = Arc::new(mr);
        self.lock().insert(start, end, mr.clone(), monitor);
        Ok(Lent::Cached(mr))
    }

    /// Drop every kept registration (before the endpoint they are bound to closes).
    pub(crate) fn clear(&self) {
        self.lock().list.clear();
    }

    /// What the cache did, after dropping what went.
    pub(crate) fn report(&self) -> CacheReport {
        let monitor = self.monitor.get();
        let e = match monitor {
            Some(Ok(m)) => self.fresh(m),
            _ => self.lock(),
        };
        let watching = monitor.map(|m| m.as_ref().map(|_| ()).map_err(Clone::clone));
        CacheReport {
            watching,
            hits: e.hits,
            misses: e.misses,
            dropped: e.dropped,
            entries: e.list.len(),
        }
    }
}
