//! libibverbs, opened with `dlopen` the first time the verbs transport needs it instead of
//! linked into every program that uses onesided: a program runs where rdma-core is not
//! installed, and only a process that opens a device loads it (and its providers).
//!
//! Only the calls libibverbs exports are reached through this table; the data path
//! (`ibv_post_send`, `ibv_poll_cq`) goes through the operation table of the device context, as
//! the inline definitions of `verbs.h` do.

use crate::error::VerbsError;
use crate::sys;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::OnceLock;

/// The library's name for the loader (found where a linked one would be).
const SONAME: &str = "libibverbs.so.1";

/// The library the bindings were generated against, by its path (`build.rs`), tried where the
/// loader finds none by name.
const BUILT_AT: Option<&str> = option_env!("ONESIDED_VERBS_LIBRARY");

/// The calls libibverbs exports, resolved in the loaded library. Each field repeats the C
/// prototype of the call it is named after (`verbs.h`).
pub(crate) struct Library {
    pub(crate) get_device_list: unsafe extern "C" fn(*mut c_int) -> *mut *mut sys::ibv_device,
    pub(crate) free_device_list: unsafe extern "C" fn(*mut *mut sys::ibv_device),
    pub(crate) get_device_name: unsafe extern "C" fn(*mut sys::ibv_device) -> *const c_char,
    pub(crate) open_device: unsafe extern "C" fn(*mut sys::ibv_device) -> *mut sys::ibv_context,
    pub(crate) close_device: unsafe extern "C" fn(*mut sys::ibv_context) -> c_int,
    pub(crate) query_device:
        unsafe extern "C" fn(*mut sys::ibv_context, *mut sys::ibv_device_attr) -> c_int,
    /// The exported call, which fills the `_compat_ibv_port_attr` prefix of `ibv_port_attr`
    /// (the inline `ibv_query_port` of `verbs.h` falls back to it the same way).
    pub(crate) query_port:
        unsafe extern "C" fn(*mut sys::ibv_context, u8, *mut sys::_compat_ibv_port_attr) -> c_int,
    pub(crate) query_gid:
        unsafe extern "C" fn(*mut sys::ibv_context, u8, c_int, *mut sys::ibv_gid) -> c_int,
    pub(crate) alloc_pd: unsafe extern "C" fn(*mut sys::ibv_context) -> *mut sys::ibv_pd,
    pub(crate) dealloc_pd: unsafe extern "C" fn(*mut sys::ibv_pd) -> c_int,
    pub(crate) reg_mr:
        unsafe extern "C" fn(*mut sys::ibv_pd, *mut c_void, usize, c_int) -> *mut sys::ibv_mr,
    pub(crate) dereg_mr: unsafe extern "C" fn(*mut sys::ibv_mr) -> c_int,
    pub(crate) create_cq: unsafe extern "C" fn(
        *mut sys::ibv_context,
        c_int,
        *mut c_void,
        *mut sys::ibv_comp_channel,
        c_int,
    ) -> *mut sys::ibv_cq,
    pub(crate) destroy_cq: unsafe extern "C" fn(*mut sys::ibv_cq) -> c_int,
    pub(crate) create_comp_channel:
        unsafe extern "C" fn(*mut sys::ibv_context) -> *mut sys::ibv_comp_channel,
    pub(crate) destroy_comp_channel: unsafe extern "C" fn(*mut sys::ibv_comp_channel) -> c_int,
    pub(crate) get_cq_event: unsafe extern "C" fn(
        *mut sys::ibv_comp_channel,
        *mut *mut sys::ibv_cq,
        *mut *mut c_void,
    ) -> c_int,
    pub(crate) ack_cq_events: unsafe extern "C" fn(*mut sys::ibv_cq, std::ffi::c_uint),
    pub(crate) create_qp:
        unsafe extern "C" fn(*mut sys::ibv_pd, *mut sys::ibv_qp_init_attr) -> *mut sys::ibv_qp,
    pub(crate) modify_qp:
        unsafe extern "C" fn(*mut sys::ibv_qp, *mut sys::ibv_qp_attr, c_int) -> c_int,
    pub(crate) destroy_qp: unsafe extern "C" fn(*mut sys::ibv_qp) -> c_int,
    pub(crate) create_srq:
        unsafe extern "C" fn(*mut sys::ibv_pd, *mut sys::ibv_srq_init_attr) -> *mut sys::ibv_srq,
    pub(crate) destroy_srq: unsafe extern "C" fn(*mut sys::ibv_srq) -> c_int,
    pub(crate) get_async_event:
        unsafe extern "C" fn(*mut sys::ibv_context, *mut sys::ibv_async_event) -> c_int,
    pub(crate) ack_async_event: unsafe extern "C" fn(*mut sys::ibv_async_event),
    pub(crate) wc_status_str: unsafe extern "C" fn(sys::ibv_wc_status) -> *const c_char,
}

static LIBRARY: OnceLock<Result<Library, String>> = OnceLock::new();

/// The loaded library, loading it at the first call; the error (kept for later calls) says
/// why it could not be loaded.
pub(crate) fn library() -> Result<&'static Library, VerbsError> {
    LIBRARY
        .get_or_init(open_first)
        .as_ref()
        .map_err(|why| VerbsError::new("loading libibverbs", libc::ELIBACC).detail(why.clone()))
}

/// Load libibverbs now, if no call loaded it yet: the error says why it cannot be.
pub fn load() -> Result<(), VerbsError> {
    library().map(|_| ())
}

/// Open the first of the names that loads and resolve its calls; else why none did.
fn open_first() -> Result<Library, String> {
    let mut why = Vec::new();
    for name in std::iter::once(SONAME).chain(BUILT_AT) {
        match open(name) {
            Ok(handle) => return resolve(handle),
            Err(e) => why.push(e),
        }
    }
    Err(why.join("; "))
}

/// `dlopen` the library `name`, resolving every symbol now; it stays loaded for the life of the
/// process (its providers are loaded by it, and its objects may outlive any one caller).
fn open(name: &str) -> Result<*mut c_void, String> {
    let c = CString::new(name).map_err(|_| format!("{name}: not a file name"))?;
    // SAFETY: `c` is a NUL-terminated path; loading runs the library's constructors, as
    // linking it would.
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        return Err(dl_error(name));
    }
    Ok(handle)
}

fn resolve(handle: *mut c_void) -> Result<Library, String> {
    // SAFETY: each symbol is looked up in `handle` by the name of the call whose C prototype
    // (in the libibverbs headers the bindings come from) the field's type repeats.
    unsafe {
        Ok(Library {
            get_device_list: symbol(handle, c"ibv_get_device_list")?,
            free_device_list: symbol(handle, c"ibv_free_device_list")?,
            get_device_name: symbol(handle, c"ibv_get_device_name")?,
            open_device: symbol(handle, c"ibv_open_device")?,
            close_device: symbol(handle, c"ibv_close_device")?,
            query_device: symbol(handle, c"ibv_query_device")?,
            query_port: symbol(handle, c"ibv_query_port")?,
            query_gid: symbol(handle, c"ibv_query_gid")?,
            alloc_pd: symbol(handle, c"ibv_alloc_pd")?,
            dealloc_pd: symbol(handle, c"ibv_dealloc_pd")?,
            reg_mr: symbol(handle, c"ibv_reg_mr")?,
            dereg_mr: symbol(handle, c"ibv_dereg_mr")?,
            create_cq: symbol(handle, c"ibv_create_cq")?,
            destroy_cq: symbol(handle, c"ibv_destroy_cq")?,
            create_comp_channel: symbol(handle, c"ibv_create_comp_channel")?,
            destroy_comp_channel: symbol(handle, c"ibv_destroy_comp_channel")?,
            get_cq_event: symbol(handle, c"ibv_get_cq_event")?,
            ack_cq_events: symbol(handle, c"ibv_ack_cq_events")?,
            create_qp: symbol(handle, c"ibv_create_qp")?,
            modify_qp: symbol(handle, c"ibv_modify_qp")?,
            destroy_qp: symbol(handle, c"ibv_destroy_qp")?,
            create_srq: symbol(handle, c"ibv_create_srq")?,
            destroy_srq: symbol(handle, c"ibv_destroy_srq")?,
            get_async_event: symbol(handle, c"ibv_get_async_event")?,
            ack_async_event: symbol(handle, c"ibv_ack_async_event")?,
            wc_status_str: symbol(handle, c"ibv_wc_status_str")?,
        })
    }
}

/// The address of `name` in `handle`, as the function pointer type `F`.
///
/// # Safety
/// `F` is a function pointer type matching the C prototype of `name`.
unsafe fn symbol<F: Copy>(handle: *mut c_void, name: &CStr) -> Result<F, String> {
    // SAFETY: `handle` came from dlopen and `name` is NUL-terminated.
    let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
    if p.is_null() {
        return Err(dl_error(&name.to_string_lossy()));
    }
    const { assert!(size_of::<F>() == size_of::<*mut c_void>()) };
    // SAFETY: `p` is the non-null address of the function, and the caller vouches that `F` is
    // a function pointer type of its prototype (a pointer-sized value, checked at compile time).
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
}

/// What `dlerror` says of the last failure, about `what`.
fn dl_error(what: &str) -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl call on
    // this thread; it is copied at once.
    let text = unsafe { libc::dlerror() };
    if text.is_null() {
        return format!("{what}: not found");
    }
    // SAFETY: as above.
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

/// A work request doing `what` completed with `status`, named as libibverbs names it.
pub(crate) fn failed_completion(what: impl Into<String>, status: u32) -> VerbsError {
    VerbsError::completion(what, status, status_text(status))
}

/// libibverbs' name of a completion status (`ibv_wc_status_str`), where the library is loaded.
fn status_text(status: u32) -> String {
    match LIBRARY.get().and_then(|l| l.as_ref().ok()) {
        Some(lib) => {
            // SAFETY: ibv_wc_status_str returns a static NUL-terminated string for any value
            // (an "unknown" text for values it does not know).
            let text = unsafe { CStr::from_ptr((lib.wc_status_str)(status as sys::ibv_wc_status)) };
            text.to_string_lossy().into_owned()
        }
        None => format!("completion status {status}"),
    }
}
