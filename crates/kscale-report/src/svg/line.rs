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
        let fx = |x: f64| if log { x.log2() } else { x };

        // Axis values: y always from zero (or below), so heights of the eye
        // compare, and over the intervals; x on data values for log axes,
        // round ticks otherwise.
        let (ymin, ymax) = value_range(pts.iter().map(|p| p.1), None);
        let (yt, ystep) = ticks(ymin, ymax, 5);
        let (y0, y1) = (yt[0], yt[yt.len() - 1]);
        let mut xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let (xt, xstep) = if log || xs.len() <= 8 {
            let step = xs
                .windows(2)
                .map(|w| w[1] - w[0])
                .fold(f64::INFINITY, f64::min);
            let step = if step.is_finite() { step } else { xs[0].abs() };
            (xs.clone(), step)
        } else {
            ticks(xs[0], xs[xs.len() - 1], 6)
        };
        let (mut x0, mut x1) = (fx(xt[0]), fx(xt[xt.len() - 1]));
        if x1 - x0 <= 0.0 || !(x1 - x0).is_finite() {
            x0 -= 1.0;
            x1 += 1.0;
        }

        let ylabels: Vec<String> = yt.iter().map(|v| tick_label(*v, ystep)).collect();
        let xlabels: Vec<String> = xt.iter().map(|v| tick_label(*v, xstep)).collect();
        let xw: Vec<f64> = xlabels.iter().map(|l| text_width(l, FONT)).collect();
        let yw = ylabels
            .iter()
            .map(|l| text_width(l, FONT))
            .fold(0.0, f64::max);

        // Margins from what must fit beside the plot.
        let axis_label_x = PAD + FONT;
        let left = (axis_label_x + 6.0 + yw + 8.0)
            .max(PAD + xw[0] / 2.0 - INSET)
            .ceil();
        let right = (PAD + xw[xw.len() - 1] / 2.0 - INSET)
            .max(PAD + 10.0)
            .ceil();
        let pw = WIDTH - left - right;

        let mut body = String::new();
        let top = title(&mut body, &self.title);
        let ph = PLOT_H;
        let bottom = top + ph;
        let sx = |x: f64| left + INSET + (fx(x) - x0) / (x1 - x0) * (pw - 2.0 * INSET);
        let sy = |y: f64| bottom - (y - y0) / (y1 - y0) * ph;

        let frame = Frame {
            left,
            top,
            width: pw,
            height: ph,
            y_title_x: axis_label_x,
            x_label: &self.x_label,
            y_label: &self.y_label,
        };
        let x_title_y = plot_frame(
            &mut body,
            &frame,
            (&sx, &sy),
            (&yt, &ylabels),
            (&xt, &xlabels),
        );

        // Lines, then each measured point with its interval, in series
        // order.
        let names = unique_labels(self.series.iter().map(|s| s.name.as_str()));
        let mut entries = Vec::new();
        let mut ci = 0;
        let mut hollow = false;
        let place = |x: f64| Place {
            to_px: &sy,
            ends: (bottom, top),
            vertical: true,
            across: sx(x),
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
                .map(|(x, y)| format!("{:.2},{:.2}", sx(*x), sy(y.value)))
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
                draw_point(&mut body, pt, &place(*x), Shape::Dot, c, &what);
            }
        }
        let (leg, leg_h) = legend(&entries, x_title_y + 10.0);
        body.push_str(&leg);
        let key_top = x_title_y + 10.0 + leg_h + 4.0;
        let (k, key_h) = key(&self.uncertainty, hollow, key_top);
        body.push_str(&k);
        let height = (key_top + key_h + PAD).ceil();
        document("line", &self.title, height, &body)
    }
}
