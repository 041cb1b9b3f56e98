//! Snapshot tests of `compare` and `scale`: beside every ratio the smallest
//! change the comparison could have seen, and the test that decided it.

use kscale_core::Direction;
use kscale_report::compare::{compare, tables as compare_tables};
use kscale_report::scale::{scale, tables as scale_tables};
use kscale_report::{Catalog, WorkloadInfo};
mod common;
use common::run_with;
use kscale_store::{CaseData, RunData};
use std::collections::BTreeMap;

struct Cat;

impl Catalog for Cat {
    fn workload(&self, id: &str) -> Option<WorkloadInfo> {
        let title = match id {
            "syscall.null" => "Simple syscall",
            "syscall.pipe" => "Pipe latency",
            "net.tcp_rr" => "TCP request/response",
            _ => return None,
        };
        Some(WorkloadInfo {
            id: id.into(),
            family: "f".into(),
            family_title: "Family".into(),
            title: title.into(),
            ..Default::default()
        })
    }
    fn family_order(&self) -> Vec<String> {
        vec!["f".into()]
    }
}

fn case(id: i64, w: &str, cpus: &str, vals: &[f64]) -> CaseData {
    let trials = std::iter::once(vals[0])
        .chain(vals.iter().copied())
        .map(|v| BTreeMap::from([("latency".to_string(), v)]))
        .collect();
    common::case(
        id,
        w,
        &[],
        cpus,
        vec![common::metric("latency", "µs", Direction::Lower, true)],
        trials,
    )
}

/// `estimator` as `kscale run --estimator` stores it.
fn run(id: i64, label: &str, estimator: Option<&str>, cases: Vec<CaseData>) -> RunData {
    let mut r = run_with(cases);
    r.run.id = id;
    r.run.label = label.into();
    if let Some(e) = estimator {
        r.run.options["rule"]["estimator"] = e.into();
    }
    for c in &mut r.cases {
        c.estimator = r.run.estimator();
    }
    r
}

/// Syscall: steady, 8 % slower in B. Pipe: 20 % CV in both, 10 % slower in
/// B, hidden. TCP: B's trials carry one host spell (a trial at 6× the
/// latency, 0.16 of the throughput).
fn pair(estimator: Option<&str>) -> (RunData, RunData) {
    let a = run(
        1,
        "A",
        estimator,
        vec![
            case(1, "syscall.null", "1", &[0.260, 0.261, 0.259, 0.262, 0.258]),
            case(
                2,
                "syscall.null",
                "all",
                &[0.270, 0.265, 0.275, 0.268, 0.272],
            ),
            case(3, "syscall.pipe", "1", &[2.1, 2.9, 2.5, 1.8, 3.0]),
            case(4, "net.tcp_rr", "1", &[19.2, 19.7, 18.7, 19.4, 19.9, 19.0]),
        ],
    );
    let b = run(
        2,
        "B",
        estimator,
        vec![
            case(
                11,
                "syscall.null",
                "1",
                &[0.281, 0.282, 0.280, 0.283, 0.279],
            ),
            case(
                12,
                "syscall.null",
                "all",
                &[0.291, 0.286, 0.297, 0.289, 0.294],
            ),
            case(13, "syscall.pipe", "1", &[2.3, 3.2, 2.75, 2.0, 3.3]),
            case(
                14,
                "net.tcp_rr",
                "1",
                &[19.1, 19.6, 120.5, 19.3, 19.8, 19.0],
            ),
        ],
    );
    (a, b)
}

fn text(tables: &[kscale_report::table::Table]) -> String {
    tables.iter().map(|t| t.to_terminal(false) + "\n").collect()
}

#[test]
fn compare_names_the_detectable_change_and_the_test() {
    for (name, est) in [("trimmed", Some("trimmed")), ("mean", None)] {
        let (a, b) = pair(est);
        let c = compare(&[&a, &b], &Cat).unwrap();
        insta::assert_snapshot!(format!("compare_{name}"), text(&compare_tables(&c)));
    }
}

#[test]
fn scale_names_the_detectable_change() {
    let (a, _) = pair(Some("trimmed"));
    let s = scale(&a, None, &Cat).unwrap();
    insta::assert_snapshot!(text(&scale_tables(&s)));
}

/// Verdicts from the spread between runs: syscall 8 % slower on runs that
/// spread 1 % is slower at ±5 %; the same change on runs that spread 10 %
/// cannot be told, and says the margin it could decide; a side without a
/// spread between runs has no verdict. The family's geometric mean gets
/// one from its cases.
#[test]
fn compare_gives_each_case_and_family_a_verdict() {
    use kscale_core::verdict::{CompareWord, Spread};
    use kscale_report::compare::{decide, SideSpread};
    let (a, b) = pair(Some("trimmed"));
    let mut c = compare(&[&a, &b], &Cat).unwrap();
    let spread = |sd: f64| Spread {
        sd,
        df: 20.0,
        runs: 21,
    };
    decide(&mut c, 0.05, |_, rows| {
        let [row] = rows else {
            return None;
        };
        Some(SideSpread {
            spread: match (row.workload.as_str(), row.cpus.as_str()) {
                ("syscall.null", "1") => spread(0.01),
                ("syscall.null", _) => spread(0.01),
                ("syscall.pipe", _) => spread(0.10),
                _ => return None,
            },
            machine: 0,
            runs: Vec::new(),
        })
    });
    let rows = &c.families[0].rows;
    let verdict = |label: &str| {
        rows.iter()
            .find(|r| r.label.starts_with(label))
            .unwrap_or_else(|| panic!("no row {label}"))
            .ratios[0]
            .verdict
    };
    let v = verdict("Simple syscall [1").expect("a verdict");
    assert_eq!(v.verdict, CompareWord::Slower, "{v:?}");
    assert!(v.interval.lo_pct > 0.0 && v.interval.est_pct > 5.0, "{v:?}");
    let v = verdict("Pipe latency").expect("a verdict");
    assert_eq!(v.verdict, CompareWord::CannotTell, "{v:?}");
    assert!(v.smallest_threshold_pct > 5.0, "{v:?}");
    assert!(verdict("TCP request/response").is_none());
    // One case without a verdict: the family has none.
    assert!(verdict("Geometric mean").is_none());
    let out = text(&compare_tables(&c));
    assert!(
        out.contains("verdict B/A") && out.contains("slower"),
        "{out}"
    );
    assert!(out.contains("cannot tell (±"), "{out}");
}

/// A family of unlike metrics (as `fs`: creations and removals) has no
/// geometric mean of them all, so it gets one per metric, each with its
/// own verdict from its own cases: two runs that agree read "same" on
/// each, and a metric moved 20 % reads "slower" on its row alone.
#[test]
fn a_family_of_unlike_metrics_gets_a_verdict_per_metric() {
    use kscale_core::verdict::{CompareWord, Spread};
    use kscale_report::compare::{decide, SideSpread};
    let of = |id: i64, w: &str, cpus: &str, metric: &str, v: f64| {
        let trials = (0..4)
            .map(|k| BTreeMap::from([(metric.to_string(), v * (1.0 + 0.001 * k as f64))]))
            .collect();
        common::case(
            id,
            w,
            &[],
            cpus,
            vec![common::metric(metric, "files/s", Direction::Higher, true)],
            trials,
        )
    };
    let side = |id: i64, label: &str, k: f64| {
        run(
            id,
            label,
            None,
            vec![
                of(id * 10 + 1, "syscall.null", "1", "creates", 1000.0),
                of(id * 10 + 2, "syscall.null", "all", "creates", 1100.0),
                of(id * 10 + 3, "syscall.pipe", "1", "deletes", 2000.0 * k),
                of(id * 10 + 4, "syscall.pipe", "all", "deletes", 2100.0 * k),
            ],
        )
    };
    let (a, b) = (side(1, "A", 1.0), side(2, "B", 0.8));
    let mut c = compare(&[&a, &b], &Cat).unwrap();
    decide(&mut c, 0.05, |_, _| {
        Some(SideSpread {
            spread: Spread {
                sd: 0.005,
                df: 20.0,
                runs: 21,
            },
            machine: 0,
            runs: Vec::new(),
        })
    });
    let rows = &c.families[0].rows;
    let verdict = |label: &str| {
        rows.iter()
            .find(|r| r.label == label)
            .unwrap_or_else(|| panic!("no row {label}: {rows:#?}"))
            .ratios[0]
            .verdict
            .map(|v| v.verdict)
    };
    assert_eq!(verdict("Geometric mean: creates"), Some(CompareWord::Same));
    assert_eq!(
        verdict("Geometric mean: deletes"),
        Some(CompareWord::Slower)
    );
    assert!(!rows.iter().any(|r| r.label == "Geometric mean"));
}

/// A family's verdict reads the spread of its own geometric mean between
/// runs where the sides have one: cases that each spread too far to tell
/// can move apart from one another, so their mean may spread far less
/// (over eight quick runs of one binary, syscall's mean 3.4 % a run, its
/// cases 9.4 %). Without it, the family falls back to its cases'.
#[test]
fn a_family_reads_the_spread_of_its_own_mean() {
    use kscale_core::verdict::{CompareWord, Spread};
    use kscale_report::compare::{decide, SideSpread};
    let of = |id: i64, cpus: &str, v: f64| {
        let trials = (0..4)
            .map(|k| BTreeMap::from([("creates".to_string(), v * (1.0 + 0.001 * k as f64))]))
            .collect();
        common::case(
            id,
            "syscall.null",
            &[],
            cpus,
            vec![common::metric(
                "creates",
                "files/s",
                Direction::Higher,
                true,
            )],
            trials,
        )
    };
    let side = |id: i64, label: &str| {
        run(
            id,
            label,
            None,
            vec![of(id * 10 + 1, "1", 1000.0), of(id * 10 + 2, "all", 1100.0)],
        )
    };
    let (a, b) = (side(1, "A"), side(2, "B"));
    let spread = |sd: f64| SideSpread {
        spread: Spread {
            sd,
            df: 20.0,
            runs: 21,
        },
        machine: 0,
        runs: Vec::new(),
    };
    let verdicts = |family: Option<f64>| {
        let mut c = compare(&[&a, &b], &Cat).unwrap();
        decide(&mut c, 0.05, |_, rows| match rows.len() {
            1 => Some(spread(0.10)),
            _ => family.map(spread),
        });
        c.families[0]
            .rows
            .iter()
            .map(|r| (r.label.clone(), r.ratios[0].verdict.map(|v| v.verdict)))
            .collect::<Vec<_>>()
    };
    let own = verdicts(Some(0.005));
    let word = |v: &[(String, Option<CompareWord>)], label: &str| {
        v.iter()
            .find(|(l, _)| l.starts_with(label))
            .unwrap_or_else(|| panic!("no row {label}: {v:?}"))
            .1
    };
    assert_eq!(word(&own, "Simple syscall"), Some(CompareWord::CannotTell));
    assert_eq!(word(&own, "Geometric mean"), Some(CompareWord::Same));
    let fallback = verdicts(None);
    assert_eq!(
        word(&fallback, "Geometric mean"),
        Some(CompareWord::CannotTell)
    );
}
