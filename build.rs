//! Passes on whether `onesided-fabric` found libfabric (cfg `have_libfabric` compiles the fabric
//! transport in), whether `onesided-verbs` found the libibverbs headers (cfg `have_ibverbs`: the
//! direct verbs transport), `have_nic` where either is (the code both NIC transports share),
//! and whether `onesided-pmix` found libpmix (cfg `have_pmix`: PMIx wire-up).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(have_libfabric)");
    println!("cargo::rustc-check-cfg=cfg(have_pmix)");
    println!("cargo::rustc-check-cfg=cfg(have_ibverbs)");
    println!("cargo::rustc-check-cfg=cfg(have_nic)");
    let verbs = std::env::var("DEP_IBVERBS_VERSION").is_ok_and(|v| !v.is_empty());
    let fabric = std::env::var("DEP_FABRIC_VERSION").is_ok_and(|v| !v.is_empty());
    if verbs {
        println!("cargo::rustc-cfg=have_ibverbs");
    }
    if verbs || fabric {
        println!("cargo::rustc-cfg=have_nic");
    }
    if std::env::var("DEP_PMIX_VERSION").is_ok_and(|v| !v.is_empty()) {
        println!("cargo::rustc-cfg=have_pmix");
    }
    if fabric {
        println!("cargo::rustc-cfg=have_libfabric");
    }
}
