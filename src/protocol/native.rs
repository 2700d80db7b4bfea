//! Which accumulates run as the transport's own atomics and which are emulated under the
//! target's accumulate lock, per (element type, operation), free of I/O.
//!
//! A NIC's atomics and the emulation (read, combine, write back under a lock word) are not
//! atomic with respect to each other, so accumulates that may meet on one location must take
//! the same path. Which may meet is what the window's `accumulate_ops` info says:
//!
//! - `same_op_no_op` (MPI's default): concurrent accumulates on a location use one operation,
//!   or MPI_NO_OP. An operation runs natively where the transport runs it and MPI_NO_OP (the
//!   atomic read) natively; a MPI_NO_OP on a type whose operations are split reads natively
//!   *under* the accumulate lock, atomic with respect to both paths.
//! - `same_op`: concurrent accumulates on a location use one operation: each runs natively
//!   where the transport runs it.
//!
//! Where the transport runs every operation of a type, everything of that type is native
//! whatever the info says. RDMA verbs hardware, which runs 64-bit fetch-add and
//! compare-and-swap only, is the case this serves: with it a u64 sum counter runs on the NIC
//! while u64 max is emulated.
//!
//! # MPI-4.1: 12.2.7 (accumulate_ops), 12.7.1 (atomicity of accumulates)

use super::reduce::{Elem, Op};

/// What one element's accumulate does, as far as the path it takes goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An MPI operation (MPI_NO_OP: the atomic read).
    Apply(Op),
    /// Compare-and-swap.
    CompareSwap,
}

impl Kind {
    /// Every kind that applies to `elem`: its operations, and compare-and-swap for integers.
    fn all(elem: Elem) -> impl Iterator<Item = Kind> {
        let ops = Op::ALL.into_iter().filter(move |op| op.applies(elem));
        ops.map(Kind::Apply)
            .chain((!elem.is_float()).then_some(Kind::CompareSwap))
    }

    const fn index(self) -> usize {
        match self {
            Kind::Apply(op) => op.index(),
            Kind::CompareSwap => Op::ALL.len(),
        }
    }
}

/// What one element's atomic read-modify-write does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccOp {
    /// Combine with the operand by `Op`.
    Apply(Op),
    /// Store the operand if the element equals `compare`.
    CompareSwap {
        /// The value the element must hold for the operand to be stored.
        compare: u64,
    },
}

impl AccOp {
    /// What decides its path ([`NativeOps::path`]).
    #[cfg(have_nic)]
    pub fn kind(self) -> Kind {
        match self {
            AccOp::Apply(op) => Kind::Apply(op),
            AccOp::CompareSwap { .. } => Kind::CompareSwap,
        }
    }
}

/// Kinds per element type, as bits of one word.
const KINDS: usize = Op::ALL.len() + 1;

/// The kinds that apply to `elem`, as bits from bit 0 (`Kind::index`).
const fn applying(elem: Elem) -> u64 {
    let mut bits = 0;
    let mut i = 0;
    while i < Op::ALL.len() {
        if Op::ALL[i].applies(elem) {
            bits |= 1 << i;
        }
        i += 1;
    }
    match elem.is_float() {
        true => bits,
        false => bits | 1 << Kind::CompareSwap.index(),
    }
}

/// The (element type, kind) pairs a transport runs natively on every rank (aligned, in memory
/// it reaches natively).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativeOps(u64);

/// How one accumulate goes.
#[cfg(any(have_nic, test))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// The transport's atomic.
    Native,
    /// Emulated under the target's accumulate lock.
    Locked,
    /// The transport's atomic read under the target's accumulate lock (MPI_NO_OP on a type
    /// whose operations are split between the paths).
    ReadLocked,
}

impl NativeOps {
    /// Nothing native.
    #[cfg(any(have_nic, test))]
    pub const NONE: NativeOps = NativeOps(0);
    /// Everything native (CPU atomics on mapped memory).
    pub const ALL: NativeOps = NativeOps((1 << (KINDS * Elem::ALL.len())) - 1);

    fn bit(elem: Elem, kind: Kind) -> u64 {
        1 << (elem.index() * KINDS + kind.index())
    }

    /// The native kinds of `elem`, as bits from bit 0.
    fn of(self, elem: Elem) -> u64 {
        (self.0 >> (elem.index() * KINDS)) & applying(elem)
    }

    /// The pairs for which `native` says yes.
    #[cfg(any(have_nic, test))]
    pub fn from_fn(native: impl Fn(Elem, Kind) -> bool) -> NativeOps {
        let pairs = Elem::ALL
            .into_iter()
            .flat_map(|e| Kind::all(e).map(move |k| (e, k)));
        NativeOps(
            pairs
                .filter(|&(e, k)| native(e, k))
                .fold(0, |m, (e, k)| m | Self::bit(e, k)),
        )
    }

    /// Native on both (what every rank runs).
    #[cfg(any(have_nic, test))]
    pub fn and(self, other: NativeOps) -> NativeOps {
        NativeOps(self.0 & other.0)
    }

    /// Whether `(elem, kind)` runs natively.
    pub fn has(self, elem: Elem, kind: Kind) -> bool {
        self.0 & Self::bit(elem, kind) != 0
    }

    /// Whether every kind on `elem` runs natively.
    pub fn whole(self, elem: Elem) -> bool {
        self.of(elem) == applying(elem)
    }

    /// The path of `kind` on `elem` under `accumulate_ops` (`same_op`: no MPI_NO_OP meets
    /// other operations).
    #[cfg(any(have_nic, test))]
    pub fn path(self, elem: Elem, kind: Kind, same_op: bool) -> Path {
        let read = Kind::Apply(Op::NoOp);
        if self.whole(elem) {
            return Path::Native;
        }
        let native = self.has(elem, kind);
        match kind {
            _ if same_op => match native {
                true => Path::Native,
                false => Path::Locked,
            },
            k if k == read => match native && self.of(elem) & !(1 << read.index()) != 0 {
                true => Path::ReadLocked,
                false => Path::Locked,
            },
            _ if native && self.has(elem, read) => Path::Native,
            _ => Path::Locked,
        }
    }

    /// The bits, for the key ranks exchange.
    #[cfg(any(have_nic, test))]
    pub fn bits(self) -> u64 {
        self.0
    }

    /// From [`NativeOps::bits`].
    #[cfg(any(have_nic, test))]
    pub fn from_bits(bits: u64) -> NativeOps {
        NativeOps(bits & Self::ALL.0)
    }

    /// The pairs RDMA verbs hardware runs: fetch-add (MPI_SUM), the atomic read (a fetch-add
    /// of 0) and compare-and-swap, on 64-bit integers.
    #[cfg(any(have_nic, test))]
    pub fn verbs() -> NativeOps {
        NativeOps::from_fn(|e, k| {
            matches!(e, Elem::I64 | Elem::U64)
                && matches!(
                    k,
                    Kind::Apply(Op::Sum) | Kind::Apply(Op::NoOp) | Kind::CompareSwap
                )
        })
    }
}

impl std::fmt::Display for NativeOps {
    /// The native pairs, by type: `U64[Sum NoOp CompareSwap] F64[*]` (`*`: every kind).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut first = true;
        for e in Elem::ALL {
            let kinds: Vec<Kind> = Kind::all(e).filter(|&k| self.has(e, k)).collect();
            if kinds.is_empty() {
                continue;
            }
            let sep = if first { "" } else { " " };
            first = false;
            match self.whole(e) {
                true => write!(f, "{sep}{e:?}[*]")?,
                false => {
                    let names: Vec<String> = kinds
                        .iter()
                        .map(|k| match k {
                            Kind::Apply(op) => format!("{op:?}"),
                            Kind::CompareSwap => "CompareSwap".into(),
                        })
                        .collect();
                    write!(f, "{sep}{e:?}[{}]", names.join(" "))?;
                }
            }
        }
        if first {
            write!(f, "none")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUM: Kind = Kind::Apply(Op::Sum);
    const MAX: Kind = Kind::Apply(Op::Max);
    const READ: Kind = Kind::Apply(Op::NoOp);

    #[test]
    fn a_type_run_whole_is_native_whatever_the_info() {
        for same_op in [false, true] {
            for k in Kind::all(Elem::F64) {
                assert_eq!(NativeOps::ALL.path(Elem::F64, k, same_op), Path::Native);
            }
            assert_eq!(NativeOps::NONE.path(Elem::U64, SUM, same_op), Path::Locked);
        }
        assert!(NativeOps::ALL.whole(Elem::I32) && !NativeOps::verbs().whole(Elem::U64));
    }

    #[test]
    fn split_types_follow_accumulate_ops() {
        let v = NativeOps::verbs();
        // same_op_no_op: sum needs the native read beside it; no_op reads under the lock too.
        assert_eq!(v.path(Elem::U64, SUM, false), Path::Native);
        assert_eq!(v.path(Elem::U64, Kind::CompareSwap, false), Path::Native);
        assert_eq!(v.path(Elem::U64, MAX, false), Path::Locked);
        assert_eq!(v.path(Elem::U64, READ, false), Path::ReadLocked);
        // same_op: no MPI_NO_OP meets a sum, so the read goes native alone.
        assert_eq!(v.path(Elem::U64, READ, true), Path::Native);
        assert_eq!(v.path(Elem::U64, MAX, true), Path::Locked);
        // Types verbs does not run at all stay emulated.
        assert_eq!(v.path(Elem::F64, SUM, false), Path::Locked);
        assert_eq!(v.path(Elem::F64, READ, false), Path::Locked);
    }

    #[test]
    fn without_a_native_read_nothing_of_the_type_is_native_by_default() {
        let sum_only = NativeOps::from_fn(|e, k| e == Elem::U64 && k == SUM);
        assert_eq!(sum_only.path(Elem::U64, SUM, false), Path::Locked);
        assert_eq!(sum_only.path(Elem::U64, READ, false), Path::Locked);
        assert_eq!(sum_only.path(Elem::U64, SUM, true), Path::Native);
    }

    #[test]
    fn whole_types_by_mask_agree_with_the_kinds_one_by_one() {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = NativeOps::from_bits(x);
            for e in Elem::ALL {
                assert_eq!(n.whole(e), Kind::all(e).all(|k| n.has(e, k)), "{n} {e:?}");
                let others = Kind::all(e).any(|k| k != READ && n.has(e, k));
                let split = !n.whole(e) && n.has(e, READ) && others;
                assert_eq!(
                    n.path(e, READ, false) == Path::ReadLocked,
                    split,
                    "{n} {e:?}"
                );
            }
        }
    }

    #[test]
    fn bits_round_trip_and_ranks_agree_on_the_intersection() {
        let v = NativeOps::verbs();
        assert_eq!(NativeOps::from_bits(v.bits()), v);
        assert_eq!(NativeOps::ALL.and(v), v);
        assert_eq!(v.and(NativeOps::NONE), NativeOps::NONE);
        assert_eq!(
            v.to_string(),
            "I64[Sum NoOp CompareSwap] U64[Sum NoOp CompareSwap]"
        );
        assert_eq!(NativeOps::ALL.to_string().matches("[*]").count(), 6);
    }
}
