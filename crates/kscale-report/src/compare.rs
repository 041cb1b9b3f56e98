//! `kscale compare`: systems side by side in the layout of seed 003 — a row
//! per case, a column per system, then ratio columns (B/A, C/A, C/B) and a
//! geometric-mean row. The test that suits each case's trials (Welch's or
//! Yuen's t where they look normal, the rank-sum test where they are skewed
//! or have an outlier) decides which ratios mean anything, and beside each
//! ratio stands the smallest change the comparison could have seen
//! (docs/method.md, "Comparing two cases").

use crate::format::{mean_marked, pct, sig};
use crate::results::{case_label, cpus_header, families_in_order, geomean_over_label};
use crate::table::{Cell, RowKind, Table, Tone};
use crate::Catalog;
use kscale_core::cpus::base_name;
use kscale_core::stats::geomean;
use kscale_core::twosample::{Test, TwoSample, POWER};
use kscale_core::verdict::{self, Change, CompareVerdict, CompareWord, Spread};
use kscale_core::{Direction, Estimator};
use kscale_store::{CaseData, CaseStatus, MetricRow, RunData};
use serde::Serialize;
use std::collections::BTreeMap;

pub const ALPHA: f64 = kscale_core::twosample::ALPHA;

/// How cases of different runs are matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Matching {
    /// Same workload, params and CPU configuration.
    SameCpus,
    /// Every run has one CPU configuration and they differ (e.g. `--cpus 1`
    /// against `--cpus all`): match on workload and params only.
    AcrossCpus,
}

#[derive(Clone, Debug, Serialize)]
pub struct System {
    pub name: String,
    pub run_id: i64,
    pub label: String,
    /// `poll` where kscale kept the run's idle CPUs polling; absent where
    /// they were left as they are (docs/host.md, "Idle CPUs").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_idle: Option<String>,
    /// "emulated (TCG): not the kernel's speed" for a run measured in an
    /// emulated guest (`kscale vm`, docs/vm.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulated: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Ratio {
    /// Index of the numerator and denominator systems.
    pub num: usize,
    pub den: usize,
    pub ratio: f64,
    pub p: Option<f64>,
    pub significant: bool,
    /// Whether the numerator system is the better one.
    pub better: Option<bool>,
    /// The test that gave `p`; absent on geometric-mean rows and where a
    /// side has fewer than two trials.
    pub test: Option<Test>,
    /// Minimum detectable change of this comparison, as a fraction of the
    /// denominator's value (α 0.05 two-sided, power 0.8): a `~` ratio
    /// means no change of this size or more was found.
    pub mdc: Option<f64>,
    /// The verdict (docs/verdicts.md) at the comparison's threshold, from
    /// the spread between runs of each side's case ([`decide`]); `None`
    /// where a side has no spread between runs yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<CompareVerdict>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CompareRow {
    pub workload: String,
    pub label: String,
    pub params: BTreeMap<String, String>,
    pub cpus: String,
    pub metric: String,
    pub unit: String,
    pub direction: Direction,
    pub means: Vec<f64>,
    /// Each system's interval around its value (the case's own rule, 95 %).
    pub ci_low: Vec<f64>,
    pub ci_high: Vec<f64>,
    pub n: Vec<usize>,
    pub converged: Vec<bool>,
    /// The load generator was the bottleneck (macro workloads).
    pub load_bound: Vec<bool>,
    pub ratios: Vec<Ratio>,
    /// Geometric-mean rows carry no significance.
    pub summary: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct FamilyComparison {
    pub family: String,
    pub title: String,
    pub rows: Vec<CompareRow>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub systems: Vec<System>,
    /// The estimator the tests and detectable changes are built on: the
    /// runs' own when they agree, else the mean (docs/method.md).
    pub estimator: Estimator,
    pub matching: Matching,
    pub families: Vec<FamilyComparison>,
    /// Cases present in only some systems: (system names that have it, case).
    pub only_in: Vec<(Vec<String>, String)>,
    /// The threshold the verdicts were given at (a fraction), once
    /// [`decide`] gave them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CompareError {
    #[error("compare needs at least two runs")]
    TooFew,
    #[error("runs {0} have no case in common (compare runs of the same workloads)")]
    NothingInCommon(String),
    #[error("no case of these runs has a metric `{0}` (metrics: {1})")]
    NoSuchMetric(String, String),
}

/// Every metric name the runs' cases record, for the error that names them.
pub fn known_metrics(runs: &[&RunData]) -> String {
    let names: std::collections::BTreeSet<&str> = runs
        .iter()
        .flat_map(|r| r.cases.iter())
        .flat_map(|c| c.metrics.iter().map(|m| m.name.as_str()))
        .collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.into_iter().collect::<Vec<_>>().join(", ")
    }
}

/// Ratio pairs in the seed's order: B/A, C/A, C/B, D/A …
pub fn ratio_pairs(n: usize) -> Vec<(usize, usize)> {
    (0..n)
        .flat_map(|den| (den + 1..n).map(move |num| (num, den)))
        .collect()
}

fn system_names(runs: &[&RunData]) -> Vec<String> {
    runs.iter()
        .map(|r| {
            let dup = runs.iter().filter(|o| o.run.label == r.run.label).count() > 1;
            if dup {
                format!("{}#{}", r.run.label, r.run.id)
            } else {
                r.run.label.clone()
            }
        })
        .collect()
}

fn configs(run: &RunData) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for c in &run.cases {
        if !v.contains(&c.key.cpus) {
            v.push(c.key.cpus.clone());
        }
    }
    v
}

type Key = (String, BTreeMap<String, String>, String);

pub fn compare(runs: &[&RunData], cat: &dyn Catalog) -> Result<Comparison, CompareError> {
    compare_metric(runs, cat, None)
}

/// [`compare`] on one named metric instead of each case's primary one
/// (`kscale compare --metric p99`); cases without that metric are left out.
pub fn compare_metric(
    runs: &[&RunData],
    cat: &dyn Catalog,
    metric: Option<&str>,
) -> Result<Comparison, CompareError> {
    if runs.len() < 2 {
        return Err(CompareError::TooFew);
    }
    let cfgs: Vec<Vec<String>> = runs.iter().map(|r| configs(r)).collect();
    let matching = matching(&cfgs);
    let mut names = system_names(runs);
    if matching == Matching::AcrossCpus {
        for (i, r) in runs.iter().enumerate() {
            let count = r.cases.first().map(|c| c.cpus.len()).unwrap_or(0);
            names[i] = format!("{} [{}]", names[i], cpus_header(&cfgs[i][0], count));
        }
    }
    let (order, per_run) = keyed_cases(runs, matching);
    let pairs = ratio_pairs(runs.len());
    let estimator = common_estimator(runs);
    let mut only_in = Vec::new();
    let mut by_family: BTreeMap<String, Vec<CompareRow>> = BTreeMap::new();
    for k in &order {
        let cases: Vec<Option<&CaseData>> = per_run.iter().map(|m| m.get(k).copied()).collect();
        let info = cat.info(&k.0);
        let Some(first) = cases.iter().flatten().next() else {
            continue;
        };
        let label = {
            let l = case_label(&info, &first.key);
            if k.2.is_empty() {
                l
            } else {
                format!("{l} [{}]", cpus_header(&first.key.cpus, first.cpus.len()))
            }
        };
        let usable = |c: &Option<&CaseData>| c.is_some_and(|c| c.status == CaseStatus::Done);
        if !cases.iter().all(usable) {
            only_in.push(missing(&cases, &names, label));
            continue;
        }
        let cases: Vec<&CaseData> = cases.into_iter().flatten().collect();
        let Some(metric) = cases[0].metric_or_primary(metric) else {
            continue;
        };
        let row = compare_row(&cases, metric, &pairs, estimator);
        by_family
            .entry(info.family.clone())
            .or_default()
            .push(CompareRow {
                workload: k.0.clone(),
                label,
                params: k.1.clone(),
                ..row
            });
    }
    if by_family.is_empty() {
        if let Some(m) = metric {
            return Err(CompareError::NoSuchMetric(
                m.to_string(),
                known_metrics(runs),
            ));
        }
        let ids: Vec<String> = runs.iter().map(|r| r.run.id.to_string()).collect();
        return Err(CompareError::NothingInCommon(ids.join(", ")));
    }
    let families = family_rows(by_family, runs.len(), &pairs, cat);
    let systems = runs
        .iter()
        .zip(names)
        .map(|(r, name)| System {
            name,
            run_id: r.run.id,
            label: r.run.label.clone(),
            cpu_idle: r.run.idle_cpus_polled().then(|| "poll".to_string()),
            emulated: r.run.emulated_mark(),
        })
        .collect();
    Ok(Comparison {
        systems,
        estimator,
        matching,
        families,
        only_in,
        threshold: None,
    })
}

/// The families' rows in the catalogue's order, each followed by its
/// geometric-mean rows.
fn family_rows(
    mut by_family: BTreeMap<String, Vec<CompareRow>>,
    systems: usize,
    pairs: &[(usize, usize)],
    cat: &dyn Catalog,
) -> Vec<FamilyComparison> {
    let mut families = Vec::new();
    for f in families_in_order(cat, by_family.keys()) {
        let Some(mut rows) = by_family.remove(&f) else {
            continue;
        };
        let title = cat
            .workload(&rows[0].workload)
            .map(|i| i.family_title)
            .unwrap_or_else(|| f.clone());
        add_geomeans(&mut rows, systems, pairs, cat);
        families.push(FamilyComparison {
            family: f,
            title,
            rows,
        });
    }
    families
}

/// How the runs' cases match: across CPU configurations when every run
/// has one and they differ, else on the same configuration. Configurations
/// match on their base name (`4`, `all`): runs from before names said
/// where their CPUs are, or from a machine of another shape, still line
/// up; each label keeps the first run's place.
fn matching(cfgs: &[Vec<String>]) -> Matching {
    /// The configurations' names without their places.
    fn bases(c: &[String]) -> Vec<&str> {
        c.iter().map(|n| base_name(n)).collect()
    }
    if cfgs.iter().all(|c| c.len() == 1) && cfgs.iter().any(|c| bases(c) != bases(&cfgs[0])) {
        Matching::AcrossCpus
    } else {
        Matching::SameCpus
    }
}

/// Each run's shown cases by the key they match on, and the keys in the
/// first run's order, then any others.
fn keyed_cases<'a>(
    runs: &[&'a RunData],
    matching: Matching,
) -> (Vec<Key>, Vec<BTreeMap<Key, &'a CaseData>>) {
    let key_of = |c: &CaseData| -> Key {
        let cpus = if matching == Matching::AcrossCpus {
            String::new()
        } else {
            base_name(&c.key.cpus).to_string()
        };
        (c.key.workload.clone(), c.key.params.clone(), cpus)
    };
    let mut order: Vec<Key> = Vec::new();
    let mut per_run: Vec<BTreeMap<Key, &CaseData>> = Vec::new();
    for r in runs {
        let mut m = BTreeMap::new();
        for c in r.cases.iter().filter(|c| crate::results::shown(r, c)) {
            let k = key_of(c);
            if !order.contains(&k) {
                order.push(k.clone());
            }
            m.insert(k, c);
        }
        per_run.push(m);
    }
    (order, per_run)
}

/// A case some system lacks a result for: the systems that have one, and
/// its label with why each machine that could not run it skipped it.
fn missing(cases: &[Option<&CaseData>], names: &[String], label: String) -> (Vec<String>, String) {
    let have: Vec<String> = cases
        .iter()
        .enumerate()
        .filter(|(_, c)| c.is_some_and(|c| c.status == CaseStatus::Done))
        .map(|(i, _)| names[i].clone())
        .collect();
    let why: Vec<String> = cases
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let c = c.filter(|c| c.status == CaseStatus::Skipped)?;
            Some(format!(
                "skipped in {}: {}",
                names[i],
                c.error.as_deref().unwrap_or("not runnable there")
            ))
        })
        .collect();
    let label = if why.is_empty() {
        label
    } else {
        format!("{label} ({})", why.join("; "))
    };
    (have, label)
}

/// One case's row on `metric` across the systems (its workload, label and
/// params left for the caller): each system's result by the case's own
/// rule (mean, trimmed mean, median of N, merged percentile), and a ratio
/// per pair, tested on the raw trials.
fn compare_row(
    cases: &[&CaseData],
    metric: &MetricRow,
    pairs: &[(usize, usize)],
    estimator: Estimator,
) -> CompareRow {
    let values: Vec<Vec<f64>> = cases.iter().map(|c| c.values(&metric.name)).collect();
    let summaries: Vec<_> = cases
        .iter()
        .map(|c| c.summary(&metric.name, 95.0))
        .collect();
    let means: Vec<f64> = summaries.iter().map(|s| s.mean).collect();
    let ratios = pairs
        .iter()
        .map(|&(num, den)| {
            let t = TwoSample::compare(&values[den], &values[num], estimator);
            let ratio = means[num] / means[den];
            Ratio {
                num,
                den,
                ratio,
                p: t.map(|t| t.p),
                significant: t.is_some_and(|t| t.significant()),
                better: better(metric.direction, ratio),
                test: t.map(|t| t.test),
                mdc: t.and_then(|t| t.mdc),
                verdict: None,
            }
        })
        .collect();
    CompareRow {
        workload: String::new(),
        label: String::new(),
        params: BTreeMap::new(),
        cpus: cases[0].key.cpus.clone(),
        metric: metric.name.clone(),
        unit: metric.unit.clone(),
        direction: metric.direction,
        means,
        ci_low: summaries.iter().map(|s| s.ci_low).collect(),
        ci_high: summaries.iter().map(|s| s.ci_high).collect(),
        n: values.iter().map(Vec::len).collect(),
        converged: cases.iter().map(|c| c.settled()).collect(),
        load_bound: cases.iter().map(|c| c.load_bound()).collect(),
        ratios,
        summary: false,
    }
}

/// One side's spread between runs of a case (ln) and the machine it was
/// read on: two sides on one machine share one estimate.
#[derive(Clone, Debug)]
pub struct SideSpread {
    pub spread: Spread,
    pub machine: usize,
    /// The side's runs of the case its verdict reads, as
    /// [`verdict::worse_ln`] of each one's value: every run of a label the
    /// side was named by, on its machine. Empty: the one run shown.
    pub runs: Vec<f64>,
}

impl SideSpread {
    /// The side's level (ln, worse above) and how many runs it stands on.
    fn level(&self, shown: f64, direction: Direction) -> (f64, f64) {
        if self.runs.is_empty() {
            (verdict::worse_ln(shown, direction), 1.0)
        } else {
            let n = self.runs.len() as f64;
            (self.runs.iter().sum::<f64>() / n, n)
        }
    }
}

/// The change of `num` over `den` for one row, worse above 0, from each
/// side's spread between runs and the mean of its runs; `None` where a
/// side has none.
fn row_change(
    r: &CompareRow,
    num: usize,
    den: usize,
    a: Option<&SideSpread>,
    b: Option<&SideSpread>,
) -> Option<Change> {
    let (a, b) = (a?, b?);
    let (x, y) = (r.means[num], r.means[den]);
    if !(x > 0.0 && y > 0.0) {
        return None;
    }
    let ((lx, nx), (ly, ny)) = (a.level(x, r.direction), b.level(y, r.direction));
    let est = lx - ly;
    if !est.is_finite() {
        return None;
    }
    let (va, vb) = (a.spread.sd.powi(2), b.spread.sd.powi(2));
    // One machine: one estimate of one spread, counted for both runs.
    let df = if a.machine == b.machine {
        a.spread.df
    } else {
        (va + vb).powi(2) / (va.powi(2) / a.spread.df + vb.powi(2) / b.spread.df)
    };
    Some(Change {
        est,
        se: (va / nx + vb / ny).sqrt(),
        df,
        // One run's spread, both sides alike, for the runs a side that
        // would decide it.
        sigma: Some(((va + vb) / 2.0).sqrt()),
    })
}

/// Gives every case row and every family's "Geometric mean" row a verdict
/// at `threshold` (docs/verdicts.md), from each side's spread between runs
/// on its machine (`spread(system, rows)`): of a case's level for a case
/// row, of the family's geometric mean over its cases for the family's
/// row. The machine moves a family's cases partly together and partly
/// not, and only the mean's own runs say how much: over eight quick runs
/// of one binary the syscall family's mean spread 3.4 % a run, its cases
/// 9.4 % on average. Where a side has no such spread (a case missing from
/// a run), the family's row falls back to its cases' changes: their mean
/// and, since the machine may move them together, the mean of their
/// standard errors (the most they can correlate), at the fewest degrees
/// of freedom.
pub fn decide(
    c: &mut Comparison,
    threshold: f64,
    spread: impl Fn(usize, &[&CompareRow]) -> Option<SideSpread>,
) {
    c.threshold = Some(threshold);
    for f in &mut c.families {
        let mut by_pair: BTreeMap<(usize, usize, String), Vec<Option<Change>>> = BTreeMap::new();
        for r in f.rows.iter_mut().filter(|r| !r.summary) {
            let sides: Vec<Option<SideSpread>> =
                (0..r.means.len()).map(|i| spread(i, &[&*r])).collect();
            let changes: Vec<Option<Change>> = r
                .ratios
                .iter()
                .map(|q| {
                    row_change(
                        r,
                        q.num,
                        q.den,
                        sides[q.num].as_ref(),
                        sides[q.den].as_ref(),
                    )
                })
                .collect();
            for (q, ch) in r.ratios.iter_mut().zip(changes) {
                q.verdict = ch.map(|ch| verdict::compare(ch, threshold, verdict::ALPHA));
                by_pair
                    .entry((q.num, q.den, r.metric.clone()))
                    .or_default()
                    .push(ch);
            }
        }
        let cases: Vec<CompareRow> = f.rows.iter().filter(|r| !r.summary).cloned().collect();
        for gm in f.rows.iter_mut().filter(|r| is_family_geomean(r)) {
            let metric = gm.metric.clone();
            let members: Vec<&CompareRow> = cases
                .iter()
                .filter(|r| gm.label == GEOMEAN || r.metric == metric)
                .collect();
            let sides: Vec<Option<SideSpread>> =
                (0..gm.means.len()).map(|i| spread(i, &members)).collect();
            let own: Vec<Option<Change>> = gm
                .ratios
                .iter()
                .map(|q| {
                    row_change(
                        gm,
                        q.num,
                        q.den,
                        sides[q.num].as_ref(),
                        sides[q.den].as_ref(),
                    )
                })
                .collect();
            for (q, own) in gm.ratios.iter_mut().zip(own) {
                let ch = own.or_else(|| {
                    let all = by_pair
                        .iter()
                        .filter(|((n, d, m), _)| {
                            (*n, *d) == (q.num, q.den) && (gm.label == GEOMEAN || *m == metric)
                        })
                        .flat_map(|(_, v)| v.iter().copied())
                        .collect::<Option<Vec<Change>>>()
                        .filter(|v| !v.is_empty())?;
                    let k = all.len() as f64;
                    Some(Change {
                        est: all.iter().map(|c| c.est).sum::<f64>() / k,
                        se: all.iter().map(|c| c.se).sum::<f64>() / k,
                        df: all.iter().map(|c| c.df).fold(f64::INFINITY, f64::min),
                        // One run's spread, as the standard error: its cases' mean.
                        sigma: all
                            .iter()
                            .map(|c| c.sigma)
                            .collect::<Option<Vec<f64>>>()
                            .map(|s| s.iter().sum::<f64>() / k),
                    })
                });
                q.verdict = ch.map(|ch| verdict::compare(ch, threshold, verdict::ALPHA));
            }
        }
    }
}

/// A verdict cell: `same`, `slower`, `faster`, `cannot tell (≥ 12%)`, or
/// `–` where a side has no spread between runs.
pub fn verdict_cell(r: &Ratio) -> Cell {
    match r.verdict {
        None => Cell::tone("–", Tone::Dim),
        Some(v) => match v.verdict {
            CompareWord::Same => Cell::tone("same", Tone::Good),
            CompareWord::Faster => Cell::tone("faster", Tone::Good),
            CompareWord::Slower => Cell::tone("slower", Tone::Bad),
            CompareWord::CannotTell => Cell::tone(
                match v.runs_needed {
                    Some(n) => format!(
                        "cannot tell (±{:.0}%; ~{n} runs a side)",
                        v.smallest_threshold_pct.ceil()
                    ),
                    None => format!("cannot tell (±{:.0}%)", v.smallest_threshold_pct.ceil()),
                },
                Tone::Dim,
            ),
        },
    }
}

/// The runs' estimator when every run was measured under the same one;
/// else the mean, which every run's trials support.
pub fn common_estimator(runs: &[&RunData]) -> Estimator {
    let mut e = runs.iter().map(|r| r.run.estimator());
    match e.next() {
        Some(first) if e.all(|x| x == first) => first,
        _ => Estimator::Mean,
    }
}

fn better(direction: Direction, ratio: f64) -> Option<bool> {
    if !ratio.is_finite() || ratio == 1.0 {
        return None;
    }
    Some(match direction {
        Direction::Lower => ratio < 1.0,
        Direction::Higher => ratio > 1.0,
    })
}

/// Appends per-workload geometric means over the param the definition
/// names (`geomean_over`), then the family's geometric mean when all rows
/// measure the same metric.
fn add_geomeans(
    rows: &mut Vec<CompareRow>,
    systems: usize,
    pairs: &[(usize, usize)],
    cat: &dyn Catalog,
) {
    let data: Vec<CompareRow> = rows.clone();
    let mut extra = Vec::new();
    let mut seen: Vec<(String, BTreeMap<String, String>)> = Vec::new();
    for r in &data {
        let info = cat.info(&r.workload);
        let Some(over) = &info.geomean_over else {
            continue;
        };
        let mut rest = r.params.clone();
        rest.remove(over);
        if seen.contains(&(r.workload.clone(), rest.clone())) {
            continue;
        }
        seen.push((r.workload.clone(), rest.clone()));
        let members: Vec<&CompareRow> = data
            .iter()
            .filter(|o| {
                o.workload == r.workload && o.cpus == r.cpus && {
                    let mut p = o.params.clone();
                    p.remove(over);
                    p == rest
                }
            })
            .collect();
        let label = geomean_over_label(&info.title, &rest, over);
        extra.push(summary_row(label, &members, systems, pairs, r));
    }
    rows.extend(extra);
    let metrics: std::collections::BTreeSet<(&str, &str)> = data
        .iter()
        .map(|r| (r.metric.as_str(), r.unit.as_str()))
        .collect();
    if data.len() > 1 && metrics.len() == 1 {
        let all: Vec<&CompareRow> = data.iter().collect();
        rows.push(summary_row(GEOMEAN.into(), &all, systems, pairs, &data[0]));
    } else if metrics.len() > 1 {
        // A family of unlike metrics (`fs`: creations, removals) has a
        // geometric mean, and a verdict, per metric, as the decisions
        // table decides it per metric.
        for (metric, unit) in &metrics {
            let members: Vec<&CompareRow> = data
                .iter()
                .filter(|r| r.metric == *metric && r.unit == *unit)
                .collect();
            if members.len() > 1 {
                rows.push(summary_row(
                    format!("{GEOMEAN}: {metric}"),
                    &members,
                    systems,
                    pairs,
                    members[0],
                ));
            }
        }
    }
}

/// The label of a family's geometric-mean row (with `: metric` after it
/// in a family of unlike metrics), the row that carries its verdict.
const GEOMEAN: &str = "Geometric mean";

fn is_family_geomean(r: &CompareRow) -> bool {
    r.summary && (r.label == GEOMEAN || r.label.starts_with(&format!("{GEOMEAN}: ")))
}

fn summary_row(
    label: String,
    members: &[&CompareRow],
    systems: usize,
    pairs: &[(usize, usize)],
    like: &CompareRow,
) -> CompareRow {
    let means: Vec<f64> = (0..systems)
        .map(|s| {
            geomean(&members.iter().map(|r| r.means[s]).collect::<Vec<_>>()).unwrap_or(f64::NAN)
        })
        .collect();
    CompareRow {
        workload: like.workload.clone(),
        label,
        params: BTreeMap::new(),
        cpus: like.cpus.clone(),
        metric: like.metric.clone(),
        unit: like.unit.clone(),
        direction: like.direction,
        ci_low: vec![f64::NAN; systems],
        ci_high: vec![f64::NAN; systems],
        n: vec![members.len(); systems],
        converged: vec![true; systems],
        load_bound: vec![false; systems],
        ratios: pairs
            .iter()
            .map(|&(num, den)| {
                let ratio = means[num] / means[den];
                Ratio {
                    num,
                    den,
                    ratio,
                    p: None,
                    significant: true,
                    better: better(like.direction, ratio),
                    test: None,
                    mdc: None,
                    verdict: None,
                }
            })
            .collect(),
        means,
        summary: true,
    }
}

/// A ratio cell: `108%`, or `~104%` when the test finds no difference.
pub fn ratio_cell(r: &Ratio) -> Cell {
    if !r.significant {
        return Cell::tone(format!("~{}", pct(r.ratio)), Tone::Dim);
    }
    match r.better {
        Some(true) => Cell::tone(pct(r.ratio), Tone::Good),
        Some(false) => Cell::tone(pct(r.ratio), Tone::Bad),
        None => Cell::new(pct(r.ratio)),
    }
}

/// A detectable-change cell: `12%`, `–` where there is none.
pub fn mdc_cell(r: &Ratio) -> Cell {
    match r.mdc {
        Some(m) => Cell::tone(pct_change(m), Tone::Dim),
        None => Cell::tone("–", Tone::Dim),
    }
}

/// A change as a percentage: `0.8%`, `12%`, `>999%`.
pub fn pct_change(m: f64) -> String {
    let p = m * 100.0;
    if p >= 999.5 {
        ">999%".into()
    } else if p < 9.95 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

/// The tests of a row's ratios: one name when they agree, else one per
/// ratio in column order.
pub fn tests_cell(ratios: &[Ratio]) -> Cell {
    let names: Vec<&str> = ratios
        .iter()
        .map(|r| r.test.map(Test::name).unwrap_or("–"))
        .collect();
    if names.iter().all(|n| *n == names[0]) {
        Cell::tone(names.first().copied().unwrap_or("–"), Tone::Dim)
    } else {
        Cell::tone(names.join(", "), Tone::Dim)
    }
}

/// What the detectable change, `~` and the test column mean: shared by
/// every table that compares trials.
pub fn tests_legend(estimator: Estimator) -> String {
    format!(
        "Values: {}. ~: no significant difference (two-sided, α = {ALPHA}): no change of the MDC or more was found. MDC: the minimum detectable change of that comparison, as % of the baseline (α = {ALPHA} two-sided, power {POWER}, from both sides' trials). The test behind ~: {} where both sides' trials look normal, rank-sum (Wilcoxon–Mann–Whitney) where either is skewed or has an outlier (docs/method.md).",
        estimator.describe(),
        match estimator {
            Estimator::Mean => "Welch t (on the means)",
            Estimator::Trimmed => "Yuen t (Welch's t on the trimmed means)",
        }
    )
}

pub fn legend(c: &Comparison) -> Vec<String> {
    let n = &c.systems;
    let mut v = vec![
        "Ratios are raw-value ratios (e.g. B/A = B's value ÷ A's). Time-based metrics (lower is better): above 100% means the numerator is slower. Throughput metrics (higher is better): above 100% means it is faster.".to_string(),
        format!(
            "Green: the numerator is better; red: worse. NOT CONVERGED marks a case whose CI never reached its target; LOAD-BOUND one whose load generator kept ≥ 90% of its CPUs busy (the figure may be the load's limit)."
        ),
        tests_legend(c.estimator),
    ];
    if let Some(t) = c.threshold {
        v.push(format!(
            "verdict: same where the {:.0} % interval of the change lies within ±{} %; slower or faster where the change is beyond ±{} % and the interval excludes no change; cannot tell otherwise, with the threshold it could decide and, where more runs would, about how many a side (at the spread measured so far, counting the pairs those runs add). The interval stands on each side's spread between runs of the case on its host and kernel (every stored run there), and a side named by its label on the mean of its runs there; –: a side has no two runs of one build there yet. The family's verdict is on its geometric mean row (docs/verdicts.md).",
            100.0 * (1.0 - 2.0 * verdict::ALPHA),
            sig(t * 100.0, 2),
            sig(t * 100.0, 2)
        ));
    }
    let names: Vec<String> = n
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{} = {} (run {})", letter(i), s.name, s.run_id))
        .collect();
    v.push(format!("Systems: {}.", names.join(", ")));
    v.extend(emulated_legend(n));
    if n.iter().any(|s| s.cpu_idle != n[0].cpu_idle) {
        let polled: Vec<String> = n
            .iter()
            .enumerate()
            .filter(|(_, s)| s.cpu_idle.is_some())
            .map(|(i, _)| letter(i).to_string())
            .collect();
        v.push(format!(
            "Idle CPUs polled in {} only (--cpu-idle): cases that wake another CPU are not comparable across these systems, because waking a halted CPU is part of the others' figures (docs/method.md).",
            polled.join(", ")
        ));
    }
    v
}

/// What the legend says of emulated systems: their mark, and where they
/// sit beside native ones, that their ratios are not two kernels'.
fn emulated_legend(n: &[System]) -> Vec<String> {
    let marked: Vec<(usize, &String)> = n
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.emulated.as_ref().map(|m| (i, m)))
        .collect();
    let Some((_, mark)) = marked.first() else {
        return Vec::new();
    };
    let letters: Vec<String> = marked.iter().map(|(i, _)| letter(*i).to_string()).collect();
    let mut v = vec![format!(
        "{}: {mark} (booted by kscale vm under QEMU's emulator: the ratios between emulated kernels show their difference in kind, not in size; docs/vm.md).",
        letters.join(", ")
    )];
    if marked.len() < n.len() {
        v.push(format!(
            "{} emulated and the others native: a ratio across them compares an emulator with hardware, not two kernels.",
            letters.join(", ")
        ));
    }
    v
}

pub fn letter(i: usize) -> char {
    (b'A' + (i as u8 % 26)) as char
}

/// One table per family.
pub fn tables(c: &Comparison) -> Vec<Table> {
    let pairs = ratio_pairs(c.systems.len());
    let mut out = Vec::new();
    for f in &c.families {
        let mut headers = vec!["Case".to_string(), "Unit".to_string()];
        headers.extend(c.systems.iter().enumerate().map(|(i, s)| match s.emulated {
            Some(_) => format!("{} {} (emulated)", letter(i), s.name),
            None => format!("{} {}", letter(i), s.name),
        }));
        headers.extend(
            pairs
                .iter()
                .map(|(num, den)| format!("{}/{}", letter(*num), letter(*den))),
        );
        headers.extend(
            pairs
                .iter()
                .map(|(num, den)| format!("MDC {}/{}", letter(*num), letter(*den))),
        );
        if c.threshold.is_some() {
            headers.extend(
                pairs
                    .iter()
                    .map(|(num, den)| format!("verdict {}/{}", letter(*num), letter(*den))),
            );
        }
        headers.push("Test".into());
        let mut t = Table::new(format!("{} ({})", f.title, f.family), headers);
        for r in &f.rows {
            let mut cells = vec![
                Cell::new(r.label.clone()),
                Cell::tone(r.unit.clone(), Tone::Dim),
            ];
            for (i, m) in r.means.iter().enumerate() {
                // Geometric-mean rows carry no marks.
                let converged = r.summary || r.converged[i];
                let load_bound = !r.summary && r.load_bound[i];
                cells.push(Cell::new(mean_marked(*m, converged, load_bound)));
            }
            cells.extend(r.ratios.iter().map(ratio_cell));
            if r.summary {
                cells.extend(r.ratios.iter().map(|_| Cell::new("")));
            } else {
                cells.extend(r.ratios.iter().map(mdc_cell));
            }
            if c.threshold.is_some() {
                if r.summary && r.ratios.iter().all(|q| q.verdict.is_none()) {
                    cells.extend(r.ratios.iter().map(|_| Cell::new("")));
                } else {
                    cells.extend(r.ratios.iter().map(verdict_cell));
                }
            }
            cells.push(if r.summary {
                Cell::new("")
            } else {
                tests_cell(&r.ratios)
            });
            t.push(
                if r.summary {
                    RowKind::Summary
                } else {
                    RowKind::Data
                },
                cells,
            );
        }
        out.push(t);
    }
    if !c.only_in.is_empty() {
        let mut t = Table::new(
            "Cases not in every system (left out of ratios and geometric means)",
            vec!["Case".into(), "Present in".into()],
        );
        for (have, label) in &c.only_in {
            t.push(
                RowKind::Data,
                vec![
                    Cell::new(label.clone()),
                    Cell::new(if have.is_empty() {
                        "none (failed or skipped)".to_string()
                    } else {
                        have.join(", ")
                    }),
                ],
            );
        }
        out.push(t);
    }
    if let Some(last) = out.last_mut() {
        last.notes.extend(legend(c));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_in_seed_order() {
        assert_eq!(ratio_pairs(2), vec![(1, 0)]);
        assert_eq!(ratio_pairs(3), vec![(1, 0), (2, 0), (2, 1)]);
    }

    #[test]
    fn betterness() {
        assert_eq!(better(Direction::Lower, 1.2), Some(false));
        assert_eq!(better(Direction::Higher, 1.2), Some(true));
        assert_eq!(better(Direction::Lower, 1.0), None);
    }
}
