//! The accumulate family: accumulate, get_accumulate, fetch_and_op, compare_and_swap.
//!
//! Every element is one atomic read-modify-write through the window's atomic route (CPU atomics
//! inside a node, the NIC's atomics over the fabric, or a locked read-modify-write where those
//! cannot reach the element), so accumulates from many origins to the same element combine
//! exactly, as MPI requires for the same predefined datatype, at any displacement. A call of
//! many elements is one call of the route (one NIC atomic with a count, or one turn of the
//! lock), atomic per element, not as a whole. Checks come first: the operation against the
//! type, rank, range, epoch; the epoch records the call once an element may have been updated,
//! so a refused call changes no epoch state.
//!
//! # MPI-4.1: 12.3.4 (MPI_ACCUMULATE), 12.3.5 (MPI_GET_ACCUMULATE, MPI_FETCH_AND_OP,
//! MPI_COMPARE_AND_SWAP), 12.7.1 (atomicity)

use super::Window;
use crate::error::in_call;
use crate::error::{Error, ErrorClass, Result};
use crate::protocol::reduce::Elem;
pub use crate::protocol::reduce::Op;
use crate::transport::shm::rmw;
use crate::transport::{AccOp, Accumulate, AccumulateMany, Space};
use bytemuck::Pod;

mod sealed {
    pub trait Sealed {}
}

/// Element types of the accumulate family (MPI_INT32_T, MPI_UINT32_T, MPI_INT64_T,
/// MPI_UINT64_T, MPI_FLOAT, MPI_DOUBLE). Sealed: the transports know exactly these.
pub trait AtomicElem: Pod + sealed::Sealed {
    /// The element type the transports see.
    #[doc(hidden)]
    const ELEM: Elem;
}

macro_rules! atomic_elem {
    ($($t:ty => $e:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl AtomicElem for $t {
            const ELEM: Elem = Elem::$e;
        }
    )*};
}
atomic_elem!(i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);

pub(super) fn bits<T: AtomicElem>(v: T) -> u64 {
    let mut b = [0u8; 8];
    b[..T::ELEM.size()].copy_from_slice(bytemuck::bytes_of(&v));
    u64::from_le_bytes(b)
}

/// One element's read-modify-write `op` with `operand`, as the transports take it.
pub(super) fn one_element<T: AtomicElem>(op: AccOp, operand: T, same_op: bool) -> Accumulate {
    Accumulate {
        elem: T::ELEM,
        op,
        operand: bits(operand),
        same_op,
    }
}

pub(super) fn from_bits<T: AtomicElem>(v: u64) -> T {
    bytemuck::pod_read_unaligned(&v.to_le_bytes()[..T::ELEM.size()])
}

/// The bytes of `count` elements of `T`, or MPI_ERR_COUNT when they overflow.
pub(super) fn elem_bytes<T: AtomicElem>(count: usize) -> Result<usize> {
    count
        .checked_mul(T::ELEM.size())
        .ok_or_else(|| Error::new(ErrorClass::Count, format!("{count} elements overflow")))
}

/// Whether `op` may combine `T` elements in a non-fetching accumulate (not MPI_NO_OP:
/// MPI_ERR_OP).
pub(super) fn accumulate_op<T: AtomicElem>(op: Op) -> Result<()> {
    if op == Op::NoOp {
        return Err(Error::new(
            ErrorClass::Op,
            "MPI_NO_OP is only for fetching accumulates",
        ));
    }
    op.check(T::ELEM)
}

/// Whether a fetching accumulate of `origin` into `result` with `op` is well formed: as many
/// results as operands (MPI_ERR_COUNT), an op for the type (MPI_ERR_OP).
pub(super) fn fetch_args<T: AtomicElem>(origin: &[T], result: &[T], op: Op) -> Result<()> {
    if origin.len() != result.len() {
        return Err(Error::new(
            ErrorClass::Count,
            format!(
                "{} origin elements but room for {} results",
                origin.len(),
                result.len()
            ),
        ));
    }
    op.check(T::ELEM)
}

impl Window<'_> {
    /// The accumulates of `origin`'s elements with `op`, for a transport, at this window's
    /// accumulate granularity.
    pub(super) fn many<'o, T: AtomicElem>(&self, op: Op, origin: &'o [T]) -> AccumulateMany<'o> {
        AccumulateMany {
            elem: T::ELEM,
            op,
            operands: bytemuck::cast_slice(origin),
            granularity: self.hints.get().granularity,
            same_op: self.hints.get().same_op,
        }
    }

    /// Check everything about `count` elements of `T` at `disp` of `target`; where they are.
    fn atomic_range<T: AtomicElem>(
        &self,
        target: usize,
        disp: usize,
        count: usize,
    ) -> Result<(Space, usize)> {
        self.place(target, disp, elem_bytes::<T>(count)?, false)
    }

    /// One element's read-modify-write at `(space, off)` of `target` (any offset).
    #[inline]
    fn rmw<T: AtomicElem>(
        &self,
        target: usize,
        (space, off): (Space, usize),
        op: AccOp,
        operand: T,
    ) -> Result<T> {
        let acc = Accumulate {
            elem: T::ELEM,
            op,
            operand: bits(operand),
            same_op: self.hints.get().same_op,
        };
        match self.direct.element(target, space, off, T::ELEM.size()) {
            Some(mem) => rmw(mem, off, acc),
            None => self.atomic_route().accumulate(target, space, off, acc),
        }
        .map(from_bits)
    }

    /// Many elements' read-modify-writes at `(space, off)` of `target` (any offset), with the
    /// old values in `fetched` when given; nothing moves for no elements.
    fn rmw_many<T: AtomicElem>(
        &self,
        target: usize,
        (space, off): (Space, usize),
        op: Op,
        origin: &[T],
        fetched: Option<&mut [T]>,
    ) -> Result<()> {
        if origin.is_empty() {
            return Ok(());
        }
        let in_flight = fetched.is_none() && self.hints.get().ordering.writes_may_overtake();
        if let ([one], false) = (origin, in_flight) {
            // One element waited for: the transport's call for one (over the fabric through
            // its bounce buffer, where the form for many stages a buffer and a request).
            let old = self.rmw(target, (space, off), AccOp::Apply(op), *one)?;
            if let Some([f]) = fetched {
                *f = old;
            }
            return Ok(());
        }
        let route = self.atomic_route();
        let acc = self.many(op, origin);
        match fetched {
            // Nothing to wait for where no later access must find it done (accumulate_ordering):
            // left in flight, completed by the next flush (`Window::set_info`).
            None if in_flight => route
                .start_accumulate(target, space, off, acc, None)
                .map(drop),
            fetched => {
                let fetched = fetched.map(bytemuck::cast_slice_mut);
                route.accumulate_many(target, space, off, acc, fetched)
            }
        }
    }

    /// The outcome `r` of a call of `count` elements: the epoch records the call if it
    /// succeeded or may have changed memory before it failed (a call of several elements may
    /// have updated some), so that only a refused call leaves it as it was.
    #[inline]
    pub(super) fn record<R>(&self, count: usize, r: Result<R>) -> Result<R> {
        if r.is_ok() || count > 1 {
            self.epochs.borrow_mut().issued();
        }
        r
    }

    /// Combine `origin` into `target`'s window at `disp` element by element with `op`
    /// (MPI_REPLACE stores; MPI_NO_OP is not allowed here: MPI_ERR_OP). Each element is
    /// updated atomically with respect to every other accumulate on it with the same type, at
    /// any displacement (an element not aligned to its size in the target's memory included).
    ///
    /// # MPI-4.1: 12.3.4 (MPI_ACCUMULATE)
    pub fn accumulate<T: AtomicElem>(
        &self,
        origin: &[T],
        target: usize,
        disp: usize,
        op: Op,
    ) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Accumulate", || {
            accumulate_op::<T>(op)?;
            let off = self.atomic_range::<T>(target, disp, origin.len())?;
            let r = self.rmw_many(target, off, op, origin, None);
            self.record(origin.len(), r)
        })
    }

    /// Like [`Window::accumulate`], and the elements' previous values land in `result` (which
    /// must be as long as `origin`: MPI_ERR_COUNT). With MPI_NO_OP it is an atomic get.
    ///
    /// # MPI-4.1: 12.3.5 (MPI_GET_ACCUMULATE)
    pub fn get_accumulate<T: AtomicElem>(
        &self,
        origin: &[T],
        result: &mut [T],
        target: usize,
        disp: usize,
        op: Op,
    ) -> Result<()> {
        in_call(Some(self.rank()), "MPI_Get_accumulate", || {
            fetch_args(origin, result, op)?;
            let off = self.atomic_range::<T>(target, disp, origin.len())?;
            let r = self.rmw_many(target, off, op, origin, Some(result));
            self.record(origin.len(), r)
        })
    }

    /// Combine `origin` into one element of `target` with `op` and return its previous value.
    ///
    /// # MPI-4.1: 12.3.5 (MPI_FETCH_AND_OP)
    pub fn fetch_and_op<T: AtomicElem>(
        &self,
        origin: T,
        target: usize,
        disp: usize,
        op: Op,
    ) -> Result<T> {
        in_call(Some(self.rank()), "MPI_Fetch_and_op", || {
            op.check(T::ELEM)?;
            let off = self.atomic_range::<T>(target, disp, 1)?;
            self.record(1, self.rmw(target, off, AccOp::Apply(op), origin))
        })
    }

    /// Store `origin` in one element of `target` if it equals `compare`; return its previous
    /// value. Integer types only (MPI_ERR_TYPE for floating point).
    ///
    /// # MPI-4.1: 12.3.5 (MPI_COMPARE_AND_SWAP)
    pub fn compare_and_swap<T: AtomicElem>(
        &self,
        origin: T,
        compare: T,
        target: usize,
        disp: usize,
    ) -> Result<T> {
        in_call(Some(self.rank()), "MPI_Compare_and_swap", || {
            if T::ELEM.is_float() {
                return Err(Error::new(
                    ErrorClass::Type,
                    "compare_and_swap takes integer types, not floating point",
                ));
            }
            let off = self.atomic_range::<T>(target, disp, 1)?;
            let swap = AccOp::CompareSwap {
                compare: bits(compare),
            };
            self.record(1, self.rmw(target, off, swap, origin))
        })
    }
}
