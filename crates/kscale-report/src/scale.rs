//! `kscale scale`: scalability (N CPUs / 1 CPU, inverted where lower is better),
//! efficiency (scalability / N), SMP overhead (SMP-1 / UP) and, with three or
//! more CPU counts, a Universal Scalability Law fit (docs/method.md, seed 003's
//! "SMP overhead" and "Scalability" tables).

use crate::format::{mean_marked, pct, sig};
use crate::results::{case_label, families_in_order};
use crate::table::{Cell, RowKind, Table, Tone};
use crate::Catalog;
use kscale_core::stats::geomean;
use kscale_core::twosample::TwoSample;
use kscale_core::usl::UslFit;
use kscale_core::Direction;
use kscale_store::{CaseData, CaseStatus, MetricRow, RunData};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Serialize)]
pub struct UslRow {
    pub fit: UslFit,
    pub peak_cpus: Option<f64>,
    /// The metric the fitted law predicts (in the metric's own unit) at 2×
    /// and 4× the largest measured CPU count.
    pub at: Vec<(usize, f64)>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ScaleRow {
    pub workload: String,
    pub label: String,
    pub params: BTreeMap<String, String>,
    pub metric: String,
    pub unit: String,
    pub direction: Direction,
    /// Mean at each of the report's CPU counts.
    pub means: Vec<Option<f64>>,
    pub converged: Vec<bool>,
    /// The load generator was the bottleneck (macro workloads), per count.
    pub load_bound: Vec<bool>,
    /// Scalability relative to the smallest count, per count.
    pub scalability: Vec<Option<f64>>,
    pub efficiency: Vec<Option<f64>>,
    /// Each count against the smallest: whether the test found a
    /// difference, and the minimum detectable change as a fraction of the
    /// smallest count's value (docs/method.md, "Comparing two cases").
    pub scal_significant: Vec<Option<bool>>,
    pub scal_mdc: Vec<Option<f64>>,
    /// Each count's interval around its value (the case's own rule, 95 %).
    pub ci_low: Vec<Option<f64>>,
    pub ci_high: Vec<Option<f64>>,
    /// SMP-1 / UP as a raw-value ratio, with the test's verdict and the
    /// comparison's minimum detectable change.
    pub smp_overhead: Option<f64>,
    pub smp_significant: Option<bool>,
    pub smp_mdc: Option<f64>,
    pub usl: Option<UslRow>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FamilyScale {
    pub family: String,
    pub title: String,
    pub rows: Vec<ScaleRow>,
    pub geomean_scalability: Vec<Option<f64>>,
    pub geomean_efficiency: Vec<Option<f64>>,
    pub geomean_smp_overhead: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ScaleReport {
    pub run_id: i64,
    /// The estimator of the values and of the tests behind `~`.
    pub estimator: kscale_core::Estimator,
    pub label: String,
    pub up: Option<(i64, String)>,
    pub counts: Vec<usize>,
    /// Where each count's CPUs are (`4 cores, 1 LLC, node 0`), from its
    /// configuration's name; empty for runs from before names said so.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub places: Vec<String>,
    pub families: Vec<FamilyScale>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ScaleError {
    #[error("run {0} was measured on a single CPU configuration; measure with --cpus 1,all or --cpus sweep, or give --up RUN for SMP overhead")]
    OneConfig(i64),
    #[error("run {0} and UP run {1} have no case in common")]
    NothingInCommon(i64, i64),
    #[error("no case of run {0} has a metric `{1}` (metrics: {2})")]
    NoSuchMetric(i64, String, String),
}

/// Throughput-like value: the metric itself, or its inverse where lower is
/// better (a time per operation).
fn throughput(direction: Direction, v: f64) -> f64 {
    match direction {
        Direction::Higher => v,
        Direction::Lower => 1.0 / v,
    }
}

/// A case across CPU configurations: workload and params.
type CaseId = (String, BTreeMap<String, String>);

pub fn scale(
    run: &RunData,
    up: Option<&RunData>,
    cat: &dyn Catalog,
) -> Result<ScaleReport, ScaleError> {
    scale_metric(run, up, cat, None)
}

/// [`scale`] on one named metric instead of each case's primary one
/// (`kscale scale --metric p99`); cases without that metric are left out.
pub fn scale_metric(
    run: &RunData,
    up: Option<&RunData>,
    cat: &dyn Catalog,
    metric: Option<&str>,
) -> Result<ScaleReport, ScaleError> {
    if let Some(m) = metric {
        if !run.cases.iter().any(|c| c.metric(m).is_some()) {
            return Err(ScaleError::NoSuchMetric(
                run.run.id,
                m.to_string(),
                crate::compare::known_metrics(&[run]),
            ));
        }
    }
    let done = |c: &&CaseData| {
        c.status == CaseStatus::Done
            && c.metric_or_primary(metric).is_some()
            && crate::results::shown(run, c)
    };
    let mut counts: Vec<usize> = run
        .cases
        .iter()
        .filter(done)
        .map(|c| c.cpus.len())
        .collect();
    counts.sort_unstable();
    counts.dedup();
    if counts.len() < 2 && up.is_none() {
        return Err(ScaleError::OneConfig(run.run.id));
    }
    // (workload, params) → count → case
    let mut order: Vec<CaseId> = Vec::new();
    let mut by: BTreeMap<CaseId, BTreeMap<usize, &CaseData>> = BTreeMap::new();
    for c in run.cases.iter().filter(done) {
        let k = (c.key.workload.clone(), c.key.params.clone());
        if !order.contains(&k) {
            order.push(k.clone());
        }
        by.entry(k).or_default().entry(c.cpus.len()).or_insert(c);
    }
    let up_cases = up
        .map(|u| up_cases(u.cases.iter().filter(done)))
        .unwrap_or_default();
    let along = Along {
        base: counts.first().copied().unwrap_or(1),
        max: counts.last().copied().unwrap_or(1),
        counts: &counts,
        estimator: match up {
            Some(u) => crate::compare::common_estimator(&[run, u]),
            None => run.run.estimator(),
        },
    };
    let mut fams: BTreeMap<String, Vec<ScaleRow>> = BTreeMap::new();
    let mut any_up = false;
    for k in &order {
        let per = &by[k];
        let first = per.values().next().copied().expect("non-empty");
        let Some(m) = first.metric_or_primary(metric) else {
            continue;
        };
        let info = cat.info(&k.0);
        let row = along.row(k, per, up_cases.get(k).copied(), m);
        any_up |= row.smp_overhead.is_some();
        fams.entry(info.family.clone()).or_default().push(ScaleRow {
            label: case_label(&info, &first.key),
            ..row
        });
    }
    if let Some(u) = up {
        if !any_up && counts.len() < 2 {
            return Err(ScaleError::NothingInCommon(run.run.id, u.run.id));
        }
    }
    Ok(ScaleReport {
        run_id: run.run.id,
        estimator: along.estimator,
        label: run.run.label.clone(),
        up: up.map(|u| (u.run.id, u.run.label.clone())),
        places: places(run, &counts),
        families: family_scales(fams, cat, counts.len()),
        counts,
    })
}

/// The UP run's cases by (workload, params), its single-CPU case where it
/// has several.
fn up_cases<'a>(cases: impl Iterator<Item = &'a CaseData>) -> BTreeMap<CaseId, &'a CaseData> {
    let mut m = BTreeMap::new();
    let mut cases: Vec<&CaseData> = cases.collect();
    cases.sort_by_key(|c| c.cpus.len());
    for c in cases {
        m.entry((c.key.workload.clone(), c.key.params.clone()))
            .or_insert(c);
    }
    m
}

/// What a scale report's rows are measured along: its CPU counts, the
/// smallest every count is compared with, the largest the law predicts
/// beyond, and the estimator of the tests.
struct Along<'a> {
    counts: &'a [usize],
    base: usize,
    max: usize,
    estimator: kscale_core::Estimator,
}

impl Along<'_> {
    /// One case's row on `metric` across the counts (its label left for
    /// the caller, which knows the workload), with SMP-1/UP where the UP
    /// run has the case.
    fn row(
        &self,
        k: &CaseId,
        per: &BTreeMap<usize, &CaseData>,
        up: Option<&CaseData>,
        m: &MetricRow,
    ) -> ScaleRow {
        let counts = self.counts;
        let summaries: Vec<_> = counts
            .iter()
            .map(|n| per.get(n).map(|c| c.summary(&m.name, 95.0)))
            .collect();
        let means: Vec<Option<f64>> = summaries.iter().map(|s| s.map(|s| s.mean)).collect();
        let base_values = per.get(&self.base).map(|c| c.values(&m.name));
        let tests: Vec<Option<TwoSample>> = counts
            .iter()
            .map(|n| {
                let (b, c) = (base_values.as_ref()?, per.get(n)?);
                TwoSample::compare(b, &c.values(&m.name), self.estimator)
            })
            .collect();
        let (scalability, efficiency) = self.scalability(&means, m.direction);
        let (smp_overhead, smp_test) = match (up, per.get(&1)) {
            (Some(u), Some(s1)) => {
                let (a, b) = (s1.values(&m.name), u.values(&m.name));
                let r = s1.summary(&m.name, 95.0).mean / u.summary(&m.name, 95.0).mean;
                (Some(r), TwoSample::compare(&b, &a, self.estimator))
            }
            _ => (None, None),
        };
        ScaleRow {
            workload: k.0.clone(),
            label: String::new(),
            params: k.1.clone(),
            metric: m.name.clone(),
            unit: m.unit.clone(),
            direction: m.direction,
            converged: counts
                .iter()
                .map(|n| per.get(n).is_some_and(|c| c.settled()))
                .collect(),
            load_bound: counts
                .iter()
                .map(|n| per.get(n).is_some_and(|c| c.load_bound()))
                .collect(),
            usl: self.usl(&means, m.direction),
            means,
            scalability,
            efficiency,
            scal_significant: tests.iter().map(|t| t.map(|t| t.significant())).collect(),
            scal_mdc: tests.iter().map(|t| t.and_then(|t| t.mdc)).collect(),
            ci_low: summaries.iter().map(|s| s.map(|s| s.ci_low)).collect(),
            ci_high: summaries.iter().map(|s| s.map(|s| s.ci_high)).collect(),
            smp_overhead,
            smp_significant: smp_test.map(|t| t.significant()),
            smp_mdc: smp_test.and_then(|t| t.mdc),
        }
    }

    /// Scalability over the smallest count and efficiency (scalability
    /// per CPU added), per count.
    fn scalability(
        &self,
        means: &[Option<f64>],
        direction: Direction,
    ) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
        let b = means[0];
        let scalability: Vec<Option<f64>> = means
            .iter()
            .map(|v| match (b, v) {
                (Some(b), Some(v)) if b > 0.0 && *v > 0.0 => {
                    Some(throughput(direction, *v) / throughput(direction, b))
                }
                _ => None,
            })
            .collect();
        let efficiency = scalability
            .iter()
            .zip(self.counts)
            .map(|(s, n)| s.map(|s| s / (*n as f64 / self.base as f64)))
            .collect();
        (scalability, efficiency)
    }

    /// The Universal Scalability Law fitted to the case's throughput, with
    /// what it predicts at 2× and 4× the most CPUs measured.
    fn usl(&self, means: &[Option<f64>], direction: Direction) -> Option<UslRow> {
        let pts: Vec<(f64, f64)> = self
            .counts
            .iter()
            .zip(means)
            .filter_map(|(n, v)| v.map(|v| (*n as f64, throughput(direction, v))))
            .collect();
        UslFit::fit(&pts).map(|fit| UslRow {
            peak_cpus: fit.peak(),
            at: [2 * self.max, 4 * self.max]
                .iter()
                .map(|&n| (n, throughput(direction, fit.predict(n as f64))))
                .collect(),
            fit,
        })
    }
}

/// The families' rows in the catalogue's order, each with its geometric
/// means over `n` counts (over every row, or none).
fn family_scales(
    mut fams: BTreeMap<String, Vec<ScaleRow>>,
    cat: &dyn Catalog,
    n: usize,
) -> Vec<FamilyScale> {
    families_in_order(cat, fams.keys())
        .into_iter()
        .filter_map(|f| {
            let rows = fams.remove(&f)?;
            let title = cat
                .workload(&rows[0].workload)
                .map(|i| i.family_title)
                .unwrap_or_else(|| f.clone());
            let gm = |get: &dyn Fn(&ScaleRow) -> Option<f64>| -> Option<f64> {
                let v: Vec<f64> = rows.iter().filter_map(get).collect();
                if v.len() == rows.len() {
                    geomean(&v)
                } else {
                    None
                }
            };
            Some(FamilyScale {
                geomean_scalability: (0..n)
                    .map(|i| gm(&|r: &ScaleRow| r.scalability[i]))
                    .collect(),
                geomean_efficiency: (0..n)
                    .map(|i| gm(&|r: &ScaleRow| r.efficiency[i]))
                    .collect(),
                geomean_smp_overhead: gm(&|r: &ScaleRow| r.smp_overhead),
                family: f,
                title,
                rows,
            })
        })
        .collect()
}

/// Where each count's CPUs are, from the name of its first case's
/// configuration; none at all for a run from before names said so.
fn places(run: &RunData, counts: &[usize]) -> Vec<String> {
    let places: Vec<String> = counts
        .iter()
        .map(|&n| {
            run.cases
                .iter()
                .find(|c| c.cpus.len() == n)
                .and_then(|c| c.key.cpus.split_once(" ("))
                .map(|(_, p)| p.trim_end_matches(')').to_string())
                .unwrap_or_default()
        })
        .collect();
    if places.iter().all(String::is_empty) {
        Vec::new()
    } else {
        places
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "–".into())
}

fn mdc(m: Option<f64>) -> Cell {
    Cell::tone(
        m.map(crate::compare::pct_change)
            .unwrap_or_else(|| "–".into()),
        Tone::Dim,
    )
}

fn cpus(n: usize) -> String {
    if n == 1 {
        "1 CPU".into()
    } else {
        format!("{n} CPUs")
    }
}

pub fn tables(r: &ScaleReport) -> Vec<Table> {
    let cols = Columns {
        base: r.counts.first().copied().unwrap_or(1),
        more: r.counts.iter().copied().enumerate().skip(1).collect(),
        has_up: r.up.is_some(),
    };
    let mut out = Vec::new();
    for f in &r.families {
        let mut t = Table::new(
            format!("Scalability — {} ({})", f.title, f.family),
            cols.headers(r),
        );
        for row in &f.rows {
            t.push(RowKind::Data, cols.row(row));
        }
        t.push(RowKind::Summary, cols.geomean_row(r, f));
        out.push(t);
        out.extend(usl_table(r, f));
    }
    if let Some(last) = out
        .iter_mut()
        .rev()
        .find(|t| t.title.starts_with("Scalability"))
    {
        let (base, has_up) = (cols.base, cols.has_up);
        let top = r.counts.last().copied().unwrap_or(1);
        last.notes.push(format!(
            "scal. N/{base}: metric on N CPUs ÷ on {base} (inverted where lower is better, so above 1× is faster); eff. N: scalability ÷ (N/{base}). MDC {top}/{base}: the smallest change between {base} and {top} CPUs that comparison could have seen.{}",
            if has_up { " SMP-1/UP: raw-value ratio of the 1-CPU result to the UP run's (time: above 100% is slower)." } else { "" }
        ));
        last.notes.push(crate::compare::tests_legend(r.estimator));
    }
    out
}

/// The columns of a scalability table: a mean per count, then each count
/// above the smallest (`more`: index and count) as a scalability and an
/// efficiency, the largest's detectable change, and SMP-1/UP with its
/// detectable change where the report has a UP run.
struct Columns {
    base: usize,
    more: Vec<(usize, usize)>,
    has_up: bool,
}

impl Columns {
    /// Each count's heading names where its CPUs are, where the report
    /// knows.
    fn headers(&self, r: &ScaleReport) -> Vec<String> {
        let base = self.base;
        let mut headers = vec!["Case".to_string(), "Unit".to_string()];
        headers.extend(r.counts.iter().enumerate().map(|(i, n)| {
            match r.places.get(i).filter(|p| !p.is_empty()) {
                Some(p) => format!("{} ({p})", cpus(*n)),
                None => cpus(*n),
            }
        }));
        headers.extend(self.more.iter().map(|(_, n)| format!("scal. {n}/{base}")));
        headers.extend(self.more.iter().map(|(_, n)| format!("eff. {n}")));
        if let Some((_, n)) = self.more.last() {
            headers.push(format!("MDC {n}/{base}"));
        }
        if self.has_up {
            headers.push("SMP-1/UP".into());
            headers.push("MDC SMP-1/UP".into());
        }
        headers
    }

    /// A case's row: scalability green from half of linear up, red below
    /// 1×, `~` where the test found no difference.
    fn row(&self, row: &ScaleRow) -> Vec<Cell> {
        let mut cells = vec![Cell::new(row.label.clone()), Cell::dim(row.unit.clone())];
        for (i, m) in row.means.iter().enumerate() {
            let s = opt(*m, |v| mean_marked(v, row.converged[i], row.load_bound[i]));
            cells.push(Cell::new(s));
        }
        for (i, n) in &self.more {
            let tone = match row.scalability[*i] {
                Some(s) if s >= 1.0 + 0.5 * (*n as f64 / self.base as f64 - 1.0) => Tone::Good,
                Some(s) if s < 1.0 => Tone::Bad,
                _ => Tone::Plain,
            };
            let text = opt(row.scalability[*i], |s| format!("{s:.2}×"));
            cells.push(match row.scal_significant[*i] {
                Some(false) => Cell::dim(format!("~{text}")),
                _ => Cell::tone(text, tone),
            });
        }
        for (i, _) in &self.more {
            cells.push(Cell::new(opt(row.efficiency[*i], pct)));
        }
        if let Some((i, _)) = self.more.last() {
            cells.push(mdc(row.scal_mdc[*i]));
        }
        if self.has_up {
            let text = opt(row.smp_overhead, pct);
            cells.push(match row.smp_significant {
                Some(false) => Cell::dim(format!("~{text}")),
                _ => Cell::new(text),
            });
            cells.push(mdc(row.smp_mdc));
        }
        cells
    }

    /// The family's "Geometric mean" row: its scalability, efficiency and
    /// SMP-1/UP, no means.
    fn geomean_row(&self, r: &ScaleReport, f: &FamilyScale) -> Vec<Cell> {
        let mut cells = vec![Cell::new("Geometric mean"), Cell::blank()];
        cells.extend(r.counts.iter().map(|_| Cell::blank()));
        for (i, _) in &self.more {
            cells.push(Cell::new(opt(f.geomean_scalability[*i], |s| {
                format!("{s:.2}×")
            })));
        }
        for (i, _) in &self.more {
            cells.push(Cell::new(opt(f.geomean_efficiency[*i], pct)));
        }
        if !self.more.is_empty() {
            cells.push(Cell::blank());
        }
        if self.has_up {
            cells.push(Cell::new(opt(f.geomean_smp_overhead, pct)));
            cells.push(Cell::blank());
        }
        cells
    }
}

/// The family's Universal Scalability Law fits, where any case has one.
fn usl_table(r: &ScaleReport, f: &FamilyScale) -> Option<Table> {
    let usl: Vec<(&ScaleRow, &UslRow)> = f
        .rows
        .iter()
        .filter_map(|row| Some((row, row.usl.as_ref()?)))
        .collect();
    if usl.is_empty() {
        return None;
    }
    let max = r.counts.last().copied().unwrap_or(1);
    let mut t = Table::new(
        format!("Universal Scalability Law — {} ({})", f.title, f.family),
        vec![
            "Case".into(),
            "σ contention".into(),
            "κ coherency".into(),
            "peak at".into(),
            format!("X({})", 2 * max),
            format!("X({})", 4 * max),
            "R²".into(),
        ],
    );
    for (row, u) in usl {
        let mut cells = vec![
            Cell::new(row.label.clone()),
            Cell::new(format!("{:.4}", u.fit.sigma)),
            Cell::new(format!("{:.5}", u.fit.kappa)),
            Cell::new(opt(u.peak_cpus, |p| format!("{p:.1} CPUs"))),
        ];
        for (_, x) in &u.at {
            cells.push(Cell::new(format!("{} {}", sig(*x, 4), row.unit)));
        }
        cells.push(Cell::new(format!("{:.3}", u.fit.r2)));
        t.push(RowKind::Data, cells);
    }
    t.notes.push("X(N): the metric the fitted law predicts at N CPUs (fitted to throughput: the metric, or its inverse where lower is better).".into());
    Some(t)
}
