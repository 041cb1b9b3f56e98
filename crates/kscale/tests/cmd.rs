//! The cmd family on the real binary: the quick set, a command hidden from
//! PATH (skipped with its reason, out of the geometric mean, compared on the
//! common rows), and a command that fails (its case fails with its stderr).

mod common;
use common::{skip, Env};
use std::path::{Path, PathBuf};

/// Short trials: cmd's figures are not what these tests check.
const FAST: &[&str] = &[
    "--min-trials",
    "2",
    "--max-trials",
    "2",
    "--trial-time",
    "0.05",
    "--no-progress",
];

/// Where a program is on this PATH.
fn which(p: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(p))
        .find(|f| f.is_file())
}

/// The programs a test needs, or a skip (a failure under CI) naming the
/// first missing one.
fn have(programs: &[&str]) -> bool {
    match programs.iter().find(|p| which(p).is_none()) {
        Some(p) => {
            skip(&format!("{p} is not installed"));
            false
        }
        None => true,
    }
}

/// A directory to use as the whole PATH: a link to every program on the
/// current PATH except `hide`, plus `extra` scripts (name, body).
fn path_without(root: &Path, hide: &str, extra: &[(&str, &str)]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, body) in extra {
        let p = bin.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            if name == hide || bin.join(&name).exists() {
                continue;
            }
            let _ = std::os::unix::fs::symlink(e.path(), bin.join(&name));
        }
    }
    bin
}

/// The export's primary rows of a run, by workload.
fn rows(env: &Env, run: &str) -> Vec<serde_json::Value> {
    env.primary(run)
}

fn row<'a>(rows: &'a [serde_json::Value], workload: &str) -> &'a serde_json::Value {
    rows.iter()
        .find(|r| r["workload"] == workload)
        .unwrap_or_else(|| panic!("no {workload} in {rows:?}"))
}

/// The figure of the table row whose label starts with `label`.
fn table_figure(text: &str, label: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no `{label}` row in\n{text}"));
    line.split_whitespace()
        .find_map(|w| w.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no figure in `{line}`"))
}

#[test]
fn quick_set_runs_and_leaves_nothing() {
    let env = Env::new();
    let scratch = env.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let mut args = vec!["run", "cmd", "--quick", "--dir", scratch.to_str().unwrap()];
    args.extend(FAST);
    let out = env.cmd(&args).output().unwrap();
    let text = common::stdout_of_success(&out, "run cmd");
    assert!(text.contains("Command line execution time (cmd)"), "{text}");
    assert!(text.contains("Geometric mean"), "{text}");
    let rows = rows(&env, "1");
    assert!((8..=12).contains(&rows.len()), "{} cases", rows.len());
    for r in &rows {
        match r["status"].as_str() {
            Some("done") => assert!(r["mean"].as_f64().is_some_and(|m| m > 0.0), "{r}"),
            // A quick-set command missing here is the machine's, not kscale's.
            Some("skipped") => skip(&format!(
                "{}: {}",
                r["workload"],
                r["error"].as_str().unwrap_or("")
            )),
            _ => panic!("{} did not run: {}", r["workload"], r["error"]),
        }
    }
    let left: Vec<_> = std::fs::read_dir(&scratch).unwrap().flatten().collect();
    assert!(left.is_empty(), "left in --dir: {left:?}");
}

/// `wc` hidden from PATH: its case is skipped with the reason and the
/// package, the run completes, the geometric mean covers the other two
/// rows; compared with a run that had `wc`, the common rows are compared
/// and `wc` is listed as skipped in the second.
#[test]
fn a_missing_command_is_skipped_and_left_out_of_the_mean() {
    if !have(&["wc", "cat", "grep"]) {
        return;
    }
    let env = Env::new();
    let targets = ["cmd.cat.large", "cmd.grep.large", "cmd.wc.all"];
    let mut args = vec!["run", "--label", "with-wc"];
    args.extend(targets);
    args.extend(FAST);
    let out = env.cmd(&args).output().unwrap();
    common::assert_exit(&out, 0);

    let bin = path_without(env.path(), "wc", &[]);
    let mut args = vec!["run", "--label", "without-wc"];
    args.extend(targets);
    args.extend(FAST);
    let out = env.cmd(&args).env("PATH", &bin).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}\n{err}");
    let reason = "wc: not installed (Debian package coreutils)";
    assert!(
        err.contains(&format!("cmd.wc.all [cpus all] skipped: {reason}")),
        "{err}"
    );
    assert!(text.contains("skipped"), "{text}");
    assert!(text.contains(reason), "{text}");

    let rows2 = rows(&env, "2");
    let wc = row(&rows2, "cmd.wc.all");
    assert_eq!(wc["status"], "skipped");
    assert_eq!(wc["error"], reason);
    assert!(wc["mean"].is_null(), "{wc}");
    // The family's geometric mean is over cat and grep only.
    let means: Vec<f64> = ["cmd.cat.large", "cmd.grep.large"]
        .iter()
        .map(|w| row(&rows2, w)["mean"].as_f64().unwrap())
        .collect();
    let expect = (means[0] * means[1]).sqrt();
    let shown = table_figure(&text, "Geometric mean");
    assert!(
        (shown - expect).abs() <= expect * 0.001 + 1.0,
        "geometric mean {shown}, expected {expect} from {means:?}\n{text}"
    );

    // Compared with the run that had wc: two common rows and their mean;
    // wc is listed as skipped in the second system.
    let out = env.cmd(&["compare", "1", "2"]).output().unwrap();
    let cmp = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{cmp}");
    assert!(cmp.contains("Geometric mean"), "{cmp}");
    assert!(
        cmp.contains(&format!("skipped in without-wc: {reason}")),
        "{cmp}"
    );
    let common = cmp
        .lines()
        .filter(|l| l.contains("cat - display") || l.contains("grep - search"))
        .count();
    assert_eq!(common, 2, "{cmp}");
}

/// A command that exits non-zero fails its case with its stderr's first
/// line; the run's other cases stand. So under both ways of starting it:
/// posix_spawn's file actions redirect stderr, and enter the scratch
/// directory, as the forked child does.
#[test]
fn a_failing_command_fails_its_case_with_its_stderr() {
    if !have(&["cat", "sh"]) {
        return;
    }
    for spawn in ["spawn=fork", "spawn=posix_spawn"] {
        let env = Env::new();
        let fake = "#!/bin/sh\necho 'wc: simulated failure for kscale' >&2\necho 'second line' >&2\nexit 3\n";
        let bin = path_without(env.path(), "wc", &[("wc", fake)]);
        let mut args = vec!["run", "cmd.wc.all", "cmd.cat.large", "--param", spawn];
        args.extend(FAST);
        let out = env.cmd(&args).env("PATH", &bin).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{spawn}: {err}");
        let rows = rows(&env, "1");
        let wc = row(&rows, "cmd.wc.all");
        assert_eq!(wc["status"], "failed", "{spawn}: {wc}");
        let e = wc["error"].as_str().unwrap_or("");
        assert!(
            e.contains("exited with status 3") && e.ends_with("wc: simulated failure for kscale"),
            "{spawn}: {e}"
        );
        let cat = row(&rows, "cmd.cat.large");
        assert_eq!(cat["status"], "done", "{spawn}");
        assert_eq!(
            cat["params"]["spawn"],
            spawn.trim_start_matches("spawn="),
            "{cat}"
        );
    }
}

/// `list` names every row of the table, from the first to the last.
#[test]
fn list_names_every_row() {
    let out = common::kscale()
        .args(["list", "--family", "cmd", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let all: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(all.len() >= 114, "{}", all.len());
    assert!(all.iter().any(|w| w["workload"] == "cmd.ar.create"));
    assert!(all.iter().any(|w| w["workload"] == "cmd.yacc.generate"));
}
