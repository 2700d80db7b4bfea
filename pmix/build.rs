//! Finds libpmix with pkg-config and generates bindings with bindgen.
//!
//! Without libpmix (or libclang) the crate builds empty and dependents see no `have_pmix` cfg,
//! so the default build needs only the Rust toolchain. `ONESIDED_REQUIRE_PMIX=1` turns a
//! missing libpmix (or libclang) into a build error, so CI can never skip PMIx silently.
//!
//! Besides the bindings it writes `failure_codes.rs`: the process-failure event codes that the
//! installed headers define, as an array expression over `sys`, for `event.rs` to register.

use std::env;
use std::path::PathBuf;

/// Event codes that mean a process of the job is gone; the ones the headers lack are left out.
const FAILURE_CODES: [&str; 7] = [
    "PMIX_ERR_PROC_ABORTED",
    "PMIX_ERR_PROC_ABORTED_BY_SIG",
    "PMIX_EVENT_PROC_TERMINATED",
    "PMIX_ERR_LOST_CONNECTION",
    "PMIX_EVENT_JOB_END",
    "PMIX_ERR_UNREACH",
    "PMIX_ERR_PROC_ABORTING",
];

/// The other `#define`s the safe layer uses: status codes, data types, scopes and keys.
const VARS: [&str; 17] = [
    "PMIX_SUCCESS",
    "PMIX_EVENT_ACTION_COMPLETE",
    "PMIX_BOOL",
    "PMIX_INT",
    "PMIX_STRING",
    "PMIX_UINT32",
    "PMIX_STATUS",
    "PMIX_PROC",
    "PMIX_BYTE_OBJECT",
    "PMIX_GLOBAL",
    "PMIX_MAX_KEYLEN",
    "PMIX_JOB_SIZE",
    "PMIX_LOCAL_PEERS",
    "PMIX_COLLECT_DATA",
    "PMIX_EVENT_AFFECTED_PROC",
    "PMIX_EXIT_CODE",
    "PMIX_JOB_TERM_STATUS",
];

fn main() {
    println!("cargo::rustc-check-cfg=cfg(have_pmix)");
    println!("cargo::rerun-if-env-changed=ONESIDED_REQUIRE_PMIX");
    println!("cargo::rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo::rerun-if-changed=wrapper.h");
    let required = env::var("ONESIDED_REQUIRE_PMIX").is_ok_and(|v| v == "1");
    match generate() {
        Ok(version) => {
            println!("cargo::rustc-cfg=have_pmix");
            println!("cargo::metadata=version={version}");
            println!("cargo::rustc-env=ONESIDED_PMIX_VERSION={version}");
        }
        Err(why) if required => panic!("ONESIDED_REQUIRE_PMIX=1 but {why}"),
        Err(why) => {
            // A warning is one line: pkg-config's explanation spans several.
            let why = why.split_whitespace().collect::<Vec<_>>().join(" ");
            println!("cargo::warning=building without PMIx: {why}");
            println!("cargo::metadata=version=");
        }
    }
}

fn generate() -> Result<String, String> {
    let lib = pkg_config::Config::new()
        .atleast_version("4.0")
        .probe("pmix")
        .map_err(|e| format!("pkg-config found no pmix >= 4.0 ({e})"))?;
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let vars = VARS.iter().chain(&FAILURE_CODES).copied();
    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .allowlist_function(
            "PMIx_(Init|Initialized|Finalize|Abort|Put|Commit|Fence|Get|Register_event_handler\
             |Error_string|Value_load|Value_destruct|Info_load)",
        )
        .allowlist_type(
            "pmix_(proc|value|info|byte_object|status|scope|data_type|rank\
             |notification_fn|event_notification_cbfunc_fn|hdlr_reg_cbfunc)_t",
        )
        .allowlist_var(vars.collect::<Vec<_>>().join("|"))
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false);
    for inc in &lib.include_paths {
        builder = builder.clang_arg(format!("-I{}", inc.display()));
    }
    let bindings =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || builder.generate()))
            .map_err(|_| "bindgen could not run (is libclang installed?)".to_string())?
            .map_err(|e| format!("bindgen failed on the PMIx headers: {e}"))?;
    let text = bindings.to_string();
    let codes: Vec<String> = FAILURE_CODES
        .iter()
        .filter(|name| text.contains(&format!("pub const {name}:")))
        .map(|name| format!("sys::{name}"))
        .collect();
    std::fs::write(out.join("bindings.rs"), text).map_err(|e| format!("writing bindings: {e}"))?;
    std::fs::write(
        out.join("failure_codes.rs"),
        format!("[{}]\n", codes.join(", ")),
    )
    .map_err(|e| format!("writing failure_codes.rs: {e}"))?;
    Ok(lib.version)
}
