//! The libfabric library, opened with `dlopen` the first time the fabric transport needs it
//! instead of linked into every program that uses onesided.
//!
//! A linked libfabric is loaded, with the libraries it links, when the process starts. Debian's
//! links the psm and psm2 providers' libraries, whose constructors calibrate a timer by sleeping
//! in small steps: 0.2 s of every process start on this machine (an empty C program linked with
//! `-lfabric` takes 0.20 s, against under 1 ms without). Linked, the launcher, every rank of a
//! job that runs over shared memory only, and every `onesided --help` paid it. Loaded here, only
//! a process that opens a provider does, once.
//!
//! Only the calls libfabric exports are reached through this table (`fi_getinfo`, `fi_dupinfo`,
//! `fi_freeinfo`, `fi_fabric`, `fi_strerror`, `fi_version`); everything else goes through the
//! operation tables of the objects they return, as it always did. `build.rs` keeps the exported
//! calls out of the generated bindings, so none can be called past this table.

use crate::sys;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::OnceLock;

/// The library's name for the loader: found where a linked one would be (`LD_LIBRARY_PATH`,
/// the loader's cache). libfabric 1.x keeps this soname.
const SONAME: &str = "libfabric.so.1";

/// The library the bindings were generated against, by its path (`build.rs`), tried where the
/// loader finds none by name (a libfabric installed outside the loader's search).
const BUILT_AT: Option<&str> = option_env!("ONESIDED_FABRIC_LIBRARY");

/// The calls libfabric exports, resolved in the loaded library.
pub(crate) struct Library {
    pub(crate) getinfo: unsafe extern "C" fn(
        u32,
        *const c_char,
        *const c_char,
        u64,
        *const sys::fi_info,
        *mut *mut sys::fi_info,
    ) -> c_int,
    pub(crate) dupinfo: unsafe extern "C" fn(*const sys::fi_info) -> *mut sys::fi_info,
    pub(crate) freeinfo: unsafe extern "C" fn(*mut sys::fi_info),
    pub(crate) fabric: unsafe extern "C" fn(
        *mut sys::fi_fabric_attr,
        *mut *mut sys::fid_fabric,
        *mut c_void,
    ) -> c_int,
    pub(crate) strerror: unsafe extern "C" fn(c_int) -> *const c_char,
    pub(crate) version: unsafe extern "C" fn() -> u32,
}

static LIBRARY: OnceLock<Result<Library, String>> = OnceLock::new();

/// Why libfabric could not be loaded, as the first call that needed it found: every later call
/// gets the same (`FiError` makes it the error of the call).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unloadable(pub(crate) &'static str);

/// The loaded library, loading it at the first call; the error (kept for later calls) says
/// why it could not be loaded.
pub(crate) fn library() -> Result<&'static Library, Unloadable> {
    LIBRARY
        .get_or_init(open_first)
        .as_ref()
        .map_err(|why| Unloadable(why.as_str()))
}

/// Set the variable `var` to `value` for this process, unless the environment sets it already:
/// libfabric, and the libraries it links, read their variables once, when they load. The value
/// in effect, or `None` where libfabric is loaded already (too late).
///
/// Call it before the process starts threads that read the environment: `World::init` calls it
/// first, before it joins its process manager (as MPI libraries set their libfabric variables in
/// `MPI_Init`).
pub fn preset(var: &str, value: &str) -> Option<String> {
    if LIBRARY.get().is_some() {
        return None;
    }
    if let Ok(given) = std::env::var(var) {
        return Some(given);
    }
    // SAFETY: libfabric is not loaded (it reads its variables once, when it initializes), and
    // the caller runs this before starting threads of its own; the race setenv has is with
    // other threads reading the environment at the same moment.
    unsafe { std::env::set_var(var, value) };
    Some(value.to_owned())
}

/// The library, where one has been loaded already: for the calls that only matter once the
/// fabric is in use (error texts).
pub(crate) fn loaded() -> Option<&'static Library> {
    LIBRARY.get().and_then(|l| l.as_ref().ok())
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
/// process (its providers start threads of their own).
fn open(name: &str) -> Result<*mut c_void, String> {
    let c = CString::new(name).map_err(|_| format!("{name}: not a file name"))?;
    // SAFETY: `c` is a NUL-terminated path; loading runs the library's constructors, as
    // linking it did.
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        return Err(dl_error(name));
    }
    Ok(handle)
}

fn resolve(handle: *mut c_void) -> Result<Library, String> {
    // SAFETY: each symbol is looked up in `handle` by the name of the call whose C prototype
    // (in the libfabric headers the bindings come from) the field's type repeats.
    unsafe {
        Ok(Library {
            getinfo: symbol(handle, c"fi_getinfo")?,
            dupinfo: symbol(handle, c"fi_dupinfo")?,
            freeinfo: symbol(handle, c"fi_freeinfo")?,
            fabric: symbol(handle, c"fi_fabric")?,
            strerror: symbol(handle, c"fi_strerror")?,
            version: symbol(handle, c"fi_version")?,
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
