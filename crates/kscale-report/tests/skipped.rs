//! Skipped cases (a workload the machine cannot run): shown with their
//! reason, left out of the family's geometric mean in `show`, and out of
//! `compare`'s common rows, which are still compared.

use kscale_core::Direction;
use kscale_report::compare::{compare, tables};
use kscale_report::results::run_tables;
use kscale_report::{Catalog, WorkloadInfo};
mod common;
use kscale_store::{CaseData, CaseStatus, RunData};
use std::collections::BTreeMap;

struct Cat;

impl Catalog for Cat {
    fn workload(&self, id: &str) -> Option<WorkloadInfo> {
        let title = match id {
            "cmd.cat" => "cat - display a large file",
            "cmd.grep" => "grep - search a large file",
            "cmd.compress" => "compress - compress large file, forced",
            _ => return None,
        };
        Some(WorkloadInfo {
            id: id.into(),
            family: "cmd".into(),
            family_title: "Command line execution time".into(),
            title: title.into(),
            ..Default::default()
        })
    }
    fn family_order(&self) -> Vec<String> {
        vec!["cmd".into()]
    }
}

const REASON: &str = "compress: not installed (Debian package ncompress)";

fn case(id: i64, w: &str, v: f64) -> CaseData {
    let trials = [v * 1.2, v, v, v]
        .iter()
        .map(|x| BTreeMap::from([("time".to_string(), *x)]))
        .collect();
    common::case(
        id,
        w,
        &[],
        "all",
        vec![common::metric("time", "µs", Direction::Lower, true)],
        trials,
    )
}

fn skipped(id: i64, w: &str) -> CaseData {
    let mut c = case(id, w, 1.0);
    c.status = CaseStatus::Skipped;
    c.error = Some(REASON.into());
    c.converged = None;
    c.trials.clear();
    c
}

fn run(id: i64, label: &str, cases: Vec<CaseData>) -> RunData {
    let mut r = common::run_with(cases);
    r.run.id = id;
    r.run.label = label.into();
    r
}

fn text(t: &kscale_report::Table) -> String {
    let mut s = String::new();
    for r in &t.rows {
        let cells: Vec<&str> = r.cells.iter().map(|c| c.text.as_str()).collect();
        s.push_str(&cells.join(" | "));
        s.push('\n');
    }
    s + &t.notes.join("\n")
}

#[test]
fn show_marks_the_skip_and_means_the_rest() {
    let r = run(
        1,
        "a",
        vec![
            case(1, "cmd.cat", 100.0),
            case(2, "cmd.grep", 400.0),
            skipped(3, "cmd.compress"),
        ],
    );
    let t = &run_tables(&r, &Cat)[0];
    let s = text(t);
    assert!(
        s.contains("compress - compress large file, forced | µs | skipped"),
        "{s}"
    );
    assert!(s.contains(REASON), "{s}");
    // √(100 × 400) = 200, over the two rows measured.
    assert!(s.contains("Geometric mean | µs | 200"), "{s}");
}

#[test]
fn compare_uses_the_common_rows_and_names_the_skip() {
    let a = run(
        1,
        "a",
        vec![
            case(1, "cmd.cat", 100.0),
            case(2, "cmd.grep", 400.0),
            case(3, "cmd.compress", 50.0),
        ],
    );
    let b = run(
        2,
        "b",
        vec![
            case(1, "cmd.cat", 110.0),
            case(2, "cmd.grep", 440.0),
            skipped(3, "cmd.compress"),
        ],
    );
    let c = compare(&[&a, &b], &Cat).unwrap();
    let rows = &c.families[0].rows;
    assert_eq!(rows.len(), 3, "two common rows and the geometric mean");
    let gm = rows.last().unwrap();
    assert!(gm.summary);
    assert!((gm.means[0] - 200.0).abs() < 1e-9, "{:?}", gm.means);
    assert!((gm.ratios[0].ratio - 1.1).abs() < 1e-9);
    assert_eq!(c.only_in.len(), 1);
    assert!(c.only_in[0].1.contains(&format!("skipped in b: {REASON}")));
    let all: String = tables(&c).iter().map(text).collect();
    assert!(all.contains("skipped in b"), "{all}");
}
