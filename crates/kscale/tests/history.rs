//! `kscale history` and `kscale changes` through the binary, on SQLite and
//! on PostgreSQL (docs/history.md): 30 runs built as `kscale export` files,
//! merged with `kscale import`, one case whose trials step up 10 % (its
//! metric worse) from run 20. `changes` reports that one change at run 20
//! (±1) and exits 1; the same runs without the step exit 0. The PostgreSQL
//! half runs on a throw-away cluster and skips with a printed reason where
//! the server binaries are missing (a failure under `CI`).

mod common;
#[path = "common/series.rs"]
mod series;

use common::kscale;
use kscale_store::pg_harness::cluster_or_skip;
use serde_json::{json, Value};
use series::{import_series, RUNS, STEP_AT};
use std::path::Path;

fn changes(db: &str, extra: &[&str]) -> (i32, Value) {
    let out = kscale()
        .args(["--db", db, "changes", "syscall.null", "--format", "json"])
        .args(extra)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "changes printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

/// The whole scenario on one backend: `step_db` gets the series with the
/// step, `flat_db` the one without.
fn scenario(step_db: &str, flat_db: &str, dir: &Path) {
    import_series(step_db, dir, true);
    import_series(flat_db, dir, false);

    let (code, v) = changes(step_db, &[]);
    let found = v["changes"].as_array().expect("changes array");
    assert_eq!(found.len(), 1, "{v:#}");
    let c = &found[0];
    let at = c["index"].as_u64().unwrap() as usize;
    assert!(at.abs_diff(STEP_AT) <= 1, "change at run {at}: {c:#}");
    assert_eq!(c["persistent"], true);
    assert_eq!(c["regression"], true);
    let pct = c["change_pct"].as_f64().unwrap();
    assert!((5.0..15.0).contains(&pct), "{c:#}");
    assert!(c["change_low_pct"].as_f64().unwrap() < pct);
    assert!(c["change_high_pct"].as_f64().unwrap() > pct);
    assert_eq!(code, 1, "a 10 % regression fails the 5 % gate");
    // Above the change's size the gate passes.
    assert_eq!(changes(step_db, &["--threshold", "20%"]).0, 0);

    let (code, v) = changes(flat_db, &[]);
    assert_eq!(v["changes"], json!([]), "{v:#}");
    assert_eq!(code, 0);

    // The terminal form: one line for the change and the summary.
    let out = kscale()
        .args(["--db", step_db, "changes"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert_eq!(text.matches("REGRESSION").count(), 1, "{text}");
    assert!(text.contains("1 regression worse than 5 %"), "{text}");

    // History: every run, in the asked order, filtered.
    let history = |extra: &[&str]| {
        let out = kscale()
            .args([
                "--db",
                step_db,
                "history",
                "syscall.null",
                "--format",
                "csv",
            ])
            .args(extra)
            .output()
            .unwrap();
        common::assert_exit(&out, 0);
        String::from_utf8(out.stdout).unwrap()
    };
    let all = history(&[]);
    assert_eq!(all.lines().count(), RUNS + 1, "{all}");
    let labels: Vec<&str> = all
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(7).unwrap())
        .collect();
    assert_eq!(labels.first(), Some(&"nightly-00"));
    assert_eq!(labels.last(), Some(&"nightly-29"));
    // Kernel 6.10.0 after 6.9.0, not after 6.1.0.
    let by_kernel = history(&["--order", "kernel"]);
    let kernels: Vec<&str> = by_kernel
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(10).unwrap())
        .collect();
    assert_eq!(&kernels[9..11], ["6.9.0", "6.10.0"]);
    assert_eq!(history(&["--label", "nightly-2?"]).lines().count(), 11);
    assert_eq!(
        history(&["--since", "2025-01-05", "--until", "2025-01-06"])
            .lines()
            .count(),
        3
    );
    assert_eq!(history(&["--host", "lab1"]).lines().count(), RUNS + 1);
    // No run of another host: nothing to show is the user's mistake.
    kscale()
        .args([
            "--db",
            step_db,
            "history",
            "syscall.null",
            "--host",
            "elsewhere",
        ])
        .assert()
        .code(2);
}

#[test]
fn changes_find_the_step_at_run_20_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let step = dir.path().join("step.db").display().to_string();
    let flat = dir.path().join("flat.db").display().to_string();
    scenario(&step, &flat, dir.path());
}

#[test]
fn changes_find_the_step_at_run_20_on_postgres() {
    let Some(pg) = cluster_or_skip("changes_find_the_step_at_run_20_on_postgres") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let step = pg.create_db("step").unwrap();
    let flat = pg.create_db("flat").unwrap();
    scenario(&step, &flat, dir.path());
}

/// Bad input: one line naming the bad value and what is accepted, status 2.
#[test]
fn bad_history_and_changes_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("k.db").display().to_string();
    import_series(&db, dir.path(), false);
    for (args, want) in [
        (vec!["history"], "at least one TARGET"),
        (
            vec!["history", "nosuchfamily"],
            "unknown target `nosuchfamily`",
        ),
        (
            vec!["history", "syscall.null", "--since", "May"],
            "bad --since `May`",
        ),
        (
            vec!["history", "syscall.null", "--order", "size"],
            "possible values",
        ),
        (
            vec!["changes", "--threshold", "lots"],
            "bad --threshold `lots`",
        ),
        (
            vec!["history", "mem.rd"],
            "no stored run has a measured case of mem.rd",
        ),
    ] {
        let out = kscale().args(["--db", &db]).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}
