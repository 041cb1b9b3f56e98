//! [`BarChart`]: horizontal grouped bars, a row per category.

use super::parts::*;
use super::text::*;
use super::*;
use crate::format::escape_html as esc;
use std::fmt::Write;

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
        let (v0, v1) = (vt[0], vt[vt.len() - 1]);
        let vlabels: Vec<String> = vt.iter().map(|v| tick_label(*v, vstep)).collect();
        let vw: Vec<f64> = vlabels.iter().map(|l| text_width(l, FONT)).collect();

        // Category names left of the bars, wrapped to two lines at most.
        let max_label = 0.42 * WIDTH;
        let widest = self
            .categories
            .iter()
            .map(|c| text_width(c, FONT))
            .fold(0.0, f64::max);
        let label_w = widest.min(max_label);
        let cat_lines: Vec<Vec<String>> = self
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
        let left = (PAD + label_w + 8.0).max(PAD + vw[0] / 2.0).ceil();
        let right = (PAD + vw[vw.len() - 1] / 2.0).max(PAD + 6.0).ceil();
        let pw = WIDTH - left - right;

        let nser = self.series.len().max(1);
        let bar_h = if nser == 1 { 14.0 } else { 10.0 };
        let gap = 8.0;
        let group_h = |i: usize| {
            let bars = nser as f64 * bar_h;
            let text = cat_lines[i].len() as f64 * FONT * LINE_GAP;
            bars.max(text) + gap
        };

        let mut body = String::new();
        let top = title(&mut body, &self.title);
        let ph: f64 = (0..self.categories.len()).map(group_h).sum::<f64>() + gap;
        let bottom = top + ph;
        let sx = |v: f64| left + (v - v0) / (v1 - v0) * pw;
        let _ = write!(
            body,
            r##"<rect class="plot" x="{left:.2}" y="{top:.2}" width="{pw:.2}" height="{ph:.2}" fill="none" stroke="none"/>"##
        );
        // Vertical grid at the value ticks, labels under the axis.
        let pos: Vec<f64> = vt.iter().map(|t| sx(*t)).collect();
        x_ticks(
            &mut body,
            &vt,
            &pos,
            &vlabels,
            (top, bottom + 4.0),
            "#e3e3e3",
        );
        let zero = sx(0.0);
        let _ = write!(
            body,
            r##"<line x1="{zero:.2}" y1="{top:.2}" x2="{zero:.2}" y2="{bottom:.2}" stroke="#333"/>"##
        );
        let names = unique_labels(self.series.iter().map(|(n, _)| n.as_str()));
        let mut hollow = false;
        let mut y = top + gap;
        for (gi, cat) in self.categories.iter().enumerate() {
            let gh = group_h(gi) - gap;
            let lines = &cat_lines[gi];
            let text_h = lines.len() as f64 * FONT * LINE_GAP;
            text_lines(
                &mut body,
                left - 8.0,
                y + (gh - text_h) / 2.0 + FONT,
                lines,
                FONT,
                r#" text-anchor="end""#,
                Some(cat),
            );
            let bars_y = y + (gh - nser as f64 * bar_h) / 2.0;
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
                    ends: (left, left + pw),
                    vertical: false,
                    across: bars_y + (si as f64 + 0.5) * bar_h,
                };
                let shape = Shape::Bar {
                    base: 0.0,
                    thickness: bar_h - 2.0,
                };
                let what = format!("{cat} · {}:", names[si]);
                draw_point(&mut body, p, &place, shape, color(si), &what);
            }
            y += gh + gap;
        }
        if let Some(r) = reference {
            let x = sx(r);
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
        let (leg, leg_h) = legend(&entries, axis_title_y + 10.0);
        body.push_str(&leg);
        let key_top = axis_title_y + 10.0 + leg_h + 4.0;
        let (k, key_h) = key(&self.uncertainty, hollow, key_top);
        body.push_str(&k);
        let height = (key_top + key_h + PAD).ceil();
        document("bar", &self.title, height, &body)
    }
}
