//! Keys and values: between Rust strings and bytes and PMIx's C structs.

use crate::error::PmixError;
use crate::sys;
use std::ffi::{CStr, CString, c_char};

/// Longest key, without its NUL.
const MAX_KEYLEN: usize = sys::PMIX_MAX_KEYLEN as usize;

/// A key the headers define (`PMIX_JOB_SIZE`, ...), which bindgen emits as a byte string with
/// its NUL. Used for constants only, so a string without the NUL stops the build, never a run.
pub(crate) const fn header_key(bytes: &'static [u8]) -> &'static CStr {
    match CStr::from_bytes_with_nul(bytes) {
        Ok(key) => key,
        Err(_) => panic!("a PMIx key constant without its NUL"),
    }
}

/// The bytes of a NUL-terminated C array (a namespace, a key), without the NUL.
fn c_bytes(chars: &[c_char]) -> impl Iterator<Item = u8> + '_ {
    chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8)
}

/// The text of a NUL-terminated C array, such as a namespace.
pub(crate) fn c_text(chars: &[c_char]) -> String {
    String::from_utf8_lossy(&c_bytes(chars).collect::<Vec<u8>>()).into_owned()
}

/// Whether the NUL-terminated C array `chars` holds `key`.
pub(crate) fn is_key(chars: &[c_char], key: &CStr) -> bool {
    c_bytes(chars).eq(key.to_bytes().iter().copied())
}

/// Keys PMIx keeps for its own attributes begin with this (`PMIX_CHECK_RESERVED_KEY`).
const RESERVED: &str = "pmix";

/// A key as PMIx takes it: at most `PMIX_MAX_KEYLEN` bytes, no NUL inside.
pub(crate) fn c_key(call: &'static str, key: &str) -> Result<CString, PmixError> {
    if key.len() > MAX_KEYLEN {
        return Err(PmixError::detail(
            call,
            format!("key {key:?} longer than {MAX_KEYLEN} bytes"),
        ));
    }
    CString::new(key).map_err(|_| PmixError::detail(call, format!("key {key:?} holds a NUL")))
}

/// A key a process may put: as [`c_key`], and not one of PMIx's reserved keys (PMIx_Put takes
/// those, but PMIx_Get of another process then finds nothing).
pub(crate) fn own_key(call: &'static str, key: &str) -> Result<CString, PmixError> {
    if key.starts_with(RESERVED) {
        return Err(PmixError::detail(
            call,
            format!("key {key:?}: keys beginning with {RESERVED:?} are reserved for PMIx"),
        ));
    }
    c_key(call, key)
}

/// The data type of a value, as the `PMIX_*` data type constants have it.
pub(crate) fn data_type(v: &sys::pmix_value_t) -> u32 {
    u32::from(v.type_)
}

/// The bytes of a byte object or a string; `None` for any other type.
///
/// # Safety
/// `v` came from PMIx: its type says which union field it holds, and a byte object's or
/// string's pointer is valid (or null) for as long as `v` is.
pub(crate) unsafe fn bytes(v: &sys::pmix_value_t) -> Option<Vec<u8>> {
    // SAFETY: the union is read as the field its type names; the pointers are valid as the
    // caller promises, and a byte object's `size` bytes are its own.
    unsafe {
        match data_type(v) {
            sys::PMIX_BYTE_OBJECT if v.data.bo.size == 0 => Some(Vec::new()),
            sys::PMIX_BYTE_OBJECT if !v.data.bo.bytes.is_null() => {
                let start = v.data.bo.bytes.cast::<u8>();
                Some(std::slice::from_raw_parts(start, v.data.bo.size).to_vec())
            }
            sys::PMIX_STRING if !v.data.string.is_null() => {
                Some(CStr::from_ptr(v.data.string).to_bytes().to_vec())
            }
            _ => None,
        }
    }
}

/// An integer value (`int`, `uint32_t` or a status) as `i64`; `None` for any other type.
///
/// # Safety
/// `v` came from PMIx: its type says which union field it holds.
pub(crate) unsafe fn integer(v: &sys::pmix_value_t) -> Option<i64> {
    // SAFETY: the union is read as the field its type names.
    unsafe {
        match data_type(v) {
            sys::PMIX_INT => Some(i64::from(v.data.integer)),
            sys::PMIX_UINT32 => Some(i64::from(v.data.uint32)),
            sys::PMIX_STATUS => Some(i64::from(v.data.status)),
            _ => None,
        }
    }
}

/// The process a `PMIX_PROC` value names; `None` for any other type.
///
/// # Safety
/// `v` came from PMIx: its type says which union field it holds, and a proc pointer is valid
/// (or null) for as long as `v` is.
pub(crate) unsafe fn process(v: &sys::pmix_value_t) -> Option<&sys::pmix_proc_t> {
    match data_type(v) {
        // SAFETY: the union holds a proc pointer, valid or null as the caller promises.
        sys::PMIX_PROC => unsafe { v.data.proc_.as_ref() },
        _ => None,
    }
}

/// A value PMIx_Get handed over, released on drop.
pub(crate) struct Got(*mut sys::pmix_value_t);

impl Got {
    /// Takes over `value` from a successful PMIx_Get; `None` for a null pointer.
    ///
    /// # Safety
    /// `value` is null or a value PMIx_Get allocated for the caller, not released elsewhere.
    pub(crate) unsafe fn new(value: *mut sys::pmix_value_t) -> Option<Got> {
        (!value.is_null()).then_some(Got(value))
    }

    /// The value.
    pub(crate) fn value(&self) -> &sys::pmix_value_t {
        // SAFETY: the pointer is non-null and PMIx's allocation, owned by `self` until drop.
        unsafe { &*self.0 }
    }
}

impl Drop for Got {
    fn drop(&mut self) {
        // SAFETY: the pointer came from PMIx_Get, which allocates it with malloc for the caller
        // to release as PMIX_VALUE_RELEASE does: destruct the contents, then free; once.
        unsafe {
            sys::PMIx_Value_destruct(self.0);
            libc::free(self.0.cast());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked_not_truncated() {
        let longest = "k".repeat(MAX_KEYLEN);
        assert_eq!(
            c_key("t", &longest).map(CString::into_bytes),
            Ok(longest.into())
        );
        let e = c_key("PMIx_Put", &"k".repeat(MAX_KEYLEN + 1)).expect_err("too long");
        assert!(e.to_string().starts_with("PMIx_Put: key \"kkk"), "{e}");
        assert!(c_key("t", "a\0b").is_err());
        assert!(own_key("t", "pmix.mine").is_err());
        assert!(own_key("t", "onesided.card").is_ok());
        assert!(c_key("t", "pmix.job.size").is_ok());
    }

    #[test]
    fn c_arrays_read_up_to_their_nul() {
        let chars = [b'a' as c_char, b'b' as c_char, 0, b'c' as c_char];
        assert_eq!(c_text(&chars), "ab");
        assert!(is_key(&chars, c"ab"));
        assert!(!is_key(&chars, c"abc"));
        assert!(!is_key(&chars, c"a"));
    }
}
