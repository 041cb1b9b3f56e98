//! Property tests of the SVG charts: for arbitrary titles, labels and
//! values — long, empty, unicode, markup, zero, negative, tiny, huge, NaN —
//! every mark lies inside its plot area, the ticks cover the data, legend
//! labels are unique and whole, and no text leaves the viewBox.

#[path = "common/chart_fixtures.rs"]
mod chart_fixtures;
#[path = "common/svgcheck.rs"]
mod svgcheck;

use kscale_report::svg::{BarChart, LineChart, Series};
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
        prop::collection::vec((x_value(), value()), 0..10),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(name, points, reference)| Series {
            name,
            points,
            reference,
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
                    prop::collection::vec(prop::option::of(value()), cats),
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
            })
    })
}

/// What a line chart draws: finite points (on a log axis only when every
/// x is positive; otherwise the chart falls back to linear and draws all).
fn drawn_line(c: &LineChart) -> Drawn {
    let pts: Vec<(f64, f64)> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().copied())
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
            .flat_map(|(_, v)| v.iter().flatten().copied())
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
}

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
        series: vec![("cpu-clock".into(), vec![Some(54.0), Some(4.0)])],
        reference: None,
    };
    let svg = bars.to_svg();
    assert!(check(&svg, Some(&drawn_bar(&bars))).is_empty(), "{svg}");
    // A line clamped flat at the top of its plot while its points were
    // drawn outside the image (cy="-38.6").
    let lines = chart_fixtures::ctx_lat(vec![
        Series::new(
            "size=0 · 6.18.44-fc-v657 [1 CPU]",
            vec![(2.0, 4.35), (8.0, 5.1)],
        ),
        Series::new(
            "size=0 · 6.18.44-fc-v657 [all (2 CPUs)]",
            vec![(2.0, 4.5), (8.0, 4.9)],
        ),
    ]);
    let svg = lines.to_svg();
    assert!(check(&svg, Some(&drawn_line(&lines))).is_empty(), "{svg}");
    assert!(!svg.contains("cy=\"-"), "{svg}");
    // Legend entries cut to the same text; identical labels.
    let dup = LineChart {
        series: vec![
            Series::new("size=0.5m", vec![(1.0, 1.0), (2.0, 1.9)]),
            Series::new("size=0.5m", vec![(1.0, 1.0), (2.0, 1.7)]),
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
            vec![(0.0, 9330.0), (1.0, 8991.0), (10.0, 7578.0)],
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
        series: vec![Series::new("a", vec![(1.0, 1.0), (2.0, 3.0)])],
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
}
