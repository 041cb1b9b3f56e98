//! `--budget` (docs/budget.md, "The run's budget"): one wall-clock budget
//! for the whole run, and every NOT CONVERGED case says what it needed.

mod common;
use common::{drawn, nginx, refused, Env};
use std::time::{Duration, Instant};

/// The tests here measure within a budget, and the harness runs them in
/// parallel: one test's runs load the CPUs another's plan is fitted to.
/// A 30 s study beside a budgeted run left `mem.frd` out on one
/// configuration. Each holds this while it measures.
static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn measuring() -> std::sync::MutexGuard<'static, ()> {
    MEASURING.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn a_budgeted_run_ends_in_its_budget_and_says_what_each_case_needed() {
    let _serial = measuring();
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

/// Every spender draws on the one budget (docs/budget.md, "One spender"):
/// a budgeted run of a case, a capacity search and their profiles ends
/// saying where its seconds went — cases, capacity steps, control readings
/// and profiles each with their own — and what the spenders drew does not
/// exceed what the run took. Tune's arms: tests/tune.rs.
#[test]
fn every_spender_draws_on_the_one_budget() {
    let _serial = measuring();
    if nginx().is_none() {
        return;
    }
    let env = Env::new();
    let started = Instant::now();
    let out = env.run_ok(&[
        "run",
        "syscall.null",
        "web.nginx",
        "--capacity",
        "--profile",
        "--quick",
        "--cpus",
        "1",
        "--budget",
        "20s",
        "--no-progress",
    ]);
    let took = started.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&out.stderr);
    let mut spenders = vec!["cases", "capacity steps", "control readings"];
    // A machine that refuses perf says so once and takes no profiles.
    if !err.contains("profiling off") {
        spenders.push("profiles");
    }
    let mut sum = 0.0;
    for s in spenders {
        let secs = drawn(&err, s).unwrap_or_else(|| panic!("{s} drew nothing:\n{err}"));
        assert!(secs > 0.0, "{s}: {secs}\n{err}");
        sum += secs;
    }
    assert_eq!(drawn(&err, "tune's arms"), None, "{err}");
    assert!(sum <= took, "{sum} s drawn in {took} s:\n{err}");
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

/// A budget below what the whole study takes at its least buys decisions
/// first (docs/planning.md, "Decisions first"): the study says so, plans
/// the quick study's cases at --quick's lengths, holds the sweeps' others,
/// names its end in its first line, and ends within its budget.
#[test]
fn a_short_budget_decides_first_and_holds_the_sweeps() {
    let _serial = measuring();
    let env = Env::new();
    let started = Instant::now();
    let out = env.run_ok(&[
        "study",
        "--suite",
        "quick",
        "--budget",
        "30s",
        "--no-profile",
        "--no-progress",
        "--label",
        "first",
    ]);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(60), "{took:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot measure the whole study")
            && err.contains("decides each family's cells first")
            && err.contains("at --quick's trial lengths"),
        "{err}"
    );
    let run_line = err
        .lines()
        .find(|l| l.starts_with("kscale: run ") && l.contains(" cases, CI 10@95"))
        .unwrap_or_else(|| panic!("no run line at --quick's rule:\n{err}"));
    assert!(
        run_line.contains(", ends by ") && run_line.contains(" UTC"),
        "{run_line}"
    );
    let j = env.export("first");
    let cases: Vec<String> = j["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["primary"] == true)
        .map(|r| format!("{} {}", r["workload"], r["params"]))
        .collect();
    // The sweeps' other cases were held, and say so where not taken back.
    let left: Vec<&str> = j["run"]["options"]["left_out"]
        .as_array()
        .map(|a| a.iter().filter_map(|l| l.as_str()).collect())
        .unwrap_or_default();
    // The quick plan's representatives are measured: mem.frd at a quick
    // size, on one CPU and on all; in a noisy hour one (or both: CV 21 %
    // at 8m on the AMD VM) may be left out after its own first trials,
    // says why, and a held case of the family stands in for it.
    let measured = cases
        .iter()
        .filter(|c| c.contains("mem.frd") && c.contains("8m"))
        .count();
    let after_trials = left
        .iter()
        .filter(|l| l.starts_with("mem.frd") && l.contains("8m") && l.contains("left out after"))
        .count();
    let family = cases.iter().filter(|c| c.contains("mem.frd")).count();
    assert!(
        family >= 1 && measured + after_trials >= 2,
        "{cases:?}\n{left:?}"
    );
    let held = j["run"]["options"]["held"]
        .as_array()
        .map_or(0, |a| a.len());
    assert!(held > 0 && !left.is_empty(), "{held} held, {left:?}");
}
