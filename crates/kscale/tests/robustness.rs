//! Commands that fail cleanly: a reader that goes away, a directory a run
//! cannot use, a run in which every case failed, and the rule that a test
//! skipped for want of something CI installs fails under CI.

mod common;
use common::Env;
use std::process::{Command, Stdio};

/// Runs `kscale ARGS` with its standard output a pipe whose reader has
/// already gone, so that its first write fails with EPIPE.
fn with_closed_stdout(env: &Env, args: &[&str]) -> std::process::Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let mut c = Command::new(common::bin());
    c.env_remove("KSCALE_DB")
        .env("NO_COLOR", "1")
        .current_dir(env.path())
        .arg("--db")
        .arg(env.db())
        .args(args)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped());
    c.output().expect("run kscale")
}

fn quick_run(env: &Env, label: &str) {
    let out = env
        .tiny_run(&["syscall.null"], "1,all", label)
        .output()
        .unwrap();
    common::assert_exit(&out, 0);
}

#[test]
fn printing_to_a_closed_pipe_exits_quietly() {
    let env = Env::new();
    quick_run(&env, "a");
    quick_run(&env, "b");
    let report = env.path().join("r.html");
    let report = report.to_str().unwrap();
    let commands: &[&[&str]] = &[
        &["list"],
        &["list", "--format", "json"],
        &["results"],
        &["show"],
        &["show", "a", "--format", "md"],
        &["show", "a", "--format", "csv"],
        &["compare", "a", "b"],
        &["compare", "a", "b", "--format", "json"],
        &["scale", "a"],
        &["scale", "a", "--format", "csv"],
        &["export", "a", "--format", "json"],
        &["export", "a", "--format", "csv"],
        &["report", "a", "b", "-o", report],
        &[&["run"], common::TINY_NULL].concat(),
    ];
    for args in commands {
        let out = with_closed_stdout(&env, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "kscale {args:?}: {:?}\n{stderr}",
            out.status
        );
        assert!(
            !stderr.contains("panicked") && !stderr.to_lowercase().contains("broken pipe"),
            "kscale {args:?}:\n{stderr}"
        );
    }
}

#[test]
fn unusable_dirs_are_refused_before_a_run_exists() {
    let env = Env::new();
    let file = env.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let missing = env.path().join("missing");
    for dir in [
        "/proc",
        "/sys",
        file.to_str().unwrap(),
        missing.to_str().unwrap(),
    ] {
        let out = env
            .cmd(&[
                "run",
                "syscall.null",
                "--quick",
                "--no-progress",
                "--dir",
                dir,
            ])
            .output()
            .unwrap();
        common::assert_refused(&out, dir, &format!("--dir {dir}"));
        assert!(!env.db().exists(), "--dir {dir} created a database");
    }
    // Nothing of the probe is left where it succeeded.
    let ok = env.path().join("ok");
    std::fs::create_dir(&ok).unwrap();
    env.tiny_run(&["syscall.null", "--dir", ok.to_str().unwrap()], "1", "ok")
        .assert()
        .success();
    assert_eq!(std::fs::read_dir(&ok).unwrap().count(), 0);
}

fn status(env: &Env, run: &str) -> String {
    env.export(run)["run"]["status"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn a_run_in_which_every_case_failed_is_failed() {
    let env = Env::new();
    let out = env
        .tiny_run(&["syscall.null"], "1,all", "all-bad")
        .env("KSCALE_FAULT", "crash:syscall.null")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("every case of run 1 failed"), "{stderr}");
    assert_eq!(status(&env, "all-bad"), "failed");
    let results = env.cmd(&["results"]).output().unwrap();
    assert!(String::from_utf8_lossy(&results.stdout).contains("failed"));

    // Partly failed: complete, the failures listed with the results.
    let out = env
        .tiny_run(&["syscall.null", "syscall.read"], "1", "half-bad")
        .env("KSCALE_FAULT", "crash:syscall.read")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(status(&env, "half-bad"), "complete");
    assert!(String::from_utf8_lossy(&out.stdout).contains("failed: Simple read"));
}

/// Not a test of its own: run by `skips_fail_under_ci` in a child process.
#[test]
#[ignore]
fn skip_helper() {
    common::skip("the thing this helper pretends to need");
}

#[test]
fn skips_fail_under_ci() {
    let me = std::env::current_exe().unwrap();
    let run = |ci: Option<&str>| {
        let mut c = Command::new(&me);
        c.args(["--exact", "skip_helper", "--ignored", "--nocapture"]);
        match ci {
            Some(v) => c.env("CI", v),
            None => c.env_remove("CI"),
        };
        c.output().unwrap()
    };
    let local = run(None);
    assert!(local.status.success());
    assert!(String::from_utf8_lossy(&local.stderr).contains("SKIPPED: the thing"));
    let ci = run(Some("true"));
    assert!(!ci.status.success(), "a skip passed under CI");
    assert!(String::from_utf8_lossy(&ci.stderr).contains("skipped under CI"));
}
