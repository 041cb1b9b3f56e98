//! The implementation table of seed 001 ("Linux Threads vs NPTL"): for each
//! `threads` test, a row per implementation of the primitives with its
//! operations per second, ns and cycles per operation, and how far its rate
//! is from a baseline implementation's, per CPU configuration.

use crate::format::sig;
use crate::results::{case_label, cpus_header, RuleInfo};
use crate::table::{Cell, RowKind, Table, Tone};
use crate::{Catalog, WorkloadInfo};
use kscale_core::{CaseKey, Welch};
use kscale_store::{CaseData, CaseStatus, RunData};

/// The family whose cases carry an `impl` param.
const FAMILY: &str = "threads";
const IMPL: &str = "impl";
/// Metric names the `threads` workloads declare: the first is primary.
const OPS: &str = "ops";
const NS: &str = "ns";
const CYCLES: &str = "cycles";
const ALPHA: f64 = 0.05;

/// One test case with its params other than `impl`: a section of the table.
struct Group<'a> {
    base: CaseKey,
    /// impl → cpus config → case.
    rows: Vec<(String, Vec<(String, &'a CaseData)>)>,
}

/// Builds the table, or `None` when the run has no `threads` case with an
/// `impl` param.
pub fn impl_table(run: &RunData, cat: &dyn Catalog, baseline: &str) -> Option<Table> {
    let rule = RuleInfo::of(run);
    let cases: Vec<&CaseData> = run
        .cases
        .iter()
        .filter(|c| c.key.family() == FAMILY && c.key.params.contains_key(IMPL))
        .collect();
    if cases.is_empty() {
        return None;
    }
    let mut configs: Vec<(String, usize)> = Vec::new();
    let mut groups: Vec<Group> = Vec::new();
    for c in &cases {
        if !configs.iter().any(|(n, _)| *n == c.key.cpus) {
            configs.push((c.key.cpus.clone(), c.cpus.len()));
        }
        let mut base = c.key.clone();
        base.cpus.clear();
        let imp = base.params.remove(IMPL).unwrap_or_default();
        let gi = match groups.iter().position(|g| g.base == base) {
            Some(i) => i,
            None => {
                groups.push(Group {
                    base,
                    rows: Vec::new(),
                });
                groups.len() - 1
            }
        };
        let g = &mut groups[gi];
        match g.rows.iter_mut().find(|(i, _)| *i == imp) {
            Some((_, per)) => per.push((c.key.cpus.clone(), c)),
            None => g.rows.push((imp, vec![(c.key.cpus.clone(), c)])),
        }
    }

    let mut headers = vec!["Implementation".to_string()];
    for (name, count) in &configs {
        let h = cpus_header(name, *count);
        headers.push(format!("{h} ops/s"));
        headers.push("ns/op".into());
        headers.push("cycles/op".into());
        headers.push(format!("vs {baseline}"));
    }
    let width = headers.len();
    let mut table = Table::new(
        format!("Thread library implementations ({FAMILY}), compared to {baseline}"),
        headers,
    );
    let mut missing_baseline = false;
    let mut not_converged = 0;
    for g in &groups {
        let info = cat
            .workload(&g.base.workload)
            .unwrap_or_else(|| WorkloadInfo {
                id: g.base.workload.clone(),
                family: FAMILY.into(),
                family_title: FAMILY.into(),
                title: g.base.workload.clone(),
                param_order: Vec::new(),
                geomean_over: None,
            });
        let mut section = vec![Cell::new(case_label(&info, &g.base))];
        section.resize(width, Cell::new(""));
        table.push(RowKind::Section, section);
        let base_row = g.rows.iter().find(|(i, _)| i == baseline);
        for (imp, per) in &g.rows {
            let mut cells = vec![Cell::new(imp.clone())];
            for (cfg, _) in &configs {
                let Some((_, case)) = per.iter().find(|(c, _)| c == cfg) else {
                    cells.extend((0..4).map(|_| Cell::new("")));
                    continue;
                };
                if case.status == CaseStatus::Failed {
                    cells.push(Cell::tone("failed", Tone::Bad));
                    cells.extend((0..3).map(|_| Cell::new("")));
                    continue;
                }
                let mean = |m: &str| {
                    let s = case.summary(m, rule.confidence_pct);
                    (s.n > 0).then_some(s.mean)
                };
                let fmt = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |v| sig(v, 4));
                let ops = mean(OPS);
                let mut ops_cell = Cell::new(fmt(ops));
                if case.converged == Some(false) {
                    not_converged += 1;
                    ops_cell = Cell::tone(format!("{}*", ops_cell.text), Tone::Warn);
                }
                cells.push(ops_cell);
                cells.push(Cell::new(fmt(mean(NS))));
                cells.push(Cell::new(fmt(mean(CYCLES))));
                let base_case = base_row.and_then(|(_, bp)| {
                    bp.iter()
                        .find(|(c, _)| c == cfg)
                        .map(|(_, c)| *c)
                        .filter(|c| c.status != CaseStatus::Failed)
                });
                cells.push(if imp == baseline {
                    Cell::tone("–", Tone::Dim)
                } else {
                    match base_case {
                        Some(b) => diff_cell(&case.values(OPS), &b.values(OPS)),
                        None => {
                            missing_baseline = true;
                            Cell::tone("n/a", Tone::Dim)
                        }
                    }
                });
            }
            table.push(RowKind::Data, cells);
        }
    }
    table.notes.push(format!(
        "vs {baseline}: operations per second relative to {baseline} in the same test and CPU \
         configuration (+ more, − fewer; green better, red worse); ~: Welch's t-test finds no \
         significant difference (two-sided, α = {ALPHA}). cycles/op: CPU cycles of all the \
         test's threads per operation."
    ));
    if missing_baseline {
        table.notes.push(format!(
            "n/a: {baseline} was not run (or failed) for that test; choose another with --baseline"
        ));
    }
    if not_converged > 0 {
        table.notes.push(format!(
            "*: {not_converged} case(s) NOT CONVERGED (CI wider than {}% of the mean)",
            rule.width_pct
        ));
    }
    let mut notes: Vec<String> = Vec::new();
    for c in &cases {
        for n in c.notes.iter().filter(|n| n.starts_with("cycles/op")) {
            let n = format!("note: {n}");
            if !notes.contains(&n) {
                notes.push(n);
            }
        }
    }
    table.notes.extend(notes);
    Some(table)
}

/// `+44%`, `−86%`, with `~` when the difference is not significant.
fn diff_cell(values: &[f64], base: &[f64]) -> Cell {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    if values.is_empty() || base.is_empty() || mean(base) == 0.0 {
        return Cell::tone("–", Tone::Dim);
    }
    let d = mean(values) / mean(base) - 1.0;
    let text = if d >= 0.0 {
        format!("+{:.0}%", d * 100.0)
    } else {
        format!("−{:.0}%", -d * 100.0)
    };
    let significant = Welch::test(values, base).is_some_and(|w| w.significant(ALPHA));
    if !significant {
        Cell::tone(format!("~{text}"), Tone::Dim)
    } else if d > 0.0 {
        Cell::tone(text, Tone::Good)
    } else {
        Cell::tone(text, Tone::Bad)
    }
}
