//! Kernel CPU lists (`0-3,8,10-11`), as `/sys/devices/system/cpu/online`,
//! `Cpus_allowed_list` and `taskset -c` write them.

/// CPU numbers a list may name: below the most CPUs a Linux kernel is built for (`NR_CPUS`).
const MOST_CPUS: usize = 8192;

/// The CPUs of `list`, ascending and each once; `None` for a list that is empty, malformed,
/// holds a range written backwards or names a CPU from [`MOST_CPUS`] on.
pub(crate) fn parse(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.trim().split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
        if a > b || b >= MOST_CPUS {
            return None;
        }
        cpus.extend(a..=b);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// `cpus` as a list [`parse`] reads: the numbers, comma-separated.
pub(crate) fn format(cpus: &[usize]) -> String {
    let names: Vec<String> = cpus.iter().map(usize::to_string).collect();
    names.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_of_ranges_and_single_cpus() {
        assert_eq!(parse("0-1"), Some(vec![0, 1]));
        assert_eq!(parse("0"), Some(vec![0]));
        assert_eq!(parse("0-3,8,10-11\n").map(|c| c.len()), Some(7));
        assert_eq!(parse("5,2-3,3"), Some(vec![2, 3, 5]));
        assert_eq!(parse(&format(&[2, 3, 5])), Some(vec![2, 3, 5]));
    }

    #[test]
    fn malformed_lists_are_refused() {
        for bad in ["", "3-1", "a", "1,", "-2", "0-8192", "8192"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        assert_eq!(parse("8191").map(|c| c.len()), Some(1));
    }
}
