//! A report laid out by headless Chromium, as a person's browser lays it
//! out: the page's own script then records on `<body>` what it found
//! (`data-geometry-problems`, `data-points`, `data-interval-problems` …).

use std::process::Command;

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new("which")
                .arg(b)
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// The page as Chromium builds it, after its script ran; `None` (said on
/// stderr, or a panic under CI) where there is no Chromium.
pub fn dom(html: &str, name: &str) -> Option<String> {
    let Some(browser) = chromium() else {
        let why = "no chromium on this machine for the browser checks (apt-get install chromium)";
        if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            panic!("skipped under CI, where it must run: {why}");
        }
        eprintln!("SKIPPED: {why}");
        return None;
    };
    let dir = std::env::temp_dir().join(format!("kscale-report-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("report.html");
    std::fs::write(&file, html).expect("write the report");
    let out = Command::new("timeout")
        .arg("120")
        .arg(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", file.display()))
        .output()
        .expect("run chromium");
    let _ = std::fs::remove_dir_all(&dir);
    let dom = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success() && !dom.is_empty(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(dom)
}

/// The value of the first `name="…"` attribute.
pub fn attr(html: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let start = html.find(&key)? + key.len();
    Some(html[start..].split('"').next()?.to_string())
}

pub fn attr_num(html: &str, name: &str) -> Option<usize> {
    attr(html, name)?.parse().ok()
}

/// Fails unless Chromium laid out `charts` charts and `points` measured
/// points with no text or mark outside its place and no interval drawn
/// wrong: what a report's page checks of itself.
#[allow(dead_code)]
pub fn assert_laid_out_whole(dom: &str, charts: usize, points: usize) {
    assert_eq!(attr_num(dom, "data-charts-rendered"), Some(charts));
    assert_eq!(attr_num(dom, "data-points"), Some(points));
    assert_eq!(
        attr_num(dom, "data-geometry-problems"),
        Some(0),
        "{:?}",
        attr(dom, "data-geometry-report")
    );
    assert_eq!(
        attr_num(dom, "data-interval-problems"),
        Some(0),
        "{:?}",
        attr(dom, "data-interval-report")
    );
}
