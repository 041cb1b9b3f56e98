use super::*;
use kscale_core::model::CpuAccounting;
use kscale_core::{CaseKey, RunRule};
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
        quantile: None,
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
        .ensure_case(
            a,
            0,
            &key("mem.rd", "4k"),
            &[0],
            &metric(),
            RunRule::Converge,
        )
        .unwrap();
    assert_eq!(
        s.ensure_case(
            a,
            0,
            &key("mem.rd", "4k"),
            &[0],
            &metric(),
            RunRule::Converge
        )
        .unwrap(),
        c,
        "idempotent"
    );
    let v = |x: f64| BTreeMap::from([("latency".to_string(), x)]);
    let warm = v(9.0);
    s.add_trial(
        c,
        &NewTrial {
            idx: 0,
            warmup: true,
            wall_s: 0.5,
            iterations: Some(100),
            values: &warm,
            accounting: None,
            histograms: &BTreeMap::new(),
            roles: &[],
        },
    )
    .unwrap();
    let acc = CpuAccounting {
        user_pct: 50.0,
        system_pct: 50.0,
        ctxt: 10,
        intr: 20,
        seconds: 0.5,
        ..Default::default()
    };
    for (i, x) in [1.0, 1.1, 0.9].iter().enumerate() {
        let vals = v(*x);
        let t = NewTrial {
            idx: i as i64 + 1,
            warmup: false,
            wall_s: 0.5,
            iterations: Some(100),
            values: &vals,
            accounting: Some(&acc),
            histograms: &BTreeMap::new(),
            roles: &[],
        };
        s.add_trial(c, &t).unwrap();
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
    let acc = case.accounting().unwrap();
    assert_eq!(
        (acc.ctxt, acc.intr),
        (30, 60),
        "summed over the three counted trials"
    );
    assert!((acc.user_pct - 50.0).abs() < 1e-12);
    assert!(case.trials[0].accounting.is_none());
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

#[test]
fn migrates_a_version_1_database_keeping_its_trials() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("old.db");
    {
        let c = Connection::open(&p).unwrap();
        c.execute_batch(crate::schema::MIGRATIONS[0]).unwrap();
        c.pragma_update(None, "application_id", crate::schema::APPLICATION_ID)
            .unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
        c.execute_batch(
            "INSERT INTO runs VALUES (1, 'old', '2026-01-01T00:00:00Z', NULL, 'complete', '0.0.1', 'x', '[]', '{}', '{}');
             INSERT INTO cases VALUES (1, 1, 0, 'syscall.null', '{}', '1', '[0]', 'done', 1, NULL, 10, '[]');
             INSERT INTO metrics VALUES (1, 'latency', 'µs', 'lower', 1);
             INSERT INTO trials VALUES (1, 1, 0, 1, 't', 0.5, 10, '{\"latency\": 0.3}');
             INSERT INTO trials VALUES (2, 1, 1, 0, 't', 0.5, 10, '{\"latency\": 0.2}');",
        )
        .unwrap();
    }
    let s = Store::open(&p).unwrap();
    let v: i64 = s
        .conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION);
    let data = s.load_run(1).unwrap();
    assert_eq!(data.cases[0].values("latency"), vec![0.2]);
    assert!(data.cases[0].accounting().is_none());
}

#[test]
fn profiles_round_trip_and_old_runs_have_none() {
    use kscale_core::profile::{Hit, ProfileBuilder};
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("k.db")).unwrap();
    let r = s.create_run(&new_run("p")).unwrap();
    let c = s
        .ensure_case(
            r,
            0,
            &key("mem.rd", "4k"),
            &[0],
            &metric(),
            RunRule::Converge,
        )
        .unwrap();
    assert!(s.load_run(r).unwrap().cases[0].profiles.is_empty());
    let mut b = ProfileBuilder::new("instructions", "every 1000003");
    b.add_n(
        Hit::Kernel {
            symbol: Some("osq_lock"),
            comm: "kscale",
        },
        3,
    );
    b.add(Hit::User { comm: "kscale" });
    let mut p = b.finish();
    p.ops = Some(42);
    p.value = Some(0.25);
    let mut clock = p.clone();
    clock.event = "cpu-clock".into();
    s.add_profile(c, &p).unwrap();
    s.add_profile(c, &clock).unwrap();
    s.add_profile(c, &clock).unwrap(); // replaces, no duplicate
    let got = s.load_run(r).unwrap().cases[0].profiles.clone();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0], clock, "cpu-clock first");
    assert_eq!(got[1], p);
    assert_eq!(got[1].spinlock, 3);
}

/// A macro case: a percentile metric read from the merged histograms of the
/// counted trials, role CPU times, and a median-of-3 rule, all surviving the
/// round trip through SQLite.
#[test]
fn histograms_roles_and_median_rule_round_trip() {
    use kscale_core::hist;
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("k.db")).unwrap();
    let run = s.create_run(&new_run("m")).unwrap();
    let metrics = vec![
        MetricRow {
            name: "tps".into(),
            unit: "1/s".into(),
            direction: Direction::Higher,
            primary: true,
            quantile: None,
        },
        MetricRow::from_def(
            &kscale_core::MetricDef::quantile("p99", "µs", "latency", 0.99, 1e-3),
            false,
        ),
    ];
    let c = s
        .ensure_case(
            run,
            0,
            &key("net.tcp_rr", "4"),
            &[0],
            &metrics,
            RunRule::MedianOf(3),
        )
        .unwrap();
    let roles = |load_cpu: f64| {
        vec![
            RoleCpu {
                role: "server".into(),
                host: "local".into(),
                cpu_s: 1.0,
                window_s: 1.0,
                cpus: 1,
            },
            RoleCpu {
                role: "load".into(),
                host: "local".into(),
                cpu_s: load_cpu,
                window_s: 1.0,
                cpus: 1,
            },
        ]
    };
    // Trial k: 99 fast samples of 10 µs and one slow one of (k+1) ms.
    for (idx, tps) in [(0i64, 50.0), (1, 100.0), (2, 300.0), (3, 200.0)] {
        let mut h = hist::new();
        for _ in 0..99 {
            hist::record(&mut h, 10_000);
        }
        hist::record(&mut h, (idx as u64 + 1) * 1_000_000);
        let hists = BTreeMap::from([("latency".to_string(), hist::encode(&h))]);
        let values = BTreeMap::from([
            ("tps".to_string(), tps),
            (
                "p99".to_string(),
                hist::quantile_ns(&h, 0.99).unwrap() * 1e-3,
            ),
        ]);
        let r = roles(0.95);
        s.add_trial(
            c,
            &NewTrial {
                idx,
                warmup: idx == 0,
                wall_s: 1.0,
                iterations: None,
                values: &values,
                accounting: None,
                histograms: &hists,
                roles: &r,
            },
        )
        .unwrap();
    }
    s.finish_case(c, CaseStatus::Done, None, None, None, &[])
        .unwrap();
    let data = s.load_run(run).unwrap();
    let case = &data.cases[0];
    assert_eq!(case.rule, RunRule::MedianOf(3));
    assert_eq!(case.metrics[1].quantile.as_ref().unwrap().hist, "latency");
    // Median of the three counted trials, not their mean (200).
    let tps = case.summary("tps", 95.0);
    assert_eq!(
        (tps.n, tps.mean, tps.ci_low, tps.ci_high),
        (3, 200.0, 100.0, 300.0)
    );
    // 300 counted samples, 3 of them slow: p99 is the 297th value = 10 µs.
    let p99 = case.summary("p99", 95.0);
    assert!((p99.mean - 10.0).abs() < 0.05, "{p99:?}");
    assert_eq!(case.trials[1].roles.len(), 2);
    assert!(case.load_bound());
    assert_eq!(case.merged_histogram("latency").unwrap().len(), 300);
}
