//! How macro results read: secondary metrics under their case, a
//! median-of-3 rule and a load-bound load generator marked in `show`,
//! `compare` and `scale`, and both views on a chosen metric (`--metric`).

mod common;
use common::{case, metric, params, run_with};
use kscale_core::{hist, Direction, RoleCpu, RunRule};
use kscale_report::compare::{compare_metric, tables as compare_tables, CompareError};
use kscale_report::results::run_tables;
use kscale_report::scale::{scale_metric, tables as scale_tables, ScaleError};
use kscale_report::{Catalog, WorkloadInfo};
use kscale_store::{CaseData, MetricRow, QuantileOf, RunData};
use std::collections::BTreeMap;

struct Cat;

impl Catalog for Cat {
    fn workload(&self, id: &str) -> Option<WorkloadInfo> {
        (id == "net.rr").then(|| WorkloadInfo {
            id: id.into(),
            family: "net".into(),
            family_title: "Network".into(),
            title: "Request/response".into(),
            params: params(&["conns"]),
            ..WorkloadInfo::unknown(id)
        })
    }
    fn family_order(&self) -> Vec<String> {
        vec!["net".into()]
    }
}

fn metrics() -> Vec<MetricRow> {
    let mut p99 = metric("p99", "µs", Direction::Lower, false);
    p99.quantile = Some(QuantileOf {
        hist: "latency".into(),
        q: 0.99,
        per_ns: 1e-3,
    });
    vec![
        metric("tps", "tx/s", Direction::Higher, true),
        p99,
        metric("sd_server", "µs/tx", Direction::Lower, false),
    ]
}

/// A net case: `tps` per trial (first the warm-up), each trial's latency
/// histogram at `lat_us`, and its load generator `load_util` busy.
fn net_case(
    id: i64,
    cpus: &str,
    tps: &[f64],
    lat_us: f64,
    load_util: f64,
    rule: RunRule,
) -> CaseData {
    let trials = tps
        .iter()
        .map(|t| BTreeMap::from([("tps".to_string(), *t), ("sd_server".to_string(), 10.0)]))
        .collect();
    let mut c = case(id, "net.rr", &[("conns", "4")], cpus, metrics(), trials);
    c.rule = rule;
    if matches!(rule, RunRule::MedianOf(_)) {
        c.converged = None;
    }
    for t in &mut c.trials {
        let mut h = hist::new();
        for _ in 0..100 {
            hist::record(&mut h, (lat_us * 1000.0) as u64);
        }
        t.histograms.insert("latency".into(), hist::encode(&h));
        t.values.insert("p99".into(), lat_us);
        t.roles = vec![RoleCpu {
            role: "load".into(),
            host: "local".into(),
            cpu_s: load_util,
            window_s: 1.0,
            cpus: 1,
        }];
    }
    c
}

fn two_config_run(util_all: f64) -> RunData {
    run_with(vec![
        net_case(
            1,
            "1",
            &[90.0, 100.0, 101.0, 99.0],
            50.0,
            0.5,
            RunRule::MedianOf(3),
        ),
        net_case(
            2,
            "all",
            &[150.0, 180.0, 181.0, 179.0],
            40.0,
            util_all,
            RunRule::MedianOf(3),
        ),
    ])
}

fn text(t: &[kscale_report::Table]) -> String {
    t.iter().map(|t| t.to_terminal(false)).collect()
}

#[test]
fn show_lists_secondary_metrics_and_marks_rules_and_load() {
    let run = two_config_run(0.95);
    let out = text(&run_tables(&run, &Cat));
    // The primary row, then one row per secondary metric.
    assert!(out.contains("· p99"), "{out}");
    assert!(out.contains("· sd_server"), "{out}");
    // The median of the three counted trials (100), not their mean.
    assert!(out.contains(" 100.0 "), "{out}");
    assert!(out.contains("median of 3"), "{out}");
    assert!(!out.contains("case(s) NOT CONVERGED"), "{out}");
    // The all-CPUs case's load was 95 % busy.
    assert!(out.contains("LOAD-BOUND"), "{out}");
    assert_eq!(out.matches("3 median of 3 LOAD-BOUND").count(), 1, "{out}");
}

#[test]
fn compare_and_scale_on_a_chosen_metric() {
    let a = two_config_run(0.5);
    let mut b = two_config_run(0.95);
    b.run.id = 2;
    b.run.label = "other".into();
    // p99 from the merged histograms: 50 µs and 40 µs.
    let c = compare_metric(&[&a, &b], &Cat, Some("p99")).unwrap();
    let row = &c.families[0].rows[0];
    assert_eq!(row.metric, "p99");
    assert!((row.means[0] - 50.0).abs() < 0.1, "{row:?}");
    let out = text(&compare_tables(&c));
    assert!(out.contains("µs"), "{out}");
    assert!(
        !out.contains("(NOT CONVERGED)"),
        "median-of-3 cases are settled: {out}"
    );
    let all = &c.families[0].rows[1];
    assert_eq!(all.load_bound, vec![false, true]);
    assert!(out.contains("(LOAD-BOUND)"), "{out}");
    assert!(matches!(
        compare_metric(&[&a, &b], &Cat, Some("nope")),
        Err(CompareError::NoSuchMetric(m, known)) if m == "nope" && known.contains("p99")
    ));

    let s = scale_metric(&b, None, &Cat, Some("p99")).unwrap();
    let row = &s.families[0].rows[0];
    assert_eq!(row.metric, "p99");
    // Latency: 50 µs → 40 µs is 1.25× the throughput.
    assert!((row.scalability[1].unwrap() - 1.25).abs() < 0.01, "{row:?}");
    assert!(text(&scale_tables(&s)).contains("(LOAD-BOUND)"));
    assert!(matches!(
        scale_metric(&b, None, &Cat, Some("nope")),
        Err(ScaleError::NoSuchMetric(..))
    ));
}

/// A web case: `conforming` per trial (first the warm-up), median of 3.
fn web_case(id: i64, conns: &str, cpus: &str, conforming: &[f64]) -> CaseData {
    let trials = conforming
        .iter()
        .map(|v| BTreeMap::from([("conforming".to_string(), *v)]))
        .collect();
    let mut c = case(
        id,
        "web.nginx",
        &[("conns", conns), ("rate", "400")],
        cpus,
        vec![metric("conforming", "conns", Direction::Higher, true)],
        trials,
    );
    c.rule = RunRule::MedianOf(3);
    c.converged = None;
    c
}

/// A capacity search's answer (`conns=capacity`) is the row of its
/// workload on each configuration, and `scale` divides capacities; its
/// steps, each a case at one offered count, are left to its note.
#[test]
fn a_capacity_answer_is_the_row_and_its_steps_are_not() {
    let cap = kscale_core::CAPACITY;
    let mut a1 = web_case(1, cap, "1", &[0.0, 2400.0, 2400.0, 2390.0]);
    a1.notes
        .push("capacity: 2400 conns, not at 3200 — a bracket 33 % wide".into());
    let run = run_with(vec![
        web_case(2, "800", "1", &[0.0, 800.0]),
        web_case(3, "3200", "1", &[0.0, 2900.0]),
        web_case(4, "2400", "1", &[0.0, 2400.0, 2400.0, 2390.0]),
        a1,
        web_case(5, "800", "all", &[0.0, 800.0]),
        web_case(6, "1600", "all", &[0.0, 1600.0]),
        web_case(7, cap, "all", &[0.0, 1600.0, 1600.0, 1600.0]),
    ]);
    let text: String = run_tables(&run, &Cat)
        .iter()
        .map(|t| t.to_terminal(false))
        .collect();
    assert!(text.contains("conns=capacity"), "{text}");
    for step in ["conns=800", "conns=3200", "conns=2400", "conns=1600"] {
        assert!(!text.contains(step), "{step} has a row:\n{text}");
    }
    assert!(text.contains("capacity: 2400 conns, not at 3200"), "{text}");
    let s = scale_metric(&run, None, &Cat, None).unwrap();
    let rows: Vec<_> = s.families.iter().flat_map(|f| &f.rows).collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].params["conns"], cap);
    assert_eq!(rows[0].means, vec![Some(2400.0), Some(1600.0)]);
    let scal = rows[0].scalability[1].unwrap();
    assert!((scal - 1600.0 / 2400.0).abs() < 1e-9, "{scal}");
    let text: String = scale_tables(&s)
        .iter()
        .map(|t| t.to_terminal(false))
        .collect();
    assert!(text.contains("0.67×"), "{text}");
}
