//! [`ColumnChart`]: vertical columns in a row, one per step.

use super::parts::*;
use super::text::*;
use super::*;
use crate::format::escape_html as esc;
use std::fmt::Write;

/// Height of a column chart's plot area.
const COLUMN_PLOT_H: f64 = 230.0;

/// Where a column chart's plot sits: `left` to `right`, `plot_top` to
/// `bottom`, values `v0` to `v1` up it, under a title ending at `top`.
struct Plot {
    top: f64,
    plot_top: f64,
    left: f64,
    right: f64,
    bottom: f64,
    v0: f64,
    v1: f64,
}

impl Plot {
    /// A value → pixels up the plot.
    fn sy(&self, v: f64) -> f64 {
        self.bottom - (v - self.v0) / (self.v1 - self.v0) * COLUMN_PLOT_H
    }
}

impl ColumnChart {
    pub fn to_svg(&self) -> String {
        let points = || {
            self.columns
                .iter()
                .filter_map(|c| c.point.as_ref())
                .filter(|p| p.value.is_finite())
        };
        if self.columns.is_empty() {
            return no_data(&self.title, "column");
        }
        let (lo, hi) = value_range(points(), None);
        let (vt, step) = ticks(lo, hi, 5);
        let labels: Vec<String> = vt.iter().map(|t| tick_label(*t, step)).collect();
        let lw = labels
            .iter()
            .map(|l| text_width(l, FONT))
            .fold(0.0, f64::max);
        let mut body = String::new();
        let top = title(&mut body, &self.title);
        // Room above the columns for their annotations.
        let plot_top = top + FONT * 2.0;
        let axis_label_x = PAD + FONT;
        let plot = Plot {
            top,
            plot_top,
            left: (axis_label_x + 6.0 + lw + 6.0).ceil(),
            right: WIDTH - PAD,
            bottom: plot_top + COLUMN_PLOT_H,
            v0: vt[0],
            v1: vt[vt.len() - 1],
        };
        let (left, right) = (plot.left, plot.right);
        let _ = write!(
            body,
            r##"<rect class="plot" x="{left:.2}" y="{plot_top:.2}" width="{:.2}" height="{COLUMN_PLOT_H:.2}" fill="none" stroke="#ccc"/>"##,
            right - left
        );
        body.push_str(r#"<g class="yticks">"#);
        for (t, l) in vt.iter().zip(&labels) {
            let y = plot.sy(*t);
            let _ = write!(
                body,
                r##"<line data-tick="{t}" x1="{left:.2}" x2="{right:.2}" y1="{y:.2}" y2="{y:.2}" stroke="#eee"/><text x="{:.2}" y="{:.2}" text-anchor="end">{}</text>"##,
                left - 4.0,
                y + FONT * 0.35,
                esc(l)
            );
        }
        body.push_str("</g>");
        let _ = write!(
            body,
            r#"<text transform="translate({axis_label_x:.2} {:.2}) rotate(-90)" text-anchor="middle"><title>{}</title>{}</text>"#,
            plot_top + COLUMN_PLOT_H / 2.0,
            esc(&self.y_label),
            esc(&fit(&self.y_label, COLUMN_PLOT_H, FONT))
        );
        let hollow = self.draw_columns(&mut body, &plot);
        let y = self.draw_legend(&mut body, plot.bottom + FONT * 2.5);
        let (k, key_h) = key(&self.uncertainty, hollow, y + 4.0);
        body.push_str(&k);
        let height = (y + 4.0 + key_h + PAD).ceil();
        document("column", &self.title, height, &body)
    }

    /// Each column in its slot: its bar and interval with the annotation
    /// above them, or what it is missing, and its label under the plot;
    /// returns whether any is drawn hollow.
    fn draw_columns(&self, body: &mut String, plot: &Plot) -> bool {
        let sy = |v: f64| plot.sy(v);
        let slot = (plot.right - plot.left) / self.columns.len() as f64;
        let bw = slot * 0.62;
        let mut hollow = false;
        for (i, c) in self.columns.iter().enumerate() {
            let cx = plot.left + slot * (i as f64 + 0.5);
            match c.point.as_ref().filter(|p| p.value.is_finite()) {
                Some(p) => {
                    hollow |= !p.converged;
                    let place = Place {
                        to_px: &sy,
                        ends: (plot.bottom, plot.plot_top),
                        vertical: true,
                        across: cx,
                    };
                    let shape = Shape::Bar {
                        base: 0.0,
                        thickness: bw,
                    };
                    let fill = if c.muted { "#999999" } else { color(0) };
                    let what = format!("{} {}:", c.label, c.legend);
                    draw_point(body, p, &place, shape, fill, &what);
                    // Above the column and its interval, below the title.
                    let (_, ci_hi) = p.interval();
                    let highest = sy(p.value.max(0.0)).min(sy(ci_hi.min(plot.v1)));
                    let y = (highest - 5.0).max(plot.top + FONT);
                    let _ = write!(
                        body,
                        r##"<text x="{cx:.2}" y="{y:.2}" text-anchor="middle" font-size="{:.0}">{}</text>"##,
                        FONT - 1.0,
                        esc(&fit(&c.annotation, slot - 2.0, FONT - 1.0))
                    );
                }
                None => {
                    let _ = write!(
                        body,
                        r##"<text x="{cx:.2}" y="{:.2}" text-anchor="middle" fill="#D55E00">{}</text>"##,
                        sy(0.0) - 6.0,
                        esc(&fit(&c.missing, slot - 2.0, FONT))
                    );
                }
            }
            let _ = write!(
                body,
                r##"<text x="{cx:.2}" y="{:.2}" text-anchor="middle">{}</text>"##,
                plot.bottom + FONT * 1.3,
                esc(&fit(&c.label, slot - 2.0, FONT))
            );
        }
        hollow
    }

    /// The legend from `y` down: a line per column, then the notes.
    /// Returns where it ends.
    fn draw_legend(&self, body: &mut String, mut y: f64) -> f64 {
        body.push_str(r#"<g class="legend">"#);
        let line_h = FONT * LINE_GAP;
        for c in self.columns.iter().filter(|c| !c.legend.is_empty()) {
            let lines = wrap(&c.legend, WIDTH - 2.0 * PAD, FONT);
            let _ = write!(
                body,
                r#"<g class="legend-entry" data-label="{}">"#,
                esc(&c.legend)
            );
            text_lines(body, PAD, y + FONT, &lines, FONT, "", None);
            body.push_str("</g>");
            y += lines.len() as f64 * line_h + 2.0;
        }
        for n in &self.notes {
            let lines = wrap(n, WIDTH - 2.0 * PAD, FONT);
            text_lines(body, PAD, y + FONT, &lines, FONT, r##" fill="#555""##, None);
            y += lines.len() as f64 * line_h + 2.0;
        }
        body.push_str("</g>");
        y
    }
}
