//! `onesided bench compare A B`: for every test and size present in both runs, A's value, B's
//! value, B/A, and which run is better by how much (latency: lower is better; bandwidth and
//! message rate: higher is better).

use super::{Error, Metric, Run, Series};
/// Ratios within this distance of 1 print as `same` (they print as 1.00).
const SAME: f64 = 0.005;

/// The `Better` column: `same`, or the better run and its advantage (`B 2.00x`).
fn verdict(a: f64, b: f64, lower_is_better: bool) -> String {
    let ratio = b / a;
    if a == b || (ratio.is_finite() && (ratio - 1.0).abs() < SAME) {
        return "same".to_owned();
    }
    let b_wins = (b < a) == lower_is_better;
    let factor = a.max(b) / a.min(b);
    let winner = if b_wins { "B" } else { "A" };
    if factor.is_finite() {
        format!("{winner} {factor:.2}x")
    } else {
        winner.to_owned()
    }
}

/// Appends one table's lines to `out`: the rows of the sizes of A's `sa` that B's `sb` has too, with `metric` on both. Returns
/// whether it had any row.
fn table(
    a: &Run,
    sa: &Series,
    b: &Run,
    sb: &Series,
    metric: Metric,
    out: &mut Vec<String>,
) -> bool {
    let mut rows: Vec<(u64, f64, f64)> = Vec::new();
    for ra in a.records.iter().filter(|r| &r.series == sa) {
        if rows.iter().any(|&(size, _, _)| size == ra.size) {
            continue;
        }
        let vb = b.at(sb, ra.size).and_then(|rb| rb.get(metric));
        if let (Some(va), Some(vb)) = (ra.get(metric), vb) {
            rows.push((ra.size, va, vb));
        }
    }
    if rows.is_empty() {
        return false;
    }
    let unit = sa.unit;
    let better = if unit.lower_is_better() {
        "lower is better"
    } else {
        "higher is better"
    };
    let metric = if metric == Metric::Value {
        String::new()
    } else {
        format!(", {}", metric.name())
    };
    out.push(String::new());
    out.push(format!(
        "# {}: {}{metric}; {better}",
        sa.merged(sb).describe(),
        unit.title()
    ));
    out.push(format!(
        "{:<10}{:>20}{:>20}{:>10}  Better",
        "# Size", "A", "B", "B/A"
    ));
    for (size, va, vb) in rows {
        let ratio = vb / va;
        let ratio = if ratio.is_finite() {
            format!("{ratio:.2}")
        } else {
            "-".to_owned()
        };
        out.push(format!(
            "{size:<10}{va:>20.2}{vb:>20.2}{ratio:>10}  {}",
            verdict(va, vb, unit.lower_is_better())
        ));
    }
    true
}

/// The series of a run, one per line, for an error message.
fn list(run: &Run) -> String {
    run.series()
        .iter()
        .map(|s| format!("\n  {}: {}", s.describe(), s.unit.symbol()))
        .collect()
}

/// The comparison of `a` and `b` as text: a header naming A and B, then one table per pair of
/// matching series. An error if no test and size is in both with `metric`.
pub(super) fn compare(a: &Run, b: &Run, metric: Metric) -> Result<String, Error> {
    let mut out = vec![
        format!("# A: {}", a.describe()),
        format!("# B: {}", b.describe()),
        format!(
            "# B/A: B's {} over A's; Better: the better run and by how much",
            metric.name()
        ),
    ];
    let mut any = false;
    for sa in a.series() {
        for sb in b.series().into_iter().filter(|sb| sa.matches(sb)) {
            any |= table(a, sa, b, sb, metric, &mut out);
        }
    }
    if !any {
        let why = if metric == Metric::Value {
            String::new()
        } else {
            format!(" with a `{}` (OSU text has only `value`)", metric.name())
        };
        return Err(Error::new(format!(
            "no test, synchronization, window, datatype, ranks and size in both {} and {}{why}\n\
             {} has:{}\n{} has:{}",
            a.source,
            b.source,
            a.source,
            list(a),
            b.source,
            list(b)
        )));
    }
    Ok(out.join("\n") + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_better_run_and_its_advantage() {
        assert_eq!(verdict(2.0, 1.0, true), "B 2.00x");
        assert_eq!(verdict(1.0, 2.0, true), "A 2.00x");
        assert_eq!(verdict(100.0, 150.0, false), "B 1.50x");
        assert_eq!(verdict(150.0, 100.0, false), "A 1.50x");
        assert_eq!(verdict(1.0, 1.001, true), "same");
        assert_eq!(verdict(0.0, 0.0, true), "same");
        assert_eq!(verdict(0.0, 1.0, true), "A");
    }
}
