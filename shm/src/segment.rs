//! POSIX shared-memory segments: `shm_open` + `mmap(MAP_SHARED)`.
//!
//! Names are given without the leading slash and live in `/dev/shm`; segments are created with
//! mode 0600 and `O_EXCL`, so a name can only be created once. A job unlinks a segment as soon as
//! every rank that needs it has mapped it: the mapping outlives the name.

use std::ffi::CString;
use std::io;
use std::ptr::NonNull;

/// A mapped shared-memory segment. Unmapped on drop; the name is not unlinked on drop.
#[derive(Debug)]
pub struct Segment {
    ptr: NonNull<u8>,
    len: usize,
    name: String,
}

// SAFETY: the mapping is plain shared memory; all access goes through `Mem`, whose methods use
// raw-pointer copies and atomics, so sharing the handle between threads is sound.
unsafe impl Send for Segment {}
// SAFETY: as above; `Segment` itself exposes no `&mut` to the mapped bytes.
unsafe impl Sync for Segment {}

fn c_name(name: &str) -> io::Result<CString> {
    if name.contains('/') || name.is_empty() || name.len() > 200 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad segment name {name:?}"),
        ));
    }
    CString::new(format!("/{name}")).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

impl Segment {
    /// Create the segment `name` of `len` bytes (zero-filled), failing if it exists.
    pub fn create(name: &str, len: usize) -> io::Result<Segment> {
        Segment::map(name, len, libc::O_CREAT | libc::O_EXCL | libc::O_RDWR)
    }

    /// Map the existing segment `name`, which must be at least `len` bytes long.
    pub fn open(name: &str, len: usize) -> io::Result<Segment> {
        Segment::map(name, len, libc::O_RDWR)
    }

    /// Remove the name from /dev/shm; existing mappings stay valid.
    pub fn unlink(name: &str) -> io::Result<()> {
        let c = c_name(name)?;
        // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
        let rc = unsafe { libc::shm_unlink(c.as_ptr()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn map(name: &str, len: usize, flags: i32) -> io::Result<Segment> {
        let c = c_name(name)?;
        // A zero-length mapping is invalid; map one page so that every segment has a base.
        let map_len = len.max(1);
        // SAFETY: `c` is a valid C string; the returned fd is checked before use.
        let fd = unsafe { libc::shm_open(c.as_ptr(), flags | libc::O_CLOEXEC, 0o600) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let result = Segment::map_fd(fd, map_len, flags & libc::O_CREAT != 0);
        // SAFETY: `fd` is an open descriptor we own; the mapping does not need it.
        unsafe { libc::close(fd) };
        if result.is_err() && flags & libc::O_CREAT != 0 {
            let _ = Segment::unlink(name);
        }
        let ptr = result?;
        Ok(Segment {
            ptr,
            len,
            name: name.to_owned(),
        })
    }

    fn map_fd(fd: i32, len: usize, create: bool) -> io::Result<NonNull<u8>> {
        if create {
            // SAFETY: plain syscall on an fd we own.
            if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
                return Err(io::Error::last_os_error());
            }
        } else {
            // SAFETY: `st` is a properly sized out-parameter for fstat.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: `fd` is open and `st` is writable.
            if unsafe { libc::fstat(fd, &mut st) } != 0 {
                return Err(io::Error::last_os_error());
            }
            if (st.st_size as usize) < len {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "segment shorter than expected",
                ));
            }
        }
        // SAFETY: a fresh shared mapping of `len` bytes of the segment; the kernel picks the address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap returned null"))
    }

    /// Length in bytes as requested at creation.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the segment has length 0.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segment's name (without the leading slash).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len.max(1)` is exactly the mapping made in `map`; no `Mem` outlives the
        // segment because every `Mem` over it holds an `Arc<Segment>`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len.max(1)) };
    }
}
