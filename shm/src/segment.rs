//! POSIX shared-memory segments: `shm_open` + `mmap(MAP_SHARED)`.
//!
//! Names are given without the leading slash and live in `/dev/shm`; segments are created with
//! mode 0600 and `O_EXCL`, so a name can only be created once. A job unlinks a segment as soon as
//! every rank that needs it has mapped it: the mapping outlives the name.
//!
//! A mapping starts on a page; a larger alignment (up to [`MAX_ALIGN`]) is had by reserving
//! address space for the segment plus the alignment, mapping the segment over the aligned part
//! of the reservation and returning the rest.

use std::ffi::CString;
use std::io;
use std::ptr::NonNull;

/// The largest alignment a mapping may ask for: 1 GiB, the largest huge page of x86-64 and
/// AArch64.
pub const MAX_ALIGN: usize = 1 << 30;

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
    /// Create the segment `name` of `len` bytes (zero-filled), failing if it exists, and map it
    /// at an address that is a multiple of `align` (a power of two up to [`MAX_ALIGN`]).
    pub fn create(name: &str, len: usize, align: usize) -> io::Result<Segment> {
        Segment::map(
            name,
            len,
            align,
            libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
        )
    }

    /// Map the existing segment `name`, which must be at least `len` bytes long, at an address
    /// that is a multiple of `align` (a power of two up to [`MAX_ALIGN`]).
    pub fn open(name: &str, len: usize, align: usize) -> io::Result<Segment> {
        Segment::map(name, len, align, libc::O_RDWR)
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

    fn map(name: &str, len: usize, align: usize, flags: i32) -> io::Result<Segment> {
        if !align.is_power_of_two() || align > MAX_ALIGN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("alignment {align} is not a power of two up to {MAX_ALIGN}"),
            ));
        }
        let c = c_name(name)?;
        // A zero-length mapping is invalid; map one page so that every segment has a base.
        let map_len = len.max(1);
        // SAFETY: `c` is a valid C string; the returned fd is checked before use.
        let fd = unsafe { libc::shm_open(c.as_ptr(), flags | libc::O_CLOEXEC, 0o600) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let result = Segment::map_fd(fd, map_len, align, flags & libc::O_CREAT != 0);
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

    fn map_fd(fd: i32, len: usize, align: usize, create: bool) -> io::Result<NonNull<u8>> {
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
        let page = page_size();
        if align <= page {
            // SAFETY: a fresh shared mapping of `len` bytes of the segment; the kernel picks the
            // address, which is page-aligned.
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
            return mapped(p);
        }
        let span = len
            .checked_next_multiple_of(page)
            .and_then(|l| l.checked_add(align))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "segment too large"))?;
        // SAFETY: a fresh private reservation of `span` bytes, inaccessible and backed by nothing;
        // the kernel picks the address.
        let reserved = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                span,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        let start = mapped(reserved)?.as_ptr() as usize;
        let at = start.next_multiple_of(align);
        let end = at + len.next_multiple_of(page);
        // SAFETY: `[at, at + len)` lies inside the reservation made above, which nothing else
        // uses, so MAP_FIXED replaces only address space this function owns.
        let p = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED | libc::MAP_POPULATE,
                fd,
                0,
            )
        };
        let result = mapped(p);
        let (head, tail) = match result {
            Err(_) => ((start, start + span), (0, 0)),
            Ok(_) => ((start, at), (end, start + span)),
        };
        for (from, to) in [head, tail] {
            if to > from {
                // SAFETY: `[from, to)` is a part of the reservation that holds no mapping of the
                // segment: all of it when the segment could not be mapped, else the parts
                // before and after it (both on page boundaries).
                unsafe { libc::munmap(from as *mut libc::c_void, to - from) };
            }
        }
        result
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

/// The page size of this machine.
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096)
}

/// The address `mmap` returned, or the error it set.
fn mapped(p: *mut libc::c_void) -> io::Result<NonNull<u8>> {
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap returned null"))
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len.max(1)` is exactly the mapping made in `map` (the rest of an
        // aligned reservation was returned there); no `Mem` outlives the segment because every
        // `Mem` over it holds an `Arc<Segment>`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len.max(1)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Mem;
    use std::sync::Arc;

    #[test]
    fn mappings_start_at_the_alignment_asked_for() {
        let name = format!("onesided-test-align-{}", std::process::id());
        for align in [1, 4096, 1 << 16, 1 << 21] {
            let a = Segment::create(&name, 3 * 4096 + 8, align).unwrap();
            let b = Segment::open(&name, 3 * 4096 + 8, align).unwrap();
            Segment::unlink(&name).unwrap();
            for s in [&a, &b] {
                assert_eq!(s.ptr().as_ptr() as usize % align, 0, "align {align}");
            }
            let (a, b) = (
                Mem::from_segment(Arc::new(a)),
                Mem::from_segment(Arc::new(b)),
            );
            a.write(3 * 4096, &[7; 8]).unwrap();
            let mut out = [0; 8];
            b.read(3 * 4096, &mut out).unwrap();
            assert_eq!(out, [7; 8]);
        }
        for bad in [0, 3, MAX_ALIGN * 2] {
            let e = Segment::create(&name, 4096, bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        }
    }
}
