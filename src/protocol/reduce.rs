//! Accumulate arithmetic on one element, free of I/O: the software path of every transport
//! (CPU compare-and-swap loops, and the locked read-modify-write of the fabric's emulation)
//! computes with [`combine`].
//!
//! # MPI-4.1: 12.3.4 (predefined operations for accumulate), 12.3.5 (MPI_NO_OP, MPI_REPLACE)

use crate::error::{Error, ErrorClass, Result};

/// Element types of accumulate calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Elem {
    /// `i32` (MPI_INT32_T).
    I32,
    /// `u32` (MPI_UINT32_T).
    U32,
    /// `i64` (MPI_INT64_T).
    I64,
    /// `u64` (MPI_UINT64_T).
    U64,
    /// `f32` (MPI_FLOAT).
    F32,
    /// `f64` (MPI_DOUBLE).
    F64,
}

impl Elem {
    /// Every element type.
    pub const ALL: [Elem; 6] = [
        Elem::I32,
        Elem::U32,
        Elem::I64,
        Elem::U64,
        Elem::F32,
        Elem::F64,
    ];

    /// Bytes of one element.
    pub fn size(self) -> usize {
        match self {
            Elem::I32 | Elem::U32 | Elem::F32 => 4,
            Elem::I64 | Elem::U64 | Elem::F64 => 8,
        }
    }

    /// A floating-point type (no bitwise operations, no compare-and-swap).
    pub const fn is_float(self) -> bool {
        matches!(self, Elem::F32 | Elem::F64)
    }

    /// The position of this type in [`Elem::ALL`], for bit masks.
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// Predefined reduction operations of accumulate (MPI_Op).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// MPI_SUM
    Sum,
    /// MPI_PROD
    Prod,
    /// MPI_MIN
    Min,
    /// MPI_MAX
    Max,
    /// MPI_BAND
    Band,
    /// MPI_BOR
    Bor,
    /// MPI_BXOR
    Bxor,
    /// MPI_REPLACE: the target takes the origin value.
    Replace,
    /// MPI_NO_OP: the target is unchanged (fetching calls only).
    NoOp,
}

impl Op {
    /// Every operation.
    pub const ALL: [Op; 9] = [
        Op::Sum,
        Op::Prod,
        Op::Min,
        Op::Max,
        Op::Band,
        Op::Bor,
        Op::Bxor,
        Op::Replace,
        Op::NoOp,
    ];

    /// The position of this operation in [`Op::ALL`], for bit masks.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Whether `self` applies to `elem` (bitwise operations need integers).
    pub const fn applies(self, elem: Elem) -> bool {
        !(elem.is_float() && matches!(self, Op::Band | Op::Bor | Op::Bxor))
    }

    /// MPI_ERR_OP unless `self` applies to `elem`.
    pub fn check(self, elem: Elem) -> Result<()> {
        if !self.applies(elem) {
            return Err(Error::new(
                ErrorClass::Op,
                format!("{self:?} is not defined on floating-point {elem:?}"),
            ));
        }
        Ok(())
    }
}

/// The value `op` leaves in a target element holding `old` when the origin gives `operand`; both
/// are the element's bits in the low bytes of a `u64`.
pub fn combine(elem: Elem, op: Op, old: u64, operand: u64) -> u64 {
    macro_rules! arith {
        ($t:ty, $from:expr, $to:expr) => {{
            let (a, b): ($t, $t) = ($from(old), $from(operand));
            $to(match op {
                Op::Sum => sum(a, b),
                Op::Prod => prod(a, b),
                Op::Min => {
                    if b < a {
                        b
                    } else {
                        a
                    }
                }
                Op::Max => {
                    if b > a {
                        b
                    } else {
                        a
                    }
                }
                Op::Replace => b,
                Op::NoOp | Op::Band | Op::Bor | Op::Bxor => a,
            })
        }};
    }
    let bitwise = |mask: u64| match op {
        Op::Band => Some(old & operand & mask),
        Op::Bor => Some((old | operand) & mask),
        Op::Bxor => Some((old ^ operand) & mask),
        _ => None,
    };
    match elem {
        Elem::I32 => bitwise(u32::MAX as u64)
            .unwrap_or_else(|| arith!(i32, |v: u64| v as u32 as i32, |v: i32| v as u32 as u64)),
        Elem::U32 => bitwise(u32::MAX as u64)
            .unwrap_or_else(|| arith!(u32, |v: u64| v as u32, |v: u32| v as u64)),
        Elem::I64 => {
            bitwise(u64::MAX).unwrap_or_else(|| arith!(i64, |v: u64| v as i64, |v: i64| v as u64))
        }
        Elem::U64 => bitwise(u64::MAX).unwrap_or_else(|| arith!(u64, |v: u64| v, |v: u64| v)),
        Elem::F32 => arith!(f32, |v: u64| f32::from_bits(v as u32), |v: f32| v.to_bits()
            as u64),
        Elem::F64 => arith!(f64, f64::from_bits, |v: f64| v.to_bits()),
    }
}

/// Apply `op` to every element of `target` with the operand at the same place of `operands`
/// (little-endian elements of `elem`, as many as both hold), as [`combine`] does one by one:
/// the operation is chosen once for the whole run, so that a long accumulate is a plain loop.
pub fn combine_all(elem: Elem, op: Op, target: &mut [u8], operands: &[u8]) {
    macro_rules! run {
        ($t:ty, $f:expr) => {{
            const N: usize = size_of::<$t>();
            let f = $f;
            for (t, o) in target.chunks_exact_mut(N).zip(operands.chunks_exact(N)) {
                let a = <$t>::from_le_bytes(t.try_into().expect("N bytes"));
                let b = <$t>::from_le_bytes(o.try_into().expect("N bytes"));
                let v: $t = f(a, b);
                t.copy_from_slice(&v.to_le_bytes());
            }
        }};
    }
    macro_rules! arith {
        ($t:ty) => {
            match op {
                Op::Sum => run!($t, |a: $t, b: $t| sum(a, b)),
                Op::Prod => run!($t, |a: $t, b: $t| prod(a, b)),
                Op::Min => run!($t, |a: $t, b: $t| if b < a { b } else { a }),
                Op::Max => run!($t, |a: $t, b: $t| if b > a { b } else { a }),
                Op::Replace => run!($t, |_: $t, b: $t| b),
                Op::NoOp | Op::Band | Op::Bor | Op::Bxor => {}
            }
        };
    }
    macro_rules! integer {
        ($t:ty) => {
            match op {
                Op::Band => run!($t, |a: $t, b: $t| a & b),
                Op::Bor => run!($t, |a: $t, b: $t| a | b),
                Op::Bxor => run!($t, |a: $t, b: $t| a ^ b),
                _ => arith!($t),
            }
        };
    }
    match elem {
        Elem::I32 => integer!(i32),
        Elem::U32 => integer!(u32),
        Elem::I64 => integer!(i64),
        Elem::U64 => integer!(u64),
        Elem::F32 => arith!(f32),
        Elem::F64 => arith!(f64),
    }
}

/// Wrapping addition for integers, IEEE addition for floats.
trait Arith: Copy {
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
}

macro_rules! wrapping {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
        }
    )*};
}
wrapping!(i32, u32, i64, u64);

macro_rules! ieee {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            fn add(self, o: Self) -> Self { self + o }
            fn mul(self, o: Self) -> Self { self * o }
        }
    )*};
}
ieee!(f32, f64);

fn sum<T: Arith>(a: T, b: T) -> T {
    a.add(b)
}

fn prod<T: Arith>(a: T, b: T) -> T {
    a.mul(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_ops_wrap_and_keep_width() {
        assert_eq!(combine(Elem::U64, Op::Sum, u64::MAX, 2), 1);
        assert_eq!(
            combine(Elem::I32, Op::Sum, (-5i32) as u32 as u64, 3),
            (-2i32) as u32 as u64
        );
        assert_eq!(
            combine(Elem::I32, Op::Min, (-5i32) as u32 as u64, 3),
            (-5i32) as u32 as u64
        );
        assert_eq!(combine(Elem::U32, Op::Max, 7, 9), 9);
        assert_eq!(combine(Elem::U32, Op::Prod, 1 << 31, 2), 0);
        assert_eq!(combine(Elem::I64, Op::Bxor, 0b1100, 0b1010), 0b0110);
        assert_eq!(combine(Elem::U64, Op::Replace, 1, 42), 42);
        assert_eq!(combine(Elem::U64, Op::NoOp, 1, 42), 1);
    }

    #[test]
    fn float_ops() {
        let f = |v: f64| v.to_bits();
        assert_eq!(combine(Elem::F64, Op::Sum, f(1.5), f(2.25)), f(3.75));
        assert_eq!(combine(Elem::F64, Op::Min, f(1.5), f(-2.0)), f(-2.0));
        let g = |v: f32| v.to_bits() as u64;
        assert_eq!(combine(Elem::F32, Op::Prod, g(1.5), g(4.0)), g(6.0));
    }

    #[test]
    fn combining_a_run_agrees_with_combining_each_element() {
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for elem in Elem::ALL {
            let size = elem.size();
            for op in Op::ALL.into_iter().filter(|op| op.applies(elem)) {
                let bytes = |v: &mut dyn FnMut() -> u64| -> Vec<u8> {
                    (0..9)
                        .flat_map(|_| v().to_le_bytes()[..size].to_vec())
                        .collect()
                };
                let (mut target, operands) = (bytes(&mut next), bytes(&mut next));
                let low = |b: &[u8]| {
                    let mut w = [0u8; 8];
                    w[..size].copy_from_slice(b);
                    u64::from_le_bytes(w)
                };
                let expected: Vec<u8> = target
                    .chunks_exact(size)
                    .zip(operands.chunks_exact(size))
                    .flat_map(|(t, o)| {
                        combine(elem, op, low(t), low(o)).to_le_bytes()[..size].to_vec()
                    })
                    .collect();
                combine_all(elem, op, &mut target, &operands);
                assert_eq!(target, expected, "{elem:?} {op:?}");
            }
        }
    }

    #[test]
    fn bitwise_ops_refuse_floats() {
        assert_eq!(
            Op::Band.check(Elem::F32).unwrap_err().class(),
            ErrorClass::Op
        );
        assert!(Op::Band.check(Elem::U32).is_ok());
        assert!(Op::Sum.check(Elem::F64).is_ok());
    }

    #[test]
    fn indices_are_positions_in_all() {
        assert!(Op::ALL.iter().enumerate().all(|(i, op)| op.index() == i));
        assert!(Elem::ALL.iter().enumerate().all(|(i, e)| e.index() == i));
    }
}
