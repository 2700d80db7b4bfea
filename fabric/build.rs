//! Finds libfabric with pkg-config and generates bindings with bindgen; the static inline calls
//! (fi_write, fi_cntr_read, ...) get C wrappers through bindgen's `wrap_static_fns`, compiled
//! with `cc`. The library itself is not linked: `src/library.rs` loads it at run time, and
//! the calls it exports are left out of the bindings.
//!
//! Without libfabric the crate builds empty and dependents see no `have_libfabric` cfg, so the
//! default build needs only the Rust toolchain. `ONESIDED_REQUIRE_FABRIC=1` turns a missing
//! libfabric (or libclang) into a build error, so CI can never skip the fabric silently.
//!
//! On docs.rs (which sets `DOCS_RS`, and has neither libfabric nor libclang) the script uses the
//! bindings checked in under `docsrs/` instead: it copies `docsrs/bindings.rs` into `OUT_DIR`,
//! emits `have_libfabric` and the version in `docsrs/version`, and compiles no C (rustdoc links
//! nothing), so the documentation shows the whole API. To regenerate those files from the
//! installed libfabric, run
//!
//! ```text
//! ONESIDED_WRITE_DOCSRS_BINDINGS=1 cargo build -p onesided-fabric
//! ```
//!
//! and commit `fabric/docsrs/`.

use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(have_libfabric)");
    println!("cargo::rerun-if-env-changed=ONESIDED_REQUIRE_FABRIC");
    println!("cargo::rerun-if-env-changed=ONESIDED_WITHOUT_SYSTEM_LIBS");
    println!("cargo::rerun-if-env-changed=ONESIDED_WRITE_DOCSRS_BINDINGS");
    println!("cargo::rerun-if-env-changed=DOCS_RS");
    println!("cargo::rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo::rerun-if-changed=wrapper.h");
    // The build a machine without the library gets, on any machine (CI lints it): this wins
    // over ONESIDED_REQUIRE_FABRIC.
    let without = env::var("ONESIDED_WITHOUT_SYSTEM_LIBS").is_ok_and(|v| v == "1");
    let required = env::var("ONESIDED_REQUIRE_FABRIC").is_ok_and(|v| v == "1") && !without;
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

/// The calls libfabric exports: kept out of the bindings, since the library is not linked but
/// loaded at run time and these are reached through `library.rs` (`fi_allocinfo`, a static
/// inline, calls one of them).
const EXPORTED: &str = "fi_(getinfo|dupinfo|freeinfo|allocinfo|fabric|open|strerror|version|\
                        tostr|tostr_r|log|log_enabled|log_ready|param_define|param_get|\
                        getparams|freeparams)";

fn generate() -> Result<String, String> {
    let lib = pkg_config::Config::new()
        .atleast_version("1.17")
        .cargo_metadata(false)
        .probe("libfabric")
        .map_err(|e| format!("pkg-config found no libfabric >= 1.17 ({e})"))?;
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let wrappers = out.join("static_fns");
    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .allowlist_function("fi_.*")
        .blocklist_function(EXPORTED)
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
    if let Some(path) = lib
        .link_paths
        .iter()
        .map(|dir| dir.join("libfabric.so.1"))
        .find(|path| path.exists())
    {
        println!(
            "cargo::rustc-env=ONESIDED_FABRIC_LIBRARY={}",
            path.display()
        );
    }
    Ok(lib.version)
}

/// What `docsrs/` holds besides `version`: files the real build writes to `OUT_DIR`.
const DOCSRS_FILES: [&str; 1] = ["bindings.rs"];

/// The checked-in files for docs.rs, beside this script.
fn docsrs_dir() -> PathBuf {
    PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR")).join("docsrs")
}

/// docs.rs: the checked-in files stand in for bindgen's; nothing is compiled or linked. A
/// missing file fails the build rather than publish empty documentation.
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
