//! The HTML report as a person sees it: self-contained, every value shown as
//! text, and every chart laid out whole by a real browser (headless
//! Chromium): charts rendered, no text outside a chart, no mark outside its
//! plot, every measured point's interval drawn to scale, and the chart
//! geometry and interval checks of the SVG property tests on every chart of
//! a real report.

#[path = "../../kscale-report/tests/common/browser.rs"]
mod browser;
mod common;
#[path = "../../kscale-report/tests/common/svgcheck.rs"]
mod svgcheck;

use browser::{attr, attr_num};
use common::Env;
use std::path::Path;

/// The page as Chromium builds it from the report `file`, the same
/// browser run the report crate's own tests use.
fn dom(file: &Path) -> Option<String> {
    let html = std::fs::read_to_string(file).expect("read the report");
    // Tests run in parallel in one process: the browser's scratch
    // directory is named after the report's own (unique) directory.
    let name = file
        .parent()
        .and_then(|d| d.file_name())
        .map_or_else(|| "kscale".into(), |n| n.to_string_lossy().into_owned());
    browser::dom(&html, &name)
}

/// Every chart of the page, as markup.
fn charts(html: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find("<svg class=\"chart\"") {
        let end = rest[i..].find("</svg>").expect("closed svg") + i + 6;
        out.push(&rest[i..end]);
        rest = &rest[end..];
    }
    out
}

fn check_report(file: &Path, min_charts: usize) -> String {
    let html = std::fs::read_to_string(file).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    // Self-contained: nothing to fetch.
    for bad in ["<script src", "<link", "@import", "url(http", "src=\"http"] {
        assert!(
            !html.contains(bad),
            "report references external resources: {bad}"
        );
    }
    let svgs = charts(&html);
    assert!(svgs.len() >= min_charts, "only {} charts", svgs.len());
    assert_eq!(attr_num(&html, "data-charts"), Some(svgs.len()));
    for svg in &svgs {
        let bad = svgcheck::check(svg, None);
        assert!(bad.is_empty(), "{bad:#?}\n{svg}");
    }
    let Some(dom) = dom(file) else {
        return html;
    };
    assert_eq!(
        attr_num(&dom, "data-charts-rendered"),
        Some(svgs.len()),
        "not every chart was laid out"
    );
    // Attributes, not the script's selector text, which mentions 0x0 too.
    assert!(
        !dom.contains(" data-rendered=\"0x0\""),
        "a chart has no size"
    );
    assert_eq!(dom.matches(" data-rendered=\"").count(), svgs.len());
    assert_eq!(
        attr_num(&dom, "data-geometry-problems"),
        Some(0),
        "the browser drew text outside a chart or a mark outside its plot: {:?}",
        attr(&dom, "data-geometry-report")
    );
    // Every measured point drawn with its interval, as the browser laid
    // it out.
    let points = html.matches("<g class=\"point\">").count();
    assert!(
        points > 0 || svgs.is_empty(),
        "charts without a measured point"
    );
    assert_eq!(attr_num(&dom, "data-points"), Some(points));
    assert_eq!(
        attr_num(&dom, "data-interval-problems"),
        Some(0),
        "the browser drew an interval wrong: {:?}",
        attr(&dom, "data-interval-report")
    );
    html
}

#[test]
fn report_renders_every_chart() {
    let env = Env::new();
    let run = |label: &str, cpus: &str| {
        let what = [
            "syscall.null",
            "syscall.pipe",
            "ctx",
            "mem.frd",
            "--param",
            "procs=2,4",
            "--param",
            "size=4k,1m",
        ];
        env.tiny_run(&what, cpus, label).assert().success();
    };
    run("a", "1,all");
    run("b", "1,all");
    let file = env.path().join("r.html");
    env.cmd(&["report", "a", "b", "-o", file.to_str().unwrap()])
        .assert()
        .success();
    // Comparison bars (2 families at least), scalability lines per run,
    // sweeps (ctx, mem).
    let html = check_report(&file, 6);
    // The sweep charts name their axes from the definitions: the param and
    // the metric's unit.
    assert!(html.contains(">procs</text>"), "no procs axis");
    assert!(html.contains("latency (µs)"), "no unit on the y axis");
    assert!(html.contains("size (MB)"), "sizes not in MB");
}

/// The browser check sees what it is meant to: a chart pushed out of shape
/// is reported.
#[test]
fn browser_check_reports_broken_geometry() {
    let env = Env::new();
    env.cmd(&[
        "run",
        "ctx",
        "--param",
        "procs=2,4",
        "--param",
        "size=0",
        "--quick",
        "--trial-time",
        "0.02",
        "--no-progress",
        "--cpus",
        "1",
        "--label",
        "g",
    ])
    .assert()
    .success();
    let file = env.path().join("g.html");
    env.cmd(&["report", "g", "-o", file.to_str().unwrap()])
        .assert()
        .success();
    let html = std::fs::read_to_string(&file).unwrap();
    let i = html.find("<circle class=\"mark\" cx=\"").expect("a marker") + 26;
    let broken = format!("{}-500{}", &html[..i], &html[i..]);
    let broken = broken.replacen(
        "<rect class=\"plot\"",
        "<text x=\"-200\" y=\"20\">out</text><rect class=\"plot\"",
        1,
    );
    let bad = env.path().join("bad.html");
    std::fs::write(&bad, broken).unwrap();
    let Some(dom) = dom(&bad) else { return };
    let problems = attr_num(&dom, "data-geometry-problems").unwrap_or(0);
    assert!(problems >= 2, "{:?}", attr(&dom, "data-geometry-report"));
}

/// A label is data: markup in it shows as text and creates no element.
#[test]
fn markup_in_labels_stays_text() {
    let env = Env::new();
    let labels = [
        "<script>document.body.setAttribute('data-pwned','script')</script>",
        "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">",
    ];
    for l in labels {
        env.tiny_run(&["syscall.null"], "1,all", l)
            .assert()
            .success();
    }
    let file = env.path().join("x.html");
    env.cmd(&["report", "1", "2", "-o", file.to_str().unwrap()])
        .assert()
        .success();
    let html = check_report(&file, 2);
    assert_eq!(html.matches("<script").count(), 1, "only the report's own");
    assert!(!html.contains("<img"));
    let Some(dom) = dom(&file) else { return };
    assert!(!dom.contains(" data-pwned=\""), "a label ran as code");
    assert!(!dom.contains("<img"), "a label made an element");
    assert_eq!(dom.matches("<script").count(), 1, "a label made a script");
    // …and it is there as text, escaped by the serialiser.
    assert!(dom.contains("&lt;img src=x onerror="), "label text missing");
    assert!(
        dom.contains("&lt;script&gt;document.body"),
        "label text missing"
    );
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
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\n{text}");
    assert!(
        text.contains("== Direct results") && text.contains("== Scalability"),
        "{text}"
    );
    // The decisions come first: they are the answer the rest details.
    let decisions = text.find("== Decisions").expect("no decisions");
    assert!(
        decisions < text.find("== Direct results").unwrap_or(0),
        "{text}"
    );
    let table = &text[decisions..];
    assert!(
        table.contains("Decisions: each family's geometric mean and scalability")
            && table.contains("scal. all÷1"),
        "{text}"
    );
    let file = env.path().join("kscale-study-st.html");
    assert!(text.contains("kscale-study-st.html"), "{text}");
    let html = check_report(&file, 3);
    assert!(
        html.contains("Decisions: each family"),
        "no decisions in the report"
    );
    let j = env.export("st");
    let cpus: std::collections::BTreeSet<&str> = j["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| kscale_core::cpus::base_name(r["cpus"].as_str().unwrap()))
        .collect();
    assert_eq!(cpus.into_iter().collect::<Vec<_>>(), ["1", "all"]);

    if let Some(line) = stderr.lines().find(|l| l.contains("profiling off")) {
        common::skip(&format!("the profile checks: {line}"));
        return;
    }
    // The terminal gets the answer in a screen, not every case's routines.
    let profile = text
        .split("== Kernel profiles")
        .nth(1)
        .unwrap_or_else(|| panic!("no profile summary:\n{text}"));
    assert!(
        profile.contains("Where did the extra time go?"),
        "{profile}"
    );
    assert!(
        profile.lines().count() < 60,
        "the profile summary takes {} lines",
        profile.lines().count()
    );
    // The report's profile section opens with that question, before the
    // per-case details, which are collapsed.
    let section = &html[html.find("<section id=\"profiles\">").expect("profiles")..];
    let question = section.find("Where did the extra time go?").unwrap();
    let details = section.find("<details>").expect("collapsed cases");
    assert!(question < details);
    assert!(section.contains("Spin-lock share of kernel time"));
    // Idle never ranks as a routine: not as a case's top routine, nor among
    // what grew.
    for top in section.split("(top: ").skip(1) {
        let name = top.split_whitespace().next().unwrap_or("");
        assert!(
            !kscale_core::profile::is_idle_routine(name),
            "idle routine {name} ranked as the top routine"
        );
    }
    for cell in section.split("<td>").skip(1) {
        let name = cell.split('<').next().unwrap_or("");
        assert!(
            !kscale_core::profile::is_idle_routine(name),
            "idle routine {name} ranked in a table"
        );
    }
    let shown = env.show("st");
    assert!(shown.contains("Profile — "), "show keeps each case's table");
}
