//! What every chart kind draws alike: the title, legend and key, the
//! document around a chart, ticks along an axis, and each measured point
//! with its interval.

use super::text::*;
use super::*;
use crate::format::{escape_html as esc, sig};
use std::fmt::Write;

/// Legend labels as drawn: duplicates get ` (2)`, ` (3)` … so every entry
/// names one line.
pub(super) fn unique_labels<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in names {
        let base = if n.trim().is_empty() {
            "(unnamed)".to_string()
        } else {
            n.to_string()
        };
        let mut label = base.clone();
        let mut k = 2;
        while out.contains(&label) {
            label = format!("{base} ({k})");
            k += 1;
        }
        out.push(label);
    }
    out
}

/// Multi-line text: one `<tspan>` per line.
pub(super) fn text_lines(
    out: &mut String,
    x: f64,
    y: f64,
    lines: &[String],
    size: f64,
    attrs: &str,
    title: Option<&str>,
) {
    let _ = write!(
        out,
        r#"<text x="{x:.2}" y="{y:.2}" font-size="{size}"{attrs}>"#
    );
    if let Some(t) = title {
        let _ = write!(out, "<title>{}</title>", esc(t));
    }
    for (i, l) in lines.iter().enumerate() {
        let dy = if i == 0 { 0.0 } else { size * LINE_GAP };
        let _ = write!(out, r#"<tspan x="{x:.2}" dy="{dy:.2}">{}</tspan>"#, esc(l));
    }
    out.push_str("</text>");
}

/// The title, wrapped to the chart's width; returns the y below it.
pub(super) fn title(out: &mut String, title: &str) -> f64 {
    let lines = wrap_with(title, WIDTH - 2.0 * PAD, &|t| bold_width(t, TITLE_FONT));
    text_lines(
        out,
        PAD,
        PAD + TITLE_FONT,
        &lines,
        TITLE_FONT,
        r#" font-weight="bold""#,
        None,
    );
    PAD + lines.len() as f64 * TITLE_FONT * LINE_GAP + 8.0
}

/// How a legend entry is drawn: its swatch and label.
pub(super) struct Entry {
    pub(super) label: String,
    pub(super) color: &'static str,
    pub(super) dash: &'static str,
}

/// Legend laid out below the plot, in as many columns as the longest label
/// allows, long labels wrapped (never cut: two lines that differ only at
/// their ends must still read differently). Returns its markup and height.
pub(super) fn legend(entries: &[Entry], top: f64) -> (String, f64) {
    if entries.is_empty() {
        return (String::new(), 0.0);
    }
    let avail = WIDTH - 2.0 * PAD;
    let swatch = 26.0;
    let widest = entries
        .iter()
        .map(|e| text_width(&e.label, FONT))
        .fold(0.0, f64::max);
    let cols = ((avail / (widest + swatch + 16.0)).floor() as usize).clamp(1, 3);
    let col_w = avail / cols as f64;
    let text_w = col_w - swatch - 8.0;
    let mut out = String::from(r#"<g class="legend">"#);
    let mut y = top;
    let line_h = FONT * LINE_GAP;
    for row in entries.chunks(cols) {
        let mut row_h: f64 = 0.0;
        for (ci, e) in row.iter().enumerate() {
            let x = PAD + ci as f64 * col_w;
            let lines = wrap(&e.label, text_w, FONT);
            let cy = y + FONT * 0.65;
            let dash = if e.dash.is_empty() {
                String::new()
            } else {
                format!(r#" stroke-dasharray="{}""#, e.dash)
            };
            let _ = write!(
                out,
                r#"<g class="legend-entry" data-label="{}"><line x1="{x:.2}" y1="{cy:.2}" x2="{:.2}" y2="{cy:.2}" stroke="{}" stroke-width="3"{dash}/>"#,
                esc(&e.label),
                x + swatch - 6.0,
                e.color,
            );
            text_lines(&mut out, x + swatch, y + FONT, &lines, FONT, "", None);
            out.push_str("</g>");
            row_h = row_h.max(lines.len() as f64 * line_h);
        }
        y += row_h + 4.0;
    }
    out.push_str("</g>");
    (out, y - top)
}

/// A chart's whole SVG document: the opening tag sized to `height`, the
/// chart's `body`, the closing tag.
pub(super) fn document(kind: &str, title: &str, height: f64, body: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        r##"<svg class="chart" data-kind="{kind}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0}" width="{WIDTH}" height="{height:.0}" role="img" aria-label="{t}" font-family="{FONT_FAMILY}" font-size="{FONT}"><rect width="{WIDTH}" height="{height:.0}" fill="#fff"/>"##,
        t = esc(title)
    );
    out.push_str(body);
    out.push_str("</svg>");
    out
}

pub(super) fn no_data(title_text: &str, kind: &str) -> String {
    let mut body = String::new();
    let top = title(&mut body, title_text);
    let h = (top + 3.0 * FONT + PAD).ceil();
    let _ = write!(
        body,
        r##"<text x="{PAD}" y="{:.2}" fill="#777">no data</text>"##,
        top + 1.5 * FONT
    );
    document(kind, title_text, h, &body)
}

/// Labels along an axis thinned so that neighbours keep `gap` px apart,
/// from the left; the tick lines stay, so the axis still covers the data.
/// `pos` are pixel centres in order.
pub(super) fn thin(pos: &[f64], widths: &[f64], gap: f64) -> Vec<bool> {
    let mut right = f64::NEG_INFINITY;
    pos.iter()
        .zip(widths)
        .map(|(p, w)| {
            let keep = p - w / 2.0 >= right + gap;
            if keep {
                right = p + w / 2.0;
            }
            keep
        })
        .collect()
}

/// Where an x–y chart's plot area sits and what its axes say.
pub(super) struct Frame<'a> {
    pub left: f64,
    pub top: f64,
    pub width: f64,
    pub height: f64,
    /// The x of the rotated y-axis title.
    pub y_title_x: f64,
    pub x_label: &'a str,
    pub y_label: &'a str,
}

/// The plot area of an x–y chart, as the line and history charts draw it
/// alike: its rectangle, a horizontal grid line and label at each y tick
/// (placed by the chart's own `sy`), the x ticks (placed by `sx`), both
/// axes, and the axis titles, x under the tick labels and y rotated beside
/// them. Returns the baseline of the x title, below which the legend goes.
pub(super) fn plot_frame(
    out: &mut String,
    f: &Frame,
    (sx, sy): (&dyn Fn(f64) -> f64, &dyn Fn(f64) -> f64),
    (yt, ylabels): (&[f64], &[String]),
    (xt, xlabels): (&[f64], &[String]),
) -> f64 {
    let ypos: Vec<f64> = yt.iter().map(|t| sy(*t)).collect();
    let xpos: Vec<f64> = xt.iter().map(|t| sx(*t)).collect();
    let y = (yt, &ypos[..], ylabels);
    let x = (xt, &xpos[..], xlabels);
    let (left, top, pw, ph) = (f.left, f.top, f.width, f.height);
    let bottom = top + ph;
    let _ = write!(
        out,
        r##"<rect class="plot" x="{left:.2}" y="{top:.2}" width="{pw:.2}" height="{ph:.2}" fill="none" stroke="none"/>"##
    );
    out.push_str(r#"<g class="yticks">"#);
    for ((t, pos), l) in y.0.iter().zip(y.1).zip(y.2) {
        let _ = write!(
            out,
            r##"<line data-tick="{t}" x1="{left:.2}" y1="{pos:.2}" x2="{:.2}" y2="{pos:.2}" stroke="#e3e3e3"/><text x="{:.2}" y="{:.2}" text-anchor="end">{}</text>"##,
            left + pw,
            left - 6.0,
            pos + FONT * 0.35,
            esc(l)
        );
    }
    out.push_str("</g>");
    x_ticks(out, x.0, x.1, x.2, (bottom, bottom + 5.0), "#999");
    let _ = write!(
        out,
        r##"<line x1="{left:.2}" y1="{top:.2}" x2="{left:.2}" y2="{bottom:.2}" stroke="#333"/><line x1="{left:.2}" y1="{bottom:.2}" x2="{:.2}" y2="{bottom:.2}" stroke="#333"/>"##,
        left + pw
    );
    let x_title_y = bottom + 5.0 + 2.0 * FONT * LINE_GAP + 2.0;
    let _ = write!(
        out,
        r#"<text x="{:.2}" y="{x_title_y:.2}" text-anchor="middle"><title>{}</title>{}</text>"#,
        left + pw / 2.0,
        esc(f.x_label),
        esc(&fit(f.x_label, pw, FONT))
    );
    let _ = write!(
        out,
        r#"<text transform="translate({:.2} {:.2}) rotate(-90)" text-anchor="middle"><title>{}</title>{}</text>"#,
        f.y_title_x,
        top + ph / 2.0,
        esc(f.y_label),
        esc(&fit(f.y_label, ph, FONT))
    );
    x_title_y
}

/// What an x–y chart's axes show: the ticks along each with the step their
/// labels are written to, the axis titles, and whether x is placed on a
/// log scale.
pub(super) struct XyAxes<'a> {
    pub y: (Vec<f64>, f64),
    pub x: (Vec<f64>, f64),
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub log_x: bool,
}

/// An x–y chart's plot area as drawn, and the scales that place values in
/// it: the line and history charts lay theirs out alike.
pub(super) struct XyPlot {
    pub left: f64,
    pub top: f64,
    pub width: f64,
    pub height: f64,
    /// The x (as placed: its log on a log axis) and y at the plot's edges.
    x_span: (f64, f64),
    y_span: (f64, f64),
    log_x: bool,
    /// The baseline of the x title, below which the legend goes.
    pub under: f64,
}

impl XyAxes<'_> {
    /// Draws the plot area with its top at `top` ([`plot_frame`]), its
    /// margins wide enough for the tick labels beside and under it.
    pub(super) fn draw(&self, body: &mut String, top: f64) -> XyPlot {
        let (yt, xt) = (&self.y.0, &self.x.0);
        let ylabels: Vec<String> = yt.iter().map(|v| tick_label(*v, self.y.1)).collect();
        let xlabels: Vec<String> = xt.iter().map(|v| tick_label(*v, self.x.1)).collect();
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
        let mut plot = XyPlot {
            left,
            top,
            width: WIDTH - left - right,
            height: PLOT_H,
            x_span: (0.0, 0.0),
            y_span: (yt[0], yt[yt.len() - 1]),
            log_x: self.log_x,
            under: 0.0,
        };
        let (mut x0, mut x1) = (plot.fx(xt[0]), plot.fx(xt[xt.len() - 1]));
        if x1 - x0 <= 0.0 || !(x1 - x0).is_finite() {
            x0 -= 1.0;
            x1 += 1.0;
        }
        plot.x_span = (x0, x1);
        let frame = Frame {
            left,
            top,
            width: plot.width,
            height: plot.height,
            y_title_x: axis_label_x,
            x_label: self.x_label,
            y_label: self.y_label,
        };
        let (sx, sy) = (|x| plot.sx(x), |y| plot.sy(y));
        let under = plot_frame(body, &frame, (&sx, &sy), (yt, &ylabels), (xt, &xlabels));
        plot.under = under;
        plot
    }
}

impl XyPlot {
    /// An x as placed along the axis.
    fn fx(&self, x: f64) -> f64 {
        if self.log_x {
            x.log2()
        } else {
            x
        }
    }
    /// The plot's lower edge, where the x axis runs.
    pub(super) fn bottom(&self) -> f64 {
        self.top + self.height
    }
    /// An x → pixels, kept [`INSET`] inside the plot's sides.
    pub(super) fn sx(&self, x: f64) -> f64 {
        let (x0, x1) = self.x_span;
        self.left + INSET + (self.fx(x) - x0) / (x1 - x0) * (self.width - 2.0 * INSET)
    }
    /// A y → pixels.
    pub(super) fn sy(&self, y: f64) -> f64 {
        let (y0, y1) = self.y_span;
        self.bottom() - (y - y0) / (y1 - y0) * self.height
    }
}

/// Draws the legend and the key under a chart, the legend from just below
/// `under` (the plot's lowest text), and returns the height the chart
/// needs to hold them.
pub(super) fn legend_and_key(
    body: &mut String,
    entries: &[Entry],
    under: f64,
    u: &Uncertainty,
    hollow: bool,
) -> f64 {
    let (leg, leg_h) = legend(entries, under + 10.0);
    body.push_str(&leg);
    let key_top = under + 10.0 + leg_h + 4.0;
    let (k, key_h) = key(u, hollow, key_top);
    body.push_str(&k);
    (key_top + key_h + PAD).ceil()
}

/// Ticks along the x axis: a line from `span.0` to `span.1` at each, with
/// `data-tick`, and its label under the line's end unless it would overlap
/// its left neighbour.
pub(super) fn x_ticks(
    out: &mut String,
    ticks: &[f64],
    pos: &[f64],
    labels: &[String],
    span: (f64, f64),
    stroke: &str,
) {
    let widths: Vec<f64> = labels.iter().map(|l| text_width(l, FONT)).collect();
    let keep = thin(pos, &widths, 6.0);
    out.push_str(r#"<g class="xticks">"#);
    for (i, t) in ticks.iter().enumerate() {
        let x = pos[i];
        let _ = write!(
            out,
            r#"<line data-tick="{t}" x1="{x:.2}" y1="{:.2}" x2="{x:.2}" y2="{:.2}" stroke="{stroke}"/>"#,
            span.0, span.1
        );
        if keep[i] {
            let _ = write!(
                out,
                r#"<text x="{x:.2}" y="{:.2}" text-anchor="middle">{}</text>"#,
                span.1 + FONT,
                esc(&labels[i])
            );
        }
    }
    out.push_str("</g>");
}

/// The values a chart's value axis must show: every value and zero, the
/// `extra` ones (a reference line), and each interval as far as it does
/// not squash the values: at most the values' own span beyond them. An
/// interval reaching further is cut at the plot's edge (and says so by
/// having no cap there).
pub(super) fn value_range<'a>(
    points: impl Iterator<Item = &'a Point>,
    extra: Option<f64>,
) -> (f64, f64) {
    let (mut lo, mut hi) = (0.0f64, 0.0f64);
    let (mut ci_lo, mut ci_hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for p in points.filter(|p| p.value.is_finite()) {
        lo = lo.min(p.value);
        hi = hi.max(p.value);
        let (a, b) = p.interval();
        if a.is_finite() {
            ci_lo = ci_lo.min(a);
        }
        if b.is_finite() {
            ci_hi = ci_hi.max(b);
        }
    }
    for v in extra.into_iter().filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    let span = hi - lo;
    (lo.min(ci_lo.max(lo - span)), hi.max(ci_hi.min(hi + span)))
}

/// How a point sits on its chart.
pub(super) struct Place<'a> {
    /// A value → pixels along the value axis.
    pub(super) to_px: &'a dyn Fn(f64) -> f64,
    /// The plot's edges along the value axis, in pixels, either order.
    pub(super) ends: (f64, f64),
    /// Values run up the page (else rightwards).
    pub(super) vertical: bool,
    /// The point's centre on the other axis.
    pub(super) across: f64,
}

impl Place<'_> {
    /// (x, y) of a value's pixel `v` on the value axis, `a` across it.
    fn xy(&self, v: f64, a: f64) -> (f64, f64) {
        if self.vertical {
            (a, v)
        } else {
            (v, a)
        }
    }
}

pub(super) enum Shape {
    /// A marker at the value (line charts).
    Dot,
    /// A bar from `base` to the value, `thickness` px across.
    Bar { base: f64, thickness: f64 },
}

/// An attribute's number: in full, and infinite bounds as JavaScript and
/// Rust both read them.
pub(super) fn attr_num(v: f64) -> String {
    if v == f64::INFINITY {
        "Infinity".into()
    } else if v == f64::NEG_INFINITY {
        "-Infinity".into()
    } else {
        format!("{v}")
    }
}

/// Draws one measured value, the one way every chart kind does: its mark
/// (a dot or a bar), hollow when it did not converge, carrying
/// `data-value`, `data-ci-low` and `data-ci-high` in the chart's units;
/// then its interval as an error bar (`class="ci"`) with a cap at each end
/// inside the plot and none where it is cut at the plot's edge. Both sit in
/// a `<g class="point">`. `what` opens the tooltip.
pub(super) fn draw_point(
    out: &mut String,
    p: &Point,
    place: &Place,
    shape: Shape,
    color: &str,
    what: &str,
) {
    let (lo, hi) = p.interval();
    let px = place.to_px;
    let (e0, e1) = (
        place.ends.0.min(place.ends.1),
        place.ends.0.max(place.ends.1),
    );
    let fill = if p.converged {
        format!(r#"fill="{color}""#)
    } else {
        format!(r##"fill="#fff" stroke="{color}" stroke-width="1.5""##)
    };
    let mut tip = format!(
        "{what} {} (interval {} to {})",
        sig(p.value, 4),
        sig(lo, 4),
        sig(hi, 4)
    );
    if !p.label.is_empty() {
        let _ = write!(tip, ", {}", p.label);
    }
    if !p.converged {
        tip.push_str(", hollow: not settled");
    }
    let data = format!(
        r#"data-value="{}" data-ci-low="{}" data-ci-high="{}" data-converged="{}""#,
        attr_num(p.value),
        attr_num(lo),
        attr_num(hi),
        p.converged
    );
    out.push_str(r#"<g class="point">"#);
    let cap = match shape {
        Shape::Dot => {
            let (x, y) = place.xy(px(p.value), place.across);
            let _ = write!(
                out,
                r#"<circle class="mark" cx="{x:.2}" cy="{y:.2}" r="3" {fill} {data}><title>{}</title></circle>"#,
                esc(&tip)
            );
            4.0
        }
        Shape::Bar { base, thickness } => {
            let (a, b) = (px(p.value.min(base)), px(p.value.max(base)));
            let (a, b) = (a.min(b), a.max(b));
            let (x, y) = place.xy(a, place.across - thickness / 2.0);
            let (w, h) = if place.vertical {
                (thickness, b - a)
            } else {
                (b - a, thickness)
            };
            let _ = write!(
                out,
                r#"<rect class="bar mark" x="{x:.2}" y="{y:.2}" width="{w:.2}" height="{h:.2}" {fill} {data}><title>{}</title></rect>"#,
                esc(&tip)
            );
            (thickness / 2.0 - 1.0).clamp(2.0, 4.0)
        }
    };
    // The interval's ends in pixels, cut at the plot's edges.
    let ends: Vec<(f64, bool)> = [lo, hi]
        .iter()
        .map(|v| {
            let raw = px(*v);
            let cut = raw.is_nan() || raw < e0 - 0.01 || raw > e1 + 0.01;
            (if raw.is_nan() { e0 } else { raw.clamp(e0, e1) }, cut)
        })
        .collect();
    let a = place.across;
    let xy = |v: f64, a: f64| {
        let (x, y) = place.xy(v, a);
        format!("{x:.2},{y:.2}")
    };
    let mut d = format!("M{}L{}", xy(ends[0].0, a), xy(ends[1].0, a));
    for (v, cut) in &ends {
        if !cut {
            let _ = write!(d, "M{}L{}", xy(*v, a - cap), xy(*v, a + cap));
        }
    }
    let _ = write!(
        out,
        r##"<path class="ci mark" d="{d}" fill="none" stroke="#222" stroke-width="1.2"/></g>"##
    );
}

/// Says under the legend what the error bars and (when any mark is) the
/// hollow marks stand for, each beside a small drawing of it. Returns its
/// markup and height.
pub(super) fn key(u: &Uncertainty, hollow: bool, top: f64) -> (String, f64) {
    let mut out = String::from(r#"<g class="key">"#);
    let mut y = top;
    let text_x = PAD + 26.0;
    let lines = [
        Some(format!("error bars: {}", u.interval)),
        hollow.then(|| format!("hollow: {}", u.hollow)),
    ];
    for (i, line) in lines.iter().enumerate() {
        let Some(line) = line else { continue };
        let cy = y + FONT * 0.65;
        let gx = PAD + 10.0;
        if i == 0 {
            let _ = write!(
                out,
                r##"<path d="M{gx:.2},{:.2}L{gx:.2},{:.2}M{:.2},{:.2}L{:.2},{:.2}M{:.2},{:.2}L{:.2},{:.2}" stroke="#222" stroke-width="1.2" fill="none"/>"##,
                cy - 6.0,
                cy + 6.0,
                gx - 4.0,
                cy - 6.0,
                gx + 4.0,
                cy - 6.0,
                gx - 4.0,
                cy + 6.0,
                gx + 4.0,
                cy + 6.0
            );
        } else {
            let _ = write!(
                out,
                r##"<circle cx="{gx:.2}" cy="{cy:.2}" r="4" fill="#fff" stroke="#555" stroke-width="1.5"/>"##
            );
        }
        let wrapped = wrap(line, WIDTH - PAD - text_x, FONT);
        text_lines(
            &mut out,
            text_x,
            y + FONT,
            &wrapped,
            FONT,
            r##" fill="#555""##,
            None,
        );
        y += wrapped.len() as f64 * FONT * LINE_GAP + 4.0;
    }
    out.push_str("</g>");
    (out, y - top)
}
