//! compare and scale on real stored runs.

mod common;
use common::{refused, Env};

fn quick_run(env: &Env, label: &str, cpus: &str, targets: &[&str]) {
    env.tiny_run(targets, cpus, label).assert().success();
}

fn stdout(env: &Env, args: &[&str]) -> String {
    let out = env.cmd(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn compare_one_cpu_against_all() {
    let env = Env::new();
    quick_run(
        &env,
        "one",
        "1",
        &["syscall.null", "syscall.read", "syscall.write"],
    );
    quick_run(
        &env,
        "all",
        "all",
        &["syscall.null", "syscall.read", "fs.create"],
    );
    let text = stdout(&env, &["compare", "one", "all"]);
    assert!(text.contains("B/A"), "{text}");
    assert!(
        text.contains("Simple syscall") && text.contains("Geometric mean"),
        "{text}"
    );
    assert!(text.contains("Cases not in every system"), "{text}");
    assert!(
        text.contains("above 100% means the numerator is slower"),
        "{text}"
    );

    let md = stdout(&env, &["compare", "one", "all", "--format", "md"]);
    // The configuration's name says where its CPU is.
    assert!(
        md.contains("| Case | Unit | A one [1 CPU (1 core, 1 LLC, node "),
        "{md}"
    );
    assert!(md.contains("| **Geometric mean** |"), "{md}");

    let json: serde_json::Value = serde_json::from_str(&stdout(
        &env,
        &["compare", "one", "all", "--format", "json"],
    ))
    .unwrap();
    assert_eq!(json["matching"], "across_cpus");
    let rows = json["families"][0]["rows"].as_array().unwrap();
    // null and read are common; write and fs.create are in one system only.
    assert_eq!(rows.iter().filter(|r| r["summary"] == false).count(), 2);
    assert_eq!(
        json["only_in"].as_array().unwrap().len(),
        1 + 4,
        "write, and fs.create at four sizes"
    );
    let r = &rows[0]["ratios"][0];
    let ratio = rows[0]["means"][1].as_f64().unwrap() / rows[0]["means"][0].as_f64().unwrap();
    assert!(
        (r["ratio"].as_f64().unwrap() - ratio).abs() < 1e-12,
        "raw-value ratio"
    );

    refused(&env, &["compare", "one"], "required");
    refused(&env, &["compare", "one", "nosuch"], "no run `nosuch`");
}

/// A side named by its label stands on every run of that label on its
/// machine: its verdict reads their mean, so the runs a "cannot tell" asks
/// for are runs a user can add. A side named by its run id is that run.
#[test]
fn a_label_side_reads_all_its_runs() {
    let env = Env::new();
    for label in ["a", "a", "a", "b", "b"] {
        quick_run(&env, label, "1", &["syscall.null"]);
    }
    let text = stdout(&env, &["compare", "a", "b"]);
    assert!(
        text.contains(
            "Verdicts read each side's runs on its machine, their mean (a: 3 runs; b: 2 runs)"
        ),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&env, &["compare", "a", "b", "--format", "json"])).unwrap();
    let row = &json["families"][0]["rows"][0];
    let v = &row["ratios"][0]["verdict"];
    // The estimate is the ratio of the two labels' geometric means of each
    // run's level (its counted trials' plain mean), not of the runs shown
    // (a lower-is-better time: worse is higher).
    let level = |id: &str| {
        let trials: Vec<f64> = env.primary(id)[0]["trials"]
            .as_array()
            .expect("trials")
            .iter()
            .map(|t| t.as_f64().unwrap())
            .collect();
        trials.iter().sum::<f64>() / trials.len() as f64
    };
    let ln_mean =
        |ids: &[&str]| ids.iter().map(|id| level(id).ln()).sum::<f64>() / ids.len() as f64;
    let want = ((ln_mean(&["4", "5"]) - ln_mean(&["1", "2", "3"])).exp() - 1.0) * 100.0;
    let est = v["interval"]["est_pct"]
        .as_f64()
        .expect("a verdict interval");
    assert!((est - want).abs() < 1e-6, "{est} vs {want}: {v}");
    // By id, each side is its one run.
    let text = stdout(&env, &["compare", "3", "5"]);
    assert!(!text.contains("Verdicts read each side's runs"), "{text}");
}

#[test]
fn compare_without_common_cases_is_refused() {
    let env = Env::new();
    quick_run(&env, "a", "1", &["syscall.null"]);
    quick_run(&env, "b", "1", &["syscall.read"]);
    refused(&env, &["compare", "a", "b"], "no case in common");
}

#[test]
fn scale_and_smp_overhead() {
    let env = Env::new();
    quick_run(
        &env,
        "smp",
        "1,all",
        &["syscall.null", "mem.frd", "--param", "size=1m"],
    );
    quick_run(&env, "up", "1", &["syscall.null"]);
    let text = stdout(&env, &["scale", "smp", "--up", "up"]);
    assert!(
        text.contains("scal. 2/1") || text.contains("scal."),
        "{text}"
    );
    assert!(text.contains("SMP-1/UP"), "{text}");
    // Each count's column says where its CPUs are.
    assert!(text.contains("1 CPU (1 core, 1 LLC, node "), "{text}");
    assert!(text.contains("Geometric mean"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&env, &["scale", "smp", "--format", "json"])).unwrap();
    assert_eq!(json["places"].as_array().map(Vec::len), Some(2), "{json}");
    let fam = &json["families"][0];
    let row = &fam["rows"][0];
    let (m1, m2) = (
        row["means"][0].as_f64().unwrap(),
        row["means"][1].as_f64().unwrap(),
    );
    // Latency: scalability is inverted.
    assert!(
        (row["scalability"][1].as_f64().unwrap() - m1 / m2).abs() < 1e-9,
        "{row}"
    );
    refused(&env, &["scale", "up"], "single CPU configuration");
}
