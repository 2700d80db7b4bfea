//! A failure of an operation of a shared window's threads that no flush reported before
//! sharing ended (`wired.rs`), kept for the window's next completion.

use crate::error::{Error, Result};
use std::cell::{Cell, RefCell};

/// A failure of a thread's operation that no flush reported before sharing ended: the next
/// completion of the window's operations reports it (MPI lets an RMA call's failure be
/// reported by the synchronization that completes it).
#[derive(Debug, Default)]
pub(super) struct Unreported {
    some: Cell<bool>,
    error: RefCell<Option<Error>>,
}

impl Unreported {
    /// Keep `error` for the next completion.
    pub(super) fn keep(&self, error: Error) {
        self.error.borrow_mut().get_or_insert(error);
        self.some.set(true);
    }

    /// The kept failure, once.
    #[inline]
    pub(super) fn take(&self) -> Result<()> {
        if !self.some.get() {
            return Ok(());
        }
        self.some.set(false);
        self.error.borrow_mut().take().map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    #[test]
    fn the_first_unreported_failure_is_reported_once() {
        let u = Unreported::default();
        assert!(u.take().is_ok(), "nothing kept");
        u.keep(Error::new(ErrorClass::ProcFailed, "first"));
        u.keep(Error::new(ErrorClass::Other, "second"));
        assert_eq!(u.take().unwrap_err().class(), ErrorClass::ProcFailed);
        assert!(u.take().is_ok(), "reported once");
    }
}
