//! Hand-written SVG charts. This module draws and knows no report section:
//! a chart is plain data — a [`LineChart`], [`BarChart`] or [`ColumnChart`]
//! of measured [`Point`]s — that the sections build, and it lays itself
//! out: margins, axis ranges, tick labels, wrapped titles and legends are
//! computed from the data and from the width the text will take, so
//! nothing is clipped, no mark is drawn outside its plot and every line
//! stays honest whatever values a workload produces.
//!
//! A measured value is never drawn without its uncertainty: every chart
//! kind draws its points through one function (`draw_point`), which
//! draws the interval as an error bar and the mark hollow when the value
//! did not converge; a key under the legend says what both mean.
//!
//! What the layout guarantees (and `tests/svg_props.rs` checks for arbitrary
//! charts): every mark lies inside the plot area (`rect.plot`), the axis
//! ticks cover every value drawn, legend labels are unique, no text leaves
//! the viewBox, and every point's error bar spans its interval. The
//! rendered markup carries what a checker needs: `class="plot"` on the plot
//! area, `class="mark"` on every data mark, `data-tick` on every tick,
//! `class="legend-entry"` with `data-label` on every legend entry, and a
//! `g.point` per measured value holding its mark (with `data-value`,
//! `data-ci-low`, `data-ci-high`, `data-converged`) and its error bar
//! (`class="ci"`).

use crate::format::{escape_html as esc, sig};
use std::fmt::Write;

/// Width of every chart; the height follows from the content.
pub const WIDTH: f64 = 640.0;
/// Space kept free along every edge of the chart.
const PAD: f64 = 10.0;
const FONT: f64 = 12.0;
const TITLE_FONT: f64 = 14.0;
const LINE_GAP: f64 = 1.3;
/// Height of a line chart's plot area.
const PLOT_H: f64 = 250.0;
/// Markers and line ends stay this far inside the plot area.
const INSET: f64 = 6.0;

/// Colour-blind-safe palette (Okabe–Ito); after the eighth series the
/// colours repeat with a dash pattern so lines stay distinguishable.
const PALETTE: &[&str] = &[
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#B8A000", "#000000",
];
const DASHES: &[&str] = &["", "6 3", "2 2", "8 3 2 3"];

fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

fn dash(i: usize) -> &'static str {
    DASHES[(i / PALETTE.len()) % DASHES.len()]
}

/// The font the charts ask for first; [`text_width`] uses its metrics, and
/// the alternatives have the same or narrower ones.
const FONT_FAMILY: &str = "DejaVu Sans, Verdana, sans-serif";

/// Advance width of one character in DejaVu Sans, in ems.
fn char_em(c: char) -> f64 {
    match c {
        ' ' | '.' | ',' | '·' => 0.32,
        'i' | 'l' | 'j' | 'I' | 'J' | '\'' | '|' | '!' => 0.3,
        ':' | ';' | '/' | '\\' => 0.337,
        'f' | 't' | 'r' => 0.411,
        '(' | ')' | '[' | ']' | '-' => 0.39,
        'a'..='z' => match c {
            'm' => 0.974,
            'w' => 0.818,
            _ => 0.636,
        },
        '0'..='9' => 0.636,
        'A'..='Z' => match c {
            'M' | 'W' => 0.99,
            _ => 0.79,
        },
        '_' | '–' | '*' | '"' => 0.5,
        '{' | '}' | 'µ' => 0.636,
        '=' | '+' | '<' | '>' | '#' | '×' | '÷' | '~' | '^' | '±' | '&' => 0.838,
        '%' | '@' | '—' | '…' => 1.0,
        c if (c as u32) >= 0x2E80 => 1.0,
        _ => 0.8,
    }
}

/// Estimated width of `s` at `size` px; a little above DejaVu Sans's real
/// advance widths, so layouts computed with it fit in a browser.
pub fn text_width(s: &str, size: f64) -> f64 {
    s.chars().map(char_em).sum::<f64>() * size * 1.03
}

/// [`text_width`] for bold text.
pub fn bold_width(s: &str, size: f64) -> f64 {
    text_width(s, size) * 1.12
}

/// `s` cut to at most `max` px, ending in `…` when cut.
fn fit(s: &str, max: f64, size: f64) -> String {
    if text_width(s, size) <= max {
        return s.to_string();
    }
    let mut out = String::new();
    for c in s.chars() {
        let mut t = out.clone();
        t.push(c);
        t.push('…');
        if text_width(&t, size) > max {
            break;
        }
        out.push(c);
    }
    out.push('…');
    out
}

/// Greedy word wrap into lines of at most `max` px (measured with
/// `width`); a word longer than a line is broken where it must be.
fn wrap_with(s: &str, max: f64, width: &dyn Fn(&str) -> f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in s.split(' ').filter(|w| !w.is_empty()) {
        let candidate = if cur.is_empty() {
            word.to_string()
        } else {
            format!("{cur} {word}")
        };
        if width(&candidate) <= max {
            cur = candidate;
            continue;
        }
        if !cur.is_empty() {
            lines.push(std::mem::take(&mut cur));
        }
        // The word alone: break it into pieces that fit.
        for c in word.chars() {
            let mut t = cur.clone();
            t.push(c);
            if width(&t) > max && !cur.is_empty() {
                lines.push(std::mem::take(&mut cur));
            }
            cur.push(c);
        }
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}

fn wrap(s: &str, max: f64, size: f64) -> Vec<String> {
    wrap_with(s, max, &|t| text_width(t, size))
}

/// Tick label: integers without decimals, others with three significant
/// digits (more when neighbouring ticks would otherwise read the same).
fn tick_label(v: f64, step: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if v.fract() == 0.0 && v.abs() < 1e15 && step.fract() == 0.0 {
        return format!("{v:.0}");
    }
    // Enough digits to tell v from v ± step, without trailing zeros.
    let digits = if step > 0.0 && step.is_finite() {
        ((v.abs().log10().floor() - step.log10().floor()) as i64 + 1).clamp(3, 15) as usize
    } else {
        3
    };
    let s = sig(v, digits);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Round tick values whose first is at or below `lo` and last at or above
/// `hi`, about `n` intervals apart, and their step.
pub fn ticks(lo: f64, hi: f64, n: usize) -> (Vec<f64>, f64) {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else if lo.is_finite() {
        // One value: a unit (or its own size) around it.
        let d = if lo == 0.0 { 1.0 } else { lo.abs() * 0.5 };
        (lo - d * f64::from(u8::from(lo < 0.0)), lo + d)
    } else {
        (0.0, 1.0)
    };
    let raw = (hi - lo) / n.max(1) as f64;
    let pow = raw.log10().floor() as i32;
    let mag = 10f64.powi(pow);
    let mult = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .find(|m| m * mag >= raw)
        .unwrap_or(10.0);
    let step = mult * mag;
    let first = (lo / step).floor();
    let last = (hi / step).ceil();
    // Ranges too narrow for their magnitude (or too wide for f64) keep
    // their ends as the only ticks.
    if !(step.is_finite() && step > 0.0 && first + 1.0 > first && last - first <= 1000.0) {
        return (vec![lo, hi], hi - lo);
    }
    // k steps, computed so decimal ticks come out as written (0.6, not
    // 0.6000000000000001): dividing by an exact power of ten rounds right.
    let clean = |k: f64| {
        let v = if pow >= 0 {
            k * mult * mag
        } else {
            k * mult / 10f64.powi(-pow)
        };
        if v == 0.0 {
            0.0
        } else {
            v
        }
    };
    let mut v: Vec<f64> = Vec::new();
    let mut k = first;
    while k <= last + 0.5 && v.len() < 1000 {
        v.push(clean(k));
        k += 1.0;
    }
    if v.first().is_some_and(|f| *f > lo) {
        v.insert(0, clean(first - 1.0).min(lo));
    }
    if v.last().is_some_and(|l| *l < hi) {
        v.push(clean(last + 1.0).max(hi));
    }
    (v, step)
}

/// One measured value as a chart draws it: the value, its interval and
/// whether it settled. The interval is in the chart's units, after any
/// scaling its axis uses, and holds the value; where nothing is known about
/// it (a single trial) it is infinite, and where the value is exact it has
/// no width.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub value: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// Settled by its rule; an unsettled point is drawn hollow.
    pub converged: bool,
    /// More words for the point's tooltip ("5 trials"); may be empty.
    pub label: String,
}

impl Point {
    pub fn new(value: f64, ci_low: f64, ci_high: f64, converged: bool) -> Point {
        Point {
            value,
            ci_low,
            ci_high,
            converged,
            label: String::new(),
        }
    }
    /// A value known exactly: a reference, or a ratio's base.
    pub fn exact(value: f64) -> Point {
        Point::new(value, value, value, true)
    }
    pub fn with_label(self, label: impl Into<String>) -> Point {
        Point {
            label: label.into(),
            ..self
        }
    }
    /// The point in units `k` times smaller than its own (bytes → KB).
    pub fn divided(self, k: f64) -> Point {
        Point {
            value: self.value / k,
            ci_low: self.ci_low / k,
            ci_high: self.ci_high / k,
            ..self
        }
    }
    /// The interval as drawn: around the value whatever was given, an
    /// unknown (NaN) bound taken as the value itself.
    pub fn interval(&self) -> (f64, f64) {
        let bound = |b: f64| if b.is_nan() { self.value } else { b };
        (
            bound(self.ci_low).min(self.value),
            bound(self.ci_high).max(self.value),
        )
    }
}

/// What a chart's error bars and hollow marks stand for, said under its
/// legend.
#[derive(Clone, Debug, PartialEq)]
pub struct Uncertainty {
    /// What an error bar spans.
    pub interval: String,
    /// What makes a mark hollow.
    pub hollow: String,
}

impl Default for Uncertainty {
    fn default() -> Self {
        Uncertainty {
            interval: "the value's interval, the tables' ±CI".into(),
            hollow: "not converged: its interval is wider than the run rule asks".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    /// (x, the value there).
    pub points: Vec<(f64, Point)>,
    /// Drawn dashed, grey and without markers or intervals (e.g. the
    /// ideal-scaling line, which is not measured).
    pub reference: bool,
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, Point)>) -> Self {
        Series {
            name: name.into(),
            points,
            reference: false,
        }
    }
    pub fn reference(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points: points
                .into_iter()
                .map(|(x, y)| (x, Point::exact(y)))
                .collect(),
            reference: true,
        }
    }
}

/// A metric against a numeric param (or CPUs), one line per series.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Logarithmic x axis. Values at or below zero cannot be placed on one,
    /// so a chart holding any is drawn on a linear axis instead.
    pub log_x: bool,
    pub series: Vec<Series>,
    pub uncertainty: Uncertainty,
}

/// Horizontal grouped bars: a row of bars per category (one per series),
/// with the category's name beside it, so long case and routine names stay
/// readable; an optional reference line (100 % for ratios).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BarChart {
    pub title: String,
    /// What the bars measure, under the value axis.
    pub y_label: String,
    pub categories: Vec<String>,
    /// (name, a value per category, `None` where it has none).
    pub series: Vec<(String, Vec<Option<Point>>)>,
    pub reference: Option<f64>,
    pub uncertainty: Uncertainty,
}

/// Vertical columns in a row, one per step of something, each numbered
/// under its column, annotated above it and explained by a line of the
/// legend (a tuning staircase).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ColumnChart {
    pub title: String,
    /// What the columns measure, beside the value axis.
    pub y_label: String,
    pub columns: Vec<Column>,
    /// Lines under the legend.
    pub notes: Vec<String>,
    pub uncertainty: Uncertainty,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Column {
    /// Under the column: short (a step's number).
    pub label: String,
    /// Its line of the legend; empty for none.
    pub legend: String,
    /// `None`: not measured, and `missing` says so in its place.
    pub point: Option<Point>,
    pub missing: String,
    /// Above the column (its gain).
    pub annotation: String,
    /// Drawn grey: a column the others are read against (a baseline).
    pub muted: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Chart {
    Line(LineChart),
    Bar(BarChart),
    Column(ColumnChart),
}

impl Chart {
    pub fn title(&self) -> &str {
        match self {
            Chart::Line(c) => &c.title,
            Chart::Bar(c) => &c.title,
            Chart::Column(c) => &c.title,
        }
    }
    pub fn to_svg(&self) -> String {
        match self {
            Chart::Line(c) => c.to_svg(),
            Chart::Bar(c) => c.to_svg(),
            Chart::Column(c) => c.to_svg(),
        }
    }
}

/// Legend labels as drawn: duplicates get ` (2)`, ` (3)` … so every entry
/// names one line.
fn unique_labels<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
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
fn text_lines(
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
fn title(out: &mut String, title: &str) -> f64 {
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
struct Entry {
    label: String,
    color: &'static str,
    dash: &'static str,
}

/// Legend laid out below the plot, in as many columns as the longest label
/// allows, long labels wrapped (never cut: two lines that differ only at
/// their ends must still read differently). Returns its markup and height.
fn legend(entries: &[Entry], top: f64) -> (String, f64) {
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
fn document(kind: &str, title: &str, height: f64, body: &str) -> String {
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

fn no_data(title_text: &str, kind: &str) -> String {
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
fn thin(pos: &[f64], widths: &[f64], gap: f64) -> Vec<bool> {
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

/// Ticks along the x axis: a line from `span.0` to `span.1` at each, with
/// `data-tick`, and its label under the line's end unless it would overlap
/// its left neighbour.
fn x_ticks(
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
fn value_range<'a>(points: impl Iterator<Item = &'a Point>, extra: Option<f64>) -> (f64, f64) {
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
struct Place<'a> {
    /// A value → pixels along the value axis.
    to_px: &'a dyn Fn(f64) -> f64,
    /// The plot's edges along the value axis, in pixels, either order.
    ends: (f64, f64),
    /// Values run up the page (else rightwards).
    vertical: bool,
    /// The point's centre on the other axis.
    across: f64,
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

enum Shape {
    /// A marker at the value (line charts).
    Dot,
    /// A bar from `base` to the value, `thickness` px across.
    Bar { base: f64, thickness: f64 },
}

/// An attribute's number: in full, and infinite bounds as JavaScript and
/// Rust both read them.
fn attr_num(v: f64) -> String {
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
fn draw_point(out: &mut String, p: &Point, place: &Place, shape: Shape, color: &str, what: &str) {
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
fn key(u: &Uncertainty, hollow: bool, top: f64) -> (String, f64) {
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

        let _ = write!(
            body,
            r##"<rect class="plot" x="{left:.2}" y="{top:.2}" width="{pw:.2}" height="{ph:.2}" fill="none" stroke="none"/>"##
        );
        // Horizontal grid at the y ticks, labels left of the axis.
        body.push_str(r#"<g class="yticks">"#);
        for (t, l) in yt.iter().zip(&ylabels) {
            let y = sy(*t);
            let _ = write!(
                body,
                r##"<line data-tick="{t}" x1="{left:.2}" y1="{y:.2}" x2="{:.2}" y2="{y:.2}" stroke="#e3e3e3"/><text x="{:.2}" y="{:.2}" text-anchor="end">{}</text>"##,
                left + pw,
                left - 6.0,
                y + FONT * 0.35,
                esc(l)
            );
        }
        body.push_str("</g>");
        // x ticks at their values, labels thinned so none overlap.
        let xpos: Vec<f64> = xt.iter().map(|t| sx(*t)).collect();
        x_ticks(
            &mut body,
            &xt,
            &xpos,
            &xlabels,
            (bottom, bottom + 5.0),
            "#999",
        );
        let _ = write!(
            body,
            r##"<line x1="{left:.2}" y1="{top:.2}" x2="{left:.2}" y2="{bottom:.2}" stroke="#333"/><line x1="{left:.2}" y1="{bottom:.2}" x2="{:.2}" y2="{bottom:.2}" stroke="#333"/>"##,
            left + pw
        );
        // Axis titles: x under the tick labels, y rotated beside them.
        let x_title_y = bottom + 5.0 + 2.0 * FONT * LINE_GAP + 2.0;
        let x_title = fit(&self.x_label, pw, FONT);
        let _ = write!(
            body,
            r#"<text x="{:.2}" y="{x_title_y:.2}" text-anchor="middle"><title>{}</title>{}</text>"#,
            left + pw / 2.0,
            esc(&self.x_label),
            esc(&x_title)
        );
        let y_title = fit(&self.y_label, ph, FONT);
        let _ = write!(
            body,
            r#"<text transform="translate({:.2} {:.2}) rotate(-90)" text-anchor="middle"><title>{}</title>{}</text>"#,
            axis_label_x,
            top + ph / 2.0,
            esc(&self.y_label),
            esc(&y_title)
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

/// Height of a column chart's plot area.
const COLUMN_PLOT_H: f64 = 230.0;

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
        let (v0, v1) = (vt[0], vt[vt.len() - 1]);
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
        let left = (axis_label_x + 6.0 + lw + 6.0).ceil();
        let right = WIDTH - PAD;
        let bottom = plot_top + COLUMN_PLOT_H;
        let sy = |v: f64| bottom - (v - v0) / (v1 - v0) * COLUMN_PLOT_H;
        let _ = write!(
            body,
            r##"<rect class="plot" x="{left:.2}" y="{plot_top:.2}" width="{:.2}" height="{COLUMN_PLOT_H:.2}" fill="none" stroke="#ccc"/>"##,
            right - left
        );
        body.push_str(r#"<g class="yticks">"#);
        for (t, l) in vt.iter().zip(&labels) {
            let y = sy(*t);
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
        let slot = (right - left) / self.columns.len() as f64;
        let bw = slot * 0.62;
        let mut hollow = false;
        for (i, c) in self.columns.iter().enumerate() {
            let cx = left + slot * (i as f64 + 0.5);
            match c.point.as_ref().filter(|p| p.value.is_finite()) {
                Some(p) => {
                    hollow |= !p.converged;
                    let place = Place {
                        to_px: &sy,
                        ends: (bottom, plot_top),
                        vertical: true,
                        across: cx,
                    };
                    let shape = Shape::Bar {
                        base: 0.0,
                        thickness: bw,
                    };
                    let fill = if c.muted { "#999999" } else { color(0) };
                    let what = format!("{} {}:", c.label, c.legend);
                    draw_point(&mut body, p, &place, shape, fill, &what);
                    // Above the column and its interval, below the title.
                    let (_, ci_hi) = p.interval();
                    let highest = sy(p.value.max(0.0)).min(sy(ci_hi.min(v1)));
                    let y = (highest - 5.0).max(top + FONT);
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
                bottom + FONT * 1.3,
                esc(&fit(&c.label, slot - 2.0, FONT))
            );
        }
        // Legend: a line per column, then the notes, then the key.
        let mut y = bottom + FONT * 2.5;
        body.push_str(r#"<g class="legend">"#);
        let line_h = FONT * LINE_GAP;
        for c in self.columns.iter().filter(|c| !c.legend.is_empty()) {
            let lines = wrap(&c.legend, WIDTH - 2.0 * PAD, FONT);
            let _ = write!(
                body,
                r#"<g class="legend-entry" data-label="{}">"#,
                esc(&c.legend)
            );
            text_lines(&mut body, PAD, y + FONT, &lines, FONT, "", None);
            body.push_str("</g>");
            y += lines.len() as f64 * line_h + 2.0;
        }
        for n in &self.notes {
            let lines = wrap(n, WIDTH - 2.0 * PAD, FONT);
            text_lines(
                &mut body,
                PAD,
                y + FONT,
                &lines,
                FONT,
                r##" fill="#555""##,
                None,
            );
            y += lines.len() as f64 * line_h + 2.0;
        }
        body.push_str("</g>");
        let (k, key_h) = key(&self.uncertainty, hollow, y + 4.0);
        body.push_str(&k);
        let height = (y + 4.0 + key_h + PAD).ceil();
        document("column", &self.title, height, &body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_steps_are_round_and_cover() {
        assert_eq!(ticks(0.0, 10.0, 5).0, vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 1.0, 4).0, vec![0.0, 0.25, 0.5, 0.75, 1.0]);
        // The defect the report showed: 54 on an axis that ended at 40.
        let t = ticks(0.0, 54.0, 5).0;
        assert!(*t.last().unwrap() >= 54.0, "{t:?}");
        let t = ticks(-3.0, 5.1, 5).0;
        assert!(t[0] <= -3.0 && *t.last().unwrap() >= 5.1, "{t:?}");
        assert_eq!(ticks(0.0, 0.0, 5).0, vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
    }

    #[test]
    fn wrapping_keeps_every_character() {
        let s = "6.18.44-fc-v657 [all (2 CPUs)] · k=0.5m variant";
        let lines = wrap(s, 80.0, FONT);
        assert!(lines.len() > 1);
        assert_eq!(lines.join(" ").replace(' ', ""), s.replace(' ', ""));
        for l in &lines {
            assert!(text_width(l, FONT) <= 80.0, "{l}");
        }
    }

    #[test]
    fn duplicate_names_are_told_apart() {
        assert_eq!(
            unique_labels(["a", "b", "a", ""].into_iter()),
            vec!["a", "b", "a (2)", "(unnamed)"]
        );
    }

    /// A measured value with a ±10 % interval.
    fn pt(v: f64) -> Point {
        Point::new(v, v * 0.9, v * 1.1, true)
    }

    fn line(series: Vec<Series>) -> LineChart {
        LineChart {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series,
            ..Default::default()
        }
    }

    #[test]
    fn line_chart_has_one_polyline_per_series() {
        let c = LineChart {
            title: "a <b>".into(),
            y_label: "µs".into(),
            log_x: true,
            ..line(vec![
                Series::new("a", vec![(2.0, pt(1.0)), (4.0, pt(2.0))]),
                Series::reference("ideal", vec![(2.0, 1.0), (4.0, 4.0)]),
            ])
        };
        let svg = c.to_svg();
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a &lt;b&gt;"));
        assert!(svg.contains("stroke-dasharray"));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        // The measured line's points carry their intervals; the reference
        // line has none.
        assert_eq!(svg.matches(r#"<g class="point">"#).count(), 2);
        assert!(svg.contains(r#"data-value="2" data-ci-low="1.8" data-ci-high="2.2""#));
        assert!(svg.contains("error bars: "));
        assert!(!svg.contains("hollow: "), "no hollow mark, no word of it");
    }

    #[test]
    fn unconverged_points_are_hollow_and_the_key_says_why() {
        let c = line(vec![Series::new(
            "a",
            vec![(1.0, pt(1.0)), (2.0, Point::new(2.0, 1.0, 3.0, false))],
        )]);
        let svg = c.to_svg();
        assert_eq!(svg.matches(r#"data-converged="false""#).count(), 1);
        assert_eq!(svg.matches(r##"<circle class="mark" cx"##).count(), 2);
        assert_eq!(svg.matches(r##"r="3" fill="#fff" stroke="##).count(), 1);
        assert!(svg.contains("hollow: not converged"), "{svg}");
    }

    #[test]
    fn an_unknown_interval_is_cut_at_the_plot_edge() {
        let c = line(vec![Series::new(
            "a",
            vec![
                (1.0, pt(1.0)),
                (
                    2.0,
                    Point::new(2.0, f64::NEG_INFINITY, f64::INFINITY, false),
                ),
            ],
        )]);
        let svg = c.to_svg();
        assert!(svg.contains(r#"data-ci-low="-Infinity" data-ci-high="Infinity""#));
        // Both attributes read back as the bounds in Rust (and JavaScript).
        assert_eq!("-Infinity".parse::<f64>(), Ok(f64::NEG_INFINITY));
        // The axis did not run to infinity.
        assert!(!svg.contains("inf\""), "{svg}");
    }

    #[test]
    fn intervals_widen_the_axis_but_do_not_squash_it() {
        // An interval to 5 on values up to 2: the axis reaches 4 (the
        // values' span beyond them), not 5; a narrow one is shown whole.
        assert_eq!(
            value_range([Point::new(2.0, 1.0, 5.0, true)].iter(), None),
            (0.0, 4.0)
        );
        assert_eq!(value_range([pt(10.0)].iter(), None), (0.0, 11.0));
    }

    #[test]
    fn zero_on_a_log_axis_draws_linear() {
        let c = LineChart {
            x_label: "bytes (KB)".into(),
            log_x: true,
            ..line(vec![Series::new(
                "a",
                vec![(0.0, pt(1.0)), (4.0, pt(2.0)), (10.0, pt(3.0))],
            )])
        };
        let svg = c.to_svg();
        assert_eq!(svg.matches(r#"<circle class="mark""#).count(), 3);
        assert!(svg.contains(r#"data-tick="0""#));
    }

    #[test]
    fn bar_chart_skips_missing_values() {
        let c = BarChart {
            title: "ratios".into(),
            y_label: "%".into(),
            categories: vec!["x".into(), "y".into()],
            series: vec![("B/A".into(), vec![Some(pt(104.0)), None])],
            reference: Some(100.0),
            ..Default::default()
        };
        let svg = c.to_svg();
        assert_eq!(svg.matches(r#"class="bar mark""#).count(), 1);
        assert_eq!(svg.matches(r#"class="ci mark""#).count(), 1);
    }

    #[test]
    fn column_chart_draws_each_column_or_says_why_not() {
        let col = |label: &str, point: Option<Point>| Column {
            label: label.into(),
            legend: format!("{label} step"),
            point,
            missing: "failed".into(),
            annotation: format!("+{label} %"),
            muted: label == "0",
        };
        let c = ColumnChart {
            title: "steps".into(),
            y_label: "tps".into(),
            columns: vec![
                col("0", Some(pt(100.0))),
                col("1", Some(Point::new(130.0, 90.0, 170.0, false))),
                col("2", None),
            ],
            notes: vec!["a note".into()],
            ..Default::default()
        };
        let svg = c.to_svg();
        assert_eq!(svg.matches(r#"class="bar mark""#).count(), 2);
        assert_eq!(svg.matches(r#"data-converged="false""#).count(), 1);
        assert!(svg.contains(">failed<") && svg.contains("a note"));
        assert_eq!(svg.matches(r#"class="legend-entry""#).count(), 3);
        assert!(svg.contains("+1 %") && svg.contains("hollow: "));
    }

    #[test]
    fn empty_charts_say_so() {
        assert!(line(vec![]).to_svg().contains("no data"));
        assert!(ColumnChart::default().to_svg().contains("no data"));
    }
}
