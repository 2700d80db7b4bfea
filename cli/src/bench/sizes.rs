//! Message sizes as OSU takes and runs them: `[MIN:]MAX` with K/M (and G) suffixes, then
//! doubling.

/// Message sizes, as OSU runs them: `min`, then doubling while at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// The smallest size in bytes (at least 1).
    pub min: usize,
    /// The largest size in bytes (at least `min`).
    pub max: usize,
}

impl Sizes {
    /// The OSU default, 1 B to 4 MiB.
    pub const DEFAULT: Sizes = Sizes {
        min: 1,
        max: 4 << 20,
    };

    /// The sizes in increasing order: `min`, `2 * min`, ... up to `max` (OSU's loop, so that
    /// bounds that are not powers of two give sizes within them).
    pub fn iter(self) -> impl Iterator<Item = usize> {
        std::iter::successors(Some(self.min), |s| s.checked_mul(2))
            .take_while(move |s| *s <= self.max)
    }
}

/// One size: a byte count of at least 1 with an optional K (KiB), M (MiB) or G (GiB) suffix.
fn parse_size(s: &str) -> std::result::Result<usize, String> {
    let (digits, scale) = match s.strip_suffix(['K', 'k']) {
        Some(d) => (d, 1usize << 10),
        None => match s.strip_suffix(['M', 'm']) {
            Some(d) => (d, 1 << 20),
            None => match s.strip_suffix(['G', 'g']) {
                Some(d) => (d, 1 << 30),
                None => (s, 1),
            },
        },
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 64, 8K, 4M)"))?;
    let n = n
        .checked_mul(scale)
        .ok_or_else(|| format!("{s} is too large"))?;
    if n == 0 {
        return Err("sizes are at least 1 byte".into());
    }
    Ok(n)
}

/// Parses `-m` as OSU does: `MAX`, `MIN:MAX`, `MIN:` (MAX stays 4M) or `:MAX` (MIN stays 1).
pub fn parse_sizes(s: &str) -> std::result::Result<Sizes, String> {
    let (min, max) = match s.split_once(':') {
        Some(("", "")) => return Err("-m needs MIN, MAX or both".into()),
        Some((min, "")) => (parse_size(min)?, Sizes::DEFAULT.max),
        Some(("", max)) => (Sizes::DEFAULT.min, parse_size(max)?),
        Some((min, max)) => (parse_size(min)?, parse_size(max)?),
        None => (Sizes::DEFAULT.min, parse_size(s)?),
    };
    if min > max {
        return Err(format!("MIN {min} is larger than MAX {max}"));
    }
    Ok(Sizes { min, max })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(min: usize, max: usize) -> Sizes {
        Sizes { min, max }
    }

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_sizes("8:8"), Ok(sizes(8, 8)));
        assert_eq!(parse_sizes("4M"), Ok(sizes(1, 4 << 20)));
        assert_eq!(parse_sizes("1k:2K"), Ok(sizes(1024, 2048)));
        assert!(parse_sizes("0").is_err());
        assert!(parse_sizes("0:8").is_err());
        assert!(parse_sizes("8:4").is_err());
        assert!(parse_sizes("x").is_err());
        assert!(parse_sizes("1:x").is_err());
        assert!(parse_sizes("99999999999999999999M").is_err());
    }

    #[test]
    fn sizes_parse_every_osu_form() {
        assert_eq!(parse_sizes("64"), Ok(sizes(1, 64)));
        assert_eq!(parse_sizes("16:"), Ok(sizes(16, 4 << 20)));
        assert_eq!(parse_sizes(":128"), Ok(sizes(1, 128)));
        assert_eq!(parse_sizes("2:32"), Ok(sizes(2, 32)));
        assert!(parse_sizes(":").is_err());
        assert!(parse_sizes("8M:").is_err());
        assert!(parse_sizes("1:2:3").is_err());
    }

    #[test]
    fn sizes_iterate_by_doubling() {
        let v: Vec<usize> = sizes(2, 16).iter().collect();
        assert_eq!(v, [2, 4, 8, 16]);
        assert_eq!(Sizes::DEFAULT.iter().count(), 23);
    }

    #[test]
    fn bounds_that_are_not_powers_of_two_stay_within_them() {
        let v: Vec<usize> = parse_sizes("3:100").unwrap().iter().collect();
        assert_eq!(v, [3, 6, 12, 24, 48, 96]);
        let v: Vec<usize> = parse_sizes("100").unwrap().iter().collect();
        assert_eq!(v, [1, 2, 4, 8, 16, 32, 64]);
        let v: Vec<usize> = parse_sizes("5:7").unwrap().iter().collect();
        assert_eq!(v, [5]);
        let top: Vec<usize> = sizes(usize::MAX / 2 + 1, usize::MAX).iter().collect();
        assert_eq!(top, [usize::MAX / 2 + 1]);
    }
}
