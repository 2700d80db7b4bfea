//! Wire format between the bootstrap hub and its clients.
//!
//! A connection carries frames in both directions. All integers are little-endian.
//!
//! ```text
//! frame := len:u32 body[len]          1 <= len <= MAX_FRAME (1 GiB); larger frames are an error
//! body  := tag:u8 fields
//!
//! client -> hub
//!   0x01 Hello      secret:[u8; 32] rank:u32 pid:u32         first frame, exactly once
//!   0x02 Allgather  comm:u64 seq:u64 members:u32 index:u32 data:rest
//!   0x03 Finalize                                             the rank leaves cleanly
//! peer <-> peer (the collective network of `crate::mesh`, after both sides sent Hello)
//!   0x01 Hello      secret:[u8; 32] rank:u32 pid:u32         first frame of each side
//!   0x04 Part       comm:u64 seq:u64 round:u32 data:rest      one round of a collective
//!   0x84 Failed     rank:u32 reason:utf8 rest                 a failure, passed on
//!   0x03 Finalize                                             the sender leaves cleanly
//! hub -> client
//!   0x81 Welcome                                              the hello was accepted
//!   0x82 Gathered   comm:u64 seq:u64 count:u32 (len:u32 data[len]){count}   ordered by index
//!   0x83 Rejected   comm:u64 seq:u64 reason:utf8 rest         the collective was misused
//!   0x84 Failed     rank:u32 reason:utf8 rest                 a rank failed (u32::MAX: unknown)
//! ```
//!
//! A refused hello gets no answer: the hub closes the connection. After `Finalize` the client
//! shuts down its sending side; the hub then closes the connection. The hub reads frames of at
//! most [`HUB_FRAME_LIMIT`] bytes, and each within a deadline from its first byte (`paced`).

use std::io::{self, Read, Write};

/// Largest frame body accepted or produced.
pub(crate) const MAX_FRAME: usize = 1 << 30;

/// Largest frame body the hub reads from a rank (an allgather contribution and its header).
pub(crate) const HUB_FRAME_LIMIT: usize = 4 << 20;

/// A decoded frame.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Msg {
    Hello {
        secret: super::Secret,
        rank: u32,
        pid: u32,
    },
    Allgather {
        comm: u64,
        seq: u64,
        members: u32,
        index: u32,
        data: Vec<u8>,
    },
    Finalize,
    Part {
        comm: u64,
        seq: u64,
        round: u32,
        data: Vec<u8>,
    },
    Welcome,
    Gathered {
        comm: u64,
        seq: u64,
        parts: Vec<Vec<u8>>,
    },
    Rejected {
        comm: u64,
        seq: u64,
        reason: String,
    },
    Failed {
        rank: Option<u32>,
        reason: String,
    },
}

const HELLO: u8 = 0x01;
const ALLGATHER: u8 = 0x02;
const FINALIZE: u8 = 0x03;
const PART: u8 = 0x04;
const WELCOME: u8 = 0x81;
const GATHERED: u8 = 0x82;
const REJECTED: u8 = 0x83;
const FAILED: u8 = 0x84;

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

fn len_u32(len: usize) -> io::Result<u32> {
    u32::try_from(len)
        .ok()
        .filter(|&l| l as usize <= MAX_FRAME)
        .ok_or_else(|| invalid("bootstrap frame larger than 1 GiB"))
}

impl Msg {
    /// The whole frame (length prefix included), or an error if it would exceed [`MAX_FRAME`].
    pub(crate) fn encode(&self) -> io::Result<Vec<u8>> {
        let mut b = vec![0u8; 4];
        match self {
            Msg::Hello { secret, rank, pid } => {
                b.push(HELLO);
                b.extend_from_slice(secret);
                b.extend_from_slice(&rank.to_le_bytes());
                b.extend_from_slice(&pid.to_le_bytes());
            }
            Msg::Allgather {
                comm,
                seq,
                members,
                index,
                data,
            } => {
                len_u32(data.len())?;
                b.reserve(25 + data.len());
                b.push(ALLGATHER);
                b.extend_from_slice(&comm.to_le_bytes());
                b.extend_from_slice(&seq.to_le_bytes());
                b.extend_from_slice(&members.to_le_bytes());
                b.extend_from_slice(&index.to_le_bytes());
                b.extend_from_slice(data);
            }
            Msg::Finalize => b.push(FINALIZE),
            Msg::Part {
                comm,
                seq,
                round,
                data,
            } => {
                len_u32(data.len())?;
                b.reserve(21 + data.len());
                b.push(PART);
                b.extend_from_slice(&comm.to_le_bytes());
                b.extend_from_slice(&seq.to_le_bytes());
                b.extend_from_slice(&round.to_le_bytes());
                b.extend_from_slice(data);
            }
            Msg::Welcome => b.push(WELCOME),
            Msg::Gathered { comm, seq, parts } => {
                let total: usize = parts.iter().map(|p| p.len() + 4).sum();
                len_u32(total)?;
                b.reserve(21 + total);
                b.push(GATHERED);
                b.extend_from_slice(&comm.to_le_bytes());
                b.extend_from_slice(&seq.to_le_bytes());
                b.extend_from_slice(&len_u32(parts.len())?.to_le_bytes());
                for part in parts {
                    b.extend_from_slice(&len_u32(part.len())?.to_le_bytes());
                    b.extend_from_slice(part);
                }
            }
            Msg::Rejected { comm, seq, reason } => {
                b.push(REJECTED);
                b.extend_from_slice(&comm.to_le_bytes());
                b.extend_from_slice(&seq.to_le_bytes());
                b.extend_from_slice(reason.as_bytes());
            }
            Msg::Failed { rank, reason } => {
                b.push(FAILED);
                b.extend_from_slice(&rank.unwrap_or(u32::MAX).to_le_bytes());
                b.extend_from_slice(reason.as_bytes());
            }
        }
        let body = len_u32(b.len() - 4)?;
        b[..4].copy_from_slice(&body.to_le_bytes());
        Ok(b)
    }

    /// Decodes a frame body (without its length prefix).
    fn decode(body: &[u8]) -> io::Result<Msg> {
        let (&tag, rest) = body.split_first().ok_or_else(|| invalid("empty frame"))?;
        let mut c = Cursor(rest);
        let msg = match tag {
            HELLO => Msg::Hello {
                secret: c
                    .take(super::SECRET_LEN)?
                    .try_into()
                    .map_err(|_| invalid("secret"))?,
                rank: c.u32()?,
                pid: c.u32()?,
            },
            ALLGATHER => Msg::Allgather {
                comm: c.u64()?,
                seq: c.u64()?,
                members: c.u32()?,
                index: c.u32()?,
                data: c.rest().to_vec(),
            },
            FINALIZE => Msg::Finalize,
            PART => Msg::Part {
                comm: c.u64()?,
                seq: c.u64()?,
                round: c.u32()?,
                data: c.rest().to_vec(),
            },
            WELCOME => Msg::Welcome,
            GATHERED => {
                let comm = c.u64()?;
                let seq = c.u64()?;
                let count = c.u32()?;
                let mut parts = Vec::new();
                for _ in 0..count {
                    let len = c.u32()? as usize;
                    parts.push(c.take(len)?.to_vec());
                }
                Msg::Gathered { comm, seq, parts }
            }
            REJECTED => Msg::Rejected {
                comm: c.u64()?,
                seq: c.u64()?,
                reason: String::from_utf8_lossy(c.rest()).into_owned(),
            },
            FAILED => Msg::Failed {
                rank: Some(c.u32()?).filter(|&r| r != u32::MAX),
                reason: String::from_utf8_lossy(c.rest()).into_owned(),
            },
            _ => return Err(invalid("unknown frame tag")),
        };
        if c.0.is_empty() {
            Ok(msg)
        } else {
            Err(invalid("trailing bytes in frame"))
        }
    }
}

/// Reads one frame whose body is at most `limit` bytes (at most [`MAX_FRAME`] is ever accepted);
/// `Ok(None)` on a clean end of stream before it.
pub(crate) fn read_msg(r: &mut impl Read, limit: usize) -> io::Result<Option<Msg>> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < len.len() {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > limit.min(MAX_FRAME) {
        return Err(invalid("bootstrap frame length out of range"));
    }
    // Grown as the bytes arrive: a length prefix alone reserves little.
    let mut body = Vec::with_capacity(len.min(1 << 16));
    Read::take(&mut *r, len as u64).read_to_end(&mut body)?;
    if body.len() < len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Msg::decode(&body).map(Some)
}

/// Writes one already encoded frame.
pub(crate) fn write_frame(w: &mut impl Write, frame: &[u8]) -> io::Result<()> {
    w.write_all(frame)?;
    w.flush()
}

/// Reads fields off the front of a frame body.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(invalid("truncated frame"));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn u32(&mut self) -> io::Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> io::Result<u64> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_FRAME, Msg, read_msg};

    fn round_trip(msg: Msg) {
        let frame = msg.encode().expect("encode");
        let mut r = &frame[..];
        assert_eq!(read_msg(&mut r, MAX_FRAME).expect("decode"), Some(msg));
        assert!(r.is_empty());
    }

    #[test]
    fn frames_round_trip() {
        round_trip(Msg::Hello {
            secret: [7; 32],
            rank: 3,
            pid: 99,
        });
        round_trip(Msg::Allgather {
            comm: 1 << 40,
            seq: 5,
            members: 4,
            index: 2,
            data: b"abc".to_vec(),
        });
        round_trip(Msg::Finalize);
        round_trip(Msg::Part {
            comm: 3,
            seq: 1 << 33,
            round: 9,
            data: b"blocks".to_vec(),
        });
        round_trip(Msg::Welcome);
        round_trip(Msg::Gathered {
            comm: 9,
            seq: 1,
            parts: vec![vec![], b"x".to_vec(), b"yz".to_vec()],
        });
        round_trip(Msg::Rejected {
            comm: 2,
            seq: 3,
            reason: "bad".into(),
        });
        round_trip(Msg::Failed {
            rank: Some(2),
            reason: "killed".into(),
        });
        round_trip(Msg::Failed {
            rank: None,
            reason: String::new(),
        });
    }

    #[test]
    fn rejects_bad_frames() {
        let mut empty: &[u8] = &[];
        assert!(read_msg(&mut empty, MAX_FRAME).expect("eof").is_none());
        let huge = ((MAX_FRAME + 1) as u32).to_le_bytes();
        assert!(read_msg(&mut &huge[..], usize::MAX).is_err());
        let truncated = [5u8, 0, 0, 0, 0x02, 1];
        assert!(read_msg(&mut &truncated[..], MAX_FRAME).is_err());
        let unknown = [1u8, 0, 0, 0, 0x7f];
        assert!(read_msg(&mut &unknown[..], MAX_FRAME).is_err());
        let finalize = [1u8, 0, 0, 0, 0x03];
        assert!(read_msg(&mut &finalize[..], 0).is_err());
    }
}
