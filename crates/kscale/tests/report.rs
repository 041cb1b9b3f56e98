//! The HTML report as a person sees it: self-contained, and every chart laid
//! out by a real browser (headless Chromium) when one is installed.

mod common;
use common::Env;
use std::process::Command;

fn chromium() -> Option<String> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find_map(|b| {
            Command::new("which")
                .arg(b)
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|_| b.to_string())
        })
}

fn attr(html: &str, name: &str) -> Option<usize> {
    let key = format!("{name}=\"");
    let start = html.find(&key)? + key.len();
    html[start..].split('"').next()?.parse().ok()
}

fn check_report(env: &Env, file: &std::path::Path, min_charts: usize) {
    let html = std::fs::read_to_string(file).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    // Self-contained: nothing to fetch.
    for bad in ["<script src", "<link", "@import", "url(http", "src=\"http"] {
        assert!(
            !html.contains(bad),
            "report references external resources: {bad}"
        );
    }
    let charts = html.matches("<svg class=\"chart\"").count();
    assert!(charts >= min_charts, "only {charts} charts");
    assert_eq!(attr(&html, "data-charts"), Some(charts));

    let Some(browser) = chromium() else {
        // CI installs Chromium (.ci/run), so there a missing browser is a failure.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have chromium for the report test"
        );
        println!("SKIPPED browser check: no chromium on this machine (apt-get install chromium)");
        return;
    };
    let profile = env.path().join("chromium-profile");
    let out = Command::new("timeout")
        .arg("120")
        .arg(&browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", file.display()))
        .output()
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && !dom.is_empty(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        attr(&dom, "data-charts-rendered"),
        Some(charts),
        "not every chart was laid out by {browser}"
    );
    // Attributes, not the script's selector text, which mentions 0x0 too.
    assert!(
        !dom.contains(" data-rendered=\"0x0\""),
        "a chart has no size"
    );
    assert_eq!(dom.matches(" data-rendered=\"").count(), charts);
}

#[test]
fn report_renders_every_chart() {
    let env = Env::new();
    let run = |label: &str, cpus: &str| {
        env.cmd(&[
            "run",
            "syscall.null",
            "syscall.pipe",
            "ctx",
            "mem.frd",
            "--param",
            "procs=2,4",
            "--param",
            "size=4k,1m",
            "--quick",
            "--trial-time",
            "0.02",
            "--no-progress",
            "--label",
            label,
            "--cpus",
            cpus,
        ])
        .assert()
        .success();
    };
    run("a", "1,all");
    run("b", "1,all");
    let file = env.path().join("r.html");
    env.cmd(&["report", "a", "b", "-o", file.to_str().unwrap()])
        .assert()
        .success();
    // Comparison bars (2 families at least), scalability lines per run, sweeps (ctx, mem).
    check_report(&env, &file, 6);
}

#[test]
fn study_quick_writes_the_report() {
    let env = Env::new();
    let out = env
        .cmd(&[
            "study",
            "--quick",
            "--suite",
            "quick",
            "--trial-time",
            "0.02",
            "--no-progress",
            "--label",
            "st",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("== Direct results") && text.contains("== Scalability"),
        "{text}"
    );
    let file = env.path().join("kscale-study-st.html");
    assert!(text.contains("kscale-study-st.html"), "{text}");
    check_report(&env, &file, 3);
    let j = env.export("st");
    let cpus: std::collections::BTreeSet<&str> = j["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cpus"].as_str().unwrap())
        .collect();
    assert_eq!(cpus.into_iter().collect::<Vec<_>>(), ["1", "all"]);
}
