//! [`HistoryChart`]: one case's result over a series of runs, its change
//! points and the levels between them.

use super::parts::*;
use super::text::*;
use super::*;
use crate::format::{escape_html as esc, sig};
use std::fmt::Write;

/// Colour of the levels: the palette's second, apart from the points'.
const LEVEL_COLOR: &str = "#D55E00";
const CHANGE_COLOR: &str = "#555";
const CHANGE_DASH: &str = "5 3";

/// The values the value axis must show: every value and level, and each
/// interval as far as it does not squash them (the values' span beyond
/// them, or a twentieth of their size when they are all alike). Unlike
/// the other charts it does not reach down to zero: a history is read for
/// a step of a few percent, which an axis from zero would flatten.
fn history_range(points: &[&Point], levels: &[f64]) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in points
        .iter()
        .map(|p| p.value)
        .chain(levels.iter().copied())
        .filter(|v| v.is_finite())
    {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return (0.0, 1.0);
    }
    let reach = (hi - lo).max(0.05 * lo.abs().max(hi.abs()));
    let (mut ci_lo, mut ci_hi) = (lo, hi);
    for p in points {
        let (a, b) = p.interval();
        if a.is_finite() {
            ci_lo = ci_lo.min(a);
        }
        if b.is_finite() {
            ci_hi = ci_hi.max(b);
        }
    }
    (ci_lo.max(lo - reach), ci_hi.min(hi + reach))
}

impl HistoryChart {
    pub fn to_svg(&self) -> String {
        let n = self.runs.len();
        let drawn: Vec<(usize, &RunPoint)> = self
            .runs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.point.value.is_finite())
            .collect();
        if drawn.is_empty() {
            return no_data(&self.title, "history");
        }
        // Runs sit at their place in the series, 1 to n; a change between
        // the runs at places `at` and `at + 1`.
        let levels: Vec<&Level> = self
            .levels
            .iter()
            .filter(|l| l.value.is_finite() && l.from < l.to && l.to <= n)
            .collect();
        let changes: Vec<&ChangeMark> = self
            .changes
            .iter()
            .filter(|c| c.at >= 1 && c.at < n)
            .collect();
        let (ymin, ymax) = history_range(
            &drawn.iter().map(|(_, r)| &r.point).collect::<Vec<_>>(),
            &levels.iter().map(|l| l.value).collect::<Vec<_>>(),
        );
        let axes = XyAxes {
            y: ticks(ymin, ymax, 5),
            x: if n <= 10 {
                ((1..=n).map(|i| i as f64).collect(), 1.0)
            } else {
                ticks(1.0, n as f64, 6)
            },
            x_label: &self.x_label,
            y_label: &self.y_label,
            log_x: false,
        };
        let mut body = String::new();
        let mut top = title(&mut body, &self.title);
        // A row above the plot for the change points' run names.
        let names_y = top + FONT;
        if !changes.is_empty() {
            top += FONT * LINE_GAP + 4.0;
        }
        let plot = axes.draw(&mut body, top);
        // The runs, each in a group naming it, then the levels and the
        // change points over them so that many runs do not hide them.
        let hollow = draw_runs(&mut body, &plot, &drawn);
        draw_levels(&mut body, &plot, &levels);
        draw_changes(&mut body, &plot, &changes, names_y);
        let mut entries = vec![
            Entry {
                label: "each run's result".into(),
                color: color(0),
                dash: "",
            },
            Entry {
                label: "level: the mean of the runs between change points".into(),
                color: LEVEL_COLOR,
                dash: "",
            },
        ];
        if !changes.is_empty() {
            entries.push(Entry {
                label: "change point, before the first run after it (named above)".into(),
                color: CHANGE_COLOR,
                dash: CHANGE_DASH,
            });
        }
        let height = legend_and_key(&mut body, &entries, plot.under, &self.uncertainty, hollow);
        document("history", &self.title, height, &body)
    }
}

/// Each drawn run's point (its index in the series, the run) in a group
/// naming the run; returns whether any is drawn hollow.
fn draw_runs(body: &mut String, plot: &XyPlot, drawn: &[(usize, &RunPoint)]) -> bool {
    let sy = |y: f64| plot.sy(y);
    let mut hollow = false;
    for (i, r) in drawn {
        hollow |= !r.point.converged;
        let _ = write!(
            body,
            r#"<g class="run" data-run="{}" data-index="{i}">"#,
            r.run
        );
        let place = Place {
            to_px: &sy,
            ends: (plot.bottom(), plot.top),
            vertical: true,
            across: plot.sx(*i as f64 + 1.0),
        };
        draw_point(body, &r.point, &place, Shape::Dot, color(0), &r.what);
        body.push_str("</g>");
    }
    hollow
}

/// Each level as a line across the runs it is the mean of.
fn draw_levels(body: &mut String, plot: &XyPlot, levels: &[&Level]) {
    for l in levels {
        let y = plot.sy(l.value);
        let _ = write!(
            body,
            r#"<path class="level mark" data-level="{}" data-from="{}" data-to="{}" d="M{:.2},{y:.2}L{:.2},{y:.2}" fill="none" stroke="{LEVEL_COLOR}" stroke-width="2.5"><title>{}</title></path>"#,
            attr_num(l.value),
            l.from,
            l.to,
            plot.sx(l.from as f64 + 1.0),
            plot.sx(l.to as f64),
            esc(&format!(
                "level of runs {} to {}: {}",
                l.from + 1,
                l.to,
                sig(l.value, 4)
            ))
        );
    }
}

/// Each change point as a dashed line down the plot between its runs, and
/// its name in the row above the plot (at `names_y`), thinned so none
/// overlaps the one before; each marker keeps its tooltip.
fn draw_changes(body: &mut String, plot: &XyPlot, changes: &[&ChangeMark], names_y: f64) {
    let (top, bottom) = (plot.top, plot.bottom());
    let marker_x: Vec<f64> = changes.iter().map(|c| plot.sx(c.at as f64 + 0.5)).collect();
    for (c, x) in changes.iter().zip(&marker_x) {
        let _ = write!(
            body,
            r#"<path class="change mark" data-change-run="{}" data-change-index="{}" d="M{x:.2},{top:.2}L{x:.2},{bottom:.2}" fill="none" stroke="{CHANGE_COLOR}" stroke-width="1.5" stroke-dasharray="{CHANGE_DASH}"><title>{}</title></path>"#,
            c.run,
            c.at,
            esc(&c.tip)
        );
    }
    let names: Vec<String> = changes.iter().map(|c| fit(&c.label, 120.0, FONT)).collect();
    let widths: Vec<f64> = names.iter().map(|s| text_width(s, FONT)).collect();
    let centres: Vec<f64> = marker_x
        .iter()
        .zip(&widths)
        .map(|(x, w)| x.clamp(PAD + w / 2.0, WIDTH - PAD - w / 2.0))
        .collect();
    let keep = thin(&centres, &widths, 6.0);
    for (((c, name), x), k) in changes.iter().zip(&names).zip(&centres).zip(&keep) {
        if *k {
            let _ = write!(
                body,
                r##"<text class="change-name" x="{x:.2}" y="{names_y:.2}" text-anchor="middle" fill="{CHANGE_COLOR}"><title>{}</title>{}</text>"##,
                esc(&c.tip),
                esc(name)
            );
        }
    }
}
