//! Connections of the collective network: the handshake, socket settings, and the reader thread
//! that files what a peer sends and notices when the peer is gone.
//!
//! Either side may open a connection; both then send `Hello` (the job secret, their rank and
//! pid) and check the other's. The side that connected also checks that it reached the rank it
//! meant to, so a stale or mistaken address can never pass for a peer. A connection carries
//! frames both ways; each has a reader thread for its whole life.

use super::net::{Net, Writer};
use crate::boot::wire::{self, MAX_FRAME, Msg};
use crate::error::{Error, ErrorClass, Result};
use nix::sys::socket::{setsockopt, sockopt};
use std::io::BufReader;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// How long a connection attempt to one address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the other side may take to send its hello, and a write may block.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest hello frame body read.
const HELLO_LIMIT: usize = 64;
/// TCP keepalive for a failure timeout of `silence`: idle seconds before the first probe (half
/// of it), seconds between probes and their count, so that a host that vanished without closing
/// its connections is noticed after about `silence`.
fn keepalive(silence: Duration) -> (u32, u32, u32) {
    let total = silence.as_secs().clamp(1, u32::MAX.into()) as u32;
    let idle = (total / 2).max(1);
    let interval = (total / 10).max(1);
    let count = ((total - idle.min(total)) / interval).max(1);
    (idle, interval, count)
}

fn os(what: String) -> impl Fn(std::io::Error) -> Error {
    move |e| Error::os(&what, e)
}

/// Socket settings of every connection: no Nagle delay, bounded writes, keepalive probes, and
/// data unacknowledged for `silence` failing the connection.
fn tune(s: &TcpStream, silence: Duration) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    s.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let (idle, interval, count) = keepalive(silence);
    setsockopt(s, sockopt::KeepAlive, &true)?;
    setsockopt(s, sockopt::TcpKeepIdle, &idle)?;
    setsockopt(s, sockopt::TcpKeepInterval, &interval)?;
    setsockopt(s, sockopt::TcpKeepCount, &count)?;
    let ms = silence.as_millis().min(u32::MAX.into()) as u32;
    setsockopt(s, sockopt::TcpUserTimeout, &ms)?;
    Ok(())
}

fn hello(net: &Net) -> Msg {
    Msg::Hello {
        secret: net.secret,
        rank: net.me as u32,
        pid: std::process::id(),
    }
}

/// Reads the other side's hello; returns its rank and pid if it knows the secret.
fn read_hello(net: &Net, s: &TcpStream) -> Option<(usize, u32)> {
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT)).ok()?;
    let Ok(Some(Msg::Hello { secret, rank, pid })) = wire::read_msg(&mut &*s, HELLO_LIMIT) else {
        return None;
    };
    s.set_read_timeout(None).ok()?;
    crate::boot::same_secret(&secret, &net.secret).then_some((rank as usize, pid))
}

/// Opens a connection to `rank` at one of `addrs`, tried in order; on success it is registered
/// and read from. Fails with MPI_ERR_PROC_FAILED when no address leads to that rank.
pub(super) fn connect(net: &Arc<Net>, rank: usize, addrs: &[SocketAddr]) -> Result<Writer> {
    let mut tried = Vec::new();
    for addr in addrs {
        let attempt = (|| -> std::result::Result<(TcpStream, u32), String> {
            let s = TcpStream::connect_timeout(addr, CONNECT_TIMEOUT).map_err(|e| e.to_string())?;
            tune(&s, net.silence).map_err(|e| e.to_string())?;
            let frame = hello(net).encode().map_err(|e| e.to_string())?;
            wire::write_frame(&mut &s, &frame).map_err(|e| e.to_string())?;
            match read_hello(net, &s) {
                Some((r, pid)) if r == rank => Ok((s, pid)),
                Some((r, _)) => Err(format!("reached rank {r} instead")),
                None => Err("refused the handshake".into()),
            }
        })();
        match attempt {
            Ok((s, pid)) => {
                net.reading(rank);
                return start(net, rank, pid, s);
            }
            Err(why) => {
                tracing::debug!(peer = rank, %addr, why, "collective network: address failed");
                tried.push(format!("{addr}: {why}"));
            }
        }
    }
    Err(Error::new(
        ErrorClass::ProcFailed,
        format!("cannot reach rank {rank} ({})", tried.join("; ")),
    ))
}

/// Serves a connection a peer opened: handshake, then registration and reading. Refused
/// connections are closed without an answer.
pub(super) fn accept(net: Arc<Net>, s: TcpStream) {
    let Some((rank, pid)) = read_hello(&net, &s) else {
        return;
    };
    let peer = rank < net.size && rank != net.me;
    // Counted as being read before the answer: once answered, the peer may send its parts here
    // and its goodbye down another connection, and is not gone before both are read (counted
    // only at `start`, a peer that finished at once was taken for gone with its last part
    // still unread here: `mpirun::shm::alloc_mem::errors`, once in CI).
    if peer {
        net.reading(rank);
    }
    let answered = tune(&s, net.silence)
        .and_then(|()| hello(&net).encode())
        .and_then(|frame| wire::write_frame(&mut &s, &frame));
    match answered {
        Ok(()) if peer => {
            let _ = start(&net, rank, pid, s);
        }
        Err(_) if peer => net.read_out(rank),
        _ => {}
    }
}

/// Registers an established connection to `rank`, already counted as being read
/// ([`Net::reading`]), and starts its reader, which ends the count when the connection ends
/// (or ends it here if the reader cannot start); returns the writer the network uses for
/// `rank` (the first registered, if both sides connected at once).
fn start(net: &Arc<Net>, rank: usize, pid: u32, s: TcpStream) -> Result<Writer> {
    let what = format!("connection to rank {rank}");
    tracing::debug!(peer = rank, pid, local = ?s.local_addr().ok(), remote = ?s.peer_addr().ok(), "collective network: connected");
    let started = (|| {
        let reading = s.try_clone().map_err(os(what.clone()))?;
        let writer = net.register(rank, s.try_clone().map_err(os(what.clone()))?);
        let net = Arc::clone(net);
        thread::Builder::new()
            .name(format!("onesided-mesh-{rank}"))
            .spawn(move || {
                read(&net, rank, pid, reading);
                net.read_out(rank);
            })
            .map_err(os(format!("starting the reader of the {what}")))?;
        Ok(writer)
    })();
    if started.is_err() {
        net.read_out(rank);
    }
    started
}

/// Reader thread: files parts, passes failures on, and reports the peer lost when the
/// connection ends without its goodbye.
fn read(net: &Net, rank: usize, pid: u32, s: TcpStream) {
    let mut reader = BufReader::with_capacity(1 << 16, s);
    let mut left = false;
    let why = loop {
        match wire::read_msg(&mut reader, MAX_FRAME) {
            Ok(Some(Msg::Part {
                comm,
                seq,
                round,
                data,
            })) => net.file((comm, seq, round, rank), data),
            Ok(Some(Msg::Failed { rank: r, reason })) => {
                net.heard(r.map(|r| r as usize), &reason);
            }
            Ok(Some(Msg::Finalize)) => {
                left = true;
                net.departed(rank);
            }
            Ok(Some(_)) => break "sent an unexpected frame".to_owned(),
            Ok(None) => break "closed its connection without finalizing".to_owned(),
            Err(e) => break format!("broke its connection ({e})"),
        }
    };
    if !left && !net.stopping() {
        net.heard(Some(rank), &format!("{why} (pid {pid})"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keepalive_notices_silence_within_the_timeout() {
        assert_eq!(keepalive(Duration::from_secs(10)), (5, 1, 5));
        assert_eq!(keepalive(Duration::from_secs(60)), (30, 6, 5));
        for secs in [1, 2, 3, 7, 10, 45, 3600] {
            let (idle, interval, count) = keepalive(Duration::from_secs(secs));
            let noticed = u64::from(idle + interval * count);
            assert!(
                noticed <= secs.max(2),
                "{secs} s: noticed after {noticed} s"
            );
            assert!(idle >= 1 && interval >= 1 && count >= 1);
        }
    }
}
