//! A case across stored runs (`kscale history`, `kscale changes`,
//! docs/history.md): every stored case of some workloads, with the runs
//! they belong to, read in a handful of queries however many runs there
//! are. The cases are found through the `cases_workload` index (schema
//! migration 8 → 9) rather than run by run, which on a store of 10,000 runs
//! is the difference between a few statements and 40,000.

use crate::db::Row;
use crate::{rows, CaseData, Result, Store};
use kscale_core::Estimator;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What orders and filters a run in a series, read without the rest of
/// its snapshot.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeriesRun {
    pub id: i64,
    pub label: String,
    pub started_at: String,
    /// The kscale revision that measured it.
    pub git_rev: String,
    /// The snapshot's host name and kernel release, where recorded.
    pub hostname: Option<String>,
    pub kernel: Option<String>,
    /// The kernel's own version string (`uname -v`), where recorded.
    pub kernel_version: Option<String>,
    /// How `kscale vm` booted the guest it ran in (`TCG 2cpu`), `None`
    /// on a host's own kernel ([`crate::vm_tag`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm: Option<String>,
}

/// One stored case of a series, with what its run says about it.
#[derive(Clone, Debug)]
pub struct SeriesCase {
    pub run_id: i64,
    /// With its metrics and counted trials; no warm-ups and no profiles.
    pub case: CaseData,
    /// The events the case has a profile of (`Store::profiles` reads them).
    pub profiled: Vec<String>,
}

/// Every done case of the given workloads in the store, and their runs.
#[derive(Clone, Debug, Default)]
pub struct Stored {
    pub runs: BTreeMap<i64, SeriesRun>,
    /// By run id, then the case's place in its run.
    pub cases: Vec<SeriesCase>,
}

/// Just the parts of a snapshot a series reads: serde skips the rest
/// without building it.
#[derive(Deserialize)]
struct Snapshot {
    hostname: Option<String>,
    kernel: Option<Kernel>,
    #[serde(default)]
    vm: serde_json::Value,
}

#[derive(Deserialize)]
struct Kernel {
    release: Option<String>,
    version: Option<String>,
}

#[derive(Deserialize)]
struct Options {
    rule: Option<Rule>,
}

#[derive(Deserialize)]
struct Rule {
    estimator: Option<String>,
}

/// `c.id, c.seq, …` for a query that joins other tables.
fn qualified(columns: &str, alias: &str) -> String {
    columns
        .split(',')
        .map(|c| format!("{alias}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Store {
    /// Every done case of `workloads` (exact names), with its counted
    /// trials and metrics, and the runs they belong to; nothing when
    /// `workloads` is empty.
    pub fn series(&self, workloads: &[String]) -> Result<Stored> {
        if workloads.is_empty() {
            return Ok(Stored::default());
        }
        // `c.workload IN ($1, …)` — the index's leading column.
        let list = (1..=workloads.len())
            .map(|i| format!("${i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let params: Vec<&dyn crate::db::ToValue> = workloads
            .iter()
            .map(|w| w as &dyn crate::db::ToValue)
            .collect();
        let of_cases = format!("c.workload IN ({list}) AND c.status = 'done'");

        let mut runs = BTreeMap::new();
        let mut estimators = BTreeMap::new();
        for (run, estimator) in self.db.query_rows(
            &format!(
                "SELECT r.id, r.label, r.started_at, r.git_rev, r.options, r.snapshot FROM runs r
                 WHERE r.id IN (SELECT c.run_id FROM cases c WHERE {of_cases})"
            ),
            &params,
            series_run,
        )? {
            estimators.insert(run.id, estimator);
            runs.insert(run.id, run);
        }

        let mut cases = self.db.query_rows(
            &format!(
                "SELECT {}, c.run_id FROM cases c WHERE {of_cases} ORDER BY c.run_id, c.seq, c.id",
                qualified(rows::CASE_COLUMNS, "c")
            ),
            &params,
            |r| {
                let run_id: i64 = r.get(13)?;
                let estimator = estimators.get(&run_id).copied().unwrap_or_default();
                Ok(SeriesCase {
                    run_id,
                    case: rows::case(r, estimator)?,
                    profiled: Vec::new(),
                })
            },
        )?;
        let at: BTreeMap<i64, usize> = cases
            .iter()
            .enumerate()
            .map(|(i, c)| (c.case.id, i))
            .collect();

        for (case_id, m) in self.db.query_rows(
            &format!(
                "SELECT {}, m.case_id FROM metrics m JOIN cases c ON c.id = m.case_id
                 WHERE {of_cases} ORDER BY m.case_id, m.is_primary DESC, m.rowid",
                qualified(rows::METRIC_COLUMNS, "m")
            ),
            &params,
            |r| Ok((r.get::<i64>(7)?, rows::metric(r)?)),
        )? {
            if let Some(&i) = at.get(&case_id) {
                cases[i].case.metrics.push(m);
            }
        }
        for (case_id, t) in self.db.query_rows(
            &format!(
                "SELECT {}, t.case_id FROM trials t JOIN cases c ON c.id = t.case_id
                 WHERE {of_cases} AND t.warmup = 0 ORDER BY t.case_id, t.idx",
                qualified(rows::TRIAL_COLUMNS, "t")
            ),
            &params,
            |r| Ok((r.get::<i64>(9)?, rows::trial(r)?)),
        )? {
            if let Some(&i) = at.get(&case_id) {
                cases[i].case.trials.push(t);
            }
        }
        for (case_id, event) in self.db.query_rows(
            &format!(
                "SELECT p.case_id, p.event FROM profiles p JOIN cases c ON c.id = p.case_id
                 WHERE {of_cases} ORDER BY p.case_id, p.event"
            ),
            &params,
            |r| Ok((r.get::<i64>(0)?, r.get::<String>(1)?)),
        )? {
            if let Some(&i) = at.get(&case_id) {
                cases[i].profiled.push(event);
            }
        }
        Ok(Stored { runs, cases })
    }
}

/// A run row of [`Store::series`] and the estimator of its options.
fn series_run(r: &Row) -> Result<(SeriesRun, Estimator)> {
    let options: String = r.get(4)?;
    let snapshot: String = r.get(5)?;
    // A snapshot some other kscale wrote differently says nothing here.
    let snap = serde_json::from_str::<Snapshot>(&snapshot).unwrap_or(Snapshot {
        hostname: None,
        kernel: None,
        vm: serde_json::Value::Null,
    });
    let vm = crate::vm_tag(&serde_json::json!({ "vm": snap.vm }));
    let estimator = serde_json::from_str::<Options>(&options)
        .ok()
        .and_then(|o| o.rule?.estimator)
        .and_then(|e| Estimator::parse(&e))
        .unwrap_or(Estimator::Mean);
    let (kernel, kernel_version) = snap
        .kernel
        .map(|k| (k.release, k.version))
        .unwrap_or_default();
    Ok((
        SeriesRun {
            id: r.get(0)?,
            label: r.get(1)?,
            started_at: r.get(2)?,
            git_rev: r.get::<Option<String>>(3)?.unwrap_or_default(),
            hostname: snap.hostname,
            kernel,
            kernel_version,
            vm,
        },
        estimator,
    ))
}
