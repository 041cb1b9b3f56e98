//! `--budget` (docs/budget.md, "The run's budget"): one wall-clock budget
//! for the whole run, and every NOT CONVERGED case says what it needed.

mod common;
use common::{refused, Env};
use std::time::{Duration, Instant};

#[test]
fn a_budgeted_run_ends_in_its_budget_and_says_what_each_case_needed() {
    let env = Env::new();
    let started = Instant::now();
    // A 0.01 % interval cannot be reached: every case stops unconverged,
    // either early or when the budget is spent.
    env.run_ok(&[
        "run",
        "syscall.null",
        "syscall.read",
        "--quick",
        "--budget",
        "3s",
        "--ci",
        "0.01@95",
        "--cpus",
        "1,all",
        "--no-progress",
        "--label",
        "b",
    ]);
    let took = started.elapsed();
    // The budget plus a worker's time limit and the process's own start
    // on a busy machine.
    assert!(took < Duration::from_secs(30), "{took:?}");
    let j = env.export("b");
    let rows: Vec<&serde_json::Value> = j["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["primary"] == true)
        .collect();
    assert_eq!(rows.len(), 4, "{rows:?}");
    for r in rows {
        assert_eq!(r["converged"], false, "{r}");
        assert!(r["n"].as_u64().unwrap() >= 1, "{r}");
        let notes: Vec<&str> = r["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n.as_str())
            .collect();
        let need = notes
            .iter()
            .find(|n| n.contains("NOT CONVERGED: needs "))
            .unwrap_or_else(|| panic!("no need in {notes:?}"));
        assert!(
            need.contains(" more trial") && need.contains(" s)"),
            "{need}"
        );
        // Named as tables name the configuration, without where its CPUs are.
        let cpus = r["cpus"].as_str().unwrap();
        let base = cpus.split_once(" (").map_or(cpus, |(b, _)| b);
        assert!(need.contains(&format!("[cpus {base}]")), "{need}");
    }
}

#[test]
fn bad_budgets_are_refused_in_one_line() {
    let env = Env::new();
    for bad in ["5x", "0s", "m", "five minutes"] {
        refused(
            &env,
            &["run", "syscall.null", "--budget", bad],
            &format!("bad --budget `{bad}`: expected a duration like 90s, 5m or 1h"),
        );
    }
    refused(
        &env,
        &["study", "--suite", "micro", "--budget", "1y"],
        "bad --budget `1y`",
    );
}
