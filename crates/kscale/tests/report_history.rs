//! `kscale report --history` through the binary (docs/history.md): the
//! 30-run series of tests/history.rs, 10 % slower from run 20, drawn as one
//! point a run whose value and interval are the ones `kscale history`
//! prints, with one change marker at the run `kscale changes` names; laid
//! out whole by headless Chromium; and its bad input refused in one line.

#[path = "../../kscale-report/tests/common/browser.rs"]
mod browser;
mod common;
#[path = "common/series.rs"]
mod series;

use common::kscale;
use serde_json::Value;
use series::{import_series, RUNS, STEP_AT};

/// `name="…"` of every element that has it, in document order.
fn attrs(html: &str, name: &str) -> Vec<String> {
    let key = format!(" {name}=\"");
    html.match_indices(&key)
        .filter_map(|(i, _)| html[i + key.len()..].split('"').next())
        .map(String::from)
        .collect()
}

#[test]
fn the_history_report_marks_the_step_at_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("k.db").display().to_string();
    import_series(&db, dir.path(), true);
    let html_path = dir.path().join("history.html");
    let out = kscale()
        .args(["--db", &db, "report", "--history", "syscall.null"])
        .args(["--cpus", "1", "-o"])
        .arg(&html_path)
        .output()
        .unwrap();
    common::assert_exit(&out, 0);
    let html = std::fs::read_to_string(&html_path).unwrap();

    // What history prints, run by run, and the change changes finds.
    let out = kscale()
        .args(["--db", &db, "history", "syscall.null", "--format", "json"])
        .output()
        .unwrap();
    let history: Value = serde_json::from_slice(&out.stdout).unwrap();
    let points = history[0]["points"].as_array().expect("one series");
    assert_eq!(points.len(), RUNS);
    let out = kscale()
        .args(["--db", &db, "changes", "syscall.null", "--format", "json"])
        .output()
        .unwrap();
    let changes: Value = serde_json::from_slice(&out.stdout).unwrap();
    let found = changes["changes"].as_array().expect("changes");
    assert_eq!(found.len(), 1, "{changes:#}");
    let index = found[0]["index"].as_u64().unwrap() as usize;
    assert!(index.abs_diff(STEP_AT) <= 1, "{changes:#}");
    let run = found[0]["run"].as_i64().unwrap();
    assert_eq!(points[index]["run"]["id"].as_i64(), Some(run));

    // One chart: a point a run, in the series' order, each with the value
    // and interval history prints; one marker, at the run changes names.
    assert_eq!(
        html.matches("<svg class=\"chart\" data-kind=\"history\"")
            .count(),
        1
    );
    assert_eq!(html.matches("<g class=\"point\">").count(), RUNS);
    let ids: Vec<i64> = points
        .iter()
        .map(|p| p["run"]["id"].as_i64().unwrap())
        .collect();
    let drawn: Vec<i64> = attrs(&html, "data-run")
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(drawn, ids);
    let num = |v: &str| v.parse::<f64>().unwrap();
    for (key, field) in [
        ("data-value", "value"),
        ("data-ci-low", "ci_low"),
        ("data-ci-high", "ci_high"),
    ] {
        let shown: Vec<f64> = attrs(&html, key).iter().map(|v| num(v)).collect();
        let printed: Vec<f64> = points.iter().map(|p| p[field].as_f64().unwrap()).collect();
        assert_eq!(shown, printed, "{key}");
    }
    assert_eq!(attrs(&html, "data-change-run"), vec![run.to_string()]);
    assert_eq!(attrs(&html, "data-change-index"), vec![index.to_string()]);
    // The table under the chart names it, with its size.
    assert!(html.contains(&format!("<td>#{run}</td>")));
    assert!(html.contains(&format!("<td>{} of {RUNS}</td>", index + 1)));
    let pct = found[0]["change_pct"].as_f64().unwrap();
    assert!((5.0..15.0).contains(&pct));
    assert!(html.contains(&format!(
        "<td class=\"bad\">{}</td>",
        kscale_report::format::signed_pct(pct)
    )));
    assert!(html.contains("runs by start time, 1 to 30"));
    assert!(html.contains("latency (µs, lower is better)"));

    // Headless Chromium draws the one chart whole, its 30 points each with
    // its interval to scale.
    let Some(dom) = browser::dom(&html, "report-history") else {
        return;
    };
    browser::assert_laid_out_whole(&dom, 1, RUNS);
}

/// Bad input: one line naming the bad value and what is accepted, status 2.
#[test]
fn bad_report_history_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("k.db").display().to_string();
    import_series(&db, dir.path(), false);
    for (args, want) in [
        (
            vec!["report", "latest", "--cpus", "1", "-o", "r.html"],
            "--cpus selects the runs of a history",
        ),
        (
            vec!["report", "--history", "nosuchfamily", "-o", "r.html"],
            "unknown target `nosuchfamily`",
        ),
        (
            vec!["report", "latest", "--history", "syscall", "-o", "r.html"],
            "cannot be used with",
        ),
        (
            vec![
                "report",
                "--history",
                "syscall.null",
                "--since",
                "May",
                "-o",
                "r.html",
            ],
            "bad --since `May`",
        ),
        (
            vec!["report", "--history", "mem.rd", "-o", "r.html"],
            "no stored run has a measured case of mem.rd",
        ),
    ] {
        let out = kscale()
            .current_dir(dir.path())
            .args(["--db", &db])
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!dir.path().join("r.html").exists(), "{args:?}");
    }
}
