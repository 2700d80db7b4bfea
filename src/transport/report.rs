//! `onesided info`: what this build and this machine offer the fabric transport.

/// The report: the libfabric version built against and loaded, every provider with its RMA and
/// atomic support, MR mode, key size and inject size, and whether the registration cache can
/// watch memory here.
#[cfg(have_libfabric)]
pub fn providers() -> String {
    use onesided_fabric as fi;
    use std::fmt::Write;
    let built = fi::BUILT_WITH.unwrap_or("?");
    let mut out = match fi::version() {
        Ok(loaded) => format!("libfabric: built against {built}, loaded {loaded}\n"),
        Err(e) => return format!("libfabric: built against {built}, not loaded: {e}\n"),
    };
    let list = match fi::list() {
        Ok(l) => l,
        Err(e) => return format!("{out}no providers: {e}\n"),
    };
    let _ = writeln!(
        out,
        "{:<18} {:<4} {:<7} {:<44} {:>4} {:>7}  fabric / domain",
        "provider", "rma", "atomic", "mr_mode", "key", "inject"
    );
    let yes = |b: bool| if b { "yes" } else { "no" };
    for p in list {
        let _ = writeln!(
            out,
            "{:<18} {:<4} {:<7} {:<44} {:>4} {:>7}  {} / {}",
            p.name,
            yes(p.rma),
            yes(p.atomics),
            p.mr_mode.names(),
            p.mr_key_size,
            p.inject_size,
            p.fabric,
            p.domain
        );
    }
    if !out.contains("verbs") {
        out.push_str(
            "verbs: no RDMA device here (no InfiniBand, RoCE or rxe): the verbs provider stays off\n",
        );
    }
    let _ = match fi::memory_monitor() {
        Ok(()) => writeln!(
            out,
            "registration cache (FI_MR_LOCAL): on, a userfaultfd watches the memory it keeps"
        ),
        Err(why) => writeln!(
            out,
            "registration cache (FI_MR_LOCAL): off ({why}): each registration serves one transfer"
        ),
    };
    out
}

/// The report of a build without libfabric.
#[cfg(not(have_libfabric))]
pub fn providers() -> String {
    "libfabric: not built in (pkg-config found no libfabric when onesided was built); only the \
     shared-memory transport is available. Install libfabric-dev, pkg-config and libclang, then \
     rebuild.\n"
        .into()
}
