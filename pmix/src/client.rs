//! This process's connection to its PMIx server.

use crate::error::{PmixError, check};
use crate::sys;
use std::ffi::{CStr, CString, c_char, c_void};
use std::ptr;

/// `PMIX_RANK_WILDCARD` (`UINT32_MAX-1` in pmix_common.h, which bindgen cannot evaluate): every
/// rank of a namespace.
pub(crate) const RANK_WILDCARD: u32 = u32::MAX - 1;
/// `PMIX_RANK_UNDEF` (`UINT32_MAX`): no particular rank.
pub(crate) const RANK_UNDEF: u32 = u32::MAX;
/// Longest key, without its NUL.
const MAX_KEYLEN: usize = sys::PMIX_MAX_KEYLEN as usize;

/// The text of a NUL-terminated C array, such as a namespace.
pub(crate) fn c_text(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A key as PMIx takes it: at most `PMIX_MAX_KEYLEN` bytes, no NUL inside.
fn c_key(call: &'static str, key: &str) -> Result<CString, PmixError> {
    if key.len() > MAX_KEYLEN {
        return Err(PmixError::detail(
            call,
            format!("key {key:?} longer than {MAX_KEYLEN} bytes"),
        ));
    }
    CString::new(key).map_err(|_| PmixError::detail(call, format!("key {key:?} holds a NUL")))
}

/// A value PMIx_Get handed over, released on drop.
struct Got(*mut sys::pmix_value_t);

impl Drop for Got {
    fn drop(&mut self) {
        // SAFETY: the pointer came from PMIx_Get, which allocates it with malloc for the caller
        // to release as PMIX_VALUE_RELEASE does: destruct the contents, then free.
        unsafe {
            sys::PMIx_Value_destruct(self.0);
            libc::free(self.0.cast());
        }
    }
}

/// This process's connection to its PMIx server: `PMIx_Init` on [`Client::init`],
/// `PMIx_Finalize` on drop. `Send` and `Sync`: PMIx client calls are thread-safe.
#[derive(Debug)]
pub struct Client {
    me: sys::pmix_proc_t,
    namespace: String,
}

impl Client {
    /// Connects to the PMIx server this process was started under (`PMIx_Init`).
    pub fn init() -> Result<Client, PmixError> {
        let mut me = sys::pmix_proc_t::default();
        // SAFETY: `me` is a valid out-parameter; no info array is passed.
        check("PMIx_Init", unsafe {
            sys::PMIx_Init(&raw mut me, ptr::null_mut(), 0)
        })?;
        let namespace = c_text(&me.nspace);
        Ok(Client { me, namespace })
    }

    /// This process's namespace (its job).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// This process's rank in its namespace.
    pub fn rank(&self) -> u32 {
        self.me.rank
    }

    /// The process `rank` of this namespace.
    pub(crate) fn peer(&self, rank: u32) -> sys::pmix_proc_t {
        sys::pmix_proc_t {
            nspace: self.me.nspace,
            rank,
        }
    }

    /// `PMIx_Get` of `key` (NUL-terminated) about process `rank`.
    fn get_value(&self, rank: u32, key: &CStr) -> Result<Got, PmixError> {
        let peer = self.peer(rank);
        let mut value: *mut sys::pmix_value_t = ptr::null_mut();
        // SAFETY: `peer` and `key` are valid for the call; on success PMIx stores a value it
        // allocated in `value`, which `Got` releases.
        check("PMIx_Get", unsafe {
            sys::PMIx_Get(
                &raw const peer,
                key.as_ptr(),
                ptr::null(),
                0,
                &raw mut value,
            )
        })?;
        if value.is_null() {
            return Err(PmixError::detail("PMIx_Get", "no value returned".into()));
        }
        Ok(Got(value))
    }

    /// The number of processes of this namespace (`PMIX_JOB_SIZE`).
    pub fn job_size(&self) -> Result<u32, PmixError> {
        let key = CStr::from_bytes_with_nul(sys::PMIX_JOB_SIZE).unwrap_or_default();
        let got = self.get_value(RANK_WILDCARD, key)?;
        // SAFETY: `got.0` is a valid value from PMIx_Get; its union is read as the type it says.
        unsafe {
            match u32::from((*got.0).type_) {
                sys::PMIX_UINT32 => Ok((*got.0).data.uint32),
                t => Err(PmixError::detail(
                    "PMIx_Get",
                    format!("job size of data type {t}, not uint32"),
                )),
            }
        }
    }

    /// Publishes `value` under `key` to every process of the job (`PMIx_Put` with
    /// `PMIX_GLOBAL`, as a byte object); visible to them after [`Client::commit`] and a fence.
    pub fn put(&self, key: &str, value: &[u8]) -> Result<(), PmixError> {
        let key = c_key("PMIx_Put", key)?;
        let bo = sys::pmix_byte_object_t {
            bytes: value.as_ptr().cast_mut().cast(),
            size: value.len(),
        };
        let mut v = sys::pmix_value_t::default();
        // SAFETY: PMIx_Value_load copies the `size` bytes `bo` points to (borrowed from `value`
        // for the call) into `v`.
        check("PMIx_Value_load", unsafe {
            sys::PMIx_Value_load(
                &raw mut v,
                (&raw const bo).cast::<c_void>(),
                sys::PMIX_BYTE_OBJECT as sys::pmix_data_type_t,
            )
        })?;
        // SAFETY: `key` and `v` are valid; PMIx copies what it keeps.
        let put = check("PMIx_Put", unsafe {
            sys::PMIx_Put(
                sys::PMIX_GLOBAL as sys::pmix_scope_t,
                key.as_ptr(),
                &raw mut v,
            )
        });
        // SAFETY: `v` holds the copy PMIx_Value_load made, released once here.
        unsafe { sys::PMIx_Value_destruct(&raw mut v) };
        put
    }

    /// Pushes what was put to the server (`PMIx_Commit`).
    pub fn commit(&self) -> Result<(), PmixError> {
        // SAFETY: no arguments; the client is initialized.
        check("PMIx_Commit", unsafe { sys::PMIx_Commit() })
    }

    /// Waits until every process of the namespace has entered the fence (`PMIx_Fence`); with
    /// `collect`, what they committed is brought to every node, so later gets are local.
    pub fn fence(&self, collect: bool) -> Result<(), PmixError> {
        let all = self.peer(RANK_WILDCARD);
        let mut info = sys::pmix_info_t::default();
        let key = CStr::from_bytes_with_nul(sys::PMIX_COLLECT_DATA).unwrap_or_default();
        // SAFETY: `info` is a zeroed pmix_info_t (type PMIX_UNDEF, as PMIX_INFO_CONSTRUCT
        // makes it); PMIx_Info_load copies the key and the bool.
        check("PMIx_Info_load", unsafe {
            sys::PMIx_Info_load(
                &raw mut info,
                key.as_ptr(),
                (&raw const collect).cast::<c_void>(),
                sys::PMIX_BOOL as sys::pmix_data_type_t,
            )
        })?;
        // SAFETY: one valid proc and one valid info, both alive for the call.
        let fenced = check("PMIx_Fence", unsafe {
            sys::PMIx_Fence(&raw const all, 1, &raw const info, 1)
        });
        // SAFETY: releases what PMIx_Info_load stored in the value, once.
        unsafe { sys::PMIx_Value_destruct(&raw mut info.value) };
        fenced
    }

    /// The value process `rank` of this namespace put under `key` (a byte object, or a string
    /// as its bytes).
    pub fn get(&self, rank: u32, key: &str) -> Result<Vec<u8>, PmixError> {
        let key = c_key("PMIx_Get", key)?;
        let got = self.get_value(rank, &key)?;
        // SAFETY: `got.0` is a valid value from PMIx_Get; its union is read as the type it
        // says, and the byte object's or string's memory is PMIx's, alive until `got` drops.
        unsafe {
            let v = &*got.0;
            match u32::from(v.type_) {
                sys::PMIX_BYTE_OBJECT if v.data.bo.size == 0 => Ok(Vec::new()),
                sys::PMIX_BYTE_OBJECT if !v.data.bo.bytes.is_null() => {
                    let bytes = v.data.bo.bytes.cast::<u8>();
                    Ok(std::slice::from_raw_parts(bytes, v.data.bo.size).to_vec())
                }
                sys::PMIX_STRING if !v.data.string.is_null() => {
                    Ok(CStr::from_ptr(v.data.string).to_bytes().to_vec())
                }
                t => Err(PmixError::detail(
                    "PMIx_Get",
                    format!("{key:?} of rank {rank} has data type {t}, not bytes"),
                )),
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // SAFETY: the client was initialized by PMIx_Init; no info array is passed.
        unsafe { sys::PMIx_Finalize(ptr::null(), 0) };
    }
}
