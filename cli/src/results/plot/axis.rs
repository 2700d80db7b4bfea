//! The ticks and labels of the log axes: sizes at powers of two (`1`, `4K`, `1M`), values at 1,
//! 2 and 5 times the powers of ten.

/// At most this many size labels on an x axis.
const MAX_SIZE_LABELS: usize = 12;
/// At most this many value labels on a y axis; beyond, only the powers of ten.
const MAX_VALUE_LABELS: usize = 12;

/// A size in bytes, short: `512`, `4K`, `1M`.
pub(super) fn bytes(size: f64) -> String {
    let size = size.round() as u64;
    match size {
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{}M", s >> 20),
        s if s >= 1 << 10 && s % (1 << 10) == 0 => format!("{}K", s >> 10),
        s => s.to_string(),
    }
}

/// A value with at most six decimals and none that are zero: `0.05`, `2`, `10000`.
pub(super) fn number(value: f64) -> String {
    format!("{}", (value * 1e6).round() / 1e6)
}

/// The powers of two from `lo` to `hi`, thinned to at most [`MAX_SIZE_LABELS`].
pub(super) fn size_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (first, last) = (lo.log2().ceil() as i32, hi.log2().floor() as i32);
    let count = usize::try_from(last - first + 1).unwrap_or(0);
    let step = count.div_ceil(MAX_SIZE_LABELS).max(1);
    (first..=last).step_by(step).map(|e| 2f64.powi(e)).collect()
}

/// 1, 2 and 5 times the powers of ten from `lo` to `hi`, or only the powers of ten where those
/// would be more than [`MAX_VALUE_LABELS`].
pub(super) fn value_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (first, last) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let within = |steps: &[f64]| -> Vec<f64> {
        (first..=last)
            .flat_map(|e| steps.iter().map(move |m| m * 10f64.powi(e)))
            .filter(|v| (lo..=hi).contains(v))
            .collect()
    };
    let fine = within(&[1.0, 2.0, 5.0]);
    if fine.len() <= MAX_VALUE_LABELS {
        fine
    } else {
        within(&[1.0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_short_powers_of_two() {
        assert_eq!(bytes(512.0), "512");
        assert_eq!(bytes(4096.0), "4K");
        assert_eq!(bytes(4194304.0), "4M");
        assert_eq!(
            size_ticks(0.8, 80.0),
            [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
        );
        assert_eq!(size_ticks(0.8, 5e6).len(), 12);
    }

    #[test]
    fn values_are_one_two_five_times_powers_of_ten() {
        let labels: Vec<String> = value_ticks(0.04, 3.0).into_iter().map(number).collect();
        assert_eq!(labels, ["0.05", "0.1", "0.2", "0.5", "1", "2"]);
        assert_eq!(value_ticks(5.0, 2e6), [10.0, 100.0, 1e3, 1e4, 1e5, 1e6]);
    }
}
