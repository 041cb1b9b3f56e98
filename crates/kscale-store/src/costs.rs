//! What the cases of earlier runs on this machine cost: the trials they
//! took and the wall time those trials ran. A run without a budget says how
//! long it will take before its first trial and revises that as it goes
//! (docs/budget.md, "How long"); a case measured here before is the best
//! guess of what it costs again, far better than its trial length and the
//! gauge's noise (a nightly lab's `fs` cases take five times the trials the
//! gauge asks for).

use crate::{Result, Store};
use kscale_core::CaseKey;
use std::collections::{BTreeMap, HashMap};

/// The earlier runs a lookup reads, newest first: enough to find every case
/// of a study that alternates with other runs, few enough to stay a handful
/// of rows on a store of 10,000 runs.
const RUNS: i64 = 20;

/// One stored case's cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CaseCost {
    /// Its trials, the warm-up included.
    pub trials: usize,
    /// The wall seconds those trials ran.
    pub wall_s: f64,
}

/// What earlier runs on one host cost.
#[derive(Clone, Debug, Default)]
pub struct EarlierCosts {
    /// Each case's cost in the newest of those runs that finished it.
    pub cases: HashMap<CaseKey, CaseCost>,
    /// Of the complete runs among them, the median of each run's wall time
    /// over its trials' wall time: what a run spends around its trials
    /// (worker processes, profiles, the gauge, the store). None without one.
    pub overhead: Option<f64>,
}

impl Store {
    /// The costs of the done cases of the newest [`RUNS`] runs recorded on
    /// `host` other than `except` (the run asking).
    pub fn earlier_costs(&self, host: &str, except: i64) -> Result<EarlierCosts> {
        let runs: Vec<(i64, String, Option<String>, String)> = self.db.query_rows(
            &format!(
                "SELECT id, started_at, ended_at, status FROM runs
                 WHERE host = $1 AND id <> $2 ORDER BY id DESC LIMIT {RUNS}"
            ),
            &[&host, &except],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?;
        let Some(oldest) = runs.iter().map(|r| r.0).min() else {
            return Ok(EarlierCosts::default());
        };
        // Every case of those runs with its trials summed; the runs' own
        // trial seconds from the same rows.
        let rows: Vec<(i64, String, String, String, String, i64, f64)> = self.db.query_rows(
            "SELECT c.run_id, c.workload, c.params, c.cpus_name, c.status, COUNT(t.id),
                    COALESCE(SUM(t.wall_s), 0)
             FROM cases c JOIN runs r ON r.id = c.run_id
             LEFT JOIN trials t ON t.case_id = c.id
             WHERE r.host = $1 AND r.id <> $2 AND r.id >= $3
             GROUP BY c.id, c.run_id, c.workload, c.params, c.cpus_name, c.status",
            &[&host, &except, &oldest],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            },
        )?;
        let wanted: BTreeMap<i64, &(i64, String, Option<String>, String)> =
            runs.iter().map(|r| (r.0, r)).collect();
        let mut trial_s: BTreeMap<i64, f64> = BTreeMap::new();
        let mut newest: HashMap<CaseKey, (i64, CaseCost)> = HashMap::new();
        for (run, workload, params, cpus, status, n, wall_s) in rows {
            if !wanted.contains_key(&run) {
                continue;
            }
            *trial_s.entry(run).or_default() += wall_s;
            if status != "done" || n == 0 {
                continue;
            }
            // A case stored by some other kscale in another form says
            // nothing here.
            let Ok(params) = serde_json::from_str(&params) else {
                continue;
            };
            let key = CaseKey {
                workload,
                params,
                cpus,
            };
            let cost = CaseCost {
                trials: n as usize,
                wall_s,
            };
            match newest.get(&key) {
                Some((at, _)) if *at > run => {}
                _ => {
                    newest.insert(key, (run, cost));
                }
            }
        }
        let mut overheads: Vec<f64> = runs
            .iter()
            .filter(|(_, _, _, status)| status == "complete")
            .filter_map(|(id, started, ended, _)| {
                let secs = crate::parse_utc(ended.as_deref()?)? - crate::parse_utc(started)?;
                let trials = *trial_s.get(id)?;
                (trials > 0.0 && secs > 0).then(|| (secs as f64 / trials).max(1.0))
            })
            .collect();
        overheads.sort_by(f64::total_cmp);
        Ok(EarlierCosts {
            cases: newest.into_iter().map(|(k, (_, c))| (k, c)).collect(),
            overhead: (!overheads.is_empty()).then(|| overheads[overheads.len() / 2]),
        })
    }
}
