//! Snapshot tests of the generated SVG and HTML.

#[path = "common/chart_fixtures.rs"]
mod chart_fixtures;
#[path = "common/svgcheck.rs"]
mod svgcheck;

use chart_fixtures::pts;
use kscale_report::html::{render, Block, Report, Section};
use kscale_report::svg::{BarChart, Chart, Column, ColumnChart, LineChart, Point, Series};
use kscale_report::{Cell, RowKind, Table};

fn line() -> Chart {
    Chart::Line(chart_fixtures::ctx_lat(vec![
        Series::new(
            "size=0 · a [1 CPU]",
            pts(&[(2.0, 1.5), (4.0, 1.7), (8.0, 2.0), (16.0, 2.4)]),
        ),
        Series::new(
            "size=16k · a [1 CPU]",
            vec![
                (2.0, Point::new(4.0, 3.8, 4.2, true)),
                (4.0, Point::new(5.5, 4.0, 7.0, false)),
                (8.0, Point::new(9.0, 8.9, 9.1, true)),
                (16.0, Point::new(12.0, 11.0, 13.0, true)),
            ],
        ),
    ]))
}

fn scal() -> Chart {
    Chart::Line(LineChart {
        title: "scalability".into(),
        x_label: "CPUs".into(),
        y_label: "scalability".into(),
        log_x: false,
        series: vec![
            Series::new(
                "tcp_rr",
                vec![
                    (1.0, Point::exact(1.0)),
                    (2.0, Point::new(1.8, 1.7, 1.9, true)),
                    (4.0, Point::new(3.1, 2.6, 3.6, false)),
                ],
            ),
            Series::reference("ideal", vec![(1.0, 1.0), (2.0, 2.0), (4.0, 4.0)]),
        ],
        ..Default::default()
    })
}

fn bars() -> Chart {
    Chart::Bar(BarChart {
        title: "Latency of simple functions — ratios (%)".into(),
        y_label: "ratio (%)".into(),
        categories: vec![
            "Simple syscall".into(),
            "Pipe latency".into(),
            "Geometric mean".into(),
        ],
        series: vec![
            (
                "B/A".into(),
                vec![
                    Some(Point::new(96.0, 94.0, 98.0, true)),
                    Some(Point::new(121.0, 101.0, 141.0, false)),
                    Some(Point::new(107.0, 106.0, 108.0, true)),
                ],
            ),
            (
                "C/A".into(),
                vec![
                    Some(Point::new(104.0, 99.0, 109.0, true)),
                    None,
                    Some(Point::new(110.0, 109.0, 111.0, true)),
                ],
            ),
        ],
        reference: Some(100.0),
        ..Default::default()
    })
}

fn columns() -> Chart {
    let col = |i: usize, name: &str, point: Option<Point>, annotation: &str| Column {
        label: i.to_string(),
        legend: format!("{i} {name}: why {name}"),
        point,
        missing: "failed".into(),
        annotation: annotation.into(),
        muted: name == "baseline",
    };
    Chart::Column(ColumnChart {
        title: "net.tcp_rr [cpus all]: tps by step".into(),
        y_label: "tps (1/s)".into(),
        columns: vec![
            col(
                0,
                "baseline",
                Some(Point::new(100.0, 95.0, 105.0, true)),
                "baseline",
            ),
            col(
                1,
                "sockbuf",
                Some(Point::new(130.0, 100.0, 160.0, false)),
                "~+30.0 %",
            ),
            col(2, "busy_poll", None, ""),
            col(
                3,
                "baseline",
                Some(Point::new(101.0, 97.0, 105.0, true)),
                "drift ~+1.0 %",
            ),
        ],
        notes: vec!["No significant drift.".into()],
        ..Default::default()
    })
}

/// Every chart kind draws each point with its interval, hollow where it
/// did not converge, and passes the geometry and interval checks.
#[test]
fn every_chart_kind_draws_its_intervals() {
    for (chart, points, hollow) in [
        (line(), 8, 1),
        (scal(), 3, 1),
        (bars(), 5, 1),
        (columns(), 3, 1),
    ] {
        let svg = chart.to_svg();
        let bad = svgcheck::check(&svg, None);
        assert!(bad.is_empty(), "{}: {bad:#?}\n{svg}", chart.title());
        assert_eq!(svg.matches("<g class=\"point\">").count(), points, "{svg}");
        assert_eq!(svg.matches("class=\"ci mark\"").count(), points, "{svg}");
        assert_eq!(svg.matches("data-converged=\"false\"").count(), hollow);
        assert!(svg.contains("hollow: "), "{svg}");
        assert!(svg.contains("error bars: "), "{svg}");
    }
}

#[test]
fn column_chart_svg() {
    insta::assert_snapshot!(columns().to_svg());
}

#[test]
fn line_chart_svg() {
    insta::assert_snapshot!(line().to_svg());
}

#[test]
fn scalability_chart_svg() {
    insta::assert_snapshot!(scal().to_svg());
}

#[test]
fn bar_chart_svg() {
    insta::assert_snapshot!(bars().to_svg());
}

#[test]
fn report_html() {
    let mut t = Table::new(
        "Latency of simple functions (syscall)",
        vec!["Case".into(), "A".into(), "B".into(), "B/A".into()],
    );
    t.push(
        RowKind::Data,
        vec![
            "Simple syscall".into(),
            "0.2600".into(),
            "0.2500".into(),
            Cell::tone("96%", kscale_report::Tone::Good),
        ],
    );
    t.push(
        RowKind::Summary,
        vec![
            "Geometric mean".into(),
            "0.26".into(),
            "0.25".into(),
            "96%".into(),
        ],
    );
    t.notes.push("legend <escaped>".into());
    let report = Report {
        title: "kscale report — a vs b".into(),
        subtitle: "generated by kscale 0.1.0".into(),
        sections: vec![Section {
            id: "compare".into(),
            title: "Direct comparison".into(),
            intro: Some("Ratios.".into()),
            blocks: vec![
                Block::Charts(vec![bars(), line()]),
                Block::Table(t),
                Block::Details {
                    summary: "one case <b>".into(),
                    blocks: vec![],
                },
            ],
        }],
    };
    let html = render(&report).unwrap();
    assert!(html.contains("data-charts=\"2\""));
    assert!(html.contains("legend &lt;escaped&gt;"));
    assert!(html.contains("<summary>one case &lt;b&gt;</summary>"));
    insta::assert_snapshot!(html);
}
