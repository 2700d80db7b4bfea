//! Info objects: string keys and values that tune a window (MPI_Info).
//!
//! # MPI-4.1: 10 (info objects), 12.2.1 (window info keys)

use crate::error::{Error, ErrorClass, Result};
use crate::protocol::layout::PAGE;
use onesided_shm::segment::MAX_ALIGN;
use std::collections::BTreeMap;

/// A set of (key, value) hints. Unknown keys are ignored, as MPI requires.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Info {
    entries: BTreeMap<String, String>,
}

impl Info {
    /// An empty info object (MPI_INFO_NULL behaves the same).
    pub fn new() -> Info {
        Info::default()
    }

    /// Set `key` to `value`.
    pub fn set(mut self, key: &str, value: &str) -> Info {
        self.entries.insert(key.to_owned(), value.to_owned());
        self
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(String::as_str)
    }

    /// Every (key, value), sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The boolean value of `key`, `default` when absent; MPI_ERR_INFO for anything but
    /// "true"/"false".
    pub(crate) fn flag(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            Some(v) => Err(Error::new(
                ErrorClass::Info,
                format!("info key {key} takes true or false, not {v:?}"),
            )),
        }
    }

    /// The alignment asked for by `mpi_minimum_memory_alignment` (1 when absent): a power of
    /// two up to 1 GiB, else MPI_ERR_INFO.
    ///
    /// # MPI-4.1: 9.2 (MPI_ALLOC_MEM), 12.2.2, 12.2.3
    pub(crate) fn alignment(&self) -> Result<usize> {
        const KEY: &str = "mpi_minimum_memory_alignment";
        let Some(v) = self.get(KEY) else {
            return Ok(1);
        };
        match v.trim().parse::<usize>() {
            Ok(a) if a.is_power_of_two() && a <= MAX_ALIGN => Ok(a),
            _ => Err(Error::new(
                ErrorClass::Info,
                format!("info key {KEY} takes a power of two up to {MAX_ALIGN}, not {v:?}"),
            )),
        }
    }
}

/// Which orderings of accumulates from one origin to the same target location a window keeps
/// (info key `accumulate_ordering`): bit 0 read-after-read, 1 read-after-write, 2
/// write-after-read, 3 write-after-write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AccOrdering(u8);

const ORDERINGS: [&str; 4] = ["rar", "raw", "war", "waw"];

impl AccOrdering {
    /// MPI's default: every ordering.
    pub(crate) const ALL: AccOrdering = AccOrdering(0b1111);

    fn parse(v: &str) -> Result<AccOrdering> {
        if v.trim() == "none" {
            return Ok(AccOrdering(0));
        }
        let mut bits = 0u8;
        for word in v.split(',').map(str::trim) {
            let bit = ORDERINGS.iter().position(|o| *o == word).ok_or_else(|| {
                Error::new(
                    ErrorClass::Info,
                    format!(
                        "info key accumulate_ordering takes none or a list of rar, raw, war, waw, not {v:?}"
                    ),
                )
            })?;
            bits |= 1 << bit;
        }
        Ok(AccOrdering(bits))
    }

    fn text(self) -> String {
        let on: Vec<&str> = (0..4)
            .filter(|b| self.0 & 1 << b != 0)
            .map(|b| ORDERINGS[b])
            .collect();
        match on.is_empty() {
            true => "none".to_owned(),
            false => on.join(","),
        }
    }

    /// Whether an accumulate that fetches nothing may be left in flight, completed by the next
    /// flush: when no later read or write of the same location must wait for it (neither
    /// read-after-write nor write-after-write asked for).
    pub(crate) fn writes_may_overtake(self) -> bool {
        self.0 & 0b1010 == 0
    }
}

/// `accumulate_ops` of `info`: whether `same_op`, `None` where absent; MPI_ERR_INFO for a value
/// it does not take.
fn same_op(info: &Info) -> Result<Option<bool>> {
    match info.get("accumulate_ops") {
        None => Ok(None),
        Some("same_op") => Ok(Some(true)),
        Some("same_op_no_op") => Ok(Some(false)),
        Some(v) => Err(Error::new(
            ErrorClass::Info,
            format!("info key accumulate_ops takes same_op or same_op_no_op, not {v:?}"),
        )),
    }
}

/// The window info keys onesided acts on, parsed at creation (the accumulate keys also by
/// `Window::set_info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WinHints {
    pub no_locks: bool,
    pub noncontig: bool,
    pub same_size: bool,
    pub same_disp_unit: bool,
    /// `mpi_minimum_memory_alignment`: the alignment asked for this rank's memory (1: none).
    pub alignment: usize,
    pub ordering: AccOrdering,
    /// `accumulate_ops` is `same_op` (not `same_op_no_op`): fixed at creation, where it takes
    /// effect only if every rank asks for it.
    pub same_op: bool,
    /// `mpi_accumulate_granularity` in bytes (0: none asked for): how much the emulated
    /// accumulate path updates per hold of the target's accumulate lock.
    pub granularity: usize,
}

impl WinHints {
    pub(crate) fn parse(info: &Info) -> Result<WinHints> {
        let defaults = WinHints {
            no_locks: info.flag("no_locks", false)?,
            noncontig: info.flag("alloc_shared_noncontig", false)?,
            same_size: info.flag("same_size", false)?,
            same_disp_unit: info.flag("same_disp_unit", false)?,
            alignment: info.alignment()?,
            ordering: AccOrdering::ALL,
            same_op: same_op(info)?.unwrap_or(false),
            granularity: 0,
        };
        defaults.update(info)
    }

    /// These hints with the accumulate keys of `info` applied (the keys `Window::set_info`
    /// changes: `accumulate_ops` is checked but stays as created); MPI_ERR_INFO for a value
    /// they do not take.
    pub(crate) fn update(self, info: &Info) -> Result<WinHints> {
        let ordering = match info.get("accumulate_ordering") {
            Some(v) => AccOrdering::parse(v)?,
            None => self.ordering,
        };
        same_op(info)?;
        let granularity = match info.get("mpi_accumulate_granularity") {
            None => self.granularity,
            Some(v) => v.trim().parse().map_err(|_| {
                Error::new(
                    ErrorClass::Info,
                    format!("info key mpi_accumulate_granularity takes a byte count, not {v:?}"),
                )
            })?,
        };
        Ok(WinHints {
            ordering,
            granularity,
            ..self
        })
    }

    /// Every supported key with the value in use (MPI_Win_get_info); the memory alignment only
    /// where the window `allocated` its memory (at least a page there).
    pub(crate) fn to_info(self, allocated: bool) -> Info {
        let b = |v: bool| if v { "true" } else { "false" };
        let info = match allocated {
            true => Info::new().set(
                "mpi_minimum_memory_alignment",
                &self.alignment.max(PAGE).to_string(),
            ),
            false => Info::new(),
        };
        let ops = match self.same_op {
            true => "same_op",
            false => "same_op_no_op",
        };
        info.set("no_locks", b(self.no_locks))
            .set("alloc_shared_noncontig", b(self.noncontig))
            .set("same_size", b(self.same_size))
            .set("same_disp_unit", b(self.same_disp_unit))
            .set("accumulate_ordering", &self.ordering.text())
            .set("accumulate_ops", ops)
            .set("mpi_accumulate_granularity", &self.granularity.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_reject_garbage() {
        let h = WinHints::parse(&Info::new().set("no_locks", "true").set("unknown", "x")).unwrap();
        assert!(h.no_locks && !h.noncontig);
        let e = WinHints::parse(&Info::new().set("alloc_shared_noncontig", "yes")).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Info);
        assert_eq!(h.to_info(false).get("no_locks"), Some("true"));
        assert_eq!(h.to_info(false).get("mpi_minimum_memory_alignment"), None);
    }

    #[test]
    fn accumulate_keys_parse_update_and_report() {
        let h = WinHints::parse(&Info::new()).unwrap();
        assert_eq!(h.ordering, AccOrdering::ALL);
        assert!(!h.ordering.writes_may_overtake());
        let i = h.to_info(false);
        assert_eq!(i.get("accumulate_ordering"), Some("rar,raw,war,waw"));
        assert_eq!(i.get("accumulate_ops"), Some("same_op_no_op"));
        let h = h
            .update(
                &Info::new()
                    .set("accumulate_ordering", "none")
                    .set("accumulate_ops", "same_op"),
            )
            .unwrap();
        assert!(
            h.ordering.writes_may_overtake() && !h.same_op,
            "ops fixed at creation"
        );
        assert_eq!(h.to_info(false).get("accumulate_ordering"), Some("none"));
        let created = Info::new().set("accumulate_ops", "same_op");
        assert!(WinHints::parse(&created).unwrap().same_op);
        let h = h
            .update(&Info::new().set("accumulate_ordering", "war, rar"))
            .unwrap();
        assert!(h.ordering.writes_may_overtake());
        assert_eq!(h.to_info(false).get("accumulate_ordering"), Some("rar,war"));
        let h = h
            .update(&Info::new().set("accumulate_ordering", "waw"))
            .unwrap();
        assert!(!h.ordering.writes_may_overtake());
        let h = h
            .update(&Info::new().set("mpi_accumulate_granularity", "64"))
            .unwrap();
        assert_eq!(
            h.to_info(false).get("mpi_accumulate_granularity"),
            Some("64")
        );
        for (k, v) in [
            ("accumulate_ordering", "rar,sometimes"),
            ("accumulate_ordering", ""),
            ("accumulate_ops", "any"),
            ("mpi_accumulate_granularity", "-1"),
        ] {
            let e = h.update(&Info::new().set(k, v)).unwrap_err();
            assert_eq!(e.class(), ErrorClass::Info, "{k}={v:?}");
        }
    }

    #[test]
    fn alignment_is_a_power_of_two_up_to_a_gibibyte() {
        let align = |v: &str| {
            Info::new()
                .set("mpi_minimum_memory_alignment", v)
                .alignment()
        };
        assert_eq!(Info::new().alignment().unwrap(), 1);
        assert_eq!(align("65536").unwrap(), 65536);
        assert_eq!(align("8").unwrap(), 8);
        assert_eq!(align("1073741824").unwrap(), 1 << 30);
        for bad in [
            "0",
            "3000",
            "-64",
            "abc",
            "",
            "2147483648",
            "18446744073709551616",
        ] {
            assert_eq!(align(bad).unwrap_err().class(), ErrorClass::Info, "{bad:?}");
        }
        let h = WinHints::parse(&Info::new().set("mpi_minimum_memory_alignment", "65536"));
        let info = h.unwrap().to_info(true);
        assert_eq!(info.get("mpi_minimum_memory_alignment"), Some("65536"));
    }
}
