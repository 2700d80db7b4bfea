//! Errors with their MPI error class.
//!
//! Every misuse MPI names returns an [`Error`] whose [`Error::class`] is the MPI error class
//! (`MPI_ERR_RMA_SYNC`, `MPI_ERR_RMA_RANGE`, ...). Nothing in the library panics on misuse.
//!
//! # MPI-4.1: 9.4 (error classes), 12.8 (RMA error classes)

use std::fmt;
use std::sync::Arc;

/// MPI error classes that onesided returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// Invalid or freed window.
    Win,
    /// Bad base pointer (free_mem / detach of memory not allocated / attached).
    Base,
    /// Negative or impossible size.
    Size,
    /// Bad displacement unit or displacement.
    Disp,
    /// Lock type neither shared nor exclusive.
    LockType,
    /// Assert bits the call does not accept.
    Assert,
    /// Synchronization misuse: operation outside an epoch, unlock without lock, ...
    RmaSync,
    /// Target range outside the target's window.
    RmaRange,
    /// Memory cannot be attached.
    RmaAttach,
    /// Shared-memory window over processes that cannot share memory.
    RmaShared,
    /// Call not valid for the window's flavor.
    RmaFlavor,
    /// Out of memory.
    NoMem,
    /// Rank outside the group.
    Rank,
    /// Invalid group.
    Group,
    /// Invalid reduction operation.
    Op,
    /// Invalid element type for the operation.
    Type,
    /// Invalid count.
    Count,
    /// Invalid info key or value.
    Info,
    /// Invalid argument of another kind.
    Arg,
    /// A peer process failed (died or left the job) while it was needed.
    ProcFailed,
    /// Operating-system or transport error.
    Other,
    /// Internal error: a bug in onesided.
    Intern,
}

impl ErrorClass {
    /// The MPI name of the class, e.g. `MPI_ERR_RMA_SYNC`.
    pub fn mpi_name(self) -> &'static str {
        match self {
            ErrorClass::Win => "MPI_ERR_WIN",
            ErrorClass::Base => "MPI_ERR_BASE",
            ErrorClass::Size => "MPI_ERR_SIZE",
            ErrorClass::Disp => "MPI_ERR_DISP",
            ErrorClass::LockType => "MPI_ERR_LOCKTYPE",
            ErrorClass::Assert => "MPI_ERR_ASSERT",
            ErrorClass::RmaSync => "MPI_ERR_RMA_SYNC",
            ErrorClass::RmaRange => "MPI_ERR_RMA_RANGE",
            ErrorClass::RmaAttach => "MPI_ERR_RMA_ATTACH",
            ErrorClass::RmaShared => "MPI_ERR_RMA_SHARED",
            ErrorClass::RmaFlavor => "MPI_ERR_RMA_FLAVOR",
            ErrorClass::NoMem => "MPI_ERR_NO_MEM",
            ErrorClass::Rank => "MPI_ERR_RANK",
            ErrorClass::Group => "MPI_ERR_GROUP",
            ErrorClass::Op => "MPI_ERR_OP",
            ErrorClass::Type => "MPI_ERR_TYPE",
            ErrorClass::Count => "MPI_ERR_COUNT",
            ErrorClass::Info => "MPI_ERR_INFO",
            ErrorClass::Arg => "MPI_ERR_ARG",
            ErrorClass::ProcFailed => "MPI_ERR_PROC_FAILED",
            ErrorClass::Other => "MPI_ERR_OTHER",
            ErrorClass::Intern => "MPI_ERR_INTERN",
        }
    }
}

/// Every class, in a fixed order: the position is the class's number on the wire.
const ALL: [ErrorClass; 22] = [
    ErrorClass::Other,
    ErrorClass::Win,
    ErrorClass::Base,
    ErrorClass::Size,
    ErrorClass::Disp,
    ErrorClass::LockType,
    ErrorClass::Assert,
    ErrorClass::RmaSync,
    ErrorClass::RmaRange,
    ErrorClass::RmaAttach,
    ErrorClass::RmaShared,
    ErrorClass::RmaFlavor,
    ErrorClass::NoMem,
    ErrorClass::Rank,
    ErrorClass::Group,
    ErrorClass::Op,
    ErrorClass::Type,
    ErrorClass::Count,
    ErrorClass::Info,
    ErrorClass::Arg,
    ErrorClass::ProcFailed,
    ErrorClass::Intern,
];

impl ErrorClass {
    /// The class as a number, to tell other ranks about an error.
    pub(crate) fn to_wire(self) -> u64 {
        ALL.iter().position(|c| *c == self).unwrap_or(0) as u64
    }

    /// The class of a number from [`ErrorClass::to_wire`] (MPI_ERR_OTHER if unknown).
    pub(crate) fn from_wire(n: u64) -> ErrorClass {
        ALL.get(n as usize).copied().unwrap_or(ErrorClass::Other)
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mpi_name())
    }
}

/// An error of onesided: an MPI error class and a message saying what went wrong, and the
/// underlying error where there is one ([`std::error::Error::source`]). `Debug` prints the
/// same as `Display`, so that `fn main() -> onesided::Result<()>` reports it readably.
#[derive(Clone)]
pub struct Error {
    class: ErrorClass,
    msg: String,
    /// The MPI call the user made, and the rank (in the call's communicator or window group)
    /// that made it; set where the call returns.
    call: Option<&'static str>,
    rank: Option<usize>,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl PartialEq for Error {
    /// Errors are equal when class and message are (the source is part of the message; the call
    /// and rank say where it was returned, not what it is).
    fn eq(&self, other: &Error) -> bool {
        self.class == other.class && self.msg == other.msg
    }
}

impl Eq for Error {}

impl Error {
    /// An error of `class` described by `msg`.
    pub fn new(class: ErrorClass, msg: impl Into<String>) -> Error {
        Error {
            class,
            msg: msg.into(),
            call: None,
            rank: None,
            source: None,
        }
    }

    /// This error as returned by `call` (its MPI name, e.g. `MPI_Put`) on `rank`. The outermost
    /// call wins: a call made inside another one is not what the user called.
    pub(crate) fn at(mut self, rank: Option<usize>, call: &'static str) -> Error {
        self.call = Some(call);
        self.rank = rank.or(self.rank);
        self
    }

    /// This error, caused by `source` (returned by [`std::error::Error::source`]).
    pub(crate) fn caused_by(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        self.source = Some(Arc::new(source));
        self
    }

    /// The MPI error class.
    pub fn class(&self) -> ErrorClass {
        self.class
    }

    /// The message, without the class, the call and the rank.
    pub fn message(&self) -> &str {
        &self.msg
    }

    /// The MPI name of the call that returned this error (`MPI_Put`, `MPI_Win_fence`, ...).
    pub fn call(&self) -> Option<&'static str> {
        self.call
    }

    /// The rank that made the call, in the call's communicator or window group.
    pub fn rank(&self) -> Option<usize> {
        self.rank
    }

    /// An operating-system error while doing `what`.
    pub fn os(what: &str, err: std::io::Error) -> Error {
        let class = match (err.raw_os_error(), err.kind()) {
            (Some(libc::ENOMEM | libc::ENOSPC), _) => ErrorClass::NoMem,
            (_, std::io::ErrorKind::OutOfMemory) => ErrorClass::NoMem,
            _ => ErrorClass::Other,
        };
        Error::new(class, format!("{what}: {err}")).caused_by(err)
    }
}

impl fmt::Display for Error {
    /// `MPI_ERR_RMA_SYNC: rank 1, MPI_Put: ...`: the class, where it was returned, the message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.class)?;
        match (self.rank, self.call) {
            (Some(rank), Some(call)) => write!(f, "rank {rank}, {call}: ")?,
            (None, Some(call)) => write!(f, "{call}: ")?,
            (Some(rank), None) => write!(f, "rank {rank}: ")?,
            (None, None) => {}
        }
        f.write_str(&self.msg)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<onesided_shm::OutOfRange> for Error {
    /// An access outside window or control memory: MPI_ERR_RMA_RANGE.
    fn from(r: onesided_shm::OutOfRange) -> Error {
        Error::new(
            ErrorClass::RmaRange,
            format!(
                "{} bytes at byte offset {} outside {} bytes of window memory",
                r.len, r.offset, r.limit
            ),
        )
    }
}

/// Result of onesided calls.
pub type Result<T> = std::result::Result<T, Error>;

/// Runs the body of the user's call `call` (its MPI name) made by `rank`, naming both in its
/// error.
#[inline(always)]
pub(crate) fn in_call<R>(
    rank: Option<usize>,
    call: &'static str,
    body: impl FnOnce() -> Result<R>,
) -> Result<R> {
    body().map_err(|e| e.at(rank, call))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_reads_like_display_and_os_errors_keep_their_source() {
        let e = Error::new(ErrorClass::RmaSync, "put outside an epoch");
        assert_eq!(format!("{e:?}"), "MPI_ERR_RMA_SYNC: put outside an epoch");
        assert_eq!(format!("{e:?}"), e.to_string());
        assert!(std::error::Error::source(&e).is_none());
        let io = std::io::Error::from_raw_os_error(libc::ENOMEM);
        let e = Error::os("mapping the segment", io);
        assert_eq!(e.class(), ErrorClass::NoMem);
        let source = std::error::Error::source(&e).expect("the OS error");
        assert_eq!(
            source
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.raw_os_error()),
            Some(libc::ENOMEM)
        );
        assert_eq!(e.clone(), e);
        fn send_sync<T: Send + Sync + 'static>(_: &T) {}
        send_sync(&e);
    }

    #[test]
    fn the_outermost_call_and_its_rank_are_named() {
        let e = Error::new(ErrorClass::RmaSync, "no access epoch to rank 0");
        let inner = e.clone().at(Some(1), "MPI_Win_flush_all");
        let outer = inner.at(None, "MPI_Win_free");
        assert_eq!(
            outer.to_string(),
            "MPI_ERR_RMA_SYNC: rank 1, MPI_Win_free: no access epoch to rank 0"
        );
        assert_eq!(
            (outer.call(), outer.rank()),
            (Some("MPI_Win_free"), Some(1))
        );
        assert_eq!(outer.message(), e.message());
        assert_eq!(outer, e);
    }

    #[test]
    fn every_class_survives_the_wire() {
        for c in ALL {
            assert_eq!(ErrorClass::from_wire(c.to_wire()), c);
        }
        assert_eq!(ErrorClass::from_wire(999), ErrorClass::Other);
    }
}
