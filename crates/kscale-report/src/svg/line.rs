//! [`LineChart`]: a metric against a numeric param, a line per series.

use super::parts::*;
use super::text::*;
use super::*;
use crate::format::{escape_html as esc, sig};
use std::fmt::Write;

impl LineChart {
    pub fn to_svg(&self) -> String {
        let pts: Vec<(f64, &Point)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|(x, p)| (*x, p)))
            .filter(|(x, p)| x.is_finite() && p.value.is_finite())
            .collect();
        if pts.is_empty() {
            return no_data(&self.title, "line");
        }
        // Zero or negative x cannot sit on a log axis: draw linear.
        let log = self.log_x && pts.iter().all(|p| p.0 > 0.0);

        // Axis values: y always from zero (or below), so heights of the eye
        // compare, and over the intervals; x on data values for log axes,
        // round ticks otherwise.
        let (ymin, ymax) = value_range(pts.iter().map(|p| p.1), None);
        let mut xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let x = if log || xs.len() <= 8 {
            let step = xs
                .windows(2)
                .map(|w| w[1] - w[0])
                .fold(f64::INFINITY, f64::min);
            let step = if step.is_finite() { step } else { xs[0].abs() };
            (xs.clone(), step)
        } else {
            ticks(xs[0], xs[xs.len() - 1], 6)
        };
        let axes = XyAxes {
            y: ticks(ymin, ymax, 5),
            x,
            x_label: &self.x_label,
            y_label: &self.y_label,
            log_x: log,
        };
        let mut body = String::new();
        let top = title(&mut body, &self.title);
        let plot = axes.draw(&mut body, top);
        let (entries, hollow) = self.draw_series(&mut body, &plot);
        let height = legend_and_key(&mut body, &entries, plot.under, &self.uncertainty, hollow);
        document("line", &self.title, height, &body)
    }

    /// The lines, then each measured point with its interval, in series
    /// order; returns their legend entries and whether any point is drawn
    /// hollow.
    fn draw_series(&self, body: &mut String, plot: &XyPlot) -> (Vec<Entry>, bool) {
        let names = unique_labels(self.series.iter().map(|s| s.name.as_str()));
        let mut entries = Vec::new();
        let mut ci = 0;
        let mut hollow = false;
        let sy = |y: f64| plot.sy(y);
        let place = |x: f64| Place {
            to_px: &sy,
            ends: (plot.bottom(), plot.top),
            vertical: true,
            across: plot.sx(x),
        };
        for (s, name) in self.series.iter().zip(&names) {
            let mut p: Vec<(f64, &Point)> = s
                .points
                .iter()
                .map(|(x, p)| (*x, p))
                .filter(|(x, p)| x.is_finite() && p.value.is_finite())
                .collect();
            p.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (c, d) = if s.reference {
                ("#777", "5 4")
            } else {
                ci += 1;
                (color(ci - 1), dash(ci - 1))
            };
            entries.push(Entry {
                label: name.clone(),
                color: c,
                dash: d,
            });
            if p.is_empty() {
                continue;
            }
            let path: Vec<String> = p
                .iter()
                .map(|(x, y)| format!("{:.2},{:.2}", plot.sx(*x), plot.sy(y.value)))
                .collect();
            let dash_attr = if d.is_empty() {
                String::new()
            } else {
                format!(r#" stroke-dasharray="{d}""#)
            };
            let _ = write!(
                body,
                r#"<polyline class="series mark" fill="none" stroke="{c}" stroke-width="2"{dash_attr} points="{}"><title>{}</title></polyline>"#,
                path.join(" "),
                esc(name)
            );
            if s.reference {
                continue;
            }
            for (x, pt) in &p {
                hollow |= !pt.converged;
                let what = format!("{name}: {} →", sig(*x, 4));
                draw_point(body, pt, &place(*x), Shape::Dot, c, &what);
            }
        }
        (entries, hollow)
    }
}
