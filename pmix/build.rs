//! Finds libpmix with pkg-config and generates bindings with bindgen.
//!
//! Without libpmix (or libclang) the crate builds empty and dependents see no `have_pmix` cfg,
//! so the default build needs only the Rust toolchain. `ONESIDED_REQUIRE_PMIX=1` turns a
//! missing libpmix into a build error, so CI can never skip PMIx silently.

use std::env;
use std::path::PathBuf;

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
    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .allowlist_function("PMIx_(Init|Finalize|Abort|Put|Commit|Fence|Get|Register_event_handler|Error_string|Value_load|Value_destruct|Info_load)")
        .allowlist_type("pmix_(proc|value|info|byte_object|status|scope|data_type|rank|notification_fn|event_notification_cbfunc_fn|hdlr_reg_cbfunc)_t")
        .allowlist_var("PMIX_(SUCCESS|GLOBAL|BOOL|INT|STRING|UINT32|PROC|BYTE_OBJECT|MAX_KEYLEN|JOB_SIZE|COLLECT_DATA|EVENT_AFFECTED_PROC|EXIT_CODE|EVENT_ACTION_COMPLETE|ERR_PROC_ABORTED|ERR_PROC_ABORTING|ERR_PROC_ABORTED_BY_SIG|EVENT_PROC_TERMINATED|ERR_LOST_CONNECTION|ERR_UNREACH)")
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
    bindings
        .write_to_file(out.join("bindings.rs"))
        .map_err(|e| format!("writing bindings: {e}"))?;
    Ok(lib.version)
}
