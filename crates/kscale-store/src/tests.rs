use super::*;
use kscale_core::CaseKey;
use std::collections::BTreeMap;

fn new_run(label: &str) -> NewRun {
    NewRun {
        label: label.into(),
        kscale_version: "0.1.0".into(),
        git_rev: "abc".into(),
        args: vec!["kscale".into(), "run".into()],
        options: serde_json::json!({"quick": true}),
        snapshot: serde_json::json!({"kernel": {"release": "6.1"}}),
    }
}

fn key(w: &str, size: &str) -> CaseKey {
    let mut p = BTreeMap::new();
    p.insert("size".to_string(), size.to_string());
    CaseKey {
        workload: w.into(),
        params: p,
        cpus: "1".into(),
    }
}

fn metric() -> Vec<MetricRow> {
    vec![MetricRow {
        name: "latency".into(),
        unit: "µs".into(),
        direction: Direction::Lower,
        primary: true,
    }]
}

#[test]
fn round_trip_and_resolve() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("k.db")).unwrap();
    let a = s.create_run(&new_run("alpha")).unwrap();
    let b = s.create_run(&new_run("beta")).unwrap();
    let a2 = s.create_run(&new_run("alpha")).unwrap();
    assert_eq!(s.resolve("latest").unwrap(), a2);
    assert_eq!(s.resolve("alpha").unwrap(), a2);
    assert_eq!(s.resolve(&b.to_string()).unwrap(), b);
    assert!(matches!(s.resolve("gamma"), Err(StoreError::NoSuchRun(_))));
    assert!(matches!(s.resolve("99"), Err(StoreError::NoSuchRun(_))));

    let c = s
        .ensure_case(a, 0, &key("mem.rd", "4k"), &[0], &metric())
        .unwrap();
    assert_eq!(
        s.ensure_case(a, 0, &key("mem.rd", "4k"), &[0], &metric())
            .unwrap(),
        c,
        "idempotent"
    );
    let v = |x: f64| BTreeMap::from([("latency".to_string(), x)]);
    s.add_trial(c, 0, true, 0.5, Some(100), &v(9.0)).unwrap();
    for (i, x) in [1.0, 1.1, 0.9].iter().enumerate() {
        s.add_trial(c, i as i64 + 1, false, 0.5, Some(100), &v(*x))
            .unwrap();
    }
    s.finish_case(
        c,
        CaseStatus::Done,
        Some(false),
        None,
        Some(100),
        &["note".into()],
    )
    .unwrap();
    s.set_run_status(a, "complete").unwrap();

    let data = s.load_run(a).unwrap();
    assert_eq!(data.run.status, "complete");
    assert!(data.run.ended_at.is_some());
    assert_eq!(data.run.cases_done, 1);
    assert_eq!(data.run.not_converged, 1);
    let case = &data.cases[0];
    assert_eq!(
        case.values("latency"),
        vec![1.0, 1.1, 0.9],
        "warm-up excluded"
    );
    assert_eq!(case.trials.len(), 4);
    assert_eq!(case.converged, Some(false));
    assert_eq!(case.notes, vec!["note".to_string()]);
    assert!((case.summary("latency", 95.0).mean - 1.0).abs() < 1e-12);
    assert_eq!(data.run.snapshot["kernel"]["release"], "6.1");
}

#[test]
fn refuses_newer_and_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("k.db");
    drop(Store::open(&p).unwrap());
    {
        let c = Connection::open(&p).unwrap();
        c.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
    }
    let e = Store::open(&p).err().unwrap();
    assert!(matches!(e, StoreError::TooNew { .. }), "{e}");
    assert!(e.to_string().contains("newer kscale"));

    let foreign = dir.path().join("other.db");
    {
        let c = Connection::open(&foreign).unwrap();
        c.execute_batch("CREATE TABLE t(x)").unwrap();
    }
    assert!(matches!(
        Store::open(&foreign),
        Err(StoreError::Foreign { .. })
    ));

    let text = dir.path().join("notes.txt");
    std::fs::write(
        &text,
        "this is definitely not a database, just some text that is long enough",
    )
    .unwrap();
    assert!(matches!(
        Store::open(&text),
        Err(StoreError::Foreign { .. })
    ));
}

#[test]
fn migrates_from_empty_and_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("k.db");
    drop(Store::open(&p).unwrap());
    let s = Store::open(&p).unwrap();
    let v: i64 = s
        .conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION);
    let mode: String = s
        .conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}
