//! A case's series of runs for the history tests (tests/history.rs,
//! tests/report_history.rs): 30 runs built as `kscale export` files and
//! merged with `kscale import`, one `syscall.null` case whose trials step up
//! 10 % (its metric worse) from run 20, or stay flat.
#![allow(dead_code)]

use crate::common::kscale;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

pub const RUNS: usize = 30;
pub const STEP_AT: usize = 20;
pub const TRIALS: usize = 5;

/// A cheap seeded generator: xorshift64*, uniform in [-1, 1).
pub struct Noise(u64);

impl Noise {
    pub fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// Run `i` of the series as `kscale export --format json` writes it: one
/// `syscall.null` case on CPU 1, `TRIALS` counted trials around 1 µs (2 %
/// spread from run to run, 2 % from trial to trial), 10 % slower from run
/// `STEP_AT` when `step`.
pub fn export(i: usize, step: bool, noise: &mut Noise) -> Value {
    let level = if step && i >= STEP_AT { 1.10 } else { 1.0 };
    let run = level * (1.0 + 0.02 * noise.next());
    let day = format!("2025-01-{:02}", i + 1);
    let trials: Vec<Value> = (0..TRIALS)
        .map(|t| {
            json!({
                "idx": t + 1,
                "warmup": false,
                "started_at": format!("{day}T00:00:{t:02}Z"),
                "wall_s": 0.1,
                "iterations": 1000,
                "values": {"latency": run * (1.0 + 0.02 * noise.next())},
                "accounting": null,
            })
        })
        .collect();
    json!({
        "schema": kscale_store::SCHEMA_VERSION,
        "system": {"hostname": "lab1", "kernel": {"release": format!("6.{i}.0")}},
        "run": {
            "id": i + 1,
            "uuid": format!("00000000-0000-4000-8000-{:012x}", i + 1),
            "label": format!("nightly-{i:02}"),
            "started_at": format!("{day}T00:00:00Z"),
            "ended_at": format!("{day}T00:01:00Z"),
            "status": "complete",
            "kscale_version": "0.1.0",
            "git_rev": "0123456789ab",
            "args": ["kscale", "run", "syscall.null"],
            "options": {},
        },
        "results": [],
        "cases": [{
            "seq": 0,
            "key": {"workload": "syscall.null", "params": {}, "cpus": "1"},
            "cpus": [0],
            "status": "done",
            "converged": true,
            "rule": "converge",
            "estimator": "mean",
            "error": null,
            "iterations": 1000,
            "notes": [],
            "metrics": [{"name": "latency", "unit": "µs", "direction": "lower", "primary": true}],
            "trials": trials,
        }],
    })
}

/// Writes the 30 exports into `dir` and imports them into `db`.
pub fn import_series(db: &str, dir: &Path, step: bool) {
    let mut noise = Noise(0x5eed_0032);
    let files: Vec<PathBuf> = (0..RUNS)
        .map(|i| {
            let p = dir.join(format!("run{i:02}-{step}.json"));
            std::fs::write(&p, export(i, step, &mut noise).to_string()).unwrap();
            p
        })
        .collect();
    let out = kscale()
        .args(["--db", db, "import"])
        .args(&files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "import: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
