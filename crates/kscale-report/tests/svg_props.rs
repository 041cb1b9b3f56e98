//! Property tests of the SVG charts: for arbitrary titles, labels, values
//! and intervals — long, empty, unicode, markup, zero, negative, tiny,
//! huge, NaN, unbounded — every mark lies inside its plot area, the ticks
//! cover the data, legend labels are unique and whole, no text leaves the
//! viewBox, and every point draws its interval and is hollow exactly when
//! it did not converge.

#[path = "common/chart_fixtures.rs"]
mod chart_fixtures;
#[path = "common/svgcheck.rs"]
mod svgcheck;

use kscale_report::svg::{
    BarChart, ChangeMark, Column, ColumnChart, HistoryChart, Level, LineChart, Point, RunPoint,
    Series,
};
use proptest::prelude::*;
use svgcheck::{check, Drawn};

fn label() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,8}".prop_map(|s| s),
        "[ -~]{0,40}",
        "\\PC{0,30}",
        // Long words that must be broken, and the near-duplicates the
        // report used to cut into identical legend entries.
        "[A-Za-z0-9._-]{40,90}",
        "6\\.18\\.44-fc-v657 \\[(1 CPU|all \\(2 CPUs\\))\\] size=(0|0\\.5m|64m)",
        Just("<script>alert(1)</script>".to_string()),
        Just(String::new()),
    ]
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => -1e6..1e6f64,
        4 => 0.0..1.0f64,
        2 => 1e-9..1e-6f64,
        2 => 1e6..1e13f64,
        1 => -1e13..-1e6f64,
        1 => Just(0.0),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
    ]
}

/// How far an interval reaches from its value, as a share of the value.
fn reach() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => 0.0..0.5f64,
        2 => 0.5..5.0f64,
        1 => Just(0.0),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NAN),
    ]
}

fn point() -> impl Strategy<Value = Point> {
    (value(), reach(), reach(), prop::bool::weighted(0.7)).prop_map(|(v, a, b, converged)| {
        let m = if v == 0.0 { 1.0 } else { v.abs() };
        Point::new(v, v - a * m, v + b * m, converged)
    })
}

fn x_value() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => (0u32..40).prop_map(|e| 2f64.powi(e as i32)),
        3 => 0.0..1e4f64,
        1 => -100.0..0.0f64,
        1 => 1e9..1e12f64,
        1 => Just(0.0),
        1 => Just(f64::NAN),
    ]
}

fn series() -> impl Strategy<Value = Series> {
    (
        label(),
        prop::collection::vec((x_value(), point()), 0..10),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(name, points, reference)| {
            if reference {
                let exact = points.into_iter().map(|(x, p)| (x, p.value)).collect();
                Series::reference(name, exact)
            } else {
                Series::new(name, points)
            }
        })
}

fn line_chart() -> impl Strategy<Value = LineChart> {
    (
        label(),
        label(),
        label(),
        any::<bool>(),
        prop::collection::vec(series(), 0..14),
    )
        .prop_map(|(title, x_label, y_label, log_x, series)| LineChart {
            title,
            x_label,
            y_label,
            log_x,
            series,
            ..Default::default()
        })
}

fn bar_chart() -> impl Strategy<Value = BarChart> {
    (1usize..16, 0usize..5).prop_flat_map(|(cats, sers)| {
        (
            label(),
            label(),
            prop::collection::vec(label(), cats),
            prop::collection::vec(
                (
                    label(),
                    prop::collection::vec(prop::option::of(point()), cats),
                ),
                sers,
            ),
            prop::option::of(value()),
        )
            .prop_map(|(title, y_label, categories, series, reference)| BarChart {
                title,
                y_label,
                categories,
                series,
                reference,
                ..Default::default()
            })
    })
}

fn column_chart() -> impl Strategy<Value = ColumnChart> {
    (
        label(),
        label(),
        prop::collection::vec(
            (
                label(),
                label(),
                prop::option::of(point()),
                label(),
                any::<bool>(),
            ),
            0..12,
        ),
        prop::collection::vec(label(), 0..3),
    )
        .prop_map(|(title, y_label, columns, notes)| ColumnChart {
            title,
            y_label,
            columns: columns
                .into_iter()
                .enumerate()
                .map(|(i, (legend, missing, point, annotation, muted))| Column {
                    label: i.to_string(),
                    // The legend's lines are numbered, so never the same.
                    legend: format!("{i} {legend}"),
                    point,
                    missing: missing.chars().take(8).collect(),
                    annotation: annotation.chars().take(8).collect(),
                    muted,
                })
                .collect(),
            notes,
            ..Default::default()
        })
}

/// A history of up to 60 runs with levels and change points anywhere,
/// some of them out of range (which the chart must leave out).
fn history_chart() -> impl Strategy<Value = HistoryChart> {
    (
        label(),
        label(),
        prop::collection::vec((point(), any::<i64>(), label()), 0..60),
        prop::collection::vec((0usize..70, 0usize..70, value()), 0..5),
        prop::collection::vec((0usize..70, label(), label()), 0..6),
    )
        .prop_map(|(title, y_label, runs, levels, changes)| HistoryChart {
            title,
            x_label: "runs".into(),
            y_label,
            runs: runs
                .into_iter()
                .map(|(point, run, what)| RunPoint { run, what, point })
                .collect(),
            levels: levels
                .into_iter()
                .map(|(from, to, value)| Level { from, to, value })
                .collect(),
            changes: changes
                .into_iter()
                .map(|(at, label, tip)| ChangeMark {
                    at,
                    run: at as i64,
                    label,
                    tip,
                })
                .collect(),
            ..Default::default()
        })
}

/// What a history draws: its finite values, at places 1 to n.
fn drawn_history(c: &HistoryChart) -> Drawn {
    let pts: Vec<(f64, f64)> = c
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| (i as f64 + 1.0, r.point.value))
        .filter(|(_, y)| y.is_finite())
        .collect();
    Drawn {
        x: pts.iter().map(|p| p.0).collect(),
        y: pts.iter().map(|p| p.1).collect(),
    }
}

/// What a line chart draws: finite points (on a log axis only when every
/// x is positive; otherwise the chart falls back to linear and draws all).
fn drawn_line(c: &LineChart) -> Drawn {
    let pts: Vec<(f64, f64)> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|(x, p)| (*x, p.value)))
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    Drawn {
        x: pts.iter().map(|p| p.0).collect(),
        y: pts.iter().map(|p| p.1).collect(),
    }
}

fn drawn_bar(c: &BarChart) -> Drawn {
    Drawn {
        x: vec![],
        y: c.series
            .iter()
            .flat_map(|(_, v)| v.iter().flatten().map(|p| p.value))
            .chain(c.reference)
            .filter(|v| v.is_finite())
            .collect(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn line_charts_keep_their_geometry(c in line_chart()) {
        let svg = c.to_svg();
        let bad = check(&svg, Some(&drawn_line(&c)));
        prop_assert!(bad.is_empty(), "{bad:#?}\n{svg}");
        // Every drawable series is in the legend, once.
        let entries = svg.matches("class=\"legend-entry\"").count();
        let drawable = !drawn_line(&c).x.is_empty();
        prop_assert!(!drawable || entries == c.series.len(), "{entries} entries");
    }

    #[test]
    fn bar_charts_keep_their_geometry(c in bar_chart()) {
        let svg = c.to_svg();
        let bad = check(&svg, Some(&drawn_bar(&c)));
        prop_assert!(bad.is_empty(), "{bad:#?}\n{svg}");
    }

    #[test]
    fn history_charts_keep_their_geometry(c in history_chart()) {
        let svg = c.to_svg();
        let bad = check(&svg, Some(&drawn_history(&c)));
        prop_assert!(bad.is_empty(), "{bad:#?}\n{svg}");
        let drawn = drawn_history(&c).y.len();
        prop_assert_eq!(svg.matches("<g class=\"point\">").count(), drawn);
        // A marker for each change between two runs, none elsewhere.
        let n = c.runs.len();
        let inside = c.changes.iter().filter(|m| m.at >= 1 && m.at < n).count();
        let expect = if drawn == 0 { 0 } else { inside };
        prop_assert_eq!(svg.matches("class=\"change mark\"").count(), expect);
    }

    #[test]
    fn column_charts_keep_their_geometry(c in column_chart()) {
        let svg = c.to_svg();
        let bad = check(&svg, None);
        prop_assert!(bad.is_empty(), "{bad:#?}\n{svg}");
        let measured = c.columns.iter().flat_map(|c| &c.point).filter(|p| p.value.is_finite());
        prop_assert_eq!(svg.matches("<g class=\"point\">").count(), measured.count());
    }
}

/// A measured value with a ±5 % interval.
fn pt(v: f64) -> Point {
    Point::new(v, v * 0.95, v * 1.05, true)
}

use chart_fixtures::pts;

/// The defects the first `study --quick` report showed, as fixed cases.
#[test]
fn the_reported_defects_stay_fixed() {
    // Bars taller than the axis: 54 % on an axis that ended at 40.
    let bars = BarChart {
        title: "Kernel profile — Process fork+exit [all (2 CPUs)] (run 1)".into(),
        y_label: "% of samples".into(),
        categories: vec![
            "pv_native_safe_halt".into(),
            "finish_task_switch.isra.0".into(),
        ],
        series: vec![("cpu-clock".into(), vec![Some(pt(54.0)), Some(pt(4.0))])],
        reference: None,
        ..Default::default()
    };
    let svg = bars.to_svg();
    assert!(check(&svg, Some(&drawn_bar(&bars))).is_empty(), "{svg}");
    // A line clamped flat at the top of its plot while its points were
    // drawn outside the image (cy="-38.6").
    let lines = chart_fixtures::ctx_lat(vec![
        Series::new(
            "size=0 · 6.18.44-fc-v657 [1 CPU]",
            pts(&[(2.0, 4.35), (8.0, 5.1)]),
        ),
        Series::new(
            "size=0 · 6.18.44-fc-v657 [all (2 CPUs)]",
            pts(&[(2.0, 4.5), (8.0, 4.9)]),
        ),
    ]);
    let svg = lines.to_svg();
    assert!(check(&svg, Some(&drawn_line(&lines))).is_empty(), "{svg}");
    assert!(!svg.contains("cy=\"-"), "{svg}");
    // Legend entries cut to the same text; identical labels.
    let dup = LineChart {
        series: vec![
            Series::new("size=0.5m", pts(&[(1.0, 1.0), (2.0, 1.9)])),
            Series::new("size=0.5m", pts(&[(1.0, 1.0), (2.0, 1.7)])),
        ],
        ..lines.clone()
    };
    let svg = dup.to_svg();
    assert!(check(&svg, Some(&drawn_line(&dup))).is_empty(), "{svg}");
    // size=0 on a logarithmic axis.
    let zero = LineChart {
        log_x: true,
        series: vec![Series::new(
            "a",
            pts(&[(0.0, 9330.0), (1.0, 8991.0), (10.0, 7578.0)]),
        )],
        ..lines
    };
    let svg = zero.to_svg();
    assert!(check(&svg, Some(&drawn_line(&zero))).is_empty(), "{svg}");
    assert_eq!(svg.matches("<circle class=\"mark\"").count(), 3, "{svg}");
}

/// The checker finds what it looks for: a mark moved out of the plot, a
/// text moved out of the view, a duplicated legend entry.
#[test]
fn the_checker_sees_broken_charts() {
    let c = LineChart {
        title: "t".into(),
        x_label: "x".into(),
        y_label: "y".into(),
        log_x: false,
        series: vec![Series::new("a", pts(&[(1.0, 1.0), (2.0, 3.0)]))],
        ..Default::default()
    };
    let svg = c.to_svg();
    assert!(check(&svg, Some(&drawn_line(&c))).is_empty());
    let i = svg.find("<circle class=\"mark\" cx=\"").unwrap() + 26;
    let moved = format!("{}-40{}", &svg[..i], &svg[i..]);
    assert!(!check(&moved, None).is_empty());
    let text = svg.replacen("<text x=\"", "<text x=\"-300", 1);
    assert!(!check(&text, None).is_empty());
    let start = svg.find("<g class=\"legend-entry\"").unwrap();
    let end = svg[start..].find("</g>").unwrap() + start + 4;
    let twice = format!("{}{}{}", &svg[..end], &svg[start..end], &svg[end..]);
    assert!(!check(&twice, None).is_empty());
    let short = Drawn {
        x: vec![1.0],
        y: vec![1e9],
    };
    assert!(!check(&svg, Some(&short)).is_empty());

    // …and an interval missing, misdrawn or misread.
    let no_bar = svg.replacen("class=\"ci mark\"", "class=\"mark\"", 1);
    assert!(!check(&no_bar, None).is_empty());
    let solid = svg.replacen("data-converged=\"true\"", "data-converged=\"false\"", 1);
    assert!(!check(&solid, None).is_empty());
    let outside = svg.replacen("data-ci-low=\"0.95\"", "data-ci-low=\"1.5\"", 1);
    assert_ne!(outside, svg);
    assert!(!check(&outside, None).is_empty());
    // The error bar's far end moved 0.5 px along the value axis.
    let d = svg.find(" d=\"M").unwrap();
    let l = svg[d..].find('L').unwrap() + d;
    let comma = svg[l..].find(',').unwrap() + l + 1;
    let end = svg[comma..].find(['M', '"']).unwrap() + comma;
    let y: f64 = svg[comma..end].parse().unwrap();
    let shifted = format!("{}{:.2}{}", &svg[..comma], y + 0.5, &svg[end..]);
    assert!(!check(&shifted, None).is_empty());
    let bare = svg.replacen(" data-ci-high=", " data-x=", 1);
    assert!(!check(&bare, None).is_empty());
}
