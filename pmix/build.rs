//! Finds libpmix with pkg-config and generates bindings with bindgen.
//!
//! Without libpmix (or libclang) the crate builds empty and dependents see no `have_pmix` cfg,
//! so the default build needs only the Rust toolchain. `ONESIDED_REQUIRE_PMIX=1` turns a
//! missing libpmix (or libclang) into a build error, so CI can never skip PMIx silently.
//!
//! Besides the bindings it writes `failure_codes.rs`: the process-failure event codes that the
//! installed headers define, as an array expression over `sys`, for `event.rs` to register.
//!
//! On docs.rs (which sets `DOCS_RS`, and has neither libpmix nor libclang) the script uses the
//! files checked in under `docsrs/` instead: it copies `docsrs/bindings.rs` and
//! `docsrs/failure_codes.rs` into `OUT_DIR` and emits `have_pmix` and the version in
//! `docsrs/version`, so the documentation shows the whole API. To regenerate those files from
//! the installed libpmix, run
//!
//! ```text
//! ONESIDED_WRITE_DOCSRS_BINDINGS=1 cargo build -p onesided-pmix
//! ```
//!
//! and commit `pmix/docsrs/`.

use std::env;
use std::fs;
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
    println!("cargo::rerun-if-env-changed=ONESIDED_WITHOUT_SYSTEM_LIBS");
    println!("cargo::rerun-if-env-changed=ONESIDED_WRITE_DOCSRS_BINDINGS");
    println!("cargo::rerun-if-env-changed=DOCS_RS");
    println!("cargo::rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo::rerun-if-changed=wrapper.h");
    // The build a machine without the library gets, on any machine (CI lints it): this wins
    // over ONESIDED_REQUIRE_PMIX.
    let without = env::var("ONESIDED_WITHOUT_SYSTEM_LIBS").is_ok_and(|v| v == "1");
    let required = env::var("ONESIDED_REQUIRE_PMIX").is_ok_and(|v| v == "1") && !without;
    let outcome = if without {
        Err("ONESIDED_WITHOUT_SYSTEM_LIBS=1 leaves it out".to_string())
    } else if env::var_os("DOCS_RS").is_some() {
        Ok(pregenerated())
    } else if env::var("ONESIDED_WRITE_DOCSRS_BINDINGS").is_ok_and(|v| v == "1") {
        let version =
            generate().unwrap_or_else(|why| panic!("ONESIDED_WRITE_DOCSRS_BINDINGS=1 but {why}"));
        write_docsrs(&version);
        Ok(version)
    } else {
        generate()
    };
    match outcome {
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
    fs::write(out.join("bindings.rs"), text).map_err(|e| format!("writing bindings: {e}"))?;
    fs::write(
        out.join("failure_codes.rs"),
        format!("[{}]\n", codes.join(", ")),
    )
    .map_err(|e| format!("writing failure_codes.rs: {e}"))?;
    Ok(lib.version)
}

/// What `docsrs/` holds besides `version`: files the real build writes to `OUT_DIR`.
const DOCSRS_FILES: [&str; 2] = ["bindings.rs", "failure_codes.rs"];

/// The checked-in files for docs.rs, beside this script.
fn docsrs_dir() -> PathBuf {
    PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR")).join("docsrs")
}

/// docs.rs: the checked-in files stand in for bindgen's. A missing file fails the build rather
/// than publish empty documentation.
fn pregenerated() -> String {
    let dir = docsrs_dir();
    println!("cargo::rerun-if-changed={}", dir.display());
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    for name in DOCSRS_FILES {
        fs::copy(dir.join(name), out.join(name))
            .unwrap_or_else(|e| panic!("DOCS_RS is set but docsrs/{name}: {e}"));
    }
    let version = fs::read_to_string(dir.join("version"))
        .unwrap_or_else(|e| panic!("DOCS_RS is set but docsrs/version: {e}"));
    version.trim().to_string()
}

/// `ONESIDED_WRITE_DOCSRS_BINDINGS=1`: keeps the fresh files and their version for docs.rs.
fn write_docsrs(version: &str) {
    let dir = docsrs_dir();
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    fs::create_dir_all(&dir).expect("creating docsrs/");
    for name in DOCSRS_FILES {
        fs::copy(out.join(name), dir.join(name))
            .unwrap_or_else(|e| panic!("writing docsrs/{name}: {e}"));
    }
    fs::write(dir.join("version"), format!("{version}\n")).expect("writing docsrs/version");
}
