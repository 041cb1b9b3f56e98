//! What the report tests share: a stored run around hand-built cases.

use kscale_store::{CaseData, RunData, RunRow};

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
            not_converged: 0,
        },
        cases,
    }
}
