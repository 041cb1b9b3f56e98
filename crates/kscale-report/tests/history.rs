//! The history report (`kscale report --history`): a case's series of
//! runs drawn as one point a run with its interval, the levels between
//! change points and a marker at each, the changes tabled under the chart;
//! checked on the markup, as a snapshot, and laid out by Chromium.

#[path = "common/browser.rs"]
mod browser;
#[path = "common/svgcheck.rs"]
mod svgcheck;

use kscale_core::changes::{detect, Change, Point as RunResult, Settings};
use kscale_core::twosample::{Test, TwoSample};
use kscale_core::Direction;
use kscale_report::history::{build, HistoryHeading, HistoryPoint, HistorySeries};
use kscale_report::html::render;
use kscale_report::svg::Chart;
use kscale_store::series::SeriesRun;

/// Run `i` of a series (id `i + 1`), labelled nightly-NN, one a day.
fn run(i: usize) -> SeriesRun {
    SeriesRun {
        id: i as i64 + 1,
        label: format!("nightly-{i:02}"),
        started_at: format!("2025-01-{:02}T00:00:00Z", i + 1),
        git_rev: "0123456789ab".into(),
        hostname: Some("lab1".into()),
        kernel: Some(format!("6.{i}.0")),
        kernel_version: None,
        vm: None,
    }
}

/// 12 runs around 1 µs, 10 % higher from run index 8; run 3 did not
/// converge. The change is written out as `changes` would report it.
fn stepped() -> HistorySeries {
    let wobble = [0.0, 0.01, -0.01, 0.02, -0.02, 0.0, 0.01, -0.01];
    let points = (0..12)
        .map(|i| {
            let level = if i >= 8 { 1.1 } else { 1.0 };
            let v = level + wobble[i % wobble.len()];
            HistoryPoint {
                run: run(i),
                value: v,
                ci_low: v - 0.02,
                ci_high: v + 0.02,
                n: 5,
                converged: i != 3,
            }
        })
        .collect();
    HistorySeries {
        title: "syscall.null [1]".into(),
        metric: "latency".into(),
        unit: "µs".into(),
        direction: Direction::Lower,
        confidence_pct: 95.0,
        points,
        changes: vec![Change {
            at: 8,
            before: 1.0,
            after: 1.1,
            rel: 0.1,
            rel_low: 0.08,
            rel_high: 0.12,
            p: 0.005,
            trials: Some(TwoSample {
                test: Test::Welch,
                p: 2e-5,
                mdc: None,
            }),
            reverted_at: None,
        }],
    }
}

fn heading() -> HistoryHeading {
    HistoryHeading {
        selection: "syscall.null --cpus 1".into(),
        order: "start time".into(),
        kscale_version: "0.1.0".into(),
    }
}

#[test]
fn history_chart_svg() {
    insta::assert_snapshot!(stepped().chart("start time").to_svg());
}

#[test]
fn changes_table_markdown() {
    insta::assert_snapshot!(stepped().changes_table().to_markdown());
}

/// A point a run with its interval, hollow where it did not converge, in
/// its run's group; two levels; one marker between runs #8 and #9.
#[test]
fn the_chart_draws_each_run_the_levels_and_the_change() {
    let s = stepped();
    let svg = s.chart("start time").to_svg();
    let bad = svgcheck::check(&svg, None);
    assert!(bad.is_empty(), "{bad:#?}\n{svg}");
    assert!(svg.contains(r#"data-kind="history""#));
    assert_eq!(svg.matches(r#"<g class="point">"#).count(), 12);
    assert_eq!(svg.matches(r#"class="ci mark""#).count(), 12);
    assert_eq!(svg.matches(r#"data-converged="false""#).count(), 1);
    for p in &s.points {
        assert!(
            svg.contains(&format!(
                r#"<g class="run" data-run="{}" data-index="{}">"#,
                p.run.id,
                p.run.id - 1
            )),
            "run #{}",
            p.run.id
        );
        assert!(svg.contains(&format!(
            r#"data-ci-low="{}" data-ci-high="{}""#,
            p.ci_low, p.ci_high
        )));
    }
    // The tooltip says which run, when, on what.
    assert!(svg.contains("<title>#9 nightly-08 (2025-01-09, 6.8.0): 1.100 (interval"));
    assert_eq!(svg.matches("data-change-run=").count(), 1);
    assert!(svg.contains(r#"data-change-run="9" data-change-index="8""#));
    assert!(svg.contains(">#9</text>"), "the marker is named");
    assert!(svg.contains(r#"data-level="1" data-from="0" data-to="8""#));
    assert!(svg.contains(r#"data-level="1.1" data-from="8" data-to="12""#));

    // The marker lies halfway between the last run before and the first after.
    let x_of = |needle: &str| -> f64 {
        let at = svg.find(needle).expect(needle);
        let cx = svg[at..].find(" cx=\"").expect("cx") + at + 5;
        svg[cx..].split('"').next().unwrap().parse().unwrap()
    };
    let (before, after) = (x_of(r#"data-run="8""#), x_of(r#"data-run="9""#));
    let m = svg.find(r#"data-change-index="8" d="M"#).unwrap() + 26;
    let marker: f64 = svg[m..].split(',').next().unwrap().parse().unwrap();
    assert!(
        (marker - (before + after) / 2.0).abs() < 0.02,
        "{before} {marker} {after}"
    );
}

#[test]
fn a_series_without_changes_has_one_level_and_says_so() {
    let mut s = stepped();
    s.changes.clear();
    let svg = s.chart("start time").to_svg();
    assert!(svgcheck::check(&svg, None).is_empty());
    assert_eq!(svg.matches("class=\"level mark\"").count(), 1);
    assert!(!svg.contains("data-change-run"));
    assert!(
        !svg.contains("change point, before"),
        "no marker, no word of it"
    );
    let t = s.changes_table();
    assert!(t.rows.is_empty());
    assert!(t.notes[0].starts_with("No change point in these 12 runs"));
}

/// The changes `detect` finds (what `kscale changes` runs) are the ones
/// drawn: a 10 % step in 30 runs is one marker at its run.
#[test]
fn the_changes_core_finds_are_the_ones_marked() {
    let mut s = stepped();
    s.points = (0..30)
        .map(|i| {
            let v = if i >= 20 { 1.1 } else { 1.0 } + 0.004 * ((i * 7 % 5) as f64 - 2.0);
            HistoryPoint {
                run: run(i),
                value: v,
                ci_low: v - 0.01,
                ci_high: v + 0.01,
                n: 4,
                converged: true,
            }
        })
        .collect();
    let results: Vec<RunResult> = s
        .points
        .iter()
        .map(|p| RunResult {
            value: p.value,
            trials: vec![p.value - 0.005, p.value, p.value + 0.005, p.value + 0.001],
        })
        .collect();
    s.changes = detect(&results, &Settings::default());
    assert_eq!(s.changes.len(), 1, "{:?}", s.changes);
    let svg = s.chart("start time").to_svg();
    assert!(svg.contains(r#"data-change-run="21" data-change-index="20""#));
    let t = s.changes_table();
    assert_eq!(t.rows.len(), 1);
    assert_eq!(t.rows[0].cells[0].text, "#21");
    let col = t.headers.iter().position(|h| h == "in series").unwrap();
    assert_eq!(t.rows[0].cells[col].text, "21 of 30");
}

/// The whole page: every series a section with its chart and its table,
/// every value escaped; Chromium lays the charts out whole and draws each
/// interval to scale.
#[test]
fn the_history_report_renders_in_a_browser() {
    let mut other = stepped();
    other.title = "syscall.read [1]".into();
    other.points[2].run.label = "<script>alert(1)</script>".into();
    other.changes[0].reverted_at = Some(10);
    let report = build(&[stepped(), other], &heading());
    assert_eq!(report.chart_count(), 2);
    assert!(report
        .charts()
        .iter()
        .all(|c| matches!(c, Chart::History(_))));
    let html = render(&report).expect("render");
    assert!(html.contains("kscale history — syscall.null --cpus 1"));
    assert!(html.contains("2 cases over 12 runs, by start time"));
    assert_eq!(html.matches("<g class=\"point\">").count(), 24);
    assert_eq!(html.matches("data-change-run=").count(), 2);
    assert!(html.contains("<h3>Change points — syscall.read [1]</h3>"));
    assert!(html.contains("reverted at run #11"));
    assert!(html.contains("<td class=\"bad\">+10.0 %</td>"));
    assert!(!html.contains("<script>alert"), "a label is escaped");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"));

    let Some(dom) = browser::dom(&html, "history") else {
        return;
    };
    browser::assert_laid_out_whole(&dom, 2, 24);
}
