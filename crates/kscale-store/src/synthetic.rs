//! Synthetic stores for benchmarks (`scripts/bench-history`): thousands of
//! runs written row by row in one transaction, bypassing the per-trial
//! commits a real run makes, so that a store of 10,000 runs takes a minute
//! to build rather than a day to measure.

use crate::{Result, Store};

/// What to write.
pub struct Spec {
    pub runs: usize,
    /// Workloads the cases cycle through; case `i` of a run is workload
    /// `i % len` with param `v = i / len`, on CPU configuration `1`.
    pub workloads: Vec<String>,
    pub cases_per_run: usize,
    pub trials: usize,
    /// From this run on, every value is this much higher (a regression of
    /// a lower-is-better metric), so `changes` has something to find.
    pub step: Option<(usize, f64)>,
    pub seed: u64,
}

impl Store {
    /// Writes `spec.runs` complete runs, as `kscale run` would have stored
    /// them but for the trials' timing data.
    pub fn fill_synthetic(&self, spec: &Spec) -> Result<()> {
        let mut rng = kscale_core::order::SplitMix64::new(spec.seed);
        let mut noise = move || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
        // About the size of a real snapshot's text (~3 kB): it is read back
        // for every run of a series.
        let sysctls: serde_json::Map<String, serde_json::Value> = (0..100)
            .map(|i| (format!("kernel.synthetic_setting_{i}"), "1 2 3".into()))
            .collect();
        self.db.transaction(|db| {
            for r in 0..spec.runs {
                let day = crate::time::format_utc(1_700_000_000 + r as i64 * 3600);
                let snapshot = serde_json::json!({
                    "hostname": "bench",
                    "kernel": {"release": format!("6.{}.0", r / 100), "version": "#1 SMP"},
                    "sysctls": sysctls,
                });
                let run_id = db.insert_returning_id(
                    "INSERT INTO runs (label, started_at, ended_at, status, kscale_version, git_rev, args, options, snapshot, uuid)
                     VALUES ($1, $2, $3, 'complete', '0.1.0', 'synthetic', '[]', '{}', $4, $5) RETURNING id",
                    &[
                        &format!("bench-{r:05}"),
                        &day,
                        &day,
                        &snapshot.to_string(),
                        &crate::new_uuid(),
                    ],
                )?;
                let level = match spec.step {
                    Some((at, by)) if r >= at => 1.0 + by,
                    _ => 1.0,
                };
                let run_level = level * (1.0 + 0.02 * noise());
                for c in 0..spec.cases_per_run {
                    let n = spec.workloads.len().max(1);
                    let workload = spec.workloads.get(c % n).map_or("bench.none", String::as_str);
                    let case_id = db.insert_returning_id(
                        "INSERT INTO cases (run_id, seq, workload, params, cpus_name, cpus, status, converged, notes)
                         VALUES ($1, $2, $3, $4, '1', '[0]', 'done', 1, '[]') RETURNING id",
                        &[&run_id, &(c as i64), &workload, &format!("{{\"v\":\"{}\"}}", c / n)],
                    )?;
                    db.execute(
                        "INSERT INTO metrics (case_id, name, unit, direction, is_primary)
                         VALUES ($1, 'latency', 'µs', 'lower', 1)",
                        &[&case_id],
                    )?;
                    for t in 0..spec.trials {
                        let v = run_level * (1.0 + 0.02 * noise());
                        db.execute(
                            "INSERT INTO trials (case_id, idx, warmup, started_at, wall_s, iterations, vals)
                             VALUES ($1, $2, 0, $3, 0.1, 1000, $4)",
                            &[&case_id, &(t as i64), &day, &format!("{{\"latency\":{v}}}")],
                        )?;
                    }
                }
            }
            Ok(())
        })
    }
}
