//! Staging buffers: registered memory that this side's operations move data through, so that a
//! caller's buffer is free again when a put returns and never registered (nor pinned) itself.
//! Small transfers and atomic results take a slot of one registered arena; larger ones a buffer
//! of their own, registered when first needed and kept for reuse (a few, up to a byte budget).

use crate::error::VerbsError;
use crate::queue::Pd;
use crate::region::Mr;
use onesided_shm::Mem;
use std::sync::Arc;

/// Bytes of one arena slot: reads, writes too large to go inline, and atomic results up to this
/// size take a slot.
pub(crate) const SLOT: usize = 4096;
/// Slots of the arena (1 MiB registered at start).
const SLOTS: usize = 256;
/// Large buffers kept registered for reuse once their operations retired, and their byte budget.
const KEEP: usize = 8;
const KEEP_BYTES: usize = 64 << 20;

/// A large buffer with its registration.
pub(crate) struct Big {
    mr: Mr,
    mem: Mem<'static>,
}

/// What an operation moves its data through.
pub(crate) enum Buf {
    /// A slot of the arena.
    Slot(u32),
    /// A large buffer.
    Big(Big),
}

/// The arena and the kept large buffers.
pub(crate) struct Stage {
    pd: Arc<Pd>,
    mr: Mr,
    arena: Mem<'static>,
    free: Vec<u32>,
    kept: Vec<Big>,
}

impl Stage {
    pub(crate) fn new(pd: Arc<Pd>) -> Result<Stage, VerbsError> {
        let arena = Mem::alloc(SLOT * SLOTS, 4096)
            .ok_or_else(|| VerbsError::new("allocating the staging arena", libc::ENOMEM))?;
        // SAFETY: the arena is owned by the stage and dropped after its registration.
        let mr = unsafe { Mr::new(pd.clone(), arena.addr(), arena.len(), false)? };
        Ok(Stage {
            pd,
            mr,
            arena,
            free: (0..SLOTS as u32).rev().collect(),
            kept: Vec::new(),
        })
    }

    /// A buffer of at least `len` bytes: a slot where `len` fits one and one is free, else a
    /// large buffer (a kept one, or a new registration).
    #[inline]
    pub(crate) fn take(&mut self, len: usize) -> Result<Buf, VerbsError> {
        if len <= SLOT
            && let Some(i) = self.free.pop()
        {
            return Ok(Buf::Slot(i));
        }
        self.take_big(len)
    }

    #[inline(never)]
    fn take_big(&mut self, len: usize) -> Result<Buf, VerbsError> {
        if let Some(i) = self.kept.iter().position(|b| b.mem.len() >= len) {
            return Ok(Buf::Big(self.kept.swap_remove(i)));
        }
        let mem = Mem::alloc(len, 4096).ok_or_else(|| {
            VerbsError::new(format!("allocating {len} staging bytes"), libc::ENOMEM)
        })?;
        // SAFETY: the memory is owned by the buffer and dropped after its registration.
        let mr = unsafe { Mr::new(self.pd.clone(), mem.addr(), mem.len(), false)? };
        Ok(Buf::Big(Big { mr, mem }))
    }

    /// A buffer back, for reuse.
    #[inline]
    pub(crate) fn give(&mut self, buf: Buf) {
        match buf {
            Buf::Slot(i) => self.free.push(i),
            Buf::Big(b) => self.keep(b),
        }
    }

    #[inline(never)]
    fn keep(&mut self, b: Big) {
        self.kept.push(b);
        self.kept.sort_by_key(|b| b.mem.len());
        while self.kept.len() > KEEP
            || self.kept.iter().map(|b| b.mem.len()).sum::<usize>() > KEEP_BYTES
        {
            self.kept.remove(0);
        }
    }

    /// The address and local key of `buf`.
    #[inline]
    pub(crate) fn at(&self, buf: &Buf) -> (usize, u32) {
        match buf {
            Buf::Slot(i) => (self.arena.addr() + *i as usize * SLOT, self.mr.lkey()),
            Buf::Big(b) => (b.mem.addr(), b.mr.lkey()),
        }
    }

    /// The memory `buf` lies in and its offset there, for `len` bytes from its start (a view of
    /// its own would cost a reference count on every copy).
    #[inline]
    fn place<'s>(&'s self, buf: &'s Buf, len: usize) -> (&'s Mem<'static>, usize) {
        let (whole, off, room) = match buf {
            Buf::Slot(i) => (&self.arena, *i as usize * SLOT, SLOT),
            Buf::Big(b) => (&b.mem, 0, b.mem.len()),
        };
        assert!(len <= room, "a staging buffer holds what it was taken for");
        (whole, off)
    }

    /// Copy `src` into `buf`.
    #[inline]
    pub(crate) fn fill(&self, buf: &Buf, src: &[u8]) {
        let (whole, off) = self.place(buf, src.len());
        whole
            .write(off, src)
            .expect("a staging buffer holds what it was taken for");
    }

    /// Copy the first `dst.len()` bytes of `buf` out.
    #[inline]
    pub(crate) fn drain(&self, buf: &Buf, dst: &mut [u8]) {
        let (whole, off) = self.place(buf, dst.len());
        whole
            .read(off, dst)
            .expect("a staging buffer holds what it was taken for");
    }
}
