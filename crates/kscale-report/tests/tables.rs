//! Snapshot tests of the run tables: the layout people read and paste.

use kscale_core::Direction;
use kscale_report::results::run_tables;
use kscale_report::{Catalog, WorkloadInfo};
mod common;
use common::run_with;
use kscale_store::{CaseData, CaseStatus, RunData};
use std::collections::BTreeMap;

struct Cat;

impl Catalog for Cat {
    fn workload(&self, id: &str) -> Option<WorkloadInfo> {
        let (family, family_title, title, params, over) = match id {
            "syscall.null" => (
                "syscall",
                "Latency of simple functions",
                "Simple syscall",
                vec![],
                None,
            ),
            "syscall.pipe" => (
                "syscall",
                "Latency of simple functions",
                "Pipe latency",
                vec![],
                None,
            ),
            "ctx.lat" => (
                "ctx",
                "Context switching latency",
                "Context switch",
                vec!["procs", "size"],
                Some("procs"),
            ),
            _ => return None,
        };
        Some(WorkloadInfo {
            geomean_over: over.map(String::from),
            ..common::workload_info(id, family, family_title, title, &params)
        })
    }
    fn family_order(&self) -> Vec<String> {
        vec!["syscall".into(), "ctx".into()]
    }
}

fn case(
    id: i64,
    w: &str,
    params: &[(&str, &str)],
    cpus: &str,
    vals: &[f64],
    converged: Option<bool>,
) -> CaseData {
    let trials = std::iter::once(vals[0] * 1.3)
        .chain(vals.iter().copied())
        .map(|v| BTreeMap::from([("latency".to_string(), v)]))
        .collect();
    let mut c = common::case(
        id,
        w,
        params,
        cpus,
        vec![common::metric("latency", "µs", Direction::Lower, true)],
        trials,
    );
    c.converged = converged;
    c.iterations = Some(1000);
    for t in &mut c.trials {
        t.iterations = Some(1000);
    }
    c
}

fn run() -> RunData {
    let mut failed = case(9, "syscall.pipe", &[], "all", &[1.0], None);
    failed.status = CaseStatus::Failed;
    failed.error = Some("worker killed by signal 9".into());
    failed.trials.clear();
    run_with(vec![
        case(
            1,
            "syscall.null",
            &[],
            "1",
            &[0.2600, 0.2610, 0.2590],
            Some(true),
        ),
        case(
            2,
            "syscall.null",
            &[],
            "all",
            &[0.2700, 0.2650, 0.2750],
            Some(true),
        ),
        case(
            3,
            "syscall.pipe",
            &[],
            "1",
            &[2.1, 2.9, 2.5, 1.8, 3.0],
            Some(false),
        ),
        failed,
        case(
            4,
            "ctx.lat",
            &[("procs", "2"), ("size", "0")],
            "1",
            &[1.5, 1.52, 1.49],
            Some(true),
        ),
        case(
            5,
            "ctx.lat",
            &[("procs", "8"), ("size", "0")],
            "1",
            &[2.0, 2.02, 1.98],
            Some(true),
        ),
        case(
            6,
            "ctx.lat",
            &[("procs", "2"), ("size", "16k")],
            "1",
            &[4.0, 4.1, 3.9],
            Some(true),
        ),
        case(
            7,
            "ctx.lat",
            &[("procs", "8"), ("size", "16k")],
            "1",
            &[9.0, 9.1, 8.9],
            Some(true),
        ),
    ])
}

#[test]
fn terminal_tables() {
    let text: String = run_tables(&run(), &Cat)
        .iter()
        .map(|t| t.to_terminal(false) + "\n")
        .collect();
    insta::assert_snapshot!(text);
}

#[test]
fn markdown_tables() {
    let text: String = run_tables(&run(), &Cat)
        .iter()
        .map(|t| t.to_markdown() + "\n")
        .collect();
    insta::assert_snapshot!(text);
}

/// Sets one measure of each counted trial's accounting, in order (the
/// warm-up gets 0).
fn with_accounting(
    mut c: CaseData,
    xs: &[f64],
    set: fn(&mut kscale_core::model::CpuAccounting, f64),
) -> CaseData {
    let mut it = xs.iter();
    for t in &mut c.trials {
        let x = if t.warmup { 0.0 } else { *it.next().unwrap() };
        let mut a = kscale_core::model::CpuAccounting {
            seconds: 0.2,
            ..Default::default()
        };
        set(&mut a, x);
        t.accounting = Some(a);
    }
    c
}

fn with_steal(c: CaseData, steal: &[f64]) -> CaseData {
    with_accounting(c, steal, |a, s| {
        a.steal_pct = s;
        a.user_pct = 100.0 - s;
    })
}

fn with_line(c: CaseData, line_ns: &[f64]) -> CaseData {
    with_accounting(c, line_ns, |a, ns| a.line_ns = Some(ns))
}

/// The `kind: ` notes under the tables of one `syscall.pipe` case whose five
/// counted trials read `PIPE` and whose accounting `with` sets to `xs`.
fn host_notes(
    kind: &str,
    with: fn(CaseData, &[f64]) -> CaseData,
    xs: &[f64],
    converged: bool,
) -> Vec<String> {
    const PIPE: [f64; 5] = [2.1, 2.9, 2.5, 1.8, 3.0];
    let c = with(
        case(3, "syscall.pipe", &[], "1", &PIPE, Some(converged)),
        xs,
    );
    run_tables(&run_with(vec![c]), &Cat)
        .iter()
        .flat_map(|t| t.notes.clone())
        .filter(|n| n.starts_with(&format!("{kind}: ")))
        .collect()
}

/// What the host did to a case's trials is named under its table, only
/// when the case did not converge and its figures followed it: steal time,
/// and where the host put the vCPUs (the line round trip between them).
#[test]
fn what_the_host_did_is_named_only_for_cases_not_converged_that_followed_it() {
    type With = fn(CaseData, &[f64]) -> CaseData;
    /// Kind, how to set it, values the figures follow, their range as
    /// printed, and values that do not explain the figures.
    type Kind = (&'static str, With, [f64; 5], &'static str, [f64; 5]);
    let kinds: [Kind; 2] = [
        // The line time moves with the trials; then only within 1.5×.
        (
            "placement",
            with_line,
            [95.0, 430.0, 260.0, 90.0, 470.0],
            "90–470 ns",
            [430.0, 450.0, 470.0, 440.0, 460.0],
        ),
        // Steal moves with the trials; then it moves, but unrelated (r = 0.24).
        (
            "steal",
            with_steal,
            [4.0, 22.0, 12.0, 0.0, 30.0],
            "0–30 %",
            [12.0, 0.0, 30.0, 4.0, 22.0],
        ),
    ];
    for (kind, with, follows, range, other) in kinds {
        let named = host_notes(kind, with, &follows, false);
        assert_eq!(named.len(), 1, "{kind}: {named:?}");
        assert!(
            named[0].contains("Pipe latency [cpus 1]")
                && named[0].contains(range)
                && named[0].contains("r = 0.9"),
            "{kind}: {named:?}"
        );
        assert!(host_notes(kind, with, &follows, true).is_empty(), "{kind}");
        assert!(host_notes(kind, with, &other, false).is_empty(), "{kind}");
    }
}
