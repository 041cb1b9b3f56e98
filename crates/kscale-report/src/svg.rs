//! Hand-written SVG charts. A chart is plain data — [`LineChart`] or
//! [`BarChart`] — and renders itself; new workloads (connections, threads,
//! profiles, tuning steps) add charts by filling these structures, never by
//! touching the drawing code.

use crate::format::sig;
use std::fmt::Write;

const W: f64 = 640.0;
const H: f64 = 360.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 52.0;

/// Colour-blind-safe palette (Okabe–Ito).
const PALETTE: &[&str] = &[
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000",
];

pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed and without markers (e.g. the ideal-scaling line).
    pub reference: bool,
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
            reference: false,
        }
    }
    pub fn reference(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
            reference: true,
        }
    }
}

/// A metric against a numeric param (or CPUs), one line per series.
#[derive(Clone, Debug, PartialEq)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub series: Vec<Series>,
}

/// Grouped bars: one group per category, one bar per series; an optional
/// horizontal reference line (100 % for ratios).
#[derive(Clone, Debug, PartialEq)]
pub struct BarChart {
    pub title: String,
    pub y_label: String,
    pub categories: Vec<String>,
    pub series: Vec<(String, Vec<Option<f64>>)>,
    pub reference: Option<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Chart {
    Line(LineChart),
    Bar(BarChart),
}

impl Chart {
    pub fn title(&self) -> &str {
        match self {
            Chart::Line(c) => &c.title,
            Chart::Bar(c) => &c.title,
        }
    }
    pub fn to_svg(&self) -> String {
        match self {
            Chart::Line(c) => c.to_svg(),
            Chart::Bar(c) => c.to_svg(),
        }
    }
}

/// Tick label: integers without decimals, others with three significant digits.
fn tick(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        sig(v, 3)
    }
}

/// Round tick values covering [lo, hi].
fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi.is_nan() || lo.is_nan() || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let start = (lo / step).floor() * step;
    let mut v = Vec::new();
    let mut t = start;
    while t <= hi + step * 1e-9 {
        v.push(t);
        t += step;
    }
    v
}

fn frame(out: &mut String, title: &str, kind: &str) {
    let _ = write!(
        out,
        r#"<svg class="chart" data-kind="{kind}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{t}" font-family="sans-serif" font-size="12">"#,
        t = esc(title)
    );
    let _ = write!(out, r##"<rect width="{W}" height="{H}" fill="#fff"/>"##);
    let _ = write!(
        out,
        r#"<text x="{}" y="20" font-size="14" font-weight="bold">{}</text>"#,
        LEFT,
        esc(title)
    );
}

/// The legend beside the plot: one entry per series, reference series
/// dashed and grey, the others in palette order (the order they were drawn).
fn legend<'a>(out: &mut String, entries: impl IntoIterator<Item = (&'a str, bool)>) {
    let mut ci = 0;
    for (i, (name, reference)) in entries.into_iter().enumerate() {
        let y = TOP + 10.0 + i as f64 * 18.0;
        let x = W - RIGHT + 14.0;
        let (c, dash) = if reference {
            ("#777", r#" stroke-dasharray="5 4""#)
        } else {
            ci += 1;
            (color(ci - 1), "")
        };
        let _ = write!(
            out,
            r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{c}" stroke-width="3"{dash}/><text x="{}" y="{}">{}</text>"#,
            x + 18.0,
            x + 24.0,
            y + 4.0,
            esc(&truncate(name, 22))
        );
    }
}

/// Horizontal grid lines with their labels at the y ticks.
fn y_grid(out: &mut String, ticks: &[f64], sy: impl Fn(f64) -> f64, plot_width: f64) {
    for t in ticks {
        let y = sy(*t);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e3e3e3"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_width,
            LEFT - 6.0,
            y + 4.0,
            tick(*t)
        );
    }
}

impl LineChart {
    pub fn to_svg(&self) -> String {
        let pts: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .filter(|(x, y)| x.is_finite() && y.is_finite() && (!self.log_x || *x > 0.0))
            .collect();
        let mut out = String::new();
        frame(&mut out, &self.title, "line");
        if pts.is_empty() {
            let _ = write!(
                out,
                r#"<text x="{}" y="{}">no data</text></svg>"#,
                W / 2.0,
                H / 2.0
            );
            return out;
        }
        let fx = |x: f64| if self.log_x { x.log2() } else { x };
        let (mut x0, mut x1) = pts
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
                (a.min(fx(p.0)), b.max(fx(p.0)))
            });
        if x0 == x1 {
            x0 -= 1.0;
            x1 += 1.0;
        }
        let ymax = pts.iter().fold(0f64, |a, p| a.max(p.1));
        let yt = ticks(0.0, if ymax > 0.0 { ymax * 1.05 } else { 1.0 }, 5);
        let y1 = *yt.last().unwrap_or(&1.0);
        let pw = W - LEFT - RIGHT;
        let ph = H - TOP - BOTTOM;
        let sx = |x: f64| LEFT + (fx(x) - x0) / (x1 - x0) * pw;
        let sy = |y: f64| TOP + ph - y / y1 * ph;
        // Axes and grid.
        y_grid(&mut out, &yt, sy, pw);
        let mut xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let xt: Vec<f64> = if self.log_x || xs.len() <= 12 {
            xs
        } else {
            ticks(x0, x1, 6)
        };
        for t in &xt {
            let x = sx(*t);
            let _ = write!(
                out,
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#999"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                TOP + ph,
                TOP + ph + 5.0,
                TOP + ph + 18.0,
                tick(*t)
            );
        }
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="#333"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333"/>"##,
            TOP + ph,
            TOP + ph,
            LEFT + pw,
            TOP + ph
        );
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            LEFT + pw / 2.0,
            H - 12.0,
            esc(&self.x_label),
            TOP + ph / 2.0,
            esc(&self.y_label)
        );
        let mut ci = 0;
        for s in &self.series {
            let mut p: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite() && (!self.log_x || *x > 0.0))
                .collect();
            p.sort_by(|a, b| a.0.total_cmp(&b.0));
            let c = if s.reference { "#777" } else { color(ci) };
            let path: Vec<String> = p
                .iter()
                .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(y.min(y1))))
                .collect();
            let dash = if s.reference {
                r#" stroke-dasharray="5 4""#
            } else {
                ""
            };
            let _ = write!(
                out,
                r#"<polyline class="series" fill="none" stroke="{c}" stroke-width="2"{dash} points="{}"><title>{}</title></polyline>"#,
                path.join(" "),
                esc(&s.name)
            );
            if !s.reference {
                for (x, y) in &p {
                    let _ = write!(
                        out,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"><title>{}: {} → {}</title></circle>"#,
                        sx(*x),
                        sy(*y),
                        esc(&s.name),
                        sig(*x, 4),
                        sig(*y, 4)
                    );
                }
                ci += 1;
            }
        }
        legend(
            &mut out,
            self.series.iter().map(|s| (s.name.as_str(), s.reference)),
        );
        out.push_str("</svg>");
        out
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

impl BarChart {
    pub fn to_svg(&self) -> String {
        let mut out = String::new();
        frame(&mut out, &self.title, "bar");
        let vals: Vec<f64> = self
            .series
            .iter()
            .flat_map(|(_, v)| v.iter().flatten().copied())
            .filter(|v| v.is_finite())
            .collect();
        if vals.is_empty() || self.categories.is_empty() {
            let _ = write!(
                out,
                r#"<text x="{}" y="{}">no data</text></svg>"#,
                W / 2.0,
                H / 2.0
            );
            return out;
        }
        let top = vals
            .iter()
            .fold(self.reference.unwrap_or(0.0), |a, v| a.max(*v));
        let yt = ticks(0.0, top * 1.08, 5);
        let y1 = *yt.last().unwrap_or(&1.0);
        let pw = W - LEFT - RIGHT;
        let ph = H - TOP - BOTTOM - 30.0;
        let sy = |y: f64| TOP + ph - y.max(0.0) / y1 * ph;
        y_grid(&mut out, &yt, sy, pw);
        let groups = self.categories.len() as f64;
        let gw = pw / groups;
        let nser = self.series.len().max(1) as f64;
        let bw = (gw * 0.8 / nser).min(40.0);
        for (gi, cat) in self.categories.iter().enumerate() {
            let gx = LEFT + gi as f64 * gw + (gw - bw * nser) / 2.0;
            for (si, (name, values)) in self.series.iter().enumerate() {
                if let Some(Some(v)) = values.get(gi) {
                    let x = gx + si as f64 * bw;
                    let y = sy(*v);
                    let _ = write!(
                        out,
                        r#"<rect class="bar" x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{} · {}: {}</title></rect>"#,
                        (bw - 2.0).max(1.0),
                        (TOP + ph - y).max(0.0),
                        color(si),
                        esc(cat),
                        esc(name),
                        sig(*v, 4)
                    );
                }
            }
            let cx = LEFT + (gi as f64 + 0.5) * gw;
            let _ = write!(
                out,
                r#"<text transform="translate({cx:.1} {:.1}) rotate(-30)" text-anchor="end" font-size="11">{}</text>"#,
                TOP + ph + 14.0,
                esc(&truncate(cat, 26))
            );
        }
        if let Some(r) = self.reference {
            let y = sy(r);
            let _ = write!(
                out,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#333" stroke-dasharray="5 4"/>"##,
                LEFT + pw
            );
        }
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="#333"/><text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"##,
            TOP + ph,
            TOP + ph / 2.0,
            esc(&self.y_label)
        );
        legend(
            &mut out,
            self.series.iter().map(|(n, _)| (n.as_str(), false)),
        );
        out.push_str("</svg>");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_steps_are_round() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 1.0, 4), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    }

    #[test]
    fn line_chart_has_one_polyline_per_series() {
        let c = LineChart {
            title: "ctx <size>".into(),
            x_label: "procs".into(),
            y_label: "µs".into(),
            log_x: true,
            series: vec![
                Series::new("a", vec![(2.0, 1.0), (4.0, 2.0)]),
                Series::reference("ideal", vec![(2.0, 1.0), (4.0, 4.0)]),
            ],
        };
        let svg = c.to_svg();
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("ctx &lt;size&gt;"));
        assert!(svg.contains("stroke-dasharray"));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
    }

    #[test]
    fn bar_chart_skips_missing_values() {
        let c = BarChart {
            title: "ratios".into(),
            y_label: "%".into(),
            categories: vec!["x".into(), "y".into()],
            series: vec![("B/A".into(), vec![Some(104.0), None])],
            reference: Some(100.0),
        };
        assert_eq!(c.to_svg().matches(r#"class="bar""#).count(), 1);
    }

    #[test]
    fn empty_charts_say_so() {
        let c = LineChart {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x: false,
            series: vec![],
        };
        assert!(c.to_svg().contains("no data"));
    }
}
