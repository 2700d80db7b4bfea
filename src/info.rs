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

/// The window info keys onesided acts on, parsed once at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WinHints {
    pub no_locks: bool,
    pub noncontig: bool,
    pub same_size: bool,
    pub same_disp_unit: bool,
    /// `mpi_minimum_memory_alignment`: the alignment asked for this rank's memory (1: none).
    pub alignment: usize,
}

impl WinHints {
    pub(crate) fn parse(info: &Info) -> Result<WinHints> {
        Ok(WinHints {
            no_locks: info.flag("no_locks", false)?,
            noncontig: info.flag("alloc_shared_noncontig", false)?,
            same_size: info.flag("same_size", false)?,
            same_disp_unit: info.flag("same_disp_unit", false)?,
            alignment: info.alignment()?,
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
        info.set("no_locks", b(self.no_locks))
            .set("alloc_shared_noncontig", b(self.noncontig))
            .set("same_size", b(self.same_size))
            .set("same_disp_unit", b(self.same_disp_unit))
            .set("accumulate_ordering", "rar,raw,war,waw")
            .set("accumulate_ops", "same_op_no_op")
            .set("mpi_accumulate_granularity", "0")
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
