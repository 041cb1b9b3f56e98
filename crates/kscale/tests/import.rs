//! `kscale export` → `kscale import`: runs keep their UUID and everything
//! an export shows; re-imports are no-ops; clashes and foreign files are
//! refused with one line and status 2.

mod common;
use common::Env;
use serde_json::Value;

fn run(env: &Env, label: &str) {
    env.quick_on_cpu1(&["syscall.null", "syscall.read"], &["--max-trials", "3"])
        .args(["--label", label])
        .assert()
        .success();
}

fn write(env: &Env, name: &str, v: &Value) -> std::path::PathBuf {
    let p = env.path().join(name);
    std::fs::write(&p, serde_json::to_string_pretty(v).unwrap()).unwrap();
    p
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn export_import_export_is_identical() {
    let a = Env::new();
    run(&a, "alpha");
    run(&a, "beta");
    let first = a.export("1");
    let second = a.export("beta");
    let uuid = first["run"]["uuid"].as_str().unwrap().to_string();
    assert_eq!(uuid.len(), 36, "{uuid}");
    assert_ne!(first["run"]["uuid"], second["run"]["uuid"]);
    assert!(first["cases"][0]["trials"].as_array().unwrap().len() >= 3);

    // Run 1 into an empty store becomes run 1 again: the whole file is equal.
    let b = Env::new();
    let f1 = write(&a, "one.json", &first);
    let out = b.cmd(&["import"]).arg(&f1).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("imported run {uuid} as run 1")),
        "{}",
        stderr(&out)
    );
    assert_eq!(b.export("1"), first);

    // Run 2 becomes run 2 here; so is every byte of its export.
    let f2 = write(&a, "two.json", &second);
    b.cmd(&["import"]).arg(&f2).assert().success();
    assert_eq!(b.export("2"), second);
    // The file's bytes too, not only its meaning.
    let text = b
        .cmd(&["export", "2", "--format", "json"])
        .output()
        .unwrap()
        .stdout;
    let orig = a
        .cmd(&["export", "2", "--format", "json"])
        .output()
        .unwrap()
        .stdout;
    assert_eq!(text, orig);

    // Imported runs compare like local ones.
    b.cmd(&["compare", "alpha", "beta"]).assert().success();

    // A second import is a no-op that says so.
    let out = b.cmd(&["import"]).arg(&f1).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("already stored as run 1; nothing to do"),
        "{}",
        stderr(&out)
    );
    let runs = b.cmd(&["results"]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&runs.stdout)
            .matches("alpha")
            .count(),
        1
    );
}

#[test]
fn clashes_and_foreign_files_are_refused() {
    let a = Env::new();
    run(&a, "alpha");
    let good = a.export("1");
    let b = Env::new();
    b.cmd(&["import"])
        .arg(write(&a, "good.json", &good))
        .assert()
        .success();

    // Same UUID, other trials: refused, and the stored run is untouched.
    let mut forged = good.clone();
    let t = &mut forged["cases"][0]["trials"][1]["values"]["latency"];
    *t = Value::from(t.as_f64().unwrap() * 2.0);
    let out = b
        .cmd(&["import"])
        .arg(write(&a, "forged.json", &forged))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("already stored as run 1 with different contents"),
        "{err}"
    );
    assert_eq!(b.export("1"), good);

    let mut newer = good.clone();
    newer["schema"] = Value::from(newer["schema"].as_i64().unwrap() + 1);
    let mut old = good.clone();
    old.as_object_mut().unwrap().remove("schema");
    for (name, bad, why) in [
        ("newer.json", newer, "newer kscale"),
        ("old.json", old, "export it again"),
        (
            "array.json",
            serde_json::json!([1, 2]),
            "not a kscale export",
        ),
    ] {
        let out = b
            .cmd(&["import"])
            .arg(write(&a, name, &bad))
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(name) && err.contains(why), "{err}");
    }
    std::fs::write(a.path().join("text.json"), "hello").unwrap();
    let out = b
        .cmd(&["import"])
        .arg(a.path().join("text.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not JSON"), "{}", stderr(&out));

    // Nothing half-imported was left behind.
    let runs = b.cmd(&["results"]).output().unwrap();
    let text = String::from_utf8_lossy(&runs.stdout);
    assert_eq!(text.matches("alpha").count(), 1, "{text}");
    assert!(b.cmd(&["show", "2"]).output().unwrap().status.code() == Some(2));
}

#[test]
fn relabelled_import() {
    let a = Env::new();
    run(&a, "alpha");
    let good = a.export("1");
    let b = Env::new();
    let f = write(&a, "good.json", &good);
    b.cmd(&["import", "--label", "host1"])
        .arg(&f)
        .assert()
        .success();
    assert_eq!(b.export("host1")["run"]["uuid"], good["run"]["uuid"]);
    // Under its own label it is still the same run.
    let out = b.cmd(&["import"]).arg(&f).output().unwrap();
    assert!(stderr(&out).contains("nothing to do"), "{}", stderr(&out));
    b.cmd(&["import", "--label", "7"]).arg(&f).assert().code(2);
}
