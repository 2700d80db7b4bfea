//! The variables each rank sets for itself before libfabric loads: libfabric and the libraries
//! it links read them once, when they load, so `World::init` sets them first (only those the
//! environment does not set).
//!
//! On every machine:
//!
//! - `IPATH_NO_BACKTRACE=1` and `HFI_NO_BACKTRACE=1`: Debian's libfabric links QLogic PSM's
//!   `libinfinipath`, whose load-time constructor otherwise installs its own handler for SIGINT,
//!   SIGTERM, SIGSEGV, SIGBUS, SIGILL and SIGABRT, in place of the program's. That handler writes
//!   a backtrace to stderr and to a file `<program>.80s-<pid>,<host>.btr` in the working
//!   directory (for the faults) and then exits with status 1: a rank stopped by Ctrl-C, by
//!   Slurm's SIGTERM or by an abort was no longer reported as killed by its signal, and a handler
//!   the program had installed (before `World::init`, or while the library loads after it) was
//!   gone. Older releases of Intel's `libpsm2` (Omni-Path) install such handlers too unless
//!   `HFI_NO_BACKTRACE` is set, by Open MPI's release notes (Debian's installs none unless
//!   `HFI_BACKTRACE` is set). Open MPI's `opal_init` sets both.
//!
//! Where the kernel lists an RDMA device, so that a job over `verbs;ofi_rxm` runs with nothing
//! set by the user:
//!
//! - `FI_UNIVERSE_SIZE`: rxm asks the verbs provider for one completion queue of
//!   `rx x U + tx x U` entries (`rx` counted once where receive contexts are shared,
//!   `FI_OFI_RXM_USE_SRX=1`), with the message queue sizes `FI_OFI_RXM_MSG_RX_SIZE` and
//!   `FI_OFI_RXM_MSG_TX_SIZE` (128 each by default) and `U` = `FI_UNIVERSE_SIZE` (256 by
//!   default). verbs does not clamp that to the device's `max_cqe` (ofiwg/libfabric#10692): on
//!   rxe, which holds 32767 entries, 65536 fails every endpoint with EINVAL. Set to the largest
//!   `U` that fits every active device, where rxm's default does not.
//! - `FI_MR_CACHE_MAX_COUNT=0`: libfabric's own registration cache off. onesided keeps its own
//!   (registrations of window memory for the window's life, of local buffers in the fabric
//!   crate's cache), and libfabric 1.17's cache under rxm breaks when one range is registered
//!   twice on a domain (alloc_mem memory registered ahead and attached to a dynamic window, a
//!   local buffer on a page of window memory): rxm's map of keys for atomics refuses the cached
//!   key again (`MR map insert for atomic verification failed`), the registration fails after
//!   freeing what it returns, and atomics on the memory fail with `unknown key`.

/// The variables that keep `libinfinipath`'s and `libpsm2`'s signal handlers out.
const NO_BACKTRACE: [&str; 2] = ["IPATH_NO_BACKTRACE", "HFI_NO_BACKTRACE"];

/// rxm's `FI_UNIVERSE_SIZE` when the environment sets none.
const RXM_DEFAULT: usize = 256;

/// The largest `FI_UNIVERSE_SIZE` (at most rxm's default) whose completion queue fits
/// `max_cqe` entries, with the rxm settings `var` reads; `None` where even 1 does not fit.
pub(crate) fn fitting(max_cqe: usize, var: impl Fn(&str) -> Option<String>) -> Option<usize> {
    let size = |name: &str| {
        var(name)
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(128)
    };
    let (rx, tx) = (
        size("FI_OFI_RXM_MSG_RX_SIZE"),
        size("FI_OFI_RXM_MSG_TX_SIZE"),
    );
    let shared =
        var("FI_OFI_RXM_USE_SRX").is_some_and(|v| matches!(v.trim(), "1" | "yes" | "true"));
    let (fixed, per_peer) = match shared {
        true => (rx, tx),
        false => (0, rx + tx),
    };
    let u = max_cqe.checked_sub(fixed)? / per_peer.max(1);
    (u >= 1).then_some(u.min(RXM_DEFAULT))
}

/// Set the variables above for this process's libfabric (each that the environment does not
/// set), before libfabric loads.
pub(crate) fn apply() {
    for var in NO_BACKTRACE {
        let _ = onesided_fabric::preset(var, "1");
    }
    if !rdma_devices() {
        return;
    }
    let _ = onesided_fabric::preset("FI_MR_CACHE_MAX_COUNT", "0");
    if std::env::var_os("FI_UNIVERSE_SIZE").is_some() {
        return;
    }
    let Some(limit) = onesided_verbs::completion_limit() else {
        return;
    };
    if let Some(u) = fitting(limit as usize, |k| std::env::var(k).ok()).filter(|&u| u < RXM_DEFAULT)
    {
        let _ = onesided_fabric::preset("FI_UNIVERSE_SIZE", &u.to_string());
        tracing::debug!(
            universe = u,
            max_cqe = limit,
            "FI_UNIVERSE_SIZE set for rxm over verbs"
        );
    }
}

/// What `onesided info` says of them: the values a rank uses and why.
#[cfg(feature = "launcher")]
pub(crate) fn describe() -> String {
    let backtrace = NO_BACKTRACE
        .map(|var| match std::env::var(var) {
            Ok(v) => format!("{var}={v} (set in the environment)"),
            Err(_) => format!("{var}=1, set by each rank"),
        })
        .join(", ");
    let backtrace = format!("{backtrace} (the program's signal handlers stay, not PSM's)");
    if !rdma_devices() {
        return format!("libfabric settings: {backtrace}; no others needed (no RDMA device)");
    }
    let cache = match std::env::var("FI_MR_CACHE_MAX_COUNT") {
        Ok(v) => format!("FI_MR_CACHE_MAX_COUNT={v} (set in the environment)"),
        Err(_) => "FI_MR_CACHE_MAX_COUNT=0, set by each rank (onesided caches registrations \
                   itself)"
            .to_owned(),
    };
    let universe = if let Ok(given) = std::env::var("FI_UNIVERSE_SIZE") {
        format!("FI_UNIVERSE_SIZE={given} (set in the environment)")
    } else {
        match onesided_verbs::completion_limit() {
            None => "FI_UNIVERSE_SIZE: rxm's default (no active verbs device limits it)".into(),
            Some(limit) => match fitting(limit as usize, |k| std::env::var(k).ok()) {
                Some(u) if u < RXM_DEFAULT => format!(
                    "FI_UNIVERSE_SIZE={u}, set by each rank: rxm's completion queue over verbs \
                     then fits the {limit} entries of the smallest device (a job of more ranks \
                     over verbs;ofi_rxm: FI_OFI_RXM_USE_SRX=1)"
                ),
                Some(_) => {
                    format!("FI_UNIVERSE_SIZE: rxm's default ({limit} completion entries fit it)")
                }
                None => format!(
                    "FI_UNIVERSE_SIZE: no value fits rxm's completion queue into {limit} entries"
                ),
            },
        }
    };
    format!("libfabric settings: {backtrace}; {cache}; {universe}")
}

/// Whether the kernel lists RDMA devices (a look at sysfs, before loading libibverbs).
fn rdma_devices() -> bool {
    std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn rxe_fits_127_peers_with_rxm_defaults() {
        assert_eq!(fitting(32767, env(&[])), Some(127));
        assert_eq!((128 + 128) * 127, 32512);
    }

    #[test]
    fn a_large_queue_keeps_rxm_default_and_settings_count() {
        assert_eq!(fitting(4_194_303, env(&[])), Some(256));
        let small = [
            ("FI_OFI_RXM_MSG_RX_SIZE", "64"),
            ("FI_OFI_RXM_MSG_TX_SIZE", "64"),
        ];
        assert_eq!(fitting(32767, env(&small)), Some(255));
        let srx = [("FI_OFI_RXM_USE_SRX", "1")];
        assert_eq!(fitting(32767, env(&srx)), Some(254), "(32767 - 128) / 128");
        assert_eq!(fitting(100, env(&[])), None, "not even one peer fits");
    }
}
