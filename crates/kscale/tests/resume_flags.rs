//! `run --resume` repeats the stored run's options: every other run flag is
//! refused with one line naming it and exit status 2 (a flag accepted and
//! dropped would measure something other than what the user asked for),
//! except the two the stored run does not hold. The flags are read from
//! `run --help`, so a new flag is covered without being named here.

mod common;
use common::{assert_refused, Env};

/// The run flags `--resume` accepts (engine::args::GIVEN_WITH_RESUME).
const GIVEN_WITH_RESUME: &[&str] = &["--no-progress", "--token"];

/// Every flag of `run --help` with a value it accepts: the first of its
/// possible values, else its default, else `1`.
fn run_flags() -> Vec<(String, Option<String>)> {
    let out = common::kscale()
        .args(["run", "--help"])
        .output()
        .expect("run --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut flags: Vec<(String, Option<String>)> = Vec::new();
    for line in help.lines() {
        // An option's line: `      --name <VALUE>` or `  -h, --help`;
        // its description is indented further.
        let opt = line
            .strip_prefix("      --")
            .or_else(|| line.get(6..).filter(|_| line.starts_with("  -")));
        if let Some(rest) = opt {
            let rest = rest.trim_start_matches("--");
            let (name, value) = match rest.split_once(' ') {
                Some((n, v)) => (n, Some(v)),
                None => (rest, None),
            };
            flags.push((format!("--{name}"), value.map(|_| "1".to_string())));
            continue;
        }
        let text = line.trim();
        let hint = text
            .strip_prefix("[possible values: ")
            .or_else(|| text.strip_prefix("[default: "))
            .map(|v| v.trim_end_matches(']').split(", ").next().unwrap_or("1"));
        if let (Some(v), Some((_, Some(value)))) = (hint, flags.last_mut()) {
            if value == "1" {
                *value = v.to_string();
            }
        }
    }
    flags
}

#[test]
fn resume_refuses_every_run_flag_it_does_not_restore_from_the_flag() {
    let env = Env::new();
    env.tiny_run(&["syscall.null"], "1", "a").assert().success();
    let flags = run_flags();
    let names: Vec<&str> = flags.iter().map(|(n, _)| n.as_str()).collect();
    // The ones issue #31 found dropped, and the ones typed by hand before.
    for f in [
        "--budget",
        "--dir",
        "--cpu-mode",
        "--cpu-order",
        "--ci",
        "--label",
        "--param",
    ] {
        assert!(names.contains(&f), "{f} not found in run --help: {names:?}");
    }
    let mut refused = 0;
    for (flag, value) in &flags {
        if ["--resume", "--db", "--help", "--version"].contains(&flag.as_str())
            || GIVEN_WITH_RESUME.contains(&flag.as_str())
        {
            continue;
        }
        let mut args = vec!["run", "--resume", "a", flag.as_str()];
        args.extend(value.as_deref());
        let out = env.cmd(&args).output().expect("run");
        assert_refused(&out, "cannot be used with", &format!("{args:?}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("'{flag}")),
            "{args:?}: the error does not name {flag}: {err}"
        );
        refused += 1;
    }
    assert!(refused >= 20, "only {refused} flags refused");
    // A target is a run flag too.
    let out = env
        .cmd(&["run", "--resume", "a", "syscall.null"])
        .output()
        .expect("run");
    assert_refused(&out, "'[TARGET]...'", "run --resume a syscall.null");
}

#[test]
fn resume_accepts_the_flags_the_stored_run_does_not_hold() {
    let env = Env::new();
    env.tiny_run(&["syscall.null"], "1", "a").assert().success();
    // Past the flags' check to the run itself, which has nothing left.
    let out = env
        .cmd(&["run", "--resume", "a", "--no-progress", "--token", "t"])
        .output()
        .expect("run");
    assert_refused(
        &out,
        "already complete",
        "run --resume a --no-progress --token t",
    );
}
