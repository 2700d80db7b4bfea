//! Finds libfabric with pkg-config and generates bindings with bindgen; the static inline calls
//! (fi_write, fi_cntr_read, ...) get C wrappers through bindgen's `wrap_static_fns`, compiled
//! with `cc`.
//!
//! Without libfabric the crate builds empty and dependents see no `have_libfabric` cfg, so the
//! default build needs only the Rust toolchain. `ONESIDED_REQUIRE_FABRIC=1` turns a missing
//! libfabric (or libclang) into a build error, so CI can never skip the fabric silently.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(have_libfabric)");
    println!("cargo::rerun-if-env-changed=ONESIDED_REQUIRE_FABRIC");
    println!("cargo::rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo::rerun-if-changed=wrapper.h");
    let required = env::var("ONESIDED_REQUIRE_FABRIC").is_ok_and(|v| v == "1");
    match generate() {
        Ok(version) => {
            println!("cargo::rustc-cfg=have_libfabric");
            println!("cargo::metadata=version={version}");
            println!("cargo::rustc-env=ONESIDED_FABRIC_VERSION={version}");
        }
        Err(why) if required => panic!("ONESIDED_REQUIRE_FABRIC=1 but {why}"),
        Err(why) => {
            println!("cargo::warning=building without the fabric transport: {why}");
            println!("cargo::metadata=version=");
        }
    }
}

fn generate() -> Result<String, String> {
    let lib = pkg_config::Config::new()
        .atleast_version("1.17")
        .probe("libfabric")
        .map_err(|e| format!("pkg-config found no libfabric >= 1.17 ({e})"))?;
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let wrappers = out.join("static_fns");
    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .allowlist_function("fi_.*")
        .allowlist_type("fi_.*|fid.*")
        .allowlist_var("FI_.*")
        .wrap_static_fns(true)
        .wrap_static_fns_path(&wrappers)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false);
    for inc in &lib.include_paths {
        builder = builder.clang_arg(format!("-I{}", inc.display()));
    }
    let bindings =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || builder.generate()))
            .map_err(|_| "bindgen could not run (is libclang installed?)".to_string())?
            .map_err(|e| format!("bindgen failed on the libfabric headers: {e}"))?;
    bindings
        .write_to_file(out.join("bindings.rs"))
        .map_err(|e| format!("writing bindings: {e}"))?;
    let mut cc = cc::Build::new();
    cc.file(wrappers.with_extension("c"))
        .include(env::current_dir().expect("cwd"))
        .warnings(false);
    for inc in &lib.include_paths {
        cc.include(inc);
    }
    cc.try_compile("onesided_fabric_static_fns")
        .map_err(|e| format!("compiling the static-inline wrappers: {e}"))?;
    Ok(lib.version)
}
