//! Frame I/O of the bootstrap hub under deadlines: a client that trickles bytes or stops reading
//! cannot hold the hub longer than a message's deadline.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::wire::{Msg, read_msg};

/// The error of a message that missed its deadline.
fn late(within: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("a message took longer than {within:?}"),
    )
}

/// The time left until `deadline`, or the error of a message that missed it.
fn left(deadline: Instant, within: Duration) -> io::Result<Duration> {
    Some(deadline.saturating_duration_since(Instant::now()))
        .filter(|d| !d.is_zero())
        .ok_or_else(|| late(within))
}

/// Writes one already encoded frame to `stream`, all of it within `within`.
pub(crate) fn write_frame_within(
    stream: &TcpStream,
    frame: &[u8],
    within: Duration,
) -> io::Result<()> {
    let deadline = Instant::now() + within;
    let mut rest = frame;
    while !rest.is_empty() {
        stream.set_write_timeout(Some(left(deadline, within)?))?;
        match (&mut &*stream).write(rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(late(within));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A TCP stream read under a deadline per message: without a deadline a read waits as long as
/// it takes; with one, every read fails once it has passed, so that a peer trickling bytes
/// cannot hold the reader longer than the deadline.
pub(crate) struct Paced<'a> {
    stream: &'a TcpStream,
    deadline: Option<(Instant, Duration)>,
}

impl<'a> Paced<'a> {
    /// Reads `stream`, the first message within `within` from now.
    pub(crate) fn new(stream: &'a TcpStream, within: Duration) -> Paced<'a> {
        Paced {
            stream,
            deadline: Some((Instant::now() + within, within)),
        }
    }
}

impl Read for Paced<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let timeout = match self.deadline {
            Some((deadline, within)) => Some(left(deadline, within)?),
            None => None,
        };
        self.stream.set_read_timeout(timeout)?;
        match (&mut &*self.stream).read(buf) {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                let within = self.deadline.map_or(Duration::ZERO, |(_, w)| w);
                Err(late(within))
            }
            other => other,
        }
    }
}

/// Waits as long as it takes for the next frame to begin, then reads it whole within `within`
/// (see [`read_msg`] for `limit` and the result).
pub(crate) fn read_msg_within(
    r: &mut BufReader<Paced<'_>>,
    limit: usize,
    within: Duration,
) -> io::Result<Option<Msg>> {
    r.get_mut().deadline = None;
    loop {
        match r.fill_buf() {
            Ok([]) => return Ok(None),
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    r.get_mut().deadline = Some((Instant::now() + within, within));
    read_msg(r, limit)
}

#[cfg(test)]
mod tests {
    use super::{Paced, read_msg_within};
    use crate::boot::wire::{Msg, write_frame};
    use std::io::{BufReader, ErrorKind, Write};
    use std::net::{TcpListener, TcpStream};
    use std::thread;
    use std::time::{Duration, Instant};

    /// Idle time between messages is not limited; a message trickled a byte at a time is cut
    /// off at its deadline.
    #[test]
    fn a_trickled_message_misses_its_deadline() {
        let within = Duration::from_millis(300);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let client = thread::spawn(move || {
            let mut s = TcpStream::connect(addr).expect("connect");
            thread::sleep(2 * within);
            write_frame(&mut s, &Msg::Finalize.encode().expect("encode")).expect("write");
            let hello = Msg::Hello {
                secret: [1; 32],
                rank: 0,
                pid: 1,
            };
            for byte in hello.encode().expect("encode") {
                if s.write_all(&[byte]).is_err() {
                    return;
                }
                thread::sleep(within / 4);
            }
        });
        let (s, _) = listener.accept().expect("accept");
        let mut r = BufReader::new(Paced::new(&s, within));
        let first = read_msg_within(&mut r, 64, within).expect("idle, then a whole message");
        assert_eq!(first, Some(Msg::Finalize));
        let start = Instant::now();
        let err = read_msg_within(&mut r, 64, within).expect_err("trickled message accepted");
        let took = start.elapsed();
        assert_eq!(err.kind(), ErrorKind::TimedOut, "{err}");
        assert!(took >= within && took < 3 * within, "cut after {took:?}");
        drop(r);
        drop(s);
        client.join().expect("client");
    }
}
