//! Finds the libibverbs headers (rdma-core) with pkg-config and generates bindings with bindgen:
//! the types and constants only. The library itself is not linked: `src/library.rs` loads it at
//! run time and resolves the calls it exports by name, and the calls `verbs.h` defines inline
//! (`ibv_post_send`, `ibv_poll_cq`) go through the context's operation table, as the inline
//! definitions themselves do.
//!
//! Without the headers the crate builds empty and dependents see no `have_ibverbs` cfg, so the
//! default build needs only the Rust toolchain. `ONESIDED_REQUIRE_VERBS=1` turns missing headers
//! (or libclang) into a build error, so CI can never skip the verbs transport silently.
//!
//! On docs.rs (which sets `DOCS_RS`) the bindings checked in under `docsrs/` are used instead.
//! To regenerate them from the installed headers, run
//!
//! ```text
//! ONESIDED_WRITE_DOCSRS_BINDINGS=1 cargo build -p onesided-verbs
//! ```
//!
//! and commit `verbs/docsrs/`.

use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(have_ibverbs)");
    println!("cargo::rerun-if-env-changed=ONESIDED_REQUIRE_VERBS");
    println!("cargo::rerun-if-env-changed=ONESIDED_WITHOUT_SYSTEM_LIBS");
    println!("cargo::rerun-if-env-changed=ONESIDED_WRITE_DOCSRS_BINDINGS");
    println!("cargo::rerun-if-env-changed=DOCS_RS");
    println!("cargo::rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo::rerun-if-changed=wrapper.h");
    // The build a machine without the library gets, on any machine (CI lints it): this wins
    // over ONESIDED_REQUIRE_VERBS.
    let without = env::var("ONESIDED_WITHOUT_SYSTEM_LIBS").is_ok_and(|v| v == "1");
    let required = env::var("ONESIDED_REQUIRE_VERBS").is_ok_and(|v| v == "1") && !without;
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
            println!("cargo::rustc-cfg=have_ibverbs");
            println!("cargo::metadata=version={version}");
            println!("cargo::rustc-env=ONESIDED_VERBS_VERSION={version}");
        }
        Err(why) if required => panic!("ONESIDED_REQUIRE_VERBS=1 but {why}"),
        Err(why) => {
            println!("cargo::warning=building without the verbs transport: {why}");
            println!("cargo::metadata=version=");
        }
    }
}

fn generate() -> Result<String, String> {
    let lib = pkg_config::Config::new()
        .cargo_metadata(false)
        .probe("libibverbs")
        .map_err(|e| format!("pkg-config found no libibverbs (install libibverbs-dev): {e}"))?;
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .allowlist_type("ibv_.*|_compat_ibv_port_attr")
        .allowlist_var("IBV_.*")
        .blocklist_function(".*")
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false);
    for inc in &lib.include_paths {
        builder = builder.clang_arg(format!("-I{}", inc.display()));
    }
    let bindings =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || builder.generate()))
            .map_err(|_| "bindgen could not run (is libclang installed?)".to_string())?
            .map_err(|e| format!("bindgen failed on the libibverbs headers: {e}"))?;
    bindings
        .write_to_file(out.join("bindings.rs"))
        .map_err(|e| format!("writing bindings: {e}"))?;
    if let Some(path) = lib
        .link_paths
        .iter()
        .map(|dir| dir.join("libibverbs.so.1"))
        .find(|path| path.exists())
    {
        println!("cargo::rustc-env=ONESIDED_VERBS_LIBRARY={}", path.display());
    }
    Ok(lib.version)
}

/// The checked-in files for docs.rs, beside this script.
fn docsrs_dir() -> PathBuf {
    PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR")).join("docsrs")
}

/// docs.rs: the checked-in bindings stand in for bindgen's. A missing file fails the build
/// rather than publish empty documentation.
fn pregenerated() -> String {
    let dir = docsrs_dir();
    println!("cargo::rerun-if-changed={}", dir.display());
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    fs::copy(dir.join("bindings.rs"), out.join("bindings.rs"))
        .unwrap_or_else(|e| panic!("DOCS_RS is set but docsrs/bindings.rs: {e}"));
    let version = fs::read_to_string(dir.join("version"))
        .unwrap_or_else(|e| panic!("DOCS_RS is set but docsrs/version: {e}"));
    version.trim().to_string()
}

/// `ONESIDED_WRITE_DOCSRS_BINDINGS=1`: keeps the fresh bindings and their version for docs.rs.
fn write_docsrs(version: &str) {
    let dir = docsrs_dir();
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    fs::create_dir_all(&dir).expect("creating docsrs/");
    fs::copy(out.join("bindings.rs"), dir.join("bindings.rs"))
        .unwrap_or_else(|e| panic!("writing docsrs/bindings.rs: {e}"));
    fs::write(dir.join("version"), format!("{version}\n")).expect("writing docsrs/version");
}
