//! `kscale check`: 0 when nothing got worse, 1 with one line per regressed
//! case under a synthetic regression (`KSCALE_TEST_DELAY_NS`, a test-only
//! busy wait added to each `syscall.null` operation), 125 when nothing
//! could be measured, 2 when the baseline has nothing in common with the
//! targets.

mod common;
use common::Env;

/// The tests here measure the machine and `check` judges by how it moved:
/// one at a time, so that none measures the others' load.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

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

/// `kscale check` of one short `syscall.null` case on one CPU against
/// `baseline`, at most `max_trials` trials.
fn tiny_check(env: &Env, baseline: &str, max_trials: &str) -> assert_cmd::Command {
    env.cmd(&[
        "check",
        "--baseline",
        baseline,
        "--threshold",
        "50%",
        "syscall.null",
        "--cpus",
        "1",
        "--quick",
        "--trial-time",
        "0.02",
        "--max-trials",
        max_trials,
        "--no-progress",
    ])
}

/// 20 µs more per operation: tens of times the null syscall's latency, so
/// that even a busy machine's noise cannot hide it.
const SLOW: Option<(&str, &str)> = Some(("KSCALE_TEST_DELAY_NS", "20000"));

#[test]
fn exit_status_tells_good_regressed_and_unmeasured() {
    let _alone = alone();
    let env = Env::new();
    env.cmd(&["run", "--label", "base"])
        .args(TARGET)
        .assert()
        .success();

    // The same code again: no case is 50 % worse (a busy machine stays
    // well inside that). Whether the gate can say so depends on the noise
    // both runs met: "ok" (0) where the comparison could see a 50 % change,
    // "cannot tell" (125) where it could not — never "regressed".
    let out = check(&env, &[], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        matches!(out.status.code(), Some(0 | 125)),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !text.contains("REGRESSED") && !text.contains('\x1b'),
        "{text}"
    );
    assert_eq!(
        out.status.code() == Some(125),
        text.contains("CANNOT TELL syscall.null"),
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
    let _alone = alone();
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
        (
            vec!["syscall.null", "--cpus", "1", "--repeat", "0"],
            "bad --repeat `0`",
        ),
        (
            vec!["syscall.null", "--cpus", "1", "--repeat", "21"],
            "bad --repeat `21`",
        ),
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

/// Chat trials (messages/s ÷ 1000) from a noisy hour on the 2-vCPU VM
/// (docs/method.md, "Steal time"): five of them, their spread what steal
/// did to them. Written into a copy of a real baseline as its counted
/// trials, scaled to that baseline's level.
const NOISY: [f64; 5] = [76.8, 71.6, 83.7, 128.2, 122.8];

/// A baseline whose trials spread as the noisy hour's did: the real
/// baseline's export, its counted trials replaced by [`NOISY`] (scaled to
/// the baseline's mean), imported under another UUID and label.
fn noisy_baseline(env: &Env, label: &str) {
    let mut v = env.export("base");
    // New runs are measured and stored under the trimmed mean.
    assert_eq!(v["run"]["options"]["rule"]["estimator"], "trimmed");
    v["run"]["uuid"] = "7d444840-9dc0-41b1-9c32-6b8a56e7b0a1".into();
    let case = &mut v["cases"][0];
    let metric = case["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["primary"] == true)
        .unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    let trials = case["trials"].as_array_mut().unwrap();
    let counted: Vec<f64> = trials
        .iter()
        .filter(|t| t["warmup"] == false)
        .map(|t| t["values"][&metric].as_f64().unwrap())
        .collect();
    let level = counted.iter().sum::<f64>() / counted.len() as f64;
    let noisy_mean = NOISY.iter().sum::<f64>() / NOISY.len() as f64;
    let mut k = 0;
    trials.retain_mut(|t| {
        if t["warmup"] == true {
            return true;
        }
        if k == NOISY.len() {
            return false;
        }
        t["values"][&metric] = (level * NOISY[k] / noisy_mean).into();
        k += 1;
        true
    });
    assert_eq!(k, NOISY.len(), "the baseline has at least five trials");
    let path = env.path().join("noisy.json");
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    env.cmd(&["import", "--label", label])
        .arg(&path)
        .assert()
        .success();
}

#[test]
fn a_noisy_baseline_cannot_tell_and_skips_the_commit() {
    let _alone = alone();
    let env = Env::new();
    env.cmd(&["run", "--label", "base"])
        .args(TARGET)
        .assert()
        .success();
    noisy_baseline(&env, "noisy");
    // The noisy hour's five trials cannot show a 5 % change (their
    // detectable change alone is several times that): every case "cannot
    // tell", and the commit is skipped — unless this run came out faster
    // than all five of them (a machine that moved by a quarter between the
    // two runs of this test), which is "significantly better", never a
    // regression. Then the JSON says so and the test has nothing to tell.
    let mut c = env.cmd(&["check", "--baseline", "noisy", "--threshold", "5%"]);
    let json = c.args(TARGET).args(["--format", "json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    if json.status.code() == Some(0) {
        assert_eq!(v["cases"][0]["significant"], true, "{v}");
        assert!(v["cases"][0]["worse_pct"].as_f64().unwrap() < 0.0, "{v}");
        eprintln!(
            "this run came out significantly faster than the noisy baseline: ok, as it should"
        );
        return;
    }
    let mut c = env.cmd(&["check", "--baseline", "noisy", "--threshold", "5%"]);
    let out = c.args(TARGET).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    if out.status.code() == Some(0) {
        assert!(!text.contains("REGRESSED"), "{text}");
        eprintln!(
            "this run came out significantly faster than the noisy baseline: ok, as it should"
        );
        return;
    }
    common::assert_exit(&out, 125);
    let line = text
        .lines()
        .find(|l| l.starts_with("CANNOT TELL syscall.null"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("the smallest change this comparison could see is")
            && line.contains("above the 5% threshold"),
        "{text}"
    );
    assert!(text.contains("1 cannot tell"), "{text}");
    assert!(!text.contains("REGRESSED"), "{text}");

    assert_eq!(json.status.code(), Some(125), "{v}");
    assert_eq!(v["status"], "cannot_tell", "{v}");
    assert_eq!(v["cases"][0]["verdict"], "cannot_tell", "{v}");
    assert!(v["cases"][0]["mdc_pct"].as_f64().unwrap() > 5.0, "{v}");
    assert!(v["cases"][0]["test"].is_string(), "{v}");
    assert_eq!(v["estimator"], "trimmed", "{v}");

    // compare names the detectable change and the test beside the ratio.
    let out = env.cmd(&["compare", "noisy", "base"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("MDC B/A") && text.contains("Test"), "{text}");
    assert!(text.contains("minimum detectable change"), "{text}");
}

/// With three runs under the baseline's label, each case's between-run
/// spread is its own, estimated from them (docs/method.md, "The gauge and
/// the control"); JSON says from how many runs. A run under another label
/// is not one of them.
#[test]
fn repeated_baselines_give_a_case_its_own_between_run_spread() {
    let _alone = alone();
    let env = Env::new();
    for label in ["base", "other", "base", "base"] {
        env.cmd(&["run", "--label", label])
            .args(TARGET)
            .assert()
            .success();
    }
    let out = check(&env, &["--format", "json"], SLOW);
    let v = json(&out);
    let m = &v["cases"][0]["machine"];
    assert_eq!(m["between_runs"], 3, "{v}");
    assert!(m["between_pct"].as_f64().is_some_and(|b| b >= 0.0), "{v}");
    // Many times slower is still a regression through the runs' spread,
    // unless the gauge saw the machine itself run slower past the
    // threshold: a machine that ran faster explains no slowdown.
    let slower = ["slower_pct", "syscall_slower_pct"]
        .iter()
        .any(|k| m[*k].as_f64().is_some_and(|s| s > 50.0));
    if v["cases"][0]["machine_moved"] == true && slower {
        assert!(matches!(out.status.code(), Some(1 | 125)), "{v}");
    } else {
        assert_eq!(out.status.code(), Some(1), "{v}");
    }
}

/// The start times of a run's counted trials, in seconds since the first.
fn counted_starts(env: &Env, run: &str) -> Vec<i64> {
    let db = rusqlite::Connection::open(env.db()).unwrap();
    let mut q = db
        .prepare(
            "SELECT t.started_at FROM trials t JOIN cases c ON c.id = t.case_id \
             WHERE c.run_id = ?1 AND t.warmup = 0 ORDER BY t.id",
        )
        .unwrap();
    let secs: Vec<i64> = q
        .query_map([run.parse::<i64>().unwrap()], |r| r.get::<_, String>(0))
        .unwrap()
        .map(|s| {
            let s = s.unwrap();
            let t = &s[11..19];
            let p: Vec<i64> = t.split(':').map(|x| x.parse().unwrap()).collect();
            p[0] * 3600 + p[1] * 60 + p[2]
        })
        .collect();
    secs.iter().map(|s| s - secs[0]).collect()
}

/// `--span 6s` paces a case's trials at least 1 s apart (seven of them,
/// min-trials raised to fill the span), and a check of a paced baseline
/// paces its own run the same way and says so.
#[test]
fn paced_trials_span_the_span_and_the_check_follows_its_baseline() {
    let _alone = alone();
    let env = Env::new();
    let started = std::time::Instant::now();
    let out = env
        .tiny_run(&["syscall.null"], "1", "paced")
        .args(["--span", "6s", "--max-trials", "8"])
        .output()
        .unwrap();
    common::stdout_of_success(&out, "the paced run");
    assert!(started.elapsed().as_secs_f64() >= 6.0);
    let starts = counted_starts(&env, "1");
    assert!(starts.len() >= 7, "{starts:?}");
    // Second-resolution times: 1 s apart reads 0 to 2 s apart, and two
    // steps at least 1 s.
    for w in starts.windows(3).take(5) {
        assert!(w[2] - w[0] >= 1, "{starts:?}");
    }
    assert!(starts[6] >= 5, "{starts:?}");

    let started = std::time::Instant::now();
    let out = tiny_check(&env, "paced", "8").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // While it waits for its trials, a paced run reads the control about
    // once a second (docs/method.md, "The control as a covariate"): the
    // gauge's eight readings before it, then more through its 6 s.
    let readings: i64 = rusqlite::Connection::open(env.db())
        .unwrap()
        .query_row("SELECT COUNT(*) FROM gauge WHERE run_id = 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(readings >= 8 + 3, "{readings} control readings");
    assert!(err.contains("paced over 6 s"), "{err}");
    assert!(started.elapsed().as_secs_f64() >= 6.0);
    assert!(counted_starts(&env, "2")[6] >= 5);

    // A budget plans its own trials: --span with it is bad input.
    for args in [
        &["run", "syscall.null", "--span", "6s", "--budget", "30s"][..],
        &["study", "--quick", "--span", "6s"][..],
        &["run", "syscall.null", "--span", "soon"][..],
    ] {
        let out = env.cmd(args).output().unwrap();
        common::assert_exit(&out, 2);
    }
}

/// A paced baseline under the label `base`, as a nightly lab takes one:
/// a 3 s span of five trials (docs/method.md, "Paced trials").
fn paced_base(env: &Env) {
    // Five counted trials: a run's own trial spread is read from five or
    // more (`noise::MIN_TRIAL_SPREAD`), and a 3 s span alone asks for four.
    env.tiny_run(&["syscall.null"], "1", "base")
        .args(["--span", "3s", "--min-trials", "5", "--max-trials", "5"])
        .assert()
        .success();
}

/// `check --format json`'s document, or the test fails with its stdout.
fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stdout));
    })
}

/// With paced runs under the baseline's label, each with the control's
/// level through it, a case is set against the line through them
/// (docs/method.md, "The control as a covariate"): JSON says so with the
/// runs' spread before and after the line, and a case many times slower
/// is regressed.
#[test]
fn six_runs_of_a_label_set_a_case_against_the_controls_line() {
    let _alone = alone();
    let env = Env::new();
    // Eight: a run or two that jumped within itself more than twice the
    // label's typical spread is left out of the line (docs/method.md,
    // "Where the line does not apply"), and six must remain.
    for _ in 0..8 {
        paced_base(&env);
    }
    // Two runs now (`--repeat 2`): their mean is set against the line,
    // and neither counts among the label's runs.
    let mut c = tiny_check(&env, "base", "4");
    c.args(["--format", "json", "--repeat", "2"]);
    if let Some((k, v)) = SLOW {
        c.env(k, v);
    }
    let mut out = c.output().unwrap();
    let mut v = json(&out);
    // Tests running beside this one can make the runs now jump within
    // themselves more than the label's did; the line then rightly stands
    // aside (the next test). Once more, then the line must decide.
    for _ in 0..2 {
        let n = &v["cases"][0]["machine"]["noisier"];
        if n.is_null() {
            break;
        }
        eprintln!("the machine was noisier than the label's runs: checking once more");
        // A baseline that jumped itself stays so: a new one first.
        if n["baseline_pct"].as_f64() > n["bound_pct"].as_f64() {
            paced_base(&env);
        }
        out = c.output().unwrap();
        v = json(&out);
    }
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(2), "{v}");
    let line = &v["cases"][0]["machine"]["covariate"];
    assert!(
        line["runs"].as_u64().is_some_and(|n| (6..=8).contains(&n)),
        "{v}"
    );
    assert_eq!(line["now_runs"], 2, "{v}");
    // The p is the line's: no test between two runs is named.
    assert!(v["cases"][0]["test"].is_null(), "{v}");
    // How many runs now would see the threshold: a count, or null where
    // the line itself is too uncertain.
    let n = line
        .get("repeat_for_threshold")
        .unwrap_or_else(|| panic!("{v}"));
    assert!(
        n.is_null() || n.as_u64().is_some_and(|n| (1..=20).contains(&n)),
        "{v}"
    );
    for k in ["slope", "residual_pct", "plain_pct", "worse_pct"] {
        assert!(line[k].as_f64().is_some_and(f64::is_finite), "{k}: {v}");
    }
    assert!(line["worse_pct"].as_f64().is_some_and(|w| w > 100.0), "{v}");
    assert_eq!(out.status.code(), Some(1), "{v}");
}

/// Runs now whose control jumps within them far more than the label's
/// runs did (`KSCALE_TEST_GAUGE_JUMP`, a test-only knob: every other
/// reading's CPU loop runs three times over) are outside the regime the
/// line was fitted on: the case, many times slower, cannot be told
/// (exit 125), and the line is not used (docs/method.md, "Where the line
/// does not apply").
#[test]
fn runs_noisier_than_the_labels_are_not_set_against_its_line() {
    let _alone = alone();
    let env = Env::new();
    for _ in 0..6 {
        paced_base(&env);
    }
    let mut c = tiny_check(&env, "base", "4");
    c.args(["--format", "json"])
        .env("KSCALE_TEST_GAUGE_JUMP", "3");
    if let Some((k, v)) = SLOW {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let v = json(&out);
    let m = &v["cases"][0]["machine"];
    assert!(m["covariate"].is_null(), "{v}");
    let n = &m["noisier"];
    let (now, label, bound) = (
        n["now_pct"].as_f64().unwrap_or_else(|| panic!("{v}")),
        n["label_pct"].as_f64().unwrap_or_else(|| panic!("{v}")),
        n["bound_pct"].as_f64().unwrap_or_else(|| panic!("{v}")),
    );
    assert!(
        now > bound && bound >= 5.0 && bound >= 2.0 * label - 1e-9,
        "{v}"
    );
    assert_eq!(v["cases"][0]["verdict"], "cannot_tell", "{v}");
    assert_eq!(out.status.code(), Some(125), "{v}");
    // The terminal says why, in one line.
    let mut c = tiny_check(&env, "base", "4");
    c.env("KSCALE_TEST_GAUGE_JUMP", "3");
    let out = c.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("the machine is noisier now than in the baseline label's runs"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(125), "{text}");
}

/// Runs now whose case's own trials jump within them far more than the
/// label's runs' trials did (`KSCALE_TEST_TRIAL_JUMP`, a test-only knob:
/// every other trial stalls to ten times its length, beyond any
/// spread a machine busy with other tests gives the label's runs) are outside
/// the regime the line was fitted on, even where the control between the
/// trials read nothing: the case cannot be told (exit 125), and the
/// output says whose spread showed it.
#[test]
fn runs_whose_trials_jump_are_not_set_against_the_line() {
    let _alone = alone();
    let env = Env::new();
    for _ in 0..6 {
        paced_base(&env);
    }
    let mut c = tiny_check(&env, "base", "8");
    c.args(["--format", "json", "--repeat", "2"])
        .env("KSCALE_TEST_TRIAL_JUMP", "10");
    let out = c.output().unwrap();
    let v = json(&out);
    let m = &v["cases"][0]["machine"];
    assert!(m["covariate"].is_null(), "{v}");
    let n = &m["noisier"];
    assert_eq!(n["by"], "trials", "{v}");
    let (now, bound) = (
        n["now_pct"].as_f64().unwrap_or_else(|| panic!("{v}")),
        n["bound_pct"].as_f64().unwrap_or_else(|| panic!("{v}")),
    );
    assert!(now > bound && bound >= 5.0, "{v}");
    assert_eq!(v["cases"][0]["verdict"], "cannot_tell", "{v}");
    assert_eq!(out.status.code(), Some(125), "{v}");
    let mut c = tiny_check(&env, "base", "8");
    c.args(["--repeat", "2"])
        .env("KSCALE_TEST_TRIAL_JUMP", "10");
    let out = c.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("the case's own trials spread"), "{text}");
    assert_eq!(out.status.code(), Some(125), "{text}");
}

/// A regression is measured again alone: the second look's run holds the
/// regressed case and none of the cases that were fine.
#[test]
fn only_the_regressed_case_is_measured_again() {
    let _alone = alone();
    let env = Env::new();
    // TARGET's case with a second one beside it, which the delay leaves be.
    let targets: Vec<&str> = std::iter::once("syscall.read")
        .chain(TARGET.iter().copied())
        .collect();
    env.cmd(&["run", "--label", "base"])
        .args(&targets)
        .assert()
        .success();
    let out = env
        .cmd(&[
            "check",
            "--baseline",
            "base",
            "--threshold",
            "50%",
            "--format",
            "json",
        ])
        .args(&targets)
        .env("KSCALE_TEST_DELAY_NS", "20000")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2, "{v}");
    let slowed = cases
        .iter()
        .find(|c| c["workload"] == "syscall.null")
        .unwrap();
    assert_eq!(slowed["regressed"], true, "{v}");
    let again = slowed["confirmation"]["runs"][0].as_i64().unwrap();
    let other = cases
        .iter()
        .find(|c| c["workload"] == "syscall.read")
        .unwrap();
    assert!(other["confirmation"].is_null(), "{v}");
    let export = env
        .cmd(&["export", &again.to_string(), "--format", "json"])
        .output()
        .unwrap();
    let e: serde_json::Value = serde_json::from_slice(&export.stdout).unwrap();
    let measured: std::collections::BTreeSet<&str> = e["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["workload"].as_str())
        .collect();
    assert_eq!(
        measured.into_iter().collect::<Vec<_>>(),
        ["syscall.null"],
        "{e}"
    );
}
