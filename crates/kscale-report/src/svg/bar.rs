//! [`BarChart`]: horizontal grouped bars, a row per category.

use super::parts::*;
use super::text::*;
use super::*;
use crate::format::escape_html as esc;
use std::fmt::Write;

/// Space between two categories' rows, and above the first and below the
/// last.
const GAP: f64 = 8.0;

/// Where a bar chart's rows go: the value axis from `left` across
/// `width` pixels (`v0` to `v1`), and each category's name as wrapped
/// beside its bars.
struct Rows {
    left: f64,
    width: f64,
    v0: f64,
    v1: f64,
    cat_lines: Vec<Vec<String>>,
    /// Bars per category (the series), and how thick each is drawn.
    nser: usize,
    bar_h: f64,
}

impl Rows {
    /// A value → pixels along the value axis.
    fn sx(&self, v: f64) -> f64 {
        self.left + (v - self.v0) / (self.v1 - self.v0) * self.width
    }
    /// The height of category `i`'s row with the gap under it: its bars or
    /// its name, whichever is taller.
    fn group_h(&self, i: usize) -> f64 {
        let bars = self.nser as f64 * self.bar_h;
        let text = self.cat_lines[i].len() as f64 * FONT * LINE_GAP;
        bars.max(text) + GAP
    }
}

impl BarChart {
    pub fn to_svg(&self) -> String {
        let points = || {
            self.series
                .iter()
                .flat_map(|(_, v)| v.iter().flatten())
                .filter(|p| p.value.is_finite())
        };
        if points().next().is_none() || self.categories.is_empty() {
            return no_data(&self.title, "bar");
        }
        let reference = self.reference.filter(|r| r.is_finite());
        let (lo, hi) = value_range(points(), reference);
        let (vt, vstep) = ticks(lo, hi, 5);
        let vlabels: Vec<String> = vt.iter().map(|v| tick_label(*v, vstep)).collect();
        let vw: Vec<f64> = vlabels.iter().map(|l| text_width(l, FONT)).collect();
        let (label_w, cat_lines) = self.category_lines();
        let left = (PAD + label_w + 8.0).max(PAD + vw[0] / 2.0).ceil();
        let right = (PAD + vw[vw.len() - 1] / 2.0).max(PAD + 6.0).ceil();
        let nser = self.series.len().max(1);
        let rows = Rows {
            left,
            width: WIDTH - left - right,
            v0: vt[0],
            v1: vt[vt.len() - 1],
            cat_lines,
            nser,
            bar_h: if nser == 1 { 14.0 } else { 10.0 },
        };
        let pw = rows.width;

        let mut body = String::new();
        let top = title(&mut body, &self.title);
        let ph: f64 = (0..self.categories.len())
            .map(|i| rows.group_h(i))
            .sum::<f64>()
            + GAP;
        let bottom = top + ph;
        let _ = write!(
            body,
            r##"<rect class="plot" x="{left:.2}" y="{top:.2}" width="{pw:.2}" height="{ph:.2}" fill="none" stroke="none"/>"##
        );
        // Vertical grid at the value ticks, labels under the axis.
        let pos: Vec<f64> = vt.iter().map(|t| rows.sx(*t)).collect();
        x_ticks(
            &mut body,
            &vt,
            &pos,
            &vlabels,
            (top, bottom + 4.0),
            "#e3e3e3",
        );
        let zero = rows.sx(0.0);
        let _ = write!(
            body,
            r##"<line x1="{zero:.2}" y1="{top:.2}" x2="{zero:.2}" y2="{bottom:.2}" stroke="#333"/>"##
        );
        let names = unique_labels(self.series.iter().map(|(n, _)| n.as_str()));
        let hollow = self.draw_rows(&mut body, &rows, &names, top);
        if let Some(r) = reference {
            let x = rows.sx(r);
            let _ = write!(
                body,
                r##"<line x1="{x:.2}" y1="{top:.2}" x2="{x:.2}" y2="{bottom:.2}" stroke="#333" stroke-dasharray="5 4"/>"##
            );
        }
        let axis_title_y = bottom + 4.0 + FONT + FONT * LINE_GAP + 2.0;
        let _ = write!(
            body,
            r#"<text x="{:.2}" y="{axis_title_y:.2}" text-anchor="middle"><title>{}</title>{}</text>"#,
            left + pw / 2.0,
            esc(&self.y_label),
            esc(&fit(&self.y_label, pw, FONT))
        );
        let entries: Vec<Entry> = names
            .iter()
            .enumerate()
            .map(|(i, n)| Entry {
                label: n.clone(),
                color: color(i),
                dash: "",
            })
            .collect();
        let height = legend_and_key(&mut body, &entries, axis_title_y, &self.uncertainty, hollow);
        document("bar", &self.title, height, &body)
    }

    /// Category names left of the bars, wrapped to two lines at most (the
    /// second cut to fit), with the width they are wrapped to.
    fn category_lines(&self) -> (f64, Vec<Vec<String>>) {
        let max_label = 0.42 * WIDTH;
        let widest = self
            .categories
            .iter()
            .map(|c| text_width(c, FONT))
            .fold(0.0, f64::max);
        let label_w = widest.min(max_label);
        let lines = self
            .categories
            .iter()
            .map(|c| {
                let mut l = wrap(c, label_w, FONT);
                if l.len() > 2 {
                    let rest = l[1..].join(" ");
                    l.truncate(1);
                    l.push(fit(&rest, label_w, FONT));
                }
                l
            })
            .collect();
        (label_w, lines)
    }

    /// Each category's row from `top` down: its name beside a bar per
    /// series (`names` as the legend has them); returns whether any bar is
    /// drawn hollow.
    fn draw_rows(&self, body: &mut String, rows: &Rows, names: &[String], top: f64) -> bool {
        let sx = |v: f64| rows.sx(v);
        let mut hollow = false;
        let mut y = top + GAP;
        for (gi, cat) in self.categories.iter().enumerate() {
            let gh = rows.group_h(gi) - GAP;
            let lines = &rows.cat_lines[gi];
            let text_h = lines.len() as f64 * FONT * LINE_GAP;
            text_lines(
                body,
                rows.left - 8.0,
                y + (gh - text_h) / 2.0 + FONT,
                lines,
                FONT,
                r#" text-anchor="end""#,
                Some(cat),
            );
            let bars_y = y + (gh - rows.nser as f64 * rows.bar_h) / 2.0;
            for (si, (_, values)) in self.series.iter().enumerate() {
                let Some(Some(p)) = values.get(gi) else {
                    continue;
                };
                if !p.value.is_finite() {
                    continue;
                }
                hollow |= !p.converged;
                let place = Place {
                    to_px: &sx,
                    ends: (rows.left, rows.left + rows.width),
                    vertical: false,
                    across: bars_y + (si as f64 + 0.5) * rows.bar_h,
                };
                let shape = Shape::Bar {
                    base: 0.0,
                    thickness: rows.bar_h - 2.0,
                };
                let what = format!("{cat} · {}:", names[si]);
                draw_point(body, p, &place, shape, color(si), &what);
            }
            y += gh + GAP;
        }
        hollow
    }
}
