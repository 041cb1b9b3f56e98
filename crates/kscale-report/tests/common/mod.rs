//! What the report tests share: hand-built cases and the stored run around
//! them, and catalogue params by name.
#![allow(dead_code)]

use kscale_core::{CaseKey, Direction};
use kscale_report::{ParamInfo, WorkloadInfo};
use kscale_store::{CaseData, CaseStatus, MetricRow, RunData, RunRow, TrialRow};
use std::collections::BTreeMap;

/// Params of these names (label-scaled: tables only need their order).
pub fn params(names: &[&str]) -> Vec<ParamInfo> {
    names
        .iter()
        .map(|p| ParamInfo {
            name: p.to_string(),
            ..Default::default()
        })
        .collect()
}

/// A catalogue's entry for workload `id`: its family's id and title, its
/// own title and its params by name, the rest as a catalogue leaves it.
pub fn workload_info(
    id: &str,
    family: &str,
    family_title: &str,
    title: &str,
    param_names: &[&str],
) -> WorkloadInfo {
    WorkloadInfo {
        id: id.into(),
        family: family.into(),
        family_title: family_title.into(),
        title: title.into(),
        params: params(param_names),
        ..Default::default()
    }
}

pub fn metric(name: &str, unit: &str, direction: Direction, primary: bool) -> MetricRow {
    MetricRow {
        name: name.into(),
        unit: unit.into(),
        direction,
        primary,
        quantile: None,
    }
}

/// A done, converged case of `workload` with these params on configuration
/// `cpus` (`"1"` is CPU 0, anything else CPUs 0–1): one trial per entry of
/// `trials`, the first the warm-up, each the values of its metrics.
pub fn case(
    id: i64,
    workload: &str,
    params: &[(&str, &str)],
    cpus: &str,
    metrics: Vec<MetricRow>,
    trials: Vec<BTreeMap<String, f64>>,
) -> CaseData {
    CaseData {
        id,
        seq: id,
        key: CaseKey {
            workload: workload.into(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cpus: cpus.into(),
        },
        cpus: if cpus == "1" { vec![0] } else { vec![0, 1] },
        status: CaseStatus::Done,
        converged: Some(true),
        rule: kscale_core::RunRule::Converge,
        estimator: Default::default(),
        error: None,
        iterations: None,
        notes: vec![],
        metrics,
        trials: trials
            .into_iter()
            .enumerate()
            .map(|(i, values)| TrialRow {
                idx: i as i64,
                warmup: i == 0,
                started_at: "2026-01-01T00:00:00Z".into(),
                wall_s: 0.5,
                values,
                ..Default::default()
            })
            .collect(),
        profiles: Vec::new(),
    }
}

/// A complete run (5@95 run rules) holding `cases`.
pub fn run_with(cases: Vec<CaseData>) -> RunData {
    RunData {
        run: RunRow {
            id: 1,
            label: "test".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            ended_at: None,
            status: "complete".into(),
            kscale_version: "0.1.0".into(),
            git_rev: "x".into(),
            args: vec![],
            options: serde_json::json!({"rule": {"width_pct": 5.0, "confidence_pct": 95.0}}),
            snapshot: serde_json::json!({}),
            cases_total: 0,
            cases_done: 0,
            cases_failed: 0,
            cases_skipped: 0,
            not_converged: 0,
            owner: None,
        },
        cases,
    }
}
