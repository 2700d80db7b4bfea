//! The context of a JSON document: what ran where (library version, transport and provider,
//! ranks and nodes, CPU model and binding, host, start time).

use onesided::{Info, Result, Window, World};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

/// The `context` object of the JSON document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Context {
    /// The version of onesided.
    pub onesided: String,
    /// The network transport some target of a window is reached through ("fabric" for
    /// libfabric, "verbs" for direct verbs), else "shm".
    pub transport: String,
    /// The libfabric provider asked for (ONESIDED_FABRIC_PROVIDER, else FI_PROVIDER) when the
    /// transport is fabric; null otherwise, or when libfabric picks the first it has.
    pub provider: Option<String>,
    pub ranks: usize,
    /// Distinct nodes of the job.
    pub nodes: usize,
    /// The "model name" of /proc/cpuinfo on rank 0.
    pub cpu: String,
    /// "none" (no rank is bound), "core" (every rank bound to one CPU), the binding every rank
    /// has ("cpus 0-3"), or each rank's.
    pub binding: String,
    /// Rank 0's host name.
    pub host: String,
    /// When the job started, RFC 3339 in UTC.
    pub started: String,
    /// "per-op median" where each iteration was timed on its own and the median reported
    /// (`--per-op`); absent for OSU's mean over the loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<String>,
}

impl Context {
    /// Gathers the context; collective over `world` (a small window finds the transport).
    pub fn gather(world: &World, started: SystemTime, per_op: bool) -> Result<Context> {
        let win = Window::allocate(world, 8, 1, &Info::new())?;
        let network = (0..world.size())
            .map(|t| win.transport_name(t))
            .collect::<Result<Vec<_>>>()
            .map(|names| names.into_iter().find(|&n| n != "shm"));
        win.free()?;
        let network = network?;
        let fabric = network == Some("fabric");
        let node = world.split_shared()?;
        let leaders = world.allgather(&[u8::from(node.rank() == 0)])?;
        let bindings = world.allgather(own_binding().as_bytes())?;
        let bindings: Vec<String> = bindings
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect();
        let provider = ["ONESIDED_FABRIC_PROVIDER", "FI_PROVIDER"]
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|p| !p.is_empty()));
        Ok(Context {
            onesided: env!("CARGO_PKG_VERSION").to_owned(),
            transport: network.unwrap_or("shm").to_owned(),
            provider: provider.filter(|_| fabric),
            ranks: world.size(),
            nodes: leaders.iter().filter(|l| l.first() == Some(&1)).count(),
            cpu: cpu_model(),
            binding: combine(&bindings),
            host: read_trimmed("/proc/sys/kernel/hostname").unwrap_or_else(|| "unknown".into()),
            started: rfc3339(started),
            timing: per_op.then(|| "per-op median".to_owned()),
        })
    }

    /// The context of results merged from this job and `other` (the two jobs of `all`).
    pub fn merge(self, other: &Context) -> Context {
        let binding = if self.binding == other.binding {
            self.binding
        } else {
            format!(
                "{} ({} ranks); {} ({} ranks)",
                self.binding, self.ranks, other.binding, other.ranks
            )
        };
        let network = other.transport != "shm";
        Context {
            transport: if network {
                other.transport.clone()
            } else {
                self.transport
            },
            provider: self.provider.or_else(|| other.provider.clone()),
            ranks: self.ranks.max(other.ranks),
            nodes: self.nodes.max(other.nodes),
            binding,
            ..self
        }
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim() == "model name")
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The CPUs of a Linux CPU list such as "0-3,8,10-11" (None if it does not parse).
fn cpu_list(s: &str) -> Option<BTreeSet<usize>> {
    let mut cpus = BTreeSet::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
        cpus.extend(a..=b);
    }
    Some(cpus)
}

/// This process's binding: "none" when it may run on every online CPU, "cpu N" or "cpus LIST".
fn own_binding() -> String {
    let allowed = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|l| l.trim().to_owned())
        });
    let online = read_trimmed("/sys/devices/system/cpu/online");
    describe(allowed.as_deref(), online.as_deref())
}

fn describe(allowed: Option<&str>, online: Option<&str>) -> String {
    let Some(list) = allowed else {
        return "unknown".into();
    };
    let cpus = cpu_list(list);
    if cpus.is_some() && cpus == online.and_then(cpu_list) {
        return "none".into();
    }
    match cpus {
        Some(c) if c.len() == 1 => format!("cpu {list}"),
        _ => format!("cpus {list}"),
    }
}

/// One text for the bindings of every rank.
fn combine(bindings: &[String]) -> String {
    if bindings.iter().all(|b| b == "none") {
        "none".into()
    } else if bindings.iter().all(|b| b.starts_with("cpu "))
        && bindings.iter().collect::<BTreeSet<_>>().len() == bindings.len()
    {
        "core".into()
    } else if bindings.windows(2).all(|w| w[0] == w[1]) {
        bindings.first().cloned().unwrap_or_else(|| "none".into())
    } else {
        bindings
            .iter()
            .enumerate()
            .map(|(r, b)| format!("rank {r}: {b}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// `t` as RFC 3339 in UTC, to the second ("2025-01-31T12:00:00Z").
fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (H. Hinnant's civil_from_days).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_print_as_rfc3339_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3_723);
        assert_eq!(rfc3339(t), "2000-02-29T01:02:03Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_735_689_599);
        assert_eq!(rfc3339(t), "2024-12-31T23:59:59Z");
    }

    #[test]
    fn bindings_read_from_cpu_lists() {
        assert_eq!(describe(Some("0-3"), Some("0-3")), "none");
        assert_eq!(describe(Some("2"), Some("0-3")), "cpu 2");
        assert_eq!(describe(Some("0-1,3"), Some("0-3")), "cpus 0-1,3");
        assert_eq!(describe(None, Some("0-3")), "unknown");
        assert_eq!(cpu_list("0-2,5"), Some(BTreeSet::from([0, 1, 2, 5])));
        assert_eq!(cpu_list("x"), None);
        let all = |v: &[&str]| combine(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(all(&["none", "none"]), "none");
        assert_eq!(all(&["cpu 0", "cpu 1"]), "core");
        assert_eq!(all(&["cpus 0-1", "cpus 0-1"]), "cpus 0-1");
        assert_eq!(all(&["cpu 0", "none"]), "rank 0: cpu 0; rank 1: none");
    }
}
