//! Assertion bits of the synchronization calls (MPI_MODE_*).
//!
//! # MPI-4.1: 12.5.5

use crate::error::{Error, ErrorClass, Result};
use std::ops::BitOr;

/// A set of MPI_MODE_* assertions; `Assert::NONE` is valid for every call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Assert(u32);

impl Assert {
    /// No assertion (0).
    pub const NONE: Assert = Assert(0);
    /// MPI_MODE_NOCHECK: start/post, lock, lock_all: no conflicting lock or matching is needed.
    pub const NOCHECK: Assert = Assert(1);
    /// MPI_MODE_NOSTORE: post, fence: the local window was not updated by stores since the last sync.
    pub const NOSTORE: Assert = Assert(2);
    /// MPI_MODE_NOPUT: post, fence: the local window will not be updated by put or accumulate.
    pub const NOPUT: Assert = Assert(4);
    /// MPI_MODE_NOPRECEDE: fence: the fence completes no sequence of RMA calls.
    pub const NOPRECEDE: Assert = Assert(8);
    /// MPI_MODE_NOSUCCEED: fence: the fence starts no sequence of RMA calls.
    pub const NOSUCCEED: Assert = Assert(16);

    /// Assertions from raw bits; bits that no call accepts are kept so that the call can report
    /// MPI_ERR_ASSERT.
    pub const fn from_bits(bits: u32) -> Assert {
        Assert(bits)
    }

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: Assert) -> bool {
        self.0 & other.0 == other.0
    }

    /// `Ok` if only bits of `allowed` are set, else MPI_ERR_ASSERT naming `call`.
    pub(crate) fn check(self, allowed: Assert, call: &str) -> Result<Assert> {
        let bad = self.0 & !allowed.0;
        if bad != 0 {
            return Err(Error::new(
                ErrorClass::Assert,
                format!("{call} does not accept assert bits {bad:#x}"),
            ));
        }
        Ok(self)
    }
}

impl BitOr for Assert {
    type Output = Assert;
    fn bitor(self, rhs: Assert) -> Assert {
        Assert(self.0 | rhs.0)
    }
}

/// Asserts accepted by fence.
pub(crate) const FENCE: Assert =
    Assert(Assert::NOSTORE.0 | Assert::NOPUT.0 | Assert::NOPRECEDE.0 | Assert::NOSUCCEED.0);
/// Asserts accepted by lock and lock_all.
pub(crate) const LOCK: Assert = Assert::NOCHECK;
/// Asserts accepted by post.
pub(crate) const POST: Assert = Assert(Assert::NOCHECK.0 | Assert::NOSTORE.0 | Assert::NOPUT.0);
/// Asserts accepted by start.
pub(crate) const START: Assert = Assert::NOCHECK;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fence_rejects_nocheck_and_unknown_bits() {
        assert!(Assert::NOPRECEDE.check(FENCE, "fence").is_ok());
        let e = Assert::NOCHECK.check(FENCE, "fence").unwrap_err();
        assert_eq!(e.class(), ErrorClass::Assert);
        let e = Assert::from_bits(1 << 20)
            .check(FENCE, "fence")
            .unwrap_err();
        assert_eq!(e.class(), ErrorClass::Assert);
        let e = Assert::NOSUCCEED.check(LOCK, "lock").unwrap_err();
        assert_eq!(e.class(), ErrorClass::Assert);
        assert!(
            (Assert::NOCHECK | Assert::NOSTORE | Assert::NOPUT)
                .check(POST, "post")
                .is_ok()
        );
        let e = Assert::NOPUT.check(START, "start").unwrap_err();
        assert_eq!(e.class(), ErrorClass::Assert);
    }
}
