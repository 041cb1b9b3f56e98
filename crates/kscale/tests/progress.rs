//! A run's progress says how long it still has to go. Without a budget the
//! runner says it in the message, revised from the cases already measured
//! (kscale_core::ahead), since indicatif's estimate from the trials' rate
//! is off by the twentyfold between a micro trial and a macro one; under
//! a budget the budget bounds the run and the bar's own estimate stays.

mod common;
use common::Env;

fn progress_lines(env: &Env, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "run",
        "syscall.null",
        "syscall.read",
        "--trial-time",
        "0.02",
        "--max-trials",
        "5",
        "--cpus",
        "1",
    ];
    args.extend(extra);
    let out = env
        .cmd(&args)
        .env("KSCALE_PROGRESS", "lines")
        .output()
        .expect("start kscale");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "kscale run: {err}");
    err.lines()
        .filter(|l| l.starts_with("kscale-progress: "))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_run_without_a_budget_says_how_long_it_has_left() {
    let env = Env::new();
    let lines = progress_lines(&env, &[]);
    let left: Vec<&String> = lines.iter().filter(|l| l.contains(" left · ")).collect();
    assert!(
        !left.is_empty(),
        "no progress line says the time left: {lines:#?}"
    );
    assert!(left.iter().all(|l| l.contains("about ")), "{left:#?}");
}

#[test]
fn a_budgeted_run_leaves_it_to_its_budget() {
    let env = Env::new();
    let lines = progress_lines(&env, &["--budget", "20s"]);
    assert!(!lines.is_empty(), "no progress lines at all");
    assert!(lines.iter().all(|l| !l.contains(" left · ")), "{lines:#?}");
}
