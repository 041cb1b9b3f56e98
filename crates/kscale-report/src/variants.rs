//! Variant tables, as seed 001 ("Linux Threads vs NPTL") compared thread
//! libraries: within each test, a row per value of one param (an
//! implementation, a server mode) with its metrics side by side per CPU
//! configuration, and how far its first metric is from a baseline value's.
//! Which param, which metrics and which baseline come from the workload
//! definitions ([`crate::VariantsSpec`]).

use crate::format::sig;
use crate::results::{case_label, cpus_header, RuleInfo};
use crate::table::{Cell, RowKind, Table, Tone};
use crate::{Catalog, VariantsSpec};
use kscale_core::twosample::{Test, TwoSample};
use kscale_core::CaseKey;
use kscale_store::{CaseData, CaseStatus, RunData};

const ALPHA: f64 = kscale_core::twosample::ALPHA;

/// One test case with its params other than the variant param: a section
/// of the table.
struct Group<'a> {
    base: CaseKey,
    /// variant → (cpus config, case).
    rows: Vec<(String, Vec<(String, &'a CaseData)>)>,
}

/// One table per distinct variants declaration among the run's workloads,
/// comparing against `baseline` (or each declaration's own).
pub fn variant_tables(run: &RunData, cat: &dyn Catalog, baseline: Option<&str>) -> Vec<Table> {
    let mut specs: Vec<(VariantsSpec, Vec<&CaseData>)> = Vec::new();
    for c in &run.cases {
        let Some(spec) = cat.info(&c.key.workload).variants else {
            continue;
        };
        if !c.key.params.contains_key(&spec.param) {
            continue;
        }
        match specs.iter_mut().find(|(s, _)| *s == spec) {
            Some((_, cases)) => cases.push(c),
            None => specs.push((spec, vec![c])),
        }
    }
    specs
        .iter()
        .map(|(spec, cases)| {
            let base = baseline.unwrap_or(&spec.baseline);
            table(run, cat, spec, cases, base)
        })
        .collect()
}

fn table(
    run: &RunData,
    cat: &dyn Catalog,
    spec: &VariantsSpec,
    cases: &[&CaseData],
    baseline: &str,
) -> Table {
    let rule = RuleInfo::of(run);
    // The declared metrics, or every metric the cases carry.
    let metrics: Vec<(String, String)> = if spec.metrics.is_empty() {
        cases
            .first()
            .map(|c| {
                c.metrics
                    .iter()
                    .map(|m| (m.name.clone(), m.unit.clone()))
                    .collect()
            })
            .unwrap_or_default()
    } else {
        let info = cases
            .first()
            .map(|c| cat.info(&c.key.workload))
            .unwrap_or_default();
        spec.metrics
            .iter()
            .map(|(m, h)| {
                let heading = if h.is_empty() {
                    info.unit(m).unwrap_or(m).to_string()
                } else {
                    h.clone()
                };
                (m.clone(), heading)
            })
            .collect()
    };
    let Some((compared, _)) = metrics.first().cloned() else {
        return Table::new(spec.title.clone(), vec![spec.heading.clone()]);
    };
    let mut configs: Vec<(String, usize)> = Vec::new();
    let mut groups: Vec<Group> = Vec::new();
    for c in cases {
        if !configs.iter().any(|(n, _)| *n == c.key.cpus) {
            configs.push((c.key.cpus.clone(), c.cpus.len()));
        }
        let mut base = c.key.clone();
        base.cpus.clear();
        let variant = base.params.remove(&spec.param).unwrap_or_default();
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
        match g.rows.iter_mut().find(|(v, _)| *v == variant) {
            Some((_, per)) => per.push((c.key.cpus.clone(), c)),
            None => g.rows.push((variant, vec![(c.key.cpus.clone(), c)])),
        }
    }

    // Colours follow "better", which for a time is less.
    let lower_is_better = cases
        .iter()
        .find_map(|c| c.metrics.iter().find(|m| m.name == compared))
        .is_some_and(|m| m.direction == kscale_core::Direction::Lower);
    let per_config = metrics.len() + 1;
    let mut headers = vec![spec.heading.clone()];
    for (name, count) in &configs {
        let h = cpus_header(name, *count);
        for (i, (_, heading)) in metrics.iter().enumerate() {
            headers.push(if i == 0 {
                format!("{h} {heading}")
            } else {
                heading.clone()
            });
        }
        headers.push(format!("vs {baseline}"));
    }
    let width = headers.len();
    let family = cases
        .first()
        .map(|c| cat.info(&c.key.workload).family)
        .unwrap_or_default();
    let mut table = Table::new(
        format!("{} ({family}), compared to {baseline}", spec.title),
        headers,
    );
    let mut missing_baseline = false;
    let mut not_converged = 0;
    // Cells whose difference the rank-sum test decided, named in the notes.
    let mut rank_sum: Vec<String> = Vec::new();
    for g in &groups {
        let info = cat.info(&g.base.workload);
        let mut section = vec![Cell::new(case_label(&info, &g.base))];
        section.resize(width, Cell::new(""));
        table.push(RowKind::Section, section);
        let base_row = g.rows.iter().find(|(v, _)| v == baseline);
        for (variant, per) in &g.rows {
            let mut cells = vec![Cell::new(variant.clone())];
            for (cfg, _) in &configs {
                let Some((_, case)) = per.iter().find(|(c, _)| c == cfg) else {
                    cells.extend((0..per_config).map(|_| Cell::new("")));
                    continue;
                };
                if case.status == CaseStatus::Skipped {
                    cells.push(Cell::tone("skipped", Tone::Dim));
                    cells.extend((1..per_config).map(|_| Cell::new("")));
                    continue;
                }
                if case.status == CaseStatus::Failed {
                    cells.push(Cell::tone("failed", Tone::Bad));
                    cells.extend((1..per_config).map(|_| Cell::new("")));
                    continue;
                }
                for (i, (m, _)) in metrics.iter().enumerate() {
                    let s = case.summary(m, rule.confidence_pct);
                    let text = if s.n > 0 {
                        sig(s.mean, 4)
                    } else {
                        "–".to_string()
                    };
                    if i == 0 && case.converged == Some(false) {
                        not_converged += 1;
                        cells.push(Cell::tone(format!("{text}*"), Tone::Warn));
                    } else {
                        cells.push(Cell::new(text));
                    }
                }
                let base_case = base_row.and_then(|(_, bp)| {
                    bp.iter()
                        .find(|(c, _)| c == cfg)
                        .map(|(_, c)| *c)
                        .filter(|c| !matches!(c.status, CaseStatus::Failed | CaseStatus::Skipped))
                });
                cells.push(if variant == baseline {
                    Cell::tone("–", Tone::Dim)
                } else {
                    match base_case {
                        Some(b) => {
                            let (cell, test) = diff_cell(case, b, &compared, rule, lower_is_better);
                            if test == Some(Test::RankSum) {
                                rank_sum.push(format!("{variant} [{cfg}]"));
                            }
                            cell
                        }
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
    let heading = &metrics[0].1;
    table.notes.push(format!(
        "vs {baseline}: {heading} relative to {baseline} in the same test and CPU \
         configuration (+ more, − less; green better, red worse); ~: no significant difference \
         (two-sided, α = {ALPHA}) by {} where both sides' trials look normal, else rank-sum \
         (docs/method.md, \"Comparing two cases\"). Values: {}.",
        match rule.estimator {
            kscale_core::Estimator::Mean => "Welch's t",
            kscale_core::Estimator::Trimmed => "Yuen's t",
        },
        rule.estimator.describe(),
    ));
    if !rank_sum.is_empty() {
        table.notes.push(format!(
            "rank-sum (skewed trials or an outlier): {}",
            rank_sum.join(", ")
        ));
    }
    if !spec.note.is_empty() {
        table.notes.push(spec.note.clone());
    }
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
    for c in cases {
        for n in &c.notes {
            let n = format!("note: {n}");
            if !notes.contains(&n) {
                notes.push(n);
            }
        }
    }
    table.notes.extend(notes);
    table
}

/// `+44%`, `−86%`, with `~` when the difference is not significant: the
/// results compared by the cases' own rule, their trials by the test that
/// suits them, which is returned with the cell.
fn diff_cell(
    case: &CaseData,
    base: &CaseData,
    metric: &str,
    rule: RuleInfo,
    lower_is_better: bool,
) -> (Cell, Option<Test>) {
    let (values, base_values) = (case.values(metric), base.values(metric));
    let (v, b) = (
        case.summary(metric, rule.confidence_pct),
        base.summary(metric, rule.confidence_pct),
    );
    if v.n == 0 || b.n == 0 || b.mean == 0.0 {
        return (Cell::tone("–", Tone::Dim), None);
    }
    let d = v.mean / b.mean - 1.0;
    let text = if d >= 0.0 {
        format!("+{:.0}%", d * 100.0)
    } else {
        format!("−{:.0}%", -d * 100.0)
    };
    let t = TwoSample::compare(&base_values, &values, rule.estimator);
    let cell = if !t.is_some_and(|t| t.significant()) {
        Cell::tone(format!("~{text}"), Tone::Dim)
    } else if (d > 0.0) != lower_is_better {
        Cell::tone(text, Tone::Good)
    } else {
        Cell::tone(text, Tone::Bad)
    };
    (cell, t.map(|t| t.test))
}
