//! Stored rows of cases, metrics and trials as the model's types: one
//! reading of each, shared by a run's loading (`Store::load_run`) and a
//! series' (`series.rs`), so the two can never read a case differently.
//! Each `*_COLUMNS` list is what its reader expects, in that order; a query
//! may select more columns after them.

use crate::db::Row;
use crate::{CaseData, CaseStatus, MetricRow, QuantileOf, Result, TrialRow};
use kscale_core::{CaseKey, Direction, Estimator, RunRule};

pub(crate) const CASE_COLUMNS: &str =
    "id, seq, workload, params, cpus_name, cpus, status, converged, error, iterations, notes, estimator, rule_n";

/// A case without its metrics, trials and profiles; `run_estimator` is
/// the estimator of the run it belongs to.
pub(crate) fn case(r: &Row, run_estimator: Estimator) -> Result<CaseData> {
    let params: String = r.get(3)?;
    let cpus: String = r.get(5)?;
    let status: String = r.get(6)?;
    let notes: Option<String> = r.get(10)?;
    let estimator: String = r.get(11)?;
    let rule_n: Option<i64> = r.get(12)?;
    let rule = match (estimator.as_str(), rule_n) {
        ("median", Some(n)) => RunRule::MedianOf(n.max(1) as usize),
        _ => RunRule::Converge,
    };
    Ok(CaseData {
        id: r.get(0)?,
        seq: r.get(1)?,
        key: CaseKey {
            workload: r.get(2)?,
            params: serde_json::from_str(&params)?,
            cpus: r.get(4)?,
        },
        cpus: serde_json::from_str(&cpus)?,
        status: CaseStatus::parse(&status),
        converged: r.get(7)?,
        rule,
        estimator: match rule {
            RunRule::Converge => run_estimator,
            RunRule::MedianOf(_) => Estimator::Mean,
        },
        error: r.get(8)?,
        iterations: r.get::<Option<i64>>(9)?.map(|i| i as u64),
        notes: notes
            .map(|n| serde_json::from_str(&n))
            .transpose()?
            .unwrap_or_default(),
        metrics: Vec::new(),
        trials: Vec::new(),
        profiles: Vec::new(),
    })
}

pub(crate) const METRIC_COLUMNS: &str = "name, unit, direction, is_primary, hist, quantile, per_ns";

pub(crate) fn metric(r: &Row) -> Result<MetricRow> {
    let dir: String = r.get(2)?;
    let hist: Option<String> = r.get(4)?;
    let quantile = match (hist, r.get::<Option<f64>>(5)?, r.get::<Option<f64>>(6)?) {
        (Some(hist), Some(q), Some(per_ns)) => Some(QuantileOf { hist, q, per_ns }),
        _ => None,
    };
    Ok(MetricRow {
        name: r.get(0)?,
        unit: r.get(1)?,
        direction: Direction::parse(&dir).unwrap_or(Direction::Lower),
        primary: r.get(3)?,
        quantile,
    })
}

pub(crate) const TRIAL_COLUMNS: &str =
    "idx, warmup, started_at, wall_s, iterations, vals, accounting, histograms, roles";

pub(crate) fn trial(r: &Row) -> Result<TrialRow> {
    let vals: String = r.get(5)?;
    let accounting: Option<String> = r.get(6)?;
    let histograms: Option<String> = r.get(7)?;
    let roles: Option<String> = r.get(8)?;
    Ok(TrialRow {
        idx: r.get(0)?,
        warmup: r.get(1)?,
        started_at: r.get(2)?,
        wall_s: r.get(3)?,
        iterations: r.get::<Option<i64>>(4)?.map(|i| i as u64),
        values: serde_json::from_str(&vals)?,
        accounting: accounting.map(|a| serde_json::from_str(&a)).transpose()?,
        histograms: histograms
            .map(|h| serde_json::from_str(&h))
            .transpose()?
            .unwrap_or_default(),
        roles: roles
            .map(|r| serde_json::from_str(&r))
            .transpose()?
            .unwrap_or_default(),
    })
}
