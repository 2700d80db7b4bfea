//! The attach table of a dynamic window: which memory a rank has attached, as the other ranks
//! learn it.
//!
//! Each rank keeps its table in its control block ([`table_offset`]): a generation word bumped
//! after every attach and detach, then [`MAX_ATTACH`] slots of five words (address, length, the
//! transport's base and key, and a check word). The owner writes a slot's four words first and
//! its check last on attach, and clears the check first on detach; an origin reads the table
//! with one copy (a load over shared memory, an RDMA read over the fabric), which is not atomic
//! as a whole: a slot whose check does not match its words was read while it changed, and the
//! origin reads again. An origin keeps what it read ([`View`]) and reads again on a miss, or
//! when memory may have been detached since ([`View::holds`]): where the table is mapped, when
//! its generation moved; elsewhere, when the target's detach notice in the origin's own control
//! block is newer than the copy (a detach writes it to those origins before it returns, so no
//! access after the detach uses the old copy, and none pays a round trip to check).
//!
//! The owner's side ([`Slots`]) decides where an attach goes and what a detach clears.
//!
//! # MPI-4.1: 12.2.4 (MPI_WIN_ATTACH, MPI_WIN_DETACH)

use crate::error::{Error, ErrorClass, Result};
use crate::protocol::layout;

/// How many memory regions one rank may have attached at once (MPI_ERR_RMA_ATTACH beyond).
pub const MAX_ATTACH: usize = 64;
/// Bytes of one slot.
const SLOT: usize = 40;
/// Where the slots start in the table, after the generation word's line.
const SLOTS: usize = 64;
/// Bytes of the whole table (origins read it with one copy).
pub const TABLE_LEN: usize = SLOTS + MAX_ATTACH * SLOT;

const _: () = assert!(TABLE_LEN <= layout::PAGE);

/// The offset of the attach table in a control block of a window of `n` ranks: the page after
/// the post counters.
pub fn table_offset(n: usize) -> usize {
    layout::ctrl_block(n) - layout::PAGE
}

/// One attached region, as origins address it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Entry {
    /// Address of the first byte in the owner's process (the displacement of that byte).
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// The address of the first byte in the transport's operations (fabric; 0 over shm).
    pub base: u64,
    /// The transport's remote key (fabric; 0 over shm).
    pub key: u64,
}

impl Entry {
    /// The offset into the region of `len` bytes at address `addr`, if they lie inside it.
    pub fn offset_of(&self, addr: u64, len: usize) -> Option<usize> {
        layout::offset_in(self.addr, self.len, addr, len as u64).map(|off| off as usize)
    }

    /// The check word of a used slot holding this entry: never 0 (0 marks a free slot).
    fn check(&self) -> u64 {
        let mixed = self.addr
            ^ self.len.rotate_left(16)
            ^ self.base.rotate_left(32)
            ^ self.key.rotate_left(48);
        mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
    }

    /// The slot bytes of this entry: its four words, then the check.
    pub fn encode(&self) -> [u8; SLOT] {
        let mut b = [0u8; SLOT];
        let words = [self.addr, self.len, self.base, self.key, self.check()];
        for (w, chunk) in words.iter().zip(b.chunks_exact_mut(8)) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        b
    }
}

/// The offset, within the table, of slot `slot`'s words and of its check word.
pub fn slot_offset(slot: usize) -> (usize, usize) {
    let at = SLOTS + slot * SLOT;
    (at, at + SLOT - 8)
}

/// What an origin read of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// The generation and the attached regions.
    Table(View),
    /// A slot changed while it was read: read again.
    Torn,
}

/// An origin's copy of a target's table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct View {
    /// The generation the copy was read at.
    pub generation: u64,
    /// The regions attached then.
    pub entries: Vec<Entry>,
}

/// The entry of `entries` holding `len` bytes at `addr`, and their offset in it.
fn find_in<'e>(
    entries: impl IntoIterator<Item = &'e Entry>,
    addr: u64,
    len: usize,
) -> Option<(Entry, usize)> {
    entries
        .into_iter()
        .find_map(|e| e.offset_of(addr, len).map(|off| (*e, off)))
}

/// What an origin learnt, just before an access, of a target's table since it copied it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// The table's generation now (a load, where the table is in mapped memory): any change
    /// means the copy may be out of date.
    Generation(u64),
    /// The generation at the target's last detach, from the notice it wrote into the origin's
    /// control block before that detach returned ([`crate::protocol::layout::notice_slot`]; 0:
    /// none). Memory attached after the copy needs no notice: the copy misses it and the
    /// origin reads the table again.
    Detached(u64),
}

impl View {
    /// The region holding `len` bytes at `addr`, and their offset in it.
    pub fn find(&self, addr: u64, len: usize) -> Option<(Entry, usize)> {
        find_in(&self.entries, addr, len)
    }

    /// Whether this copy may still be used, given what changed `since` it was read: no memory
    /// in it has been detached since.
    pub fn holds(&self, since: Since) -> bool {
        match since {
            Since::Generation(g) => g == self.generation,
            Since::Detached(g) => g <= self.generation,
        }
    }
}

fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Decode a table read with one copy (`TABLE_LEN` bytes).
pub fn decode(bytes: &[u8]) -> Read {
    let mut entries = Vec::new();
    for slot in 0..MAX_ATTACH {
        let (at, check_at) = slot_offset(slot);
        let check = word(bytes, check_at);
        if check == 0 {
            continue;
        }
        let e = Entry {
            addr: word(bytes, at),
            len: word(bytes, at + 8),
            base: word(bytes, at + 16),
            key: word(bytes, at + 24),
        };
        if e.check() != check {
            return Read::Torn;
        }
        entries.push(e);
    }
    Read::Table(View {
        generation: word(bytes, 0),
        entries,
    })
}

/// The owner's record of its slots.
#[derive(Debug, Clone, Default)]
pub struct Slots {
    used: Vec<Option<Entry>>,
}

impl Slots {
    /// The slot a new attach of `entry` takes, or MPI_ERR_RMA_ATTACH when the table is full.
    pub fn attach(&mut self, entry: Entry) -> Result<usize> {
        let slot = match self.used.iter().position(Option::is_none) {
            Some(free) => free,
            None if self.used.len() < MAX_ATTACH => {
                self.used.push(None);
                self.used.len() - 1
            }
            None => {
                return Err(Error::new(
                    ErrorClass::RmaAttach,
                    format!("{MAX_ATTACH} memory regions are attached already"),
                ));
            }
        };
        self.used[slot] = Some(entry);
        Ok(slot)
    }

    /// The slot and entry of the region attached at `addr`, freed, or MPI_ERR_RMA_ATTACH when
    /// no region starts there.
    pub fn detach(&mut self, addr: u64) -> Result<(usize, Entry)> {
        let found = self
            .used
            .iter()
            .position(|s| s.is_some_and(|e| e.addr == addr));
        match found.and_then(|slot| Some((slot, self.used[slot].take()?))) {
            Some(hit) => Ok(hit),
            None => Err(Error::new(
                ErrorClass::RmaAttach,
                format!("no memory attached at address {addr:#x}"),
            )),
        }
    }

    /// The region holding `len` bytes at `addr` (the owner's own accesses), and their offset.
    pub fn find(&self, addr: u64, len: usize) -> Option<(Entry, usize)> {
        find_in(self.used.iter().flatten(), addr, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(addr: u64, len: u64) -> Entry {
        Entry {
            addr,
            len,
            base: addr,
            key: 7,
        }
    }

    /// A table as the owner lays it out, with `slots` written and generation `generation`.
    fn table(generation: u64, slots: &[(usize, Entry)]) -> Vec<u8> {
        let mut b = vec![0u8; TABLE_LEN];
        b[..8].copy_from_slice(&generation.to_le_bytes());
        for (slot, e) in slots {
            let (at, _) = slot_offset(*slot);
            b[at..at + SLOT].copy_from_slice(&e.encode());
        }
        b
    }

    #[test]
    fn origins_find_what_was_attached() {
        let (a, b) = (entry(0x1000, 64), entry(0x9000, 8));
        let Read::Table(view) = decode(&table(4, &[(0, a), (5, b)])) else {
            panic!("torn");
        };
        assert_eq!(view.generation, 4);
        assert_eq!(view.find(0x1000, 64), Some((a, 0)));
        assert_eq!(view.find(0x1010, 8), Some((a, 16)));
        assert_eq!(view.find(0x9000, 8), Some((b, 0)));
        // Past the end, straddling, before the start.
        assert_eq!(view.find(0x1039, 8), None);
        assert_eq!(view.find(0x9004, 8), None);
        assert_eq!(view.find(0xfff, 1), None);
        assert_eq!(view.find(u64::MAX, 2), None);
    }

    #[test]
    fn a_slot_read_while_it_changed_is_torn() {
        let mut t = table(1, &[(3, entry(0x1000, 64))]);
        let (at, _) = slot_offset(3);
        // The length changed after the check word was read.
        t[at + 8] ^= 1;
        assert_eq!(decode(&t), Read::Torn);
        // A cleared check word is a free slot, whatever the other words hold.
        let (_, check) = slot_offset(3);
        t[check..check + 8].fill(0);
        assert_eq!(
            decode(&t),
            Read::Table(View {
                generation: 1,
                entries: vec![]
            })
        );
    }

    #[test]
    fn slots_are_reused_and_limited() {
        let mut s = Slots::default();
        for i in 0..MAX_ATTACH as u64 {
            assert_eq!(s.attach(entry(i * 0x1000, 8)).unwrap(), i as usize);
        }
        let full = s.attach(entry(0xfff_0000, 8)).unwrap_err();
        assert_eq!(full.class(), ErrorClass::RmaAttach);
        assert_eq!(s.detach(0x5000).unwrap(), (5, entry(0x5000, 8)));
        assert_eq!(s.find(0x5000, 1), None);
        assert_eq!(s.find(0x6004, 4), Some((entry(0x6000, 8), 4)));
        assert_eq!(s.detach(0x5000).unwrap_err().class(), ErrorClass::RmaAttach);
        assert_eq!(s.attach(entry(0xfff_0000, 8)).unwrap(), 5);
    }

    #[test]
    fn a_copy_holds_until_memory_in_it_is_detached() {
        let copy = View {
            generation: 4,
            entries: vec![entry(0x5000, 8)],
        };
        // Over loads: any change of the generation, attach or detach, drops the copy.
        assert!(copy.holds(Since::Generation(4)));
        assert!(!copy.holds(Since::Generation(5)));
        // Over notices: no detach, or a detach the copy was read after, keeps it; a later one
        // drops it.
        assert!(copy.holds(Since::Detached(0)));
        assert!(copy.holds(Since::Detached(3)));
        assert!(copy.holds(Since::Detached(4)));
        assert!(!copy.holds(Since::Detached(5)));
    }

    #[test]
    fn the_table_fits_its_page() {
        for n in [1, 2, 512, 513] {
            assert!(layout::notice_slot(n, 0) >= layout::posted_slot(n - 1) + 8);
            assert!(table_offset(n) >= layout::notice_slot(n, n - 1) + 8);
            assert_eq!(table_offset(n) + layout::PAGE, layout::ctrl_block(n));
        }
    }
}
