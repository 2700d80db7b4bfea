//! `onesided info`: what this build and this machine offer the network transports: libfabric's
//! providers, the verbs devices, and which transport a window between nodes would use.

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
    let _ = writeln!(out, "{}", crate::transport::fabric::presets::describe());
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

/// The verbs devices as `ibv_devinfo -v` tells them, in onesided's terms: per port its state,
/// link layer, LID, MTU and GIDs (the one the direct verbs transport addresses marked), and per
/// device its atomic capability, inline size and registration limits; then which transport a
/// window between nodes would use.
#[cfg(have_ibverbs)]
pub fn verbs() -> String {
    use onesided_verbs as ib;
    use std::fmt::Write;
    let built = ib::BUILT_WITH.unwrap_or("?");
    let devices = match ib::devices() {
        Ok(d) => d,
        Err(e) => {
            return format!(
                "verbs: built against libibverbs {built}, not loaded: {e}\n{}",
                between(false)
            );
        }
    };
    let mut out = format!(
        "verbs: built against libibverbs {built}, {} device(s)\n",
        devices.len()
    );
    for d in &devices {
        let atomics = match d.atomic_cap {
            "none" => "none (every accumulate emulated under the target's lock)",
            "hca" => {
                "hca (8-byte fetch-and-add and compare-and-swap on the NIC, atomic with each other)"
            }
            _ => {
                "global (8-byte fetch-and-add and compare-and-swap on the NIC, atomic with the CPU's too)"
            }
        };
        let _ = writeln!(
            out,
            "{}: firmware {}, atomics {atomics}\n  max inline {} B, {} memory regions of up to {} B, \
             {} queue pairs of {} work requests, completion queues of {} entries, {} reads or \
             atomics in flight per queue pair",
            d.name,
            d.firmware,
            d.max_inline,
            d.max_mr,
            d.max_mr_size,
            d.max_qp,
            d.max_qp_wr,
            d.max_cqe,
            d.max_qp_rd_atom
        );
        for p in &d.ports {
            let chosen = ib::choose_gid(&p.gids, p.link_layer);
            let _ = writeln!(
                out,
                "  port {}: {}, link layer {}, lid {}, mtu {}, largest message {} B",
                p.number,
                p.state,
                p.link_layer.name(),
                p.lid,
                p.active_mtu,
                p.max_msg
            );
            for g in &p.gids {
                let mark = if chosen == Some(g.index) {
                    "  <- direct verbs addresses this one"
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    "    gid {:>2} {} {}{mark}",
                    g.index,
                    g.text(),
                    g.kind.as_deref().unwrap_or("")
                );
            }
        }
    }
    let usable = devices.iter().any(|d| d.active_port().is_some());
    out.push_str(&between(usable));
    out
}

/// The verbs report of a build without the libibverbs headers.
#[cfg(not(have_ibverbs))]
pub fn verbs() -> String {
    format!(
        "verbs: not built in (pkg-config found no libibverbs when onesided was built): the direct \
         verbs transport is unavailable. Install libibverbs-dev and libclang, then rebuild.\n{}",
        between(false)
    )
}

/// Which transport a window between nodes uses under `ONESIDED_TRANSPORT=auto`, given whether
/// this node has a usable verbs device.
fn between(verbs: bool) -> String {
    match (verbs, cfg!(have_libfabric)) {
        (true, _) => "between nodes: direct verbs (where every rank of the window has an active \
                      device; else libfabric)\n"
            .into(),
        (false, true) => "between nodes: libfabric (no active verbs device here)\n".into(),
        (false, false) => {
            "between nodes: none (neither verbs nor libfabric in this build)\n".into()
        }
    }
}
