//! POSIX shared-memory segments: `shm_open` + `mmap(MAP_SHARED)`.
//!
//! Names are given without the leading slash and live in `/dev/shm`; segments are created with
//! mode 0600 and `O_EXCL`, so a name can only be created once. A job unlinks a segment as soon as
//! every rank that needs it has mapped it: the mapping outlives the name.
//!
//! The mapping is a [`memmap2::MmapRaw`], which hands out raw pointers only: no reference to the
//! shared bytes is ever formed, they are reached through [`crate::Mem`]. A mapping starts on a
//! page; a larger alignment (up to [`MAX_ALIGN`]) needs the mapping placed at a chosen address,
//! which no safe mapping API offers: a reservation of address space that the file is mapped
//! into (`MAP_FIXED`), made in the crate's private `aligned` module.

use std::fs::File;
use std::io;
use std::ptr::NonNull;

use memmap2::{MmapOptions, MmapRaw};
use rustix::shm::{Mode, OFlags};

use crate::aligned::AlignedMap;

/// The largest alignment a mapping may ask for: 1 GiB, the largest huge page of x86-64 and
/// AArch64.
pub const MAX_ALIGN: usize = 1 << 30;

/// A mapped shared-memory segment. Unmapped on drop; the name is not unlinked on drop.
#[derive(Debug)]
pub struct Segment {
    map: Mapping,
    len: usize,
    name: String,
}

/// Where the segment is mapped: where the kernel chose (page alignment), or placed at a larger
/// alignment.
#[derive(Debug)]
enum Mapping {
    Paged(MmapRaw),
    Aligned(AlignedMap),
}

/// The identity of an open file (device and inode), to tell it from another file that later
/// got the same descriptor number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
}

impl FileId {
    /// The identity of `file`.
    pub fn of(file: &File) -> io::Result<FileId> {
        let st = rustix::fs::fstat(file)?;
        Ok(FileId {
            dev: st.st_dev,
            ino: st.st_ino,
        })
    }
}

/// An error unless `align` is a power of two up to [`MAX_ALIGN`].
fn check_align(align: usize) -> io::Result<()> {
    if !align.is_power_of_two() || align > MAX_ALIGN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("alignment {align} is not a power of two up to {MAX_ALIGN}"),
        ));
    }
    Ok(())
}

/// The shared-memory object name of segment `name`: `/name`.
fn shm_name(name: &str) -> io::Result<String> {
    if name.contains('/') || name.contains('\0') || name.is_empty() || name.len() > 200 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad segment name {name:?}"),
        ));
    }
    Ok(format!("/{name}"))
}

/// Mappings up to this many bytes are populated when they are made, so that the first accesses
/// to small segments (control blocks, benchmark buffers) fault nothing; larger ones get each
/// page at its first use, so that a large window costs neither time nor memory until it is
/// used (an 8 GiB `allocate_shared` took 20 s and 8 GiB of memory per rank when every page was
/// populated at creation).
pub const POPULATE_MAX: usize = 64 << 20;

/// Fails with [`io::ErrorKind::OutOfMemory`] where the file system holding the named segment
/// `file` (the tmpfs of /dev/shm) has fewer than `len` bytes free (memory files have no such
/// limit): pages are given at first use, and a store
/// to a page the file system cannot give kills the process (SIGBUS), so a segment larger than
/// the room left is refused when it is made. Another process may take the room later; this
/// check only refuses what cannot fit now.
fn check_room(file: &File, len: usize) -> io::Result<()> {
    let fs = rustix::fs::fstatvfs(file)?;
    let free = fs.f_bavail.saturating_mul(fs.f_frsize);
    if len as u64 > free {
        return Err(io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!("{len} bytes asked for, {free} free in the shared-memory file system"),
        ));
    }
    Ok(())
}

impl Segment {
    /// Create the segment `name` of `len` bytes (zero-filled), failing if it exists, and map it
    /// at an address that is a multiple of `align` (a power of two up to [`MAX_ALIGN`]).
    pub fn create(name: &str, len: usize, align: usize) -> io::Result<Segment> {
        Segment::map(
            name,
            len,
            align,
            OFlags::CREATE | OFlags::EXCL | OFlags::RDWR,
        )
    }

    /// Map the existing segment `name`, which must be at least `len` bytes long, at an address
    /// that is a multiple of `align` (a power of two up to [`MAX_ALIGN`]).
    pub fn open(name: &str, len: usize, align: usize) -> io::Result<Segment> {
        Segment::map(name, len, align, OFlags::RDWR)
    }

    /// Remove the name from /dev/shm; existing mappings stay valid.
    pub fn unlink(name: &str) -> io::Result<()> {
        Ok(rustix::shm::unlink(shm_name(name)?)?)
    }

    fn map(name: &str, len: usize, align: usize, flags: OFlags) -> io::Result<Segment> {
        check_align(align)?;
        let create = flags.contains(OFlags::CREATE);
        // The descriptor is close-on-exec; the mapping does not need it once made.
        let file = File::from(rustix::shm::open(
            shm_name(name)?,
            flags,
            Mode::RUSR | Mode::WUSR,
        )?);
        // A zero-length mapping is invalid; map one page so that every segment has a base.
        let map_len = len.max(1);
        let result = match create {
            true => check_room(&file, map_len),
            false => Ok(()),
        }
        .and_then(|()| Segment::map_file(&file, map_len, align, create));
        if result.is_err() && create {
            let _ = Segment::unlink(name);
        }
        Ok(Segment {
            map: result?,
            len,
            name: name.to_owned(),
        })
    }

    /// A segment without a name: a memory file (`memfd_create`) of `len` bytes (zero-filled),
    /// mapped at a multiple of `align`; the file is returned open, so that other processes of
    /// the user can map it too ([`Segment::open_fd_of`]) while this one keeps it. Nothing is
    /// left behind when the last process unmaps it or exits.
    pub fn anonymous(len: usize, align: usize) -> io::Result<(Segment, File)> {
        check_align(align)?;
        let file = File::from(rustix::fs::memfd_create(
            "onesided-mem",
            rustix::fs::MemfdFlags::CLOEXEC,
        )?);
        let map = Segment::map_file(&file, len.max(1), align, true)?;
        let seg = Segment {
            map,
            len,
            name: String::new(),
        };
        Ok((seg, file))
    }

    /// Map the memory file that process `pid` holds open as descriptor `fd` (a segment made by
    /// [`Segment::anonymous`] there), which must be the file `id` (a descriptor number can be
    /// reused for another file) and at least `len` bytes long, at a multiple of `align`. The
    /// kernel checks that this process may trace `pid` (the same right cross-memory attach
    /// needs).
    pub fn open_fd_of(
        pid: u32,
        fd: i32,
        len: usize,
        align: usize,
        id: FileId,
    ) -> io::Result<Segment> {
        check_align(align)?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/fd/{fd}"))?;
        if FileId::of(&file)? != id {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("descriptor {fd} of process {pid} is another file now"),
            ));
        }
        let map = Segment::map_file(&file, len.max(1), align, false)?;
        Ok(Segment {
            map,
            len,
            name: String::new(),
        })
    }

    fn map_file(file: &File, len: usize, align: usize, create: bool) -> io::Result<Mapping> {
        if create {
            file.set_len(len as u64)?;
        } else if file.metadata()?.len() < len as u64 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "segment shorter than expected",
            ));
        }
        let populate = len <= POPULATE_MAX;
        if align <= rustix::param::page_size() {
            let mut options = MmapOptions::new();
            options.len(len);
            if populate {
                options.populate();
            }
            let map = options.map_raw(file)?;
            if map.as_ptr().is_null() {
                return Err(io::Error::other("mmap returned null"));
            }
            return Ok(Mapping::Paged(map));
        }
        AlignedMap::new(file, len, align, populate).map(Mapping::Aligned)
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
        match &self.map {
            Mapping::Paged(map) => {
                NonNull::new(map.as_mut_ptr()).expect("checked to be non-null when mapped")
            }
            Mapping::Aligned(map) => map.ptr(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Mem;
    use std::sync::Arc;

    #[test]
    #[cfg_attr(miri, ignore = "shm_open and mmap of a descriptor are beyond Miri")]
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

    /// Bytes the shared-memory file system holds for segment `name`.
    fn held(name: &str) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(format!("/dev/shm/{name}"))
            .unwrap()
            .blocks()
            * 512
    }

    #[test]
    #[cfg_attr(miri, ignore = "shm_open and mmap of a descriptor are beyond Miri")]
    fn small_segments_are_populated_large_ones_filled_by_use() {
        let name = format!("onesided-test-populate-{}", std::process::id());
        for align in [1, 1 << 21] {
            let small = Segment::create(&name, 16 * 4096, align).unwrap();
            assert!(
                held(&name) >= 16 * 4096,
                "every page at once (align {align})"
            );
            drop(small);
            Segment::unlink(&name).unwrap();

            let len = 2 * POPULATE_MAX;
            let large = Mem::from_segment(Arc::new(Segment::create(&name, len, align).unwrap()));
            assert_eq!(held(&name), 0, "no page before use (align {align})");
            large.write(len / 2, &[1; 8]).unwrap();
            let one = held(&name);
            assert!(one > 0 && one < 1 << 22, "the page written: {one} bytes");
            Segment::unlink(&name).unwrap();
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "shm_open and fstatvfs are beyond Miri")]
    fn a_segment_larger_than_the_room_left_is_refused() {
        let name = format!("onesided-test-room-{}", std::process::id());
        let e = Segment::create(&name, 1 << 50, 1).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::OutOfMemory, "{e}");
        assert!(
            e.to_string()
                .contains("free in the shared-memory file system"),
            "{e}"
        );
        assert!(
            !std::path::Path::new(&format!("/dev/shm/{name}")).exists(),
            "nothing left behind"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "memfd_create and mmap of a descriptor are beyond Miri")]
    fn anonymous_segments_are_mapped_again_through_proc() {
        use std::os::fd::AsRawFd;
        let (a, file) = Segment::anonymous(2 * 4096, 1 << 16).unwrap();
        assert!(a.name().is_empty());
        assert_eq!(a.ptr().as_ptr() as usize % (1 << 16), 0);
        let (pid, fd, id) = (
            std::process::id(),
            file.as_raw_fd(),
            FileId::of(&file).unwrap(),
        );
        let b = Segment::open_fd_of(pid, fd, 2 * 4096, 1, id).unwrap();
        let (a, b) = (
            Mem::from_segment(Arc::new(a)),
            Mem::from_segment(Arc::new(b)),
        );
        a.write(4096 + 8, &[9; 8]).unwrap();
        let mut out = [0; 8];
        b.read(4096 + 8, &mut out).unwrap();
        assert_eq!(out, [9; 8]);
        let other = FileId {
            ino: id.ino + 1,
            ..id
        };
        let e = Segment::open_fd_of(pid, fd, 4096, 1, other).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let e = Segment::open_fd_of(pid, fd, 3 * 4096, 1, id).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    #[cfg_attr(miri, ignore = "shm_open and mmap of a descriptor are beyond Miri")]
    fn errors_name_what_went_wrong() {
        let name = format!("onesided-test-errors-{}", std::process::id());
        let kind = |r: io::Result<Segment>| r.unwrap_err().kind();
        assert_eq!(kind(Segment::open(&name, 8, 1)), io::ErrorKind::NotFound);
        let empty = Segment::create(&name, 0, 1).unwrap();
        assert!(empty.is_empty());
        assert_eq!(
            kind(Segment::create(&name, 8, 1)),
            io::ErrorKind::AlreadyExists
        );
        assert_eq!(
            kind(Segment::open(&name, 4096, 1)),
            io::ErrorKind::UnexpectedEof
        );
        assert!(Segment::open(&name, 1, 1 << 16).is_ok());
        Segment::unlink(&name).unwrap();
        assert_eq!(
            Segment::unlink(&name).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        for bad in ["", "a/b", "a\0b"] {
            assert_eq!(
                kind(Segment::create(bad, 8, 1)),
                io::ErrorKind::InvalidInput
            );
        }
    }
}
