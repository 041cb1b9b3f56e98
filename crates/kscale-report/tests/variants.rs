//! Snapshot tests of a variant table — seed 001's implementation table —
//! built from a stored run of a family whose definition declares one.

use kscale_core::Direction;
use kscale_report::variants::variant_tables;
use kscale_report::{Catalog, Table, VariantsSpec, WorkloadInfo};
mod common;
use common::run_with;
use kscale_store::{CaseData, CaseStatus, RunData};
use std::collections::BTreeMap;

struct Cat;

/// The run's only variant table.
fn one(run: &RunData, baseline: Option<&str>) -> Option<Table> {
    let mut v = variant_tables(run, &Cat, baseline);
    assert!(v.len() <= 1, "{v:?}");
    v.pop()
}

impl Catalog for Cat {
    fn workload(&self, id: &str) -> Option<WorkloadInfo> {
        let (title, params) = match id {
            "threads.lifecycle" => ("Thread create + join", vec!["impl", "stack", "seconds"]),
            "threads.context" => (
                "Mutex hand-over switches",
                vec!["impl", "threads", "seconds"],
            ),
            "threads.uncontested" => ("Uncontested lock + unlock", vec!["impl", "seconds"]),
            "syscall.null" => ("Simple syscall", vec![]),
            _ => return None,
        };
        let variants = id.starts_with("threads.").then(|| VariantsSpec {
            title: "Thread library implementations".into(),
            param: "impl".into(),
            heading: "Implementation".into(),
            metrics: [("ops", "ops/s"), ("ns", "ns/op"), ("cycles", "cycles/op")]
                .iter()
                .map(|(m, h)| (m.to_string(), h.to_string()))
                .collect(),
            baseline: "pthread".into(),
            note: "cycles/op: CPU cycles of all the test's threads per operation.".into(),
        });
        Some(WorkloadInfo {
            id: id.into(),
            family: id.split('.').next().unwrap_or(id).into(),
            family_title: "Thread library".into(),
            title: title.into(),
            params: common::params(&params),
            variants,
            ..Default::default()
        })
    }
    fn family_order(&self) -> Vec<String> {
        vec!["syscall".into(), "threads".into()]
    }
}

/// A case whose trials have `ops` ops/s (spread by `jitter`), with ns/op and
/// cycles/op derived from it at 2 GHz.
fn case(id: i64, w: &str, params: &[(&str, &str)], cpus: &str, ops: f64, jitter: f64) -> CaseData {
    let trials = [0.0, -1.0, 1.0, 0.5]
        .iter()
        .map(|d| {
            let v = ops * (1.0 + d * jitter);
            BTreeMap::from([
                ("ops".to_string(), v),
                ("ns".to_string(), 1e9 / v),
                ("cycles".to_string(), 2.0 * 1e9 / v),
            ])
        })
        .collect();
    let mut c = common::case(
        id,
        w,
        params,
        cpus,
        vec![
            common::metric("ops", "ops/s", Direction::Higher, true),
            common::metric("ns", "ns", Direction::Lower, false),
            common::metric("cycles", "cycles", Direction::Lower, false),
        ],
        trials,
    );
    c.notes =
        vec!["cycles/op: CPU time of all threads × TSC at 2.1 GHz (perf refused: ENOENT)".into()];
    c
}

fn threads_run() -> RunData {
    let mut cases = Vec::new();
    let mut id = 0;
    let mut add = |w: &str, p: &[(&str, &str)], one: f64, all: f64, jitter: f64| {
        id += 1;
        cases.push(case(id, w, p, "1", one, jitter));
        id += 1;
        cases.push(case(id, w, p, "all", all, jitter));
    };
    for (imp, one, all) in [("pthread", 60_000.0, 45_000.0), ("std", 52_000.0, 40_000.0)] {
        add(
            "threads.lifecycle",
            &[("impl", imp), ("stack", "64k"), ("seconds", "1")],
            one,
            all,
            0.01,
        );
    }
    for (imp, one, all) in [
        ("pthread", 700_000.0, 300_000.0),
        ("std", 720_000.0, 310_000.0),
        ("futex", 701_000.0, 330_000.0),
        ("spin", 200_000.0, 4_000_000.0),
    ] {
        add(
            "threads.context",
            &[("impl", imp), ("threads", "2"), ("seconds", "1")],
            one,
            all,
            0.02,
        );
    }
    for (imp, v) in [
        ("pthread", 55e6),
        ("std", 60e6),
        ("futex", 62e6),
        ("spin", 70e6),
    ] {
        add(
            "threads.uncontested",
            &[("impl", imp), ("seconds", "1")],
            v,
            v * 0.99,
            0.005,
        );
    }
    // A failed case shows as such, and a non-threads case is ignored.
    cases[3].status = CaseStatus::Failed;
    cases[3].trials.clear();
    cases.push(case(99, "syscall.null", &[], "1", 1.0, 0.0));
    run_with(cases)
}

#[test]
fn terminal_table() {
    let t = one(&threads_run(), None).expect("threads cases");
    insta::assert_snapshot!(t.to_terminal(false));
}

#[test]
fn markdown_table_against_std() {
    let t = one(&threads_run(), Some("std")).expect("threads cases");
    insta::assert_snapshot!(t.to_markdown());
}

#[test]
fn missing_baseline_is_marked() {
    let t = one(&threads_run(), Some("nptl")).expect("threads cases");
    let text = t.to_terminal(false);
    assert!(
        text.contains("n/a") && text.contains("--baseline"),
        "{text}"
    );
}

#[test]
fn no_threads_cases_no_table() {
    let run = run_with(vec![case(1, "syscall.null", &[], "1", 1.0, 0.0)]);
    assert!(one(&run, None).is_none());
}
