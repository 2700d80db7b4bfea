//! Waking a peer's progress thread where the provider cannot.
//!
//! A provider whose completion queue has no wait object that traffic wakes (libfabric's shm
//! provider: its senders signal through shared memory) leaves the progress thread of a rank
//! that is away (computing, asleep, or waiting outside the fabric) to poll every millisecond,
//! and every operation that needs that rank's progress waits for the next poll. So the
//! progress thread of such an endpoint dozes on a doorbell instead: a datagram socket in the
//! abstract namespace named after its process, which vanishes with the process and leaves no
//! file behind. An origin whose operation has waited [`KNOCK_AFTER`] sends one empty datagram
//! to the doorbell of each peer process it waits for, and again every [`KNOCK_EVERY`] while
//! it waits (an endpoint rings at most that often); the woken thread then polls back to back
//! for as long (`Core::hot`), since operations come in bursts. Where every peer of an
//! endpoint rings (all on its node), its progress thread looks by itself only every 20 ms.
//!
//! An endpoint whose queue has a wait object (`Idle::Wake`) takes the doorbell too: peers on
//! its node address its issuing port, which has none (`Endpoint::near_name`), and its progress
//! thread sleeps in the queue's wait object and on the doorbell at once.
//!
//! One doorbell per process: the first endpoint takes it; another one in the same process (a
//! second thread's world) keeps polling every millisecond, and with a waking queue is addressed
//! at that queue's port by every peer.

use std::os::fd::{AsRawFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// How long an origin waits for an operation before it wakes the peers it waits for.
pub(crate) const KNOCK_AFTER: Duration = Duration::from_micros(20);
/// The shortest time between two rounds of knocks from one endpoint: a woken peer serves back
/// to back this long, and without a bound every long wait knocks (about one per 1 MiB put over
/// the shm provider: 1455 datagrams and as many wake-ups in one `put_bw` run under strace, 828
/// with it). A wait that lasts knocks again at this pace.
pub(crate) const KNOCK_EVERY: Duration = Duration::from_millis(1);

/// The abstract socket name of doorbell `id` (a process id; the tests use ids no process has).
fn address(id: u32) -> Option<SocketAddr> {
    SocketAddr::from_abstract_name(format!("onesided-fabric-progress-{id}")).ok()
}

/// Block until one of `fds` is readable or `timeout` passes (one `ppoll`, which skips negative
/// descriptors); whether one is readable.
pub(crate) fn readable<const N: usize>(fds: [RawFd; N], timeout: Duration) -> bool {
    let mut pfds = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: N valid pollfds, a valid timeout, and no signal mask.
    unsafe { libc::ppoll(pfds.as_mut_ptr(), N as libc::nfds_t, &ts, std::ptr::null()) > 0 }
}

/// This process's doorbell, held by one endpoint's progress thread.
#[derive(Debug)]
pub(crate) struct Doorbell {
    sock: UnixDatagram,
}

impl Doorbell {
    /// This process's doorbell, unless another endpoint of the process holds it.
    pub(crate) fn take() -> Option<Doorbell> {
        Doorbell::bind(std::process::id())
    }

    fn bind(id: u32) -> Option<Doorbell> {
        let sock = UnixDatagram::bind_addr(&address(id)?).ok()?;
        sock.set_nonblocking(true).ok()?;
        Some(Doorbell { sock })
    }

    /// Sleep until the doorbell rings or `timeout` passes; whether it rang. Rings that came
    /// meanwhile are all answered by this one wake. One `ppoll` while nothing rings.
    pub(crate) fn doze(&self, timeout: Duration) -> bool {
        !timeout.is_zero() && readable([self.fd()], timeout) && self.answer()
    }

    /// The doorbell's file descriptor, for a sleep on it and on something else at once.
    pub(crate) fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Take every ring that came; whether one did.
    pub(crate) fn answer(&self) -> bool {
        let mut byte = [0u8; 1];
        let mut rang = false;
        while self.sock.recv(&mut byte).is_ok() {
            rang = true;
        }
        rang
    }

    /// Ring this doorbell (to end the doze of a progress thread that is to stop).
    pub(crate) fn ring(&self) {
        if let Ok(addr) = self.sock.local_addr() {
            let _ = self.sock.send_to_addr(&[], &addr);
        }
    }
}

/// What an origin rings peers' doorbells with.
#[derive(Debug)]
pub(crate) struct Knocker {
    sock: UnixDatagram,
}

impl Knocker {
    pub(crate) fn new() -> Option<Knocker> {
        let sock = UnixDatagram::unbound().ok()?;
        sock.set_nonblocking(true).ok()?;
        Some(Knocker { sock })
    }

    /// Ring process `pid`'s doorbell. Best effort: a process without one (its endpoint has a
    /// waking queue, or another endpoint of it holds the doorbell) or with a full queue of
    /// rings is served by its polls as before.
    pub(crate) fn knock(&self, pid: u32) {
        let Some(addr) = address(pid) else {
            return;
        };
        // Nobody there (ECONNREFUSED), or rings already queued (EAGAIN): nothing to do.
        let _ = self.sock.send_to_addr(&[], &addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_knock_wakes_the_doze_and_silence_times_out() {
        // An id above any pid (at most 2^22), so endpoints of other tests keep theirs.
        let id = 1 << 31 | std::process::id();
        let bell = Doorbell::bind(id).expect("a doorbell");
        assert!(Doorbell::bind(id).is_none(), "one doorbell per id");
        let since = Instant::now();
        assert!(!bell.doze(Duration::from_millis(5)));
        assert!(since.elapsed() >= Duration::from_millis(4));
        let knocker = Knocker::new().expect("unbound datagram socket");
        for _ in 0..3 {
            knocker.knock(id);
        }
        assert!(
            bell.doze(Duration::from_secs(5)),
            "the knocks ring the doorbell"
        );
        assert!(
            !bell.doze(Duration::from_millis(2)),
            "one wake answers every ring that came before it"
        );
        bell.ring();
        assert!(bell.doze(Duration::from_secs(5)));
        knocker.knock(id + 1);
        assert!(
            !bell.doze(Duration::from_millis(2)),
            "a knock elsewhere rings nothing here"
        );
    }
}
