//! `onesided bench plot FILES -o OUT.svg`: the values of several runs against message size, on
//! log-log axes, one panel per unit present (latency in us, bandwidth in MB/s, message rate),
//! one line per file and series, each panel with its legend below it.
//!
//! A legend entry is the file, the test and the synchronization, followed by whichever of
//! window, datatype and ranks take more than one value among the plotted series. Points that a
//! log axis cannot show (size 0, values of 0 or less) are left out.

mod axis;

use super::{Error, Metric, Run, Series, Unit};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// Width of the picture, in pixels.
const WIDTH: u32 = 1000;
/// Height of a panel's chart, in pixels.
const CHART_HEIGHT: u32 = 480;
/// Height of a legend entry, in pixels.
const LEGEND_LINE: u32 = 20;
/// Space above and below a legend, in pixels.
const LEGEND_PAD: u32 = 10;
/// Left edge of the legend's samples, in pixels (under the y axis).
const LEGEND_X: i32 = 95;
/// The first colors of the lines (matplotlib's tab10); further lines take plotters' palette.
const COLORS: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// A panel's area of the picture.
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// One line of the chart.
struct Line {
    label: String,
    unit: Unit,
    points: Vec<(f64, f64)>,
}

/// The color of the `i`th line of a panel.
fn color(i: usize) -> RGBAColor {
    COLORS
        .get(i)
        .map_or_else(|| Palette99::pick(i).to_rgba(), |c| c.to_rgba())
}

/// The legend entry of `series` of the run from `source`; `shown` tells whether window,
/// datatype and ranks take part.
fn label(source: &str, series: &Series, shown: [bool; 3]) -> String {
    let mut parts = vec![format!("{source}: {}", series.test)];
    parts.extend(series.sync.clone());
    let optional = [&series.window, &series.datatype];
    for (field, shown) in optional.into_iter().zip(shown) {
        parts.extend(field.clone().filter(|_| shown));
    }
    if shown[2] {
        parts.push(format!("{} ranks", series.ranks));
    }
    parts.join(", ")
}

/// The lines of `runs`, one per run and series, with the points `metric` gives.
fn lines(runs: &[Run], metric: Metric) -> Vec<Line> {
    let all: Vec<(&Run, &Series)> = runs
        .iter()
        .flat_map(|run| run.series().into_iter().map(move |s| (run, s)))
        .collect();
    let several = |f: &dyn Fn(&Series) -> Option<String>| {
        let mut values: Vec<String> = all.iter().filter_map(|(_, s)| f(s)).collect();
        values.sort();
        values.dedup();
        values.len() > 1
    };
    let shown = [
        several(&|s| s.window.clone()),
        several(&|s| s.datatype.clone()),
        several(&|s| Some(s.ranks.to_string())),
    ];
    all.iter()
        .map(|&(run, series)| {
            run.records
                .iter()
                .filter(|r| &r.series == series && r.size > 0)
                .filter_map(|r| Some((r.size as f64, r.get(metric)?)))
                .filter(|&(_, v)| v > 0.0)
                .collect::<Vec<_>>()
        })
        .zip(&all)
        .filter(|(points, _)| !points.is_empty())
        .map(|(points, &(run, series))| Line {
            label: label(&run.source, series, shown),
            unit: series.unit,
            points,
        })
        .collect()
}

/// The range of `values`, widened by `factor` on both sides (a log axis needs lo < hi).
fn span(values: impl Iterator<Item = f64>, factor: f64) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    (lo / factor, hi * factor)
}

/// Maps a drawing error to an [`Error`] naming the output.
fn drawing<E: std::error::Error>(out: &Path) -> impl Fn(E) -> Error + '_ {
    move |e| Error::new(format!("drawing {}: {e}", out.display()))
}

/// Draws the chart of `lines` (all of one unit) on `area`.
fn chart(
    area: &Area,
    unit: Unit,
    metric: Metric,
    lines: &[&Line],
    out: &Path,
) -> Result<(), Error> {
    let (x0, x1) = span(
        lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)),
        1.25,
    );
    let (y0, y1) = span(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)), 1.5);
    let caption = match metric {
        Metric::Value => format!("{} against message size", unit.title()),
        m => format!("{}, {}, against message size", unit.title(), m.name()),
    };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(
            (x0..x1)
                .log_scale()
                .with_key_points(axis::size_ticks(x0, x1)),
            (y0..y1)
                .log_scale()
                .with_key_points(axis::value_ticks(y0, y1)),
        )
        .map_err(drawing(out))?;
    chart
        .configure_mesh()
        .x_desc("Size (bytes)")
        .y_desc(unit.title())
        .x_label_formatter(&|x| axis::bytes(*x))
        .y_label_formatter(&|y| axis::number(*y))
        .draw()
        .map_err(drawing(out))?;
    for (i, line) in lines.iter().enumerate() {
        let style = color(i).stroke_width(2);
        chart
            .draw_series(LineSeries::new(line.points.clone(), style))
            .map_err(drawing(out))?;
        chart
            .draw_series(
                line.points
                    .iter()
                    .map(|&p| Circle::new(p, 3, color(i).filled())),
            )
            .map_err(drawing(out))?;
    }
    Ok(())
}

/// Draws the legend of `lines` on `area`: a sample of each line and its label, one a row.
fn legend(area: &Area, lines: &[&Line], out: &Path) -> Result<(), Error> {
    let text = TextStyle::from(("sans-serif", 14)).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, line) in lines.iter().enumerate() {
        let y = (LEGEND_PAD + LEGEND_LINE / 2 + LEGEND_LINE * i as u32) as i32;
        let style = color(i).stroke_width(2);
        area.draw(&PathElement::new(
            [(LEGEND_X, y), (LEGEND_X + 30, y)],
            style,
        ))
        .map_err(drawing(out))?;
        area.draw(&Circle::new((LEGEND_X + 15, y), 3, color(i).filled()))
            .map_err(drawing(out))?;
        area.draw(&Text::new(line.label.clone(), (LEGEND_X + 40, y), &text))
            .map_err(drawing(out))?;
    }
    Ok(())
}

/// Draws `runs` into the SVG file `out`, one panel per unit present, with `metric`.
pub(super) fn plot(runs: &[Run], metric: Metric, out: &Path) -> Result<(), Error> {
    let lines = lines(runs, metric);
    let mut units: Vec<Unit> = lines.iter().map(|l| l.unit).collect();
    units.sort();
    units.dedup();
    if units.is_empty() {
        return Err(Error::new(format!(
            "nothing to plot: no `{}` above 0 at a size above 0 in these files",
            metric.name()
        )));
    }
    let panels: Vec<(Unit, Vec<&Line>)> = units
        .into_iter()
        .map(|u| (u, lines.iter().filter(|l| l.unit == u).collect()))
        .collect();
    let legend_height = |n: usize| LEGEND_LINE * n as u32 + 2 * LEGEND_PAD;
    let height = panels
        .iter()
        .map(|(_, l)| CHART_HEIGHT + legend_height(l.len()))
        .sum();
    let root = SVGBackend::new(out, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE).map_err(drawing(out))?;
    let mut rest = root;
    for (unit, lines) in &panels {
        let (chart_area, below) = rest.split_vertically(CHART_HEIGHT);
        let (legend_area, below) = below.split_vertically(legend_height(lines.len()));
        chart(&chart_area, *unit, metric, lines, out)?;
        legend(&legend_area, lines, out)?;
        rest = below;
    }
    rest.present().map_err(drawing(out))
}
