//! Bruck's allgather, without I/O: which peer each round sends to and receives from, and how
//! many blocks move.
//!
//! With `n` members, member `i` starts holding its own block. In round `k` (distance `d = 2^k`)
//! it sends the first `min(d, n - d)` blocks it holds to member `i - d` and receives as many from
//! member `i + d` (mod `n`), appending them: after round `k` it holds the blocks of members
//! `i, i + 1, ..., i + 2d - 1`. After `ceil(log2 n)` rounds it holds all `n`, rotated by `i`.
//! Each member talks to `2 ceil(log2 n)` peers and receives `n - 1` blocks in all, whatever `n`
//! is (no power-of-two restriction, unlike recursive doubling).

use crate::codec::{Dec, Enc};
use crate::error::{Error, ErrorClass, Result};

/// One round of one member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Round {
    /// Round number, from 0.
    pub(crate) k: u32,
    /// Member index the round's blocks go to.
    pub(crate) send_to: usize,
    /// Member index the round's blocks come from.
    pub(crate) recv_from: usize,
    /// Blocks sent, and received, in the round.
    pub(crate) count: usize,
}

/// The rounds member `i` of `n` runs, in order (none when `n` is 1).
pub(crate) fn rounds(n: usize, i: usize) -> impl Iterator<Item = Round> {
    (0u32..)
        .map(|k| (k, 1usize << k))
        .take_while(move |&(_, d)| d < n)
        .map(move |(k, d)| Round {
            k,
            send_to: (i + n - d) % n,
            recv_from: (i + d) % n,
            count: d.min(n - d),
        })
}

/// The bytes of a round's message: the blocks, each with its length.
pub(crate) fn pack(blocks: &[Vec<u8>]) -> Vec<u8> {
    blocks
        .iter()
        .fold(Enc::new().u64(blocks.len() as u64), |e, b| e.bytes(b))
        .finish()
}

/// The blocks of a round's message, which must hold exactly `count` of them.
pub(crate) fn unpack(bytes: &[u8], count: usize) -> Result<Vec<Vec<u8>>> {
    let mut d = Dec::new(bytes);
    let got = d.usize()?;
    if got != count {
        return Err(Error::new(
            ErrorClass::Intern,
            format!("collective round carried {got} blocks, not {count}"),
        ));
    }
    (0..count).map(|_| Ok(d.bytes()?.to_vec())).collect()
}

/// The blocks in member order, from the `n` that member `i` holds after the last round.
pub(crate) fn in_order(mut held: Vec<Vec<u8>>, i: usize) -> Vec<Vec<u8>> {
    let n = held.len();
    held.rotate_right(i % n.max(1));
    held
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the schedule for `n` members in memory, round by round.
    fn simulate(n: usize) -> Vec<Vec<Vec<u8>>> {
        let mut held: Vec<Vec<Vec<u8>>> = (0..n).map(|i| vec![vec![i as u8; i % 3]]).collect();
        let plans: Vec<Vec<Round>> = (0..n).map(|i| rounds(n, i).collect()).collect();
        let depth = plans[0].len();
        for k in 0..depth {
            let sent: Vec<Vec<u8>> = (0..n)
                .map(|i| pack(&held[i][..plans[i][k].count]))
                .collect();
            for i in 0..n {
                let r = plans[i][k];
                assert_eq!(plans[r.send_to][k].recv_from, i, "n={n} k={k}");
                let blocks = unpack(&sent[r.recv_from], r.count).unwrap();
                held[i].extend(blocks);
            }
        }
        held.into_iter()
            .enumerate()
            .map(|(i, h)| in_order(h, i))
            .collect()
    }

    #[test]
    fn every_member_gathers_every_block_in_order() {
        for n in 1..=70 {
            let want: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8; i % 3]).collect();
            for (i, got) in simulate(n).into_iter().enumerate() {
                assert_eq!(got, want, "n={n} member {i}");
            }
        }
    }

    #[test]
    fn rounds_are_logarithmic() {
        assert_eq!(rounds(1, 0).count(), 0);
        assert_eq!(rounds(2, 1).count(), 1);
        assert_eq!(rounds(1000, 7).count(), 10);
        assert_eq!(rounds(1024, 7).count(), 10);
        assert_eq!(rounds(1025, 7).count(), 11);
        let last = rounds(6, 0).last().unwrap();
        assert_eq!(
            (last.k, last.count, last.send_to, last.recv_from),
            (2, 2, 2, 4)
        );
    }

    #[test]
    fn a_wrong_block_count_is_an_error() {
        let bytes = pack(&[vec![1], vec![2]]);
        assert!(unpack(&bytes, 3).is_err());
        assert!(unpack(&bytes[..bytes.len() - 1], 2).is_err());
    }
}
