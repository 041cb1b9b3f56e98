//! `kscale check`: 0 when nothing got worse, 1 with one line per regressed
//! case under a synthetic regression (`KSCALE_TEST_DELAY_NS`, a test-only
//! busy wait added to each `syscall.null` operation), 125 when nothing
//! could be measured, 2 when the baseline has nothing in common with the
//! targets.

mod common;
use common::Env;

const TARGET: &[&str] = &[
    "syscall.null",
    "--cpus",
    "1",
    "--quick",
    "--min-trials",
    "5",
    "--no-progress",
];

/// `kscale check` with one environment variable set.
fn check(env: &Env, extra: &[&str], var: Option<(&str, &str)>) -> std::process::Output {
    let mut c = env.cmd(&["check", "--baseline", "base", "--threshold", "50%"]);
    c.args(TARGET).args(extra);
    if let Some((k, v)) = var {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// 20 µs more per operation: tens of times the null syscall's latency, so
/// that even a busy machine's noise cannot hide it.
const SLOW: Option<(&str, &str)> = Some(("KSCALE_TEST_DELAY_NS", "20000"));

#[test]
fn exit_status_tells_good_regressed_and_unmeasured() {
    let env = Env::new();
    env.cmd(&["run", "--label", "base"])
        .args(TARGET)
        .assert()
        .success();

    // The same code again: no case is 50 % worse (a busy machine stays well inside that).
    let out = check(&env, &[], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !text.contains("REGRESSED") && !text.contains('\x1b'),
        "{text}"
    );

    // Each operation busy-waits 20 µs more: many times slower.
    let out = check(&env, &[], SLOW);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("REGRESSED"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].contains("syscall.null") && lines[0].contains("worse, p = "),
        "{text}"
    );

    // The same as JSON, for CI.
    let out = check(&env, &["--format", "json"], SLOW);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "regressed");
    assert_eq!(v["cases"][0]["regressed"], true);
    assert!(v["cases"][0]["worse_pct"].as_f64().unwrap() > 50.0, "{v}");

    // Every trial crashes: git bisect's "skip".
    let out = check(&env, &[], Some(("KSCALE_FAULT", "crash:syscall.null")));
    common::assert_exit(&out, 125);
    assert!(String::from_utf8_lossy(&out.stderr).contains("could not measure"));
}

#[test]
fn bad_input_is_one_line_and_status_2() {
    let env = Env::new();
    env.cmd(&["run", "--label", "base"])
        .args(TARGET)
        .assert()
        .success();
    for (args, why) in [
        (
            vec!["syscall.read", "--cpus", "1", "--quick"],
            "no case in common",
        ),
        (
            vec!["syscall.null", "--cpus", "1", "--threshold", "x"],
            "bad --threshold",
        ),
        (vec!["nosuch", "--cpus", "1"], "unknown workload"),
    ] {
        let out = env
            .cmd(&["check", "--baseline", "base"])
            .args(&args)
            .output()
            .unwrap();
        common::assert_refused(&out, why, &format!("{args:?}"));
    }
    let out = env
        .cmd(&["check", "--baseline", "nosuch", "syscall.null"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // Nothing was measured for any of them.
    let runs = env.cmd(&["results"]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&runs.stdout)
            .matches("base")
            .count(),
        1
    );
}
