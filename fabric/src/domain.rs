//! Fabric and domain of one provider; atomic capability queries.

use crate::error::{FiError, opened};
use crate::info::Provider;
use crate::library::library;
use crate::sys;
use std::ptr;
use std::sync::Arc;

/// Close a libfabric object; errors at close are not actionable and are ignored.
///
/// # Safety
/// `fid` must be an open object, closed exactly once, with nothing depending on it still open.
pub(crate) unsafe fn close(fid: *mut sys::fid) {
    if !fid.is_null() {
        // SAFETY: guaranteed by the caller.
        unsafe { sys::fi_close(fid) };
    }
}

/// An opened fabric and domain (`fi_fabric`, `fi_domain`); shared by the endpoints and regions
/// made from it, which keep it open.
pub struct Domain {
    provider: Provider,
    fabric: *mut sys::fid_fabric,
    domain: *mut sys::fid_domain,
}

// SAFETY: the domain was opened with FI_THREAD_SAFE, so its calls may come from any thread.
unsafe impl Send for Domain {}
// SAFETY: as above.
unsafe impl Sync for Domain {}

impl std::fmt::Debug for Domain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Domain")
            .field("provider", &self.provider)
            .finish()
    }
}

impl Domain {
    /// Open the fabric and domain of `provider`.
    pub fn open(provider: Provider) -> Result<Arc<Domain>, FiError> {
        let mut d = Domain {
            provider,
            fabric: ptr::null_mut(),
            domain: ptr::null_mut(),
        };
        let info = d.provider.raw();
        let lib = library()?;
        // SAFETY: info is a valid fi_info owned by `d.provider`; the fabric is closed by Drop
        // once open.
        d.fabric = opened("fi_fabric", |fabric| unsafe {
            (lib.fabric)((*info).fabric_attr, fabric, ptr::null_mut())
        })?;
        // SAFETY: the fabric is open; the domain is closed by Drop before the fabric.
        d.domain = opened("fi_domain", |domain| unsafe {
            sys::fi_domain(d.fabric, info, domain, ptr::null_mut())
        })?;
        Ok(Arc::new(d))
    }

    /// The provider this domain was opened with.
    pub fn provider(&self) -> &Provider {
        &self.provider
    }

    pub(crate) fn raw(&self) -> *mut sys::fid_domain {
        self.domain
    }

    /// The fabric the domain belongs to (for `fi_trywait`).
    pub(crate) fn fabric(&self) -> *mut sys::fid_fabric {
        self.fabric
    }

    /// Whether the provider executes `op` on `dtype` natively for one element, for the `kind`
    /// of call (`fi_query_atomic`).
    pub fn atomic_native(&self, dtype: Datatype, op: AtomicOp, kind: AtomicKind) -> bool {
        self.atomic_count(dtype, op, kind) >= 1
    }

    /// The most `dtype` elements one atomic call of `kind` running `op` may carry natively
    /// (`fi_query_atomic`'s count); 0 where the provider does not run it.
    pub fn atomic_count(&self, dtype: Datatype, op: AtomicOp, kind: AtomicKind) -> usize {
        let mut attr = sys::fi_atomic_attr::default();
        let flags = match kind {
            AtomicKind::Plain => 0,
            AtomicKind::Fetch => sys::FI_FETCH_ATOMIC,
            AtomicKind::Compare => sys::FI_COMPARE_ATOMIC,
        };
        // SAFETY: the domain is open and `attr` is a valid out-parameter.
        let ret = unsafe {
            sys::fi_query_atomic(self.domain, dtype.raw(), op.raw(), &mut attr, flags as u64)
        };
        if ret == 0 && attr.size == dtype.size() {
            attr.count
        } else {
            0
        }
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        // SAFETY: endpoints and regions hold an Arc of this domain, so none is open any more;
        // the domain closes before its fabric.
        unsafe {
            close(self.domain.cast());
            close(self.fabric.cast());
        }
    }
}

/// Element types of atomics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Datatype {
    /// 32-bit signed integer (FI_INT32).
    I32,
    /// 32-bit unsigned integer (FI_UINT32).
    U32,
    /// 64-bit signed integer (FI_INT64).
    I64,
    /// 64-bit unsigned integer (FI_UINT64).
    U64,
    /// 32-bit float (FI_FLOAT).
    F32,
    /// 64-bit float (FI_DOUBLE).
    F64,
}

impl Datatype {
    pub(crate) fn raw(self) -> sys::fi_datatype {
        match self {
            Datatype::I32 => sys::fi_datatype_FI_INT32,
            Datatype::U32 => sys::fi_datatype_FI_UINT32,
            Datatype::I64 => sys::fi_datatype_FI_INT64,
            Datatype::U64 => sys::fi_datatype_FI_UINT64,
            Datatype::F32 => sys::fi_datatype_FI_FLOAT,
            Datatype::F64 => sys::fi_datatype_FI_DOUBLE,
        }
    }

    /// Bytes of one element.
    pub fn size(self) -> usize {
        match self {
            Datatype::I32 | Datatype::U32 | Datatype::F32 => 4,
            Datatype::I64 | Datatype::U64 | Datatype::F64 => 8,
        }
    }
}

/// Atomic operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// Minimum (FI_MIN).
    Min,
    /// Maximum (FI_MAX).
    Max,
    /// Sum (FI_SUM).
    Sum,
    /// Product (FI_PROD).
    Prod,
    /// Bitwise or (FI_BOR).
    Bor,
    /// Bitwise and (FI_BAND).
    Band,
    /// Bitwise exclusive or (FI_BXOR).
    Bxor,
    /// Fetch only (the operand is ignored).
    Read,
    /// Replace the target value.
    Write,
    /// Compare and swap (compare calls only).
    Cswap,
}

impl AtomicOp {
    pub(crate) fn raw(self) -> sys::fi_op {
        match self {
            AtomicOp::Min => sys::fi_op_FI_MIN,
            AtomicOp::Max => sys::fi_op_FI_MAX,
            AtomicOp::Sum => sys::fi_op_FI_SUM,
            AtomicOp::Prod => sys::fi_op_FI_PROD,
            AtomicOp::Bor => sys::fi_op_FI_BOR,
            AtomicOp::Band => sys::fi_op_FI_BAND,
            AtomicOp::Bxor => sys::fi_op_FI_BXOR,
            AtomicOp::Read => sys::fi_op_FI_ATOMIC_READ,
            AtomicOp::Write => sys::fi_op_FI_ATOMIC_WRITE,
            AtomicOp::Cswap => sys::fi_op_FI_CSWAP,
        }
    }
}

/// The three families of atomic calls, which providers support separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicKind {
    /// `fi_atomic`: no result returned.
    Plain,
    /// `fi_fetch_atomic`: the old value returned.
    Fetch,
    /// `fi_compare_atomic`.
    Compare,
}
