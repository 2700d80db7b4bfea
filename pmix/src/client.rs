//! This process's connection to its PMIx server.

use crate::error::{PmixError, check};
use crate::sys;
use crate::value::{self, Got, c_key, c_text, header_key, own_key};
use std::ffi::{CStr, CString, c_void};
use std::ptr;

/// `PMIX_RANK_WILDCARD`, every rank of a namespace: `UINT32_MAX-1` in pmix_common.h, an
/// expression bindgen does not evaluate.
pub(crate) const RANK_WILDCARD: u32 = u32::MAX - 1;
/// `PMIX_RANK_UNDEF`, no particular rank: `UINT32_MAX` in pmix_common.h.
pub(crate) const RANK_UNDEF: u32 = u32::MAX;

const JOB_SIZE: &CStr = header_key(sys::PMIX_JOB_SIZE);
const LOCAL_PEERS: &CStr = header_key(sys::PMIX_LOCAL_PEERS);
const COLLECT_DATA: &CStr = header_key(sys::PMIX_COLLECT_DATA);

/// This process's connection to its PMIx server (Slurm's `srun --mpi=pmix`, Open MPI's
/// `mpirun`, PRRTE's `prterun`): `PMIx_Init` on [`Client::init`], `PMIx_Finalize` on drop.
///
/// `Send` and `Sync`: PMIx client calls are thread-safe (the library serializes them onto its
/// progress thread), so one client may be shared by every thread of the process.
#[derive(Debug)]
pub struct Client {
    me: sys::pmix_proc_t,
    namespace: String,
}

impl Client {
    /// Connects to the PMIx server this process was started under (`PMIx_Init`).
    ///
    /// Started without one (no `PMIX_*` variables from a launcher), PMIx 4.2 finds no server to
    /// connect to and this fails with `PMIX_ERR_UNREACH`; it does not become a singleton.
    pub fn init() -> Result<Client, PmixError> {
        let mut me = sys::pmix_proc_t::default();
        crate::lifecycle::lifecycle(|| {
            // SAFETY: `me` is a valid out-parameter; no info array is passed.
            check("PMIx_Init", unsafe {
                sys::PMIx_Init(&raw mut me, ptr::null_mut(), 0)
            })
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
    fn peer(&self, rank: u32) -> sys::pmix_proc_t {
        sys::pmix_proc_t {
            nspace: self.me.nspace,
            rank,
        }
    }

    /// `PMIx_Get` of `key` about process `rank` of this namespace.
    fn get_value(&self, rank: u32, key: &CStr) -> Result<Got, PmixError> {
        let peer = self.peer(rank);
        let mut value: *mut sys::pmix_value_t = ptr::null_mut();
        // SAFETY: `peer` and `key` are valid for the call; on success PMIx stores a value it
        // allocated in `value`.
        check("PMIx_Get", unsafe {
            sys::PMIx_Get(
                &raw const peer,
                key.as_ptr(),
                ptr::null(),
                0,
                &raw mut value,
            )
        })?;
        // SAFETY: PMIx_Get succeeded, so `value` is null or its allocation, handed to us.
        unsafe { Got::new(value) }
            .ok_or_else(|| PmixError::detail("PMIx_Get", format!("{key:?}: no value returned")))
    }

    /// The number of processes of this namespace (`PMIX_JOB_SIZE`).
    pub fn job_size(&self) -> Result<u32, PmixError> {
        let got = self.get_value(RANK_WILDCARD, JOB_SIZE)?;
        let v = got.value();
        match value::data_type(v) {
            // SAFETY: the type says the union holds a uint32.
            sys::PMIX_UINT32 => Ok(unsafe { v.data.uint32 }),
            t => Err(PmixError::detail(
                "PMIx_Get",
                format!("{JOB_SIZE:?} of data type {t}, not uint32"),
            )),
        }
    }

    /// The ranks of this namespace on this node, this one included (`PMIX_LOCAL_PEERS`, which
    /// PMIx gives as a comma-separated string).
    pub fn local_peers(&self) -> Result<Vec<u32>, PmixError> {
        let got = self.get_value(RANK_WILDCARD, LOCAL_PEERS)?;
        let v = got.value();
        let not_string = || {
            PmixError::detail(
                "PMIx_Get",
                format!(
                    "{LOCAL_PEERS:?} of data type {}, not string",
                    value::data_type(v)
                ),
            )
        };
        if value::data_type(v) != sys::PMIX_STRING {
            return Err(not_string());
        }
        // SAFETY: `v` is PMIx_Get's value, alive while `got` is.
        let list = unsafe { value::bytes(v) }.ok_or_else(not_string)?;
        let list = String::from_utf8_lossy(&list);
        list.split(',')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(|r| {
                r.parse().map_err(|_| {
                    PmixError::detail("PMIx_Get", format!("{LOCAL_PEERS:?} reads {list:?}"))
                })
            })
            .collect()
    }

    /// Publishes `value` under `key` to every process of the job (`PMIx_Put` with
    /// `PMIX_GLOBAL`, as a byte object); visible to them after [`Client::commit`] and a fence.
    /// A key longer than `PMIX_MAX_KEYLEN` bytes is an error, not truncated, and so is a key
    /// beginning with "pmix": PMIx reserves those for its own attributes.
    pub fn put(&self, key: &str, value: &[u8]) -> Result<(), PmixError> {
        let key = own_key("PMIx_Put", key)?;
        let bo = sys::pmix_byte_object_t {
            bytes: value.as_ptr().cast_mut().cast(),
            size: value.len(),
        };
        let mut v = sys::pmix_value_t::default();
        // SAFETY: PMIx_Value_load copies the `size` bytes `bo` points to (borrowed from `value`
        // for the call, never written) into `v`.
        check("PMIx_Value_load", unsafe {
            sys::PMIx_Value_load(
                &raw mut v,
                (&raw const bo).cast::<c_void>(),
                sys::PMIX_BYTE_OBJECT as sys::pmix_data_type_t,
            )
        })?;
        // SAFETY: `key` and `v` are valid for the call; PMIx copies what it keeps.
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

    /// Waits until every process of the namespace has entered the fence (`PMIx_Fence` over
    /// `PMIX_RANK_WILDCARD`); with `collect` (`PMIX_COLLECT_DATA`), what they committed is
    /// brought to every node, so later gets are local.
    pub fn fence(&self, collect: bool) -> Result<(), PmixError> {
        let all = self.peer(RANK_WILDCARD);
        let mut info = sys::pmix_info_t::default();
        // SAFETY: `info` is a zeroed pmix_info_t (type PMIX_UNDEF, as PMIX_INFO_CONSTRUCT
        // makes it); PMIx_Info_load copies the key and the bool.
        check("PMIx_Info_load", unsafe {
            sys::PMIx_Info_load(
                &raw mut info,
                COLLECT_DATA.as_ptr(),
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

    /// The value process `rank` of this namespace put under `key`: a byte object, or a string
    /// as its bytes; a value of any other type is an error.
    pub fn get(&self, rank: u32, key: &str) -> Result<Vec<u8>, PmixError> {
        let key = c_key("PMIx_Get", key)?;
        let got = self.get_value(rank, &key)?;
        // SAFETY: `got` is PMIx_Get's value, alive for the call.
        unsafe { value::bytes(got.value()) }.ok_or_else(|| {
            PmixError::detail(
                "PMIx_Get",
                format!(
                    "{key:?} of rank {rank} has data type {}, not bytes",
                    value::data_type(got.value())
                ),
            )
        })
    }

    /// Asks the server to abort every process of this namespace, this one included, with exit
    /// status `status` and message `msg` (`PMIx_Abort` with no proc array). Under a launcher
    /// that honours it, the call does not return.
    pub fn abort(&self, status: i32, msg: &str) -> Result<(), PmixError> {
        let msg = CString::new(msg)
            .map_err(|_| PmixError::detail("PMIx_Abort", format!("message {msg:?} holds a NUL")))?;
        // SAFETY: `msg` is NUL-terminated and alive for the call; a null proc array means the
        // whole namespace.
        check("PMIx_Abort", unsafe {
            sys::PMIx_Abort(status, msg.as_ptr(), ptr::null_mut(), 0)
        })
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        crate::lifecycle::lifecycle(|| {
            // SAFETY: this client's PMIx_Init succeeded and is finalized once, here; no info
            // array is passed.
            unsafe { sys::PMIx_Finalize(ptr::null(), 0) };
        });
    }
}
