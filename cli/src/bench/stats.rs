//! Statistics over the repetitions of one size: min, median, max and the 10th and 90th
//! percentiles, interpolated linearly between the sorted samples (the median of an even count is
//! the mean of the middle two).

/// What the repetitions of one size measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Summary {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub p10: f64,
    pub p90: f64,
}

impl Summary {
    /// The summary of `samples` (NaN everywhere if there are none).
    pub fn of(samples: &[f64]) -> Summary {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |p| percentile(&sorted, p);
        Summary {
            min: at(0.0),
            median: at(0.5),
            max: at(1.0),
            p10: at(0.1),
            p90: at(0.9),
        }
    }
}

/// The `p` quantile (0 to 1) of `sorted`, interpolated linearly.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else {
        return f64::NAN;
    };
    let pos = p * last as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_is_every_statistic() {
        let s = Summary::of(&[2.5]);
        assert_eq!(
            s,
            Summary {
                min: 2.5,
                median: 2.5,
                max: 2.5,
                p10: 2.5,
                p90: 2.5
            }
        );
    }

    #[test]
    fn percentiles_interpolate_between_sorted_samples() {
        let s = Summary::of(&[5.0, 1.0, 4.0, 2.0, 3.0]);
        assert_eq!((s.min, s.median, s.max), (1.0, 3.0, 5.0));
        assert!((s.p10 - 1.4).abs() < 1e-12);
        assert!((s.p90 - 4.6).abs() < 1e-12);
        assert_eq!(Summary::of(&[1.0, 2.0, 3.0, 4.0]).median, 2.5);
        assert!(Summary::of(&[]).median.is_nan());
    }
}
