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
//!
//! A [`HistoryChart`] adds what a series of runs needs: each point sits in
//! a `g.run` with `data-run` (the run's id), each level between change
//! points is a `path.level` with `data-level`, and each change point a
//! dashed `path.change` with `data-change-run` (the first run after it).
//!
//! The inputs are here; `text` lays out text and ticks, `parts` draws what
//! every kind shares (title, legend, key, ticks, each point and its
//! interval), and `line`, `bar`, `column` and `history` draw one kind each.

mod bar;
mod column;
mod history;
mod line;
mod parts;
mod text;

pub use text::{bold_width, text_width};

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

/// One case's result over a series of runs in their order (a history):
/// a point per run with its interval, the level between change points as
/// a horizontal line, a dashed vertical line at each change point.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistoryChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// In series order; the x axis counts them from 1.
    pub runs: Vec<RunPoint>,
    pub levels: Vec<Level>,
    pub changes: Vec<ChangeMark>,
    pub uncertainty: Uncertainty,
}

/// A run of a history and its result.
#[derive(Clone, Debug, PartialEq)]
pub struct RunPoint {
    /// The run's id (`data-run`).
    pub run: i64,
    /// Opens the point's tooltip: which run, when.
    pub what: String,
    pub point: Point,
}

/// The level of the runs `from..to` (indices into the runs).
#[derive(Clone, Debug, PartialEq)]
pub struct Level {
    pub from: usize,
    pub to: usize,
    pub value: f64,
}

/// A change point before run index `at` (the first run after it).
#[derive(Clone, Debug, PartialEq)]
pub struct ChangeMark {
    pub at: usize,
    /// The id of the run at `at` (`data-change-run`).
    pub run: i64,
    /// Above the marker: short (`#21`).
    pub label: String,
    /// The marker's tooltip: what changed, by how much.
    pub tip: String,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Chart {
    Line(LineChart),
    Bar(BarChart),
    Column(ColumnChart),
    History(HistoryChart),
}

impl Chart {
    pub fn title(&self) -> &str {
        match self {
            Chart::Line(c) => &c.title,
            Chart::Bar(c) => &c.title,
            Chart::Column(c) => &c.title,
            Chart::History(c) => &c.title,
        }
    }
    pub fn to_svg(&self) -> String {
        match self {
            Chart::Line(c) => c.to_svg(),
            Chart::Bar(c) => c.to_svg(),
            Chart::Column(c) => c.to_svg(),
            Chart::History(c) => c.to_svg(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parts::*;
    use super::text::*;
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
