//! Which memory goes away: a `userfaultfd` that watches address ranges and reports those
//! unmapped (`munmap`, a heap that shrinks), given back (`madvise` with `MADV_DONTNEED`,
//! `MADV_FREE` or `MADV_REMOVE`) or moved (`mremap`), for the registration cache (`cache.rs`)
//! to drop what it holds there.
//!
//! Ranges are watched in write-protect mode and never write-protected, so the watch brings
//! events and no page faults: nothing the process does in a watched range stops for the
//! monitor, except the calls that take memory away, which the kernel holds until their event
//! has been read. A thread reads them as they come, under the lock of the list it puts them in,
//! so that once such a call has returned, the next [`Monitor::take`] finds its range. The
//! thread allocates nothing while it holds that lock: an allocation may give memory back, and
//! that call would wait for the thread itself.

use crate::doorbell::readable;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

// From <linux/userfaultfd.h>: the API version, the events asked for, the watch mode, the
// ioctls (`_IOWR`/`_IOR` of type 0xAA and the structure's size) and the flag that limits the
// descriptor to faults of user mode (the only kind a process without privileges may handle,
// and this monitor handles none).
const UFFD_API: u64 = 0xAA;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
const FEATURE_EVENT_REMAP: u64 = 1 << 2;
const FEATURE_EVENT_REMOVE: u64 = 1 << 3;
const FEATURE_EVENT_UNMAP: u64 = 1 << 6;
const MODE_WP: u64 = 1 << 1;
const EVENT_PAGEFAULT: u8 = 0x12;
const EVENT_REMAP: u8 = 0x14;
const EVENT_REMOVE: u8 = 0x15;
const EVENT_UNMAP: u8 = 0x16;
const fn ioc(dir: u64, nr: u64, size: usize) -> u64 {
    (dir << 30) | ((size as u64) << 16) | (0xAA << 8) | nr
}
const UFFDIO_API: u64 = ioc(3, 0x3F, size_of::<UffdioApi>());
const UFFDIO_REGISTER: u64 = ioc(3, 0x00, size_of::<UffdioRegister>());
const UFFDIO_UNREGISTER: u64 = ioc(2, 0x01, size_of::<UffdioRange>());

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

/// One event as the kernel writes it (`struct uffd_msg`, 32 bytes): for an unmap or a removal
/// `arg` is start and end, for a move it is old address, new address and length, for a page
/// fault flags and address.
#[repr(C)]
#[derive(Clone, Copy)]
struct Message {
    event: u8,
    _reserved: [u8; 7],
    arg: [u64; 3],
}

/// Events read at once.
const READ_AT_ONCE: usize = 16;
/// Ranges kept between two [`Monitor::take`]s; beyond them the list reports everything gone.
const KEPT: usize = 64;

/// Address ranges (start, end) gone since the last [`Monitor::take`].
#[derive(Clone, Copy)]
pub(crate) struct Gone {
    ranges: [(usize, usize); KEPT],
    count: usize,
    /// More went than the list holds: treat all memory as gone.
    pub(crate) all: bool,
}

impl Gone {
    const NONE: Gone = Gone {
        ranges: [(0, 0); KEPT],
        count: 0,
        all: false,
    };

    fn push(&mut self, start: usize, end: usize) {
        match self.ranges.get_mut(self.count) {
            Some(slot) => {
                *slot = (start, end);
                self.count += 1;
            }
            None => self.all = true,
        }
    }

    fn is_empty(&self) -> bool {
        self.count == 0 && !self.all
    }

    /// Whether the range `start..end` overlaps memory that went.
    pub(crate) fn overlaps(&self, start: usize, end: usize) -> bool {
        self.all
            || self.ranges[..self.count]
                .iter()
                .any(|&(s, e)| s < end && start < e)
    }
}

/// What the monitor and its thread share.
struct Shared {
    uffd: OwnedFd,
    /// Written to stop the thread.
    wake: OwnedFd,
    stop: AtomicBool,
    gone: Mutex<Gone>,
}

/// A `userfaultfd` watching ranges for the calls that take memory away, and the thread that
/// reads its events. Dropping it stops the thread; closing the descriptor ends every watch.
pub(crate) struct Monitor {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

fn last_error(what: &str) -> String {
    format!("{what}: {}", io::Error::last_os_error())
}

/// `ioctl` on the monitor's descriptor.
///
/// # Safety
/// `arg` must be the structure `request` reads and writes.
unsafe fn ioctl<T>(fd: &OwnedFd, request: u64, arg: &mut T) -> io::Result<()> {
    // SAFETY: as the caller guarantees; the descriptor is open.
    match unsafe { libc::ioctl(fd.as_raw_fd(), request as _, arg as *mut T) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// The range of whole pages holding `start..end`.
pub(crate) fn pages(start: usize, end: usize) -> (usize, usize) {
    // SAFETY: sysconf reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    (start & !(page - 1), end.next_multiple_of(page))
}

/// Whether this process can watch memory for the registration cache, or why not (no
/// `userfaultfd` in this kernel, not permitted to this process, or without the events of
/// unmapping): for `onesided info`.
pub fn memory_monitor() -> Result<(), String> {
    descriptor().map(drop)
}

/// A `userfaultfd` that reports the calls that take memory away.
fn descriptor() -> Result<OwnedFd, String> {
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: the system call takes flags only; it returns a new descriptor or -1.
    let open = |flags: libc::c_int| unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
    // Kernels before 5.11 refuse the user-mode flag: they get the call without it.
    let fd = match open(flags | UFFD_USER_MODE_ONLY) {
        -1 => open(flags),
        fd => fd,
    };
    if fd < 0 {
        return Err(last_error("userfaultfd"));
    }
    // SAFETY: a descriptor just returned to this process, owned from here on.
    let uffd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
    let mut api = UffdioApi {
        api: UFFD_API,
        features: FEATURE_EVENT_UNMAP | FEATURE_EVENT_REMOVE | FEATURE_EVENT_REMAP,
        ioctls: 0,
    };
    // SAFETY: UFFDIO_API reads and writes a `struct uffdio_api`.
    unsafe { ioctl(&uffd, UFFDIO_API, &mut api) }
        .map_err(|e| format!("userfaultfd events of unmapping: {e}"))?;
    Ok(uffd)
}

impl Monitor {
    /// A monitor with its thread, or why there can be none ([`memory_monitor`]).
    pub(crate) fn open() -> Result<Monitor, String> {
        let uffd = descriptor()?;
        // SAFETY: eventfd takes a count and flags; it returns a new descriptor or -1.
        let wake = match unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) } {
            -1 => return Err(last_error("eventfd")),
            // SAFETY: a descriptor just returned to this process, owned from here on.
            fd => unsafe { OwnedFd::from_raw_fd(fd) },
        };
        let shared = Arc::new(Shared {
            uffd,
            wake,
            stop: AtomicBool::new(false),
            gone: Mutex::new(Gone::NONE),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("onesided-memwatch".into())
            .spawn(move || s.run())
            .map_err(|e| format!("memory monitor thread: {e}"))?;
        Ok(Monitor {
            shared,
            thread: Some(thread),
        })
    }

    /// Watch the whole pages of `start..end`. Fails where the kernel cannot watch them (memory
    /// other than anonymous, shared memory or huge pages, or a range not wholly mapped).
    pub(crate) fn watch(&self, start: usize, end: usize) -> io::Result<()> {
        let mut r = UffdioRegister {
            range: UffdioRange {
                start: start as u64,
                len: (end - start) as u64,
            },
            mode: MODE_WP,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_REGISTER reads and writes a `struct uffdio_register`; watching in this
        // mode changes nothing in how the memory behaves (module docs).
        unsafe { ioctl(&self.shared.uffd, UFFDIO_REGISTER, &mut r) }
    }

    /// Stop watching the whole pages of `start..end` (what no longer exists there is skipped).
    pub(crate) fn unwatch(&self, start: usize, end: usize) {
        self.shared.unwatch(start, end);
    }

    /// The ranges gone since the last call, none if nothing went.
    pub(crate) fn take(&self) -> Option<Gone> {
        let mut gone = self.shared.lock();
        (!gone.is_empty()).then(|| std::mem::replace(&mut *gone, Gone::NONE))
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Gone> {
        self.gone.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn unwatch(&self, start: usize, end: usize) {
        let mut r = UffdioRange {
            start: start as u64,
            len: (end - start) as u64,
        };
        // SAFETY: UFFDIO_UNREGISTER reads a `struct uffdio_range`. Failure leaves a watch that
        // reports memory nothing is cached for: harmless.
        let _ = unsafe { ioctl(&self.uffd, UFFDIO_UNREGISTER, &mut r) };
    }

    /// The thread: wait for events (or the stop), read them all under the list's lock.
    fn run(&self) {
        let fds = [self.uffd.as_raw_fd(), self.wake.as_raw_fd()];
        while !self.stop.load(Ordering::Acquire) {
            if readable(fds, Duration::from_secs(1)) {
                let mut gone = self.lock();
                while self.read(&mut gone) {}
            }
        }
    }

    /// Read the events waiting; false when there were none.
    fn read(&self, gone: &mut Gone) -> bool {
        let mut msgs = [Message {
            event: 0,
            _reserved: [0; 7],
            arg: [0; 3],
        }; READ_AT_ONCE];
        // SAFETY: the buffer holds READ_AT_ONCE messages; the descriptor does not block.
        let n = unsafe {
            libc::read(
                self.uffd.as_raw_fd(),
                msgs.as_mut_ptr().cast(),
                size_of_val(&msgs),
            )
        };
        if n <= 0 {
            return false;
        }
        for m in &msgs[..n as usize / size_of::<Message>()] {
            let [a, b, c] = m.arg.map(|x| x as usize);
            match m.event {
                EVENT_UNMAP | EVENT_REMOVE => gone.push(a, b),
                EVENT_REMAP => gone.push(a, a + c),
                // Nothing is write-protected, so no fault should come; should one come, the
                // page stops being watched (which wakes the thread that faulted) and every
                // cached registration goes.
                EVENT_PAGEFAULT => {
                    let (s, e) = pages(b, b + 1);
                    self.unwatch(s, e);
                    gone.all = true;
                }
                _ => {}
            }
        }
        true
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        let one = 1u64.to_ne_bytes();
        // SAFETY: eventfd takes an 8-byte count from a valid buffer.
        unsafe { libc::write(self.shared.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
