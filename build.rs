//! Passes on whether `onesided-fabric` found libfabric: cfg `have_libfabric` compiles the
//! fabric transport in.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(have_libfabric)");
    if std::env::var("DEP_FABRIC_VERSION").is_ok_and(|v| !v.is_empty()) {
        println!("cargo::rustc-cfg=have_libfabric");
    }
}
