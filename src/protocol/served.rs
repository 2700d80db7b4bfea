//! Accumulates the target serves: the request an origin sends, what the target does with the
//! bytes it names, and the answer, free of I/O.
//!
//! A request names a run of elements by the region key and remote address an RMA would use, one
//! operation (or compare-and-swap of one element), whether the old values come back, and the
//! operands. The target applies it under its lock, one hold for the whole run (so that the run
//! costs plain arithmetic) or, where the window's `mpi_accumulate_granularity` asks for it, one
//! hold per that many bytes ([`Request::pieces`]), all from one message; it answers with a
//! status and, when asked, the old values. MPI's atomicity is per element, so a long accumulate
//! may go as several requests.
//!
//! # MPI-4.1: 12.3.4 (accumulate), 12.3.5 (get_accumulate, fetch_and_op, compare_and_swap),
//! 12.7.1 (atomicity)

use super::native::AccOp;
use super::reduce::{Elem, Op, combine_all};

/// Bytes of a request before its operands.
pub const HEADER: usize = 32;

/// The kind code of compare-and-swap (operations use their index in [`Op::ALL`]).
const COMPARE_SWAP: u8 = 0xff;

/// A request's header: which elements, and what to do with them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub elem: Elem,
    /// What to do with each element (compare-and-swap: one element).
    pub op: AccOp,
    /// The old values come back.
    pub fetch: bool,
    /// Elements.
    pub count: usize,
    /// Where they are, as an RMA reaches them.
    pub key: u64,
    pub addr: u64,
    /// Bytes the target applies per hold of its lock, in whole elements (0: the whole run).
    pub hold: usize,
}

/// How the target answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Done,
    /// No memory registered for peers holds the elements named.
    Range,
    /// The request could not be read.
    Malformed,
}

impl Request {
    /// Bytes of the elements named.
    pub fn len(&self) -> usize {
        self.count * self.elem.size()
    }

    /// The request's header; its operands (`len` bytes) follow it.
    pub fn header(&self) -> [u8; HEADER] {
        let (kind, last) = match self.op {
            AccOp::Apply(op) => (op.index() as u8, self.hold as u64),
            AccOp::CompareSwap { compare } => (COMPARE_SWAP, compare),
        };
        let mut h = [0u8; HEADER];
        h[..4].copy_from_slice(&[self.elem.index() as u8, kind, u8::from(self.fetch), 0]);
        h[4..8].copy_from_slice(&(self.count as u32).to_le_bytes());
        h[8..16].copy_from_slice(&self.key.to_le_bytes());
        h[16..24].copy_from_slice(&self.addr.to_le_bytes());
        h[24..32].copy_from_slice(&last.to_le_bytes());
        h
    }

    /// The header of `msg` and its operands; `None` where `msg` is not a whole request.
    pub fn decode(msg: &[u8]) -> Option<(Request, &[u8])> {
        let head = msg.get(..HEADER)?;
        let word = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().expect("8 bytes"));
        let elem = *Elem::ALL.get(head[0] as usize)?;
        let last = word(24);
        let (op, hold) = match head[1] {
            COMPARE_SWAP => (AccOp::CompareSwap { compare: last }, 0),
            k => (
                AccOp::Apply(*Op::ALL.get(k as usize).filter(|op| op.applies(elem))?),
                usize::try_from(last).ok()?,
            ),
        };
        let count = u32::from_le_bytes(head[4..8].try_into().expect("4 bytes")) as usize;
        let r = Request {
            elem,
            op,
            fetch: head[2] != 0,
            count,
            key: word(8),
            addr: word(16),
            hold,
        };
        let whole = match op {
            AccOp::CompareSwap { .. } => count == 1 && !elem.is_float(),
            AccOp::Apply(_) => hold.is_multiple_of(elem.size()),
        };
        let operands = msg.get(HEADER..HEADER + r.len())?;
        (whole && msg.len() == HEADER + r.len()).then_some((r, operands))
    }

    /// Whether the target applies the request in more than one hold of its lock.
    pub fn in_pieces(&self) -> bool {
        self.hold != 0 && self.hold < self.len()
    }

    /// The runs the target applies one hold of its lock each: the whole request where `hold` is
    /// 0 or covers it, else runs of `hold` bytes (the last shorter), each a request of its own
    /// with the range of the operands it takes.
    pub fn pieces(&self) -> impl Iterator<Item = (Request, std::ops::Range<usize>)> + '_ {
        let len = self.len();
        let step = match self.hold {
            0 => len.max(1),
            h => h,
        };
        (0..len).step_by(step).map(move |start| {
            let end = (start + step).min(len);
            let piece = Request {
                count: (end - start) / self.elem.size(),
                addr: self.addr + start as u64,
                hold: 0,
                ..*self
            };
            (piece, start..end)
        })
    }

    /// Apply the request with `operands` to `target` (the `len` bytes it names), appending the
    /// old bytes to `old` where it fetches.
    pub fn apply(&self, operands: &[u8], target: &mut [u8], old: &mut Vec<u8>) {
        if self.fetch {
            old.extend_from_slice(target);
        }
        match self.op {
            AccOp::Apply(op) => combine_all(self.elem, op, target, operands),
            AccOp::CompareSwap { compare } => {
                let size = self.elem.size();
                if target[..size] == compare.to_le_bytes()[..size] {
                    target[..size].copy_from_slice(&operands[..size]);
                }
            }
        }
    }
}

/// Bytes of an answer before the old values.
pub const ANSWER_HEADER: usize = 8;

/// Append an answer's header with `status` to `out`; the old values, if any, follow it.
pub fn answer(status: Status, out: &mut Vec<u8>) {
    let code = match status {
        Status::Done => 0,
        Status::Range => 1,
        Status::Malformed => 2,
    };
    out.extend_from_slice(&[code, 0, 0, 0, 0, 0, 0, 0]);
}

/// The status of an answer and its old values; `None` where `msg` is no answer.
pub fn read_answer(msg: &[u8]) -> Option<(Status, &[u8])> {
    let status = match msg.first()? {
        0 => Status::Done,
        1 => Status::Range,
        2 => Status::Malformed,
        _ => return None,
    };
    Some((status, msg.get(ANSWER_HEADER..)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(count: usize) -> Request {
        Request {
            elem: Elem::F64,
            op: AccOp::Apply(Op::Sum),
            fetch: true,
            count,
            key: 7,
            addr: 0x1000,
            hold: 0,
        }
    }

    fn doubles(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn encode(r: &Request, operands: &[u8]) -> Vec<u8> {
        [&r.header()[..], operands].concat()
    }

    fn applied(r: &Request, operands: &[u8], target: &mut [u8]) -> Vec<u8> {
        let mut old = Vec::new();
        r.apply(operands, target, &mut old);
        old
    }

    fn answered(status: Status, old: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        answer(status, &mut a);
        a.extend_from_slice(old);
        a
    }

    #[test]
    fn a_request_round_trips_and_sums_every_element() {
        let ops = doubles(&[1.0, 2.0, 3.0]);
        let msg = encode(&sum(3), &ops);
        let (r, operands) = Request::decode(&msg).expect("a request");
        assert_eq!(r, sum(3));
        let mut target = doubles(&[10.0, 20.0, 30.0]);
        let old = applied(&r, operands, &mut target);
        assert_eq!(target, doubles(&[11.0, 22.0, 33.0]));
        assert_eq!(old, doubles(&[10.0, 20.0, 30.0]));
        let not_fetching = Request { fetch: false, ..r };
        assert!(applied(&not_fetching, operands, &mut target).is_empty());
    }

    #[test]
    fn compare_and_swap_stores_only_on_a_match() {
        let cas = |compare| Request {
            elem: Elem::U32,
            op: AccOp::CompareSwap { compare },
            fetch: true,
            count: 1,
            key: 1,
            addr: 8,
            hold: 0,
        };
        let msg = encode(&cas(5), &9u32.to_le_bytes());
        let (r, operands) = Request::decode(&msg).unwrap();
        let mut target = 5u32.to_le_bytes().to_vec();
        assert_eq!(applied(&r, operands, &mut target), 5u32.to_le_bytes());
        assert_eq!(target, 9u32.to_le_bytes());
        let msg = encode(&cas(5), &7u32.to_le_bytes());
        let (r, operands) = Request::decode(&msg).unwrap();
        assert_eq!(applied(&r, operands, &mut target), 9u32.to_le_bytes());
        assert_eq!(target, 9u32.to_le_bytes(), "no match, no store");
    }

    #[test]
    fn a_hold_splits_the_run_into_pieces_applied_one_by_one() {
        let ops = doubles(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        let r = Request { hold: 16, ..sum(5) };
        let (back, _) = Request::decode(&encode(&r, &ops)).expect("a request");
        assert_eq!(back, r, "the hold travels in the header");
        let pieces: Vec<_> = r.pieces().collect();
        let runs: Vec<_> = pieces
            .iter()
            .map(|(p, at)| (p.addr - r.addr, p.count, at.clone()))
            .collect();
        assert_eq!(runs, [(0, 2, 0..16), (16, 2, 16..32), (32, 1, 32..40)]);
        let mut target = doubles(&[10.0, 20.0, 30.0, 40.0, 50.0]);
        let mut old = Vec::new();
        for (p, at) in &pieces {
            let bytes = (p.addr - r.addr) as usize..(p.addr - r.addr) as usize + p.len();
            p.apply(&ops[at.clone()], &mut target[bytes], &mut old);
        }
        assert_eq!(target, doubles(&[11.0, 22.0, 33.0, 44.0, 55.0]));
        assert_eq!(old, doubles(&[10.0, 20.0, 30.0, 40.0, 50.0]));
        assert!(r.in_pieces());
        assert_eq!(sum(5).pieces().count(), 1, "no hold: one piece");
        assert!(!sum(5).in_pieces());
        let odd = Request { hold: 12, ..sum(2) };
        assert!(
            Request::decode(&encode(&odd, &ops[..16])).is_none(),
            "a hold of part of an element"
        );
    }

    #[test]
    fn malformed_requests_are_refused() {
        let ops = doubles(&[1.0, 2.0]);
        let msg = encode(&sum(2), &ops);
        assert!(Request::decode(&msg[..msg.len() - 1]).is_none(), "short");
        assert!(
            Request::decode(&[msg.clone(), vec![0]].concat()).is_none(),
            "long"
        );
        let mut bad = msg.clone();
        bad[0] = 6;
        assert!(Request::decode(&bad).is_none(), "no such type");
        let mut band = msg.clone();
        band[1] = Op::Band.index() as u8;
        assert!(Request::decode(&band).is_none(), "bitwise on doubles");
        let float_cas = Request {
            op: AccOp::CompareSwap { compare: 0 },
            count: 1,
            ..sum(1)
        };
        assert!(Request::decode(&encode(&float_cas, &ops[..8])).is_none());
        let two_cas = Request {
            elem: Elem::U64,
            op: AccOp::CompareSwap { compare: 0 },
            ..sum(2)
        };
        assert!(Request::decode(&encode(&two_cas, &ops)).is_none());
    }

    #[test]
    fn answers_carry_their_status_and_old_values() {
        let a = answered(Status::Done, &[1, 2, 3]);
        assert_eq!(read_answer(&a), Some((Status::Done, &[1u8, 2, 3][..])));
        let r = answered(Status::Range, &[]);
        assert_eq!(read_answer(&r).unwrap().0, Status::Range);
        let m = answered(Status::Malformed, &[]);
        assert_eq!(read_answer(&m).unwrap().0, Status::Malformed);
        assert_eq!(read_answer(&[9, 0, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(read_answer(&[0, 0]), None);
    }
}
