//! Variant tables, as seed 001 ("Linux Threads vs NPTL") compared thread
//! libraries: within each test, a row per value of one param (an
//! implementation, a server mode) with its metrics side by side per CPU
//! configuration, and how far its first metric is from a baseline value's.
//! Which param, which metrics and which baseline come from the workload
//! definitions ([`crate::VariantsSpec`]).

use crate::format::sig;
use crate::results::{case_label, case_notes, cpus_header, RuleInfo};
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
    let metrics = metrics(spec, cases, cat);
    let Some((compared, _)) = metrics.first().cloned() else {
        return Table::new(spec.title.clone(), vec![spec.heading.clone()]);
    };
    let (configs, groups) = groups(cases, &spec.param);
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
    let mut cells = VariantCells {
        // Colours follow "better", which for a time is less.
        lower_is_better: cases
            .iter()
            .find_map(|c| c.metrics.iter().find(|m| m.name == compared))
            .is_some_and(|m| m.direction == kscale_core::Direction::Lower),
        metrics: &metrics,
        compared,
        baseline,
        rule: RuleInfo::of(run),
        missing_baseline: false,
        not_converged: 0,
        rank_sum: Vec::new(),
    };
    for g in &groups {
        let info = cat.info(&g.base.workload);
        let mut section = vec![Cell::new(case_label(&info, &g.base))];
        section.resize(width, Cell::blank());
        table.push(RowKind::Section, section);
        let base_row = g.rows.iter().find(|(v, _)| v == baseline);
        for (variant, per) in &g.rows {
            let mut row = vec![Cell::new(variant.clone())];
            for (cfg, _) in &configs {
                let base_case = base_row
                    .and_then(|(_, bp)| on(bp, cfg))
                    .filter(|c| !matches!(c.status, CaseStatus::Failed | CaseStatus::Skipped));
                row.extend(cells.config_cells(variant, cfg, on(per, cfg), base_case));
            }
            table.push(RowKind::Data, row);
        }
    }
    cells.write_notes(&mut table, spec, cases);
    table
}

/// A variant's case on configuration `cfg`.
fn on<'a>(per: &[(String, &'a CaseData)], cfg: &str) -> Option<&'a CaseData> {
    per.iter().find(|(c, _)| c == cfg).map(|(_, c)| *c)
}

/// The metrics the table shows with their column headings: the declared
/// ones (a heading left empty is the metric's unit), or every metric the
/// cases carry.
fn metrics(spec: &VariantsSpec, cases: &[&CaseData], cat: &dyn Catalog) -> Vec<(String, String)> {
    if spec.metrics.is_empty() {
        return cases
            .first()
            .map(|c| {
                c.metrics
                    .iter()
                    .map(|m| (m.name.clone(), m.unit.clone()))
                    .collect()
            })
            .unwrap_or_default();
    }
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
}

/// The cases' CPU configurations in run order, and their tests: the cases
/// grouped by key without the variant `param`, a row per variant.
fn groups<'a>(cases: &[&'a CaseData], param: &str) -> (Vec<(String, usize)>, Vec<Group<'a>>) {
    let mut configs: Vec<(String, usize)> = Vec::new();
    let mut groups: Vec<Group> = Vec::new();
    for c in cases {
        if !configs.iter().any(|(n, _)| *n == c.key.cpus) {
            configs.push((c.key.cpus.clone(), c.cpus.len()));
        }
        let mut base = c.key.clone();
        base.cpus.clear();
        let variant = base.params.remove(param).unwrap_or_default();
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
    (configs, groups)
}

/// What fills a variant table's cells, and what its notes will need to
/// say of them: which baseline went missing, how many cases did not
/// converge, which differences the rank-sum test decided.
struct VariantCells<'a> {
    metrics: &'a [(String, String)],
    /// The metric compared with the baseline.
    compared: String,
    baseline: &'a str,
    rule: RuleInfo,
    lower_is_better: bool,
    missing_baseline: bool,
    not_converged: usize,
    /// Cells whose difference the rank-sum test decided.
    rank_sum: Vec<String>,
}

impl VariantCells<'_> {
    /// A variant's cells on one configuration: each metric, then its
    /// difference from the baseline's case there (`base`).
    fn config_cells(
        &mut self,
        variant: &str,
        cfg: &str,
        case: Option<&CaseData>,
        base: Option<&CaseData>,
    ) -> Vec<Cell> {
        let per_config = self.metrics.len() + 1;
        let Some(case) = case else {
            return vec![Cell::blank(); per_config];
        };
        let first = match case.status {
            CaseStatus::Skipped => Some(Cell::dim("skipped")),
            CaseStatus::Failed => Some(Cell::tone("failed", Tone::Bad)),
            _ => None,
        };
        if let Some(first) = first {
            let mut cells = vec![first];
            cells.extend((1..per_config).map(|_| Cell::blank()));
            return cells;
        }
        let mut cells = Vec::new();
        for (i, (m, _)) in self.metrics.iter().enumerate() {
            let s = case.summary(m, self.rule.confidence_pct);
            let text = if s.n > 0 {
                sig(s.mean, 4)
            } else {
                "–".to_string()
            };
            if i == 0 && case.converged == Some(false) {
                self.not_converged += 1;
                cells.push(Cell::tone(format!("{text}*"), Tone::Warn));
            } else {
                cells.push(Cell::new(text));
            }
        }
        cells.push(if variant == self.baseline {
            Cell::dim("–")
        } else if let Some(b) = base {
            let (cell, test) = diff_cell(case, b, &self.compared, self.rule, self.lower_is_better);
            if test == Some(Test::RankSum) {
                self.rank_sum.push(format!("{variant} [{cfg}]"));
            }
            cell
        } else {
            self.missing_baseline = true;
            Cell::dim("n/a")
        });
        cells
    }

    /// The table's notes: what `vs` and `~` mean, then the marks its cells
    /// carry, the declaration's note and the cases' own.
    fn write_notes(self, table: &mut Table, spec: &VariantsSpec, cases: &[&CaseData]) {
        let (baseline, rule) = (self.baseline, self.rule);
        let heading = &self.metrics[0].1;
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
        if !self.rank_sum.is_empty() {
            table.notes.push(format!(
                "rank-sum (skewed trials or an outlier): {}",
                self.rank_sum.join(", ")
            ));
        }
        if !spec.note.is_empty() {
            table.notes.push(spec.note.clone());
        }
        if self.missing_baseline {
            table.notes.push(format!(
                "n/a: {baseline} was not run (or failed) for that test; choose another with --baseline"
            ));
        }
        if self.not_converged > 0 {
            table.notes.push(format!(
                "*: {} case(s) NOT CONVERGED (CI wider than {}% of the mean)",
                self.not_converged, rule.width_pct
            ));
        }
        table
            .notes
            .extend(case_notes(cases, |_, n| format!("note: {n}")));
    }
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
