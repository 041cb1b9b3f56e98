//! `kscale run fscache` end to end on the real binary: every case on every
//! CPU configuration stores a finite positive figure for each metric, the
//! read and memcpy rows sit side by side, and the cached file is verified and
//! removed.

mod common;
use common::Env;

#[test]
fn fscache_runs_on_every_cpu_configuration() {
    let env = Env::new();
    let out = env
        .cmd(&[
            "run",
            "fscache",
            "--quick",
            "--cpus",
            "1,all",
            "--trial-time",
            "0.05",
            "--no-progress",
            "--label",
            "t",
        ])
        .output()
        .unwrap();
    let stdout = common::stdout_of_success(&out, "run fscache");
    assert!(stdout.contains("(fscache)"), "no table\n{stdout}");
    assert!(stdout.contains("memcpy"), "no memcpy rows\n{stdout}");

    let j = env.export("t");
    let results = j["results"].as_array().unwrap();
    let all_cpus = kscale_cpu_count();
    // 2 bufsizes x 2 sources x (1 or 2 CPU configurations) cases, 4 metrics each.
    let configs = if all_cpus > 1 { 2 } else { 1 };
    assert_eq!(results.len(), 2 * 2 * configs * 4, "{j}");
    let mut sources = std::collections::BTreeSet::new();
    for r in results {
        assert_eq!(r["status"], "done", "{r}");
        let mean = r["mean"].as_f64().unwrap();
        assert!(mean.is_finite() && mean > 0.0, "{r}");
        assert!(r["n"].as_u64().unwrap() >= 3, "{r}");
        let trials = r["trials"].as_array().unwrap();
        assert_eq!(trials.len() as u64, r["n"].as_u64().unwrap(), "{r}");
        for t in trials {
            let v = t.as_f64().unwrap();
            assert!(v.is_finite() && v > 0.0, "{r}");
        }
        sources.insert(r["params"]["source"].as_str().unwrap().to_string());
    }
    assert_eq!(sources.len(), 2, "both sources measured");
    assert!(
        stdout.contains("verified resident in the page cache (mincore)"),
        "no residency note\n{stdout}"
    );
    // Nothing left behind in the scratch area (the run's directory is removed).
    let leftovers: Vec<_> = std::fs::read_dir(env.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("fscache"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn kscale_cpu_count() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
