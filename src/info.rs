//! Info objects: string keys and values that tune a window (MPI_Info).
//!
//! # MPI-4.1: 10 (info objects), 12.2.1 (window info keys)

use crate::error::{Error, ErrorClass, Result};
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
}

/// The window info keys onesided acts on, parsed once at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WinHints {
    pub no_locks: bool,
    pub noncontig: bool,
    pub same_size: bool,
    pub same_disp_unit: bool,
}

impl WinHints {
    pub(crate) fn parse(info: &Info) -> Result<WinHints> {
        Ok(WinHints {
            no_locks: info.flag("no_locks", false)?,
            noncontig: info.flag("alloc_shared_noncontig", false)?,
            same_size: info.flag("same_size", false)?,
            same_disp_unit: info.flag("same_disp_unit", false)?,
        })
    }

    /// Every supported key with the value in use (MPI_Win_get_info).
    pub(crate) fn to_info(self) -> Info {
        let b = |v: bool| if v { "true" } else { "false" };
        Info::new()
            .set("no_locks", b(self.no_locks))
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
        assert_eq!(h.to_info().get("no_locks"), Some("true"));
    }
}
