//! Every test here runs against both backends: `NAME::sqlite` always,
//! `NAME::postgres` on a throw-away cluster ([`crate::pg_harness`]), skipped
//! with a printed reason where the server binaries are missing (a failure
//! under `CI`).

use super::*;
use kscale_core::model::CpuAccounting;
use kscale_core::{CaseKey, RunRule};
use std::collections::BTreeMap;

/// One test's database, on one backend.
struct Env {
    _dir: tempfile::TempDir,
    #[cfg(feature = "postgres")]
    cluster: Option<crate::pg_harness::PgCluster>,
    /// The store's file or URL.
    loc: String,
    n: std::cell::Cell<u32>,
}

impl Env {
    fn sqlite() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let loc = dir.path().join("k.db").display().to_string();
        Env {
            _dir: dir,
            #[cfg(feature = "postgres")]
            cluster: None,
            loc,
            n: 0.into(),
        }
    }

    #[cfg(feature = "postgres")]
    fn postgres(test: &str) -> Option<Env> {
        let cluster = crate::pg_harness::cluster_or_skip(test)?;
        let loc = cluster.create_db("kscale").unwrap();
        Some(Env {
            _dir: tempfile::tempdir().unwrap(),
            cluster: Some(cluster),
            loc,
            n: 0.into(),
        })
    }

    fn backend(&self) -> Backend {
        if is_url(&self.loc) {
            Backend::Postgres
        } else {
            Backend::Sqlite
        }
    }

    fn open(&self) -> Store {
        Store::open(Path::new(&self.loc)).unwrap()
    }

    /// Another, empty database on the same backend.
    fn other(&self) -> String {
        self.n.set(self.n.get() + 1);
        let name = format!("other{}", self.n.get());
        #[cfg(feature = "postgres")]
        if let Some(c) = &self.cluster {
            return c.create_db(&name).unwrap();
        }
        self._dir.path().join(name).display().to_string()
    }

    /// A connection behind the store's back, for setting up what a store
    /// would never write itself.
    fn raw(&self, loc: &str) -> Db {
        match self.backend() {
            Backend::Sqlite => Db::Sqlite(Connection::open(loc).unwrap()),
            #[cfg(feature = "postgres")]
            Backend::Postgres => Db::Pg(std::cell::RefCell::new(
                postgres::Client::connect(loc, postgres::NoTls).unwrap(),
            )),
            #[cfg(not(feature = "postgres"))]
            Backend::Postgres => unreachable!(),
        }
    }
}

/// `both!(name)`: the test body `fn name(env: &Env)` as `name::sqlite` and
/// `name::postgres`.
macro_rules! both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn sqlite() {
                super::$name(&super::Env::sqlite());
            }
            #[cfg(feature = "postgres")]
            #[test]
            fn postgres() {
                if let Some(env) = super::Env::postgres(concat!(stringify!($name), "::postgres")) {
                    super::$name(&env);
                }
            }
        }
    )*};
}

both!(
    round_trip_and_resolve,
    refuses_newer_and_foreign,
    migrates_from_empty_and_is_idempotent,
    migrates_a_version_1_database_keeping_its_trials,
    profiles_round_trip_and_old_runs_have_none,
    histograms_roles_and_median_rule_round_trip,
    each_trial_is_visible_to_other_readers_as_it_ends,
    concurrent_writers_lose_nothing,
    a_running_run_whose_process_is_gone_reads_killed,
    series_reads_a_workload_across_runs,
    a_case_left_out_is_gone_and_named,
    gauge_readings_round_trip_on_both_clocks,
    earlier_costs_are_the_newest_runs_on_this_host,
);

/// `Store::earlier_costs`: each done case's trials (warm-up included) and
/// their wall seconds in the newest run on this host that finished it, and
/// the complete runs' median wall time over trial time; other hosts, the
/// asking run and unfinished cases left out.
fn earlier_costs_are_the_newest_runs_on_this_host(env: &Env) {
    let s = env.open();
    let host = Owner::current().expect("this host has a name").host;
    let mut made = Vec::new();
    // Trials of 2 s each: 4 in the oldest run, 6 in the next, 9 in one
    // another host ran; runs of 16 s and 36 s.
    for (label, n, secs) in [("old", 4, 16), ("new", 6, 36), ("there", 9, 99)] {
        let run = s.create_run(&new_run(label)).unwrap();
        let c = mem_rd_4k(&s, run);
        for idx in 0..n {
            timed_trial(&s, c, idx, idx == 0, 2.0, 1.0);
        }
        s.finish_case(c, CaseStatus::Done, Some(true), None, None, &[])
            .unwrap();
        // A case that never finished says nothing of its cost.
        let pending = converging_case(&s, run, 1, "mem.wr", "4k");
        trial(&s, pending, 0, 1.0);
        s.set_run_status(run, RunStatus::Complete).unwrap();
        s.db.execute(
            "UPDATE runs SET started_at = '2026-01-01T00:00:00Z', ended_at = $1 WHERE id = $2",
            &[&format!("2026-01-01T00:00:{secs:02}Z"), &run],
        )
        .unwrap();
        made.push(run);
    }
    s.db.execute(
        "UPDATE runs SET host = 'elsewhere' WHERE id = $1",
        &[&made[2]],
    )
    .unwrap();
    let asking = s.create_run(&new_run("now")).unwrap();
    let e = s.earlier_costs(&host, asking).unwrap();
    assert_eq!(e.cases.len(), 1, "{:?}", e.cases);
    assert_eq!(
        e.cases[&key("mem.rd", "4k")],
        costs::CaseCost {
            trials: 6,
            wall_s: 12.0
        }
    );
    // 16 s over 8.01 s of trials and 36 s over 12.01 s: the median of two
    // is the upper one.
    let o = e.overhead.unwrap();
    assert!((o - 36.0 / 12.01).abs() < 1e-9, "{o}");
    // The asking run is never its own history, and another host's runs
    // are theirs.
    assert!(s.earlier_costs(&host, made[1]).unwrap().cases[&key("mem.rd", "4k")].trials == 4);
    assert!(s.earlier_costs("nowhere", asking).unwrap().cases.is_empty());
}

/// Every probe of a gauge reading comes back as stored, the thread-clock
/// ones included, and a reading without them reads `None`.
fn gauge_readings_round_trip_on_both_clocks(env: &Env) {
    use kscale_core::noise::Reading;
    let store = env.open();
    let run = store.create_run(&new_run("gauge")).unwrap();
    let full = Reading {
        t_s: 1.5,
        cpu: 1,
        cpu_ns: 1.6e6,
        mem_mbs: Some(9000.0),
        wake_us: Some(5.2),
        sys_ns: Some(82.0),
        cpu_mean_ns: Some(1.7e6),
        cpu_thread_ns: Some(1.59e6),
        sys_thread_ns: Some(80.5),
    };
    let bare = Reading {
        cpu: 0,
        mem_mbs: None,
        wake_us: None,
        sys_ns: None,
        cpu_mean_ns: None,
        cpu_thread_ns: None,
        sys_thread_ns: None,
        ..full
    };
    store.add_gauge(run, 0, &[bare, full]).unwrap();
    let back = store.gauge(run).unwrap();
    assert_eq!(back, vec![bare, full]);
}

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

/// Case 0 of `run`, mem.rd at 4k on CPU 0, made or found.
fn mem_rd_4k(s: &Store, run: i64) -> i64 {
    converging_case(s, run, 0, "mem.rd", "4k")
}

/// Case `seq` of `run`, `workload` at `size` on CPU 0 under the converge
/// rule, made or found: the plain case most of these tests need.
fn converging_case(s: &Store, run: i64, seq: i64, workload: &str, size: &str) -> i64 {
    s.ensure_case(
        run,
        seq,
        &key(workload, size),
        &[0],
        &metric(),
        RunRule::Converge,
    )
    .unwrap()
}

fn round_trip_and_resolve(env: &Env) {
    let s = env.open();
    let a = s.create_run(&new_run("alpha")).unwrap();
    let b = s.create_run(&new_run("beta")).unwrap();
    let a2 = s.create_run(&new_run("alpha")).unwrap();
    assert_eq!(s.resolve("latest").unwrap(), a2);
    assert_eq!(s.resolve("alpha").unwrap(), a2);
    assert_eq!(s.resolve(&b.to_string()).unwrap(), b);
    assert!(matches!(s.resolve("gamma"), Err(StoreError::NoSuchRun(_))));
    assert!(matches!(s.resolve("99"), Err(StoreError::NoSuchRun(_))));

    let c = mem_rd_4k(&s, a);
    assert_eq!(mem_rd_4k(&s, a), c, "idempotent");
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
    s.set_run_status(a, RunStatus::Complete).unwrap();

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

fn set_version(db: &Db, v: i64) {
    match db.backend() {
        Backend::Sqlite => db.batch(&format!("PRAGMA user_version = {v}")).unwrap(),
        Backend::Postgres => {
            db.execute("UPDATE kscale_schema SET version = $1", &[&v])
                .unwrap();
        }
    }
}

fn refuses_newer_and_foreign(env: &Env) {
    drop(env.open());
    set_version(&env.raw(&env.loc), SCHEMA_VERSION + 1);
    let e = Store::open(Path::new(&env.loc)).err().unwrap();
    assert!(matches!(e, StoreError::TooNew { .. }), "{e}");
    assert!(e.to_string().contains("newer kscale"));
    assert_eq!(e.to_string().lines().count(), 1);
    // Refused without writing: still the newer version.
    let m = schema::marker(&env.raw(&env.loc)).unwrap();
    assert_eq!(m.version, SCHEMA_VERSION + 1);

    let foreign = env.other();
    env.raw(&foreign)
        .batch("CREATE TABLE t (x INTEGER)")
        .unwrap();
    let e = Store::open(Path::new(&foreign)).err().unwrap();
    assert!(matches!(e, StoreError::Foreign { .. }), "{e}");
    // Nothing of ours was added to it.
    assert_eq!(schema::marker(&env.raw(&foreign)).unwrap().tables, 1);

    if env.backend() == Backend::Sqlite {
        let text = env._dir.path().join("notes.txt");
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
}

fn migrates_from_empty_and_is_idempotent(env: &Env) {
    drop(env.open());
    let s = env.open();
    let m = schema::marker(&s.db).unwrap();
    assert_eq!(
        (m.app_id, m.version),
        (schema::APPLICATION_ID, SCHEMA_VERSION)
    );
    assert_eq!(s.backend(), env.backend());
    #[allow(irrefutable_let_patterns)] // without the `postgres` feature
    if let Db::Sqlite(conn) = &s.db {
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }
}

fn migrates_a_version_1_database_keeping_its_trials(env: &Env) {
    {
        let db = env.raw(&env.loc);
        match db.backend() {
            Backend::Sqlite => db.batch(crate::schema::MIGRATIONS[0]).unwrap(),
            Backend::Postgres => db
                .batch(&schema::pg_ddl(crate::schema::MIGRATIONS[0]))
                .unwrap(),
        }
        schema::set_marker(&db, 1).unwrap();
        db.batch(
            "INSERT INTO runs VALUES (1, 'old', '2026-01-01T00:00:00Z', NULL, 'complete', '0.0.1', 'x', '[]', '{}', '{}');
             INSERT INTO cases VALUES (1, 1, 0, 'syscall.null', '{}', '1', '[0]', 'done', 1, NULL, 10, '[]');
             INSERT INTO metrics VALUES (1, 'latency', 'µs', 'lower', 1);
             INSERT INTO trials VALUES (1, 1, 0, 1, 't', 0.5, 10, '{\"latency\": 0.3}');
             INSERT INTO trials VALUES (2, 1, 1, 0, 't', 0.5, 10, '{\"latency\": 0.2}');",
        )
        .unwrap();
    }
    let s = env.open();
    assert_eq!(schema::marker(&s.db).unwrap().version, SCHEMA_VERSION);
    let data = s.load_run(1).unwrap();
    assert_eq!(data.cases[0].values("latency"), vec![0.2]);
    assert!(data.cases[0].accounting().is_none());
}

fn profiles_round_trip_and_old_runs_have_none(env: &Env) {
    use kscale_core::profile::{Hit, ProfileBuilder};
    let s = env.open();
    let r = s.create_run(&new_run("p")).unwrap();
    let c = mem_rd_4k(&s, r);
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
/// round trip through the store.
fn histograms_roles_and_median_rule_round_trip(env: &Env) {
    use kscale_core::hist;
    let s = env.open();
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

fn trial(s: &Store, case: i64, idx: i64, x: f64) {
    timed_trial(s, case, idx, false, 0.01, x);
}

/// A trial of `case`, a warm-up or counted, that took `wall_s`.
fn timed_trial(s: &Store, case: i64, idx: i64, warmup: bool, wall_s: f64, x: f64) {
    let vals = BTreeMap::from([("latency".to_string(), x)]);
    s.add_trial(
        case,
        &NewTrial {
            idx,
            warmup,
            wall_s,
            iterations: Some(1),
            values: &vals,
            accounting: None,
            histograms: &BTreeMap::new(),
            roles: &[],
        },
    )
    .unwrap();
}

/// "Each trial committed as it ends": another connection sees a trial
/// before its case is finished, so a killed run loses only the trial in
/// flight.
fn each_trial_is_visible_to_other_readers_as_it_ends(env: &Env) {
    let w = env.open();
    let r = env.open();
    let run = w.create_run(&new_run("live")).unwrap();
    let c = mem_rd_4k(&w, run);
    for i in 0..3 {
        trial(&w, c, i, 1.0 + i as f64);
        let seen = r.load_run(run).unwrap();
        assert_eq!(seen.cases[0].trials.len(), i as usize + 1);
        assert_eq!(seen.cases[0].status, CaseStatus::Pending);
        assert_eq!(seen.run.status, "running");
    }
    // A repeated trial index (a resumed run re-measuring) replaces the row.
    trial(&w, c, 2, 7.0);
    assert_eq!(
        r.load_run(run).unwrap().cases[0].values("latency"),
        vec![1.0, 2.0, 7.0]
    );
}

/// Four writers, each with its own store, open one new database at once
/// (racing to migrate it) and write a run each, while a reader loads
/// everything in a loop; afterwards every trial is there.
fn concurrent_writers_lose_nothing(env: &Env) {
    use std::sync::atomic::{AtomicBool, Ordering};
    const WRITERS: usize = 4;
    const CASES: i64 = 3;
    const TRIALS: i64 = 20;
    let loc = env.loc.as_str();
    let done = AtomicBool::new(false);
    let (runs, reads) = std::thread::scope(|sc| {
        let reader = sc.spawn(|| {
            let mut reads = 0usize;
            let mut store = None;
            while !done.load(Ordering::SeqCst) {
                let s = store.get_or_insert_with(|| Store::open(Path::new(loc)).unwrap());
                for r in s.runs().unwrap() {
                    let d = s.load_run(r.id).unwrap();
                    assert!(d.cases.len() <= CASES as usize);
                }
                reads += 1;
            }
            reads
        });
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                sc.spawn(move || {
                    let s = Store::open(Path::new(loc)).unwrap();
                    let run = s.create_run(&new_run(&format!("writer{w}"))).unwrap();
                    for c in 0..CASES {
                        let case = converging_case(&s, run, c, "mem.rd", &format!("{c}k"));
                        for t in 0..TRIALS {
                            trial(&s, case, t, (w * 1000) as f64 + t as f64);
                        }
                        s.finish_case(case, CaseStatus::Done, Some(true), None, None, &[])
                            .unwrap();
                    }
                    s.set_run_status(run, RunStatus::Complete).unwrap();
                    run
                })
            })
            .collect();
        // Every writer joined and the reader stopped before any panic is
        // passed on, so a failing writer fails the test instead of hanging it.
        let joined: Vec<_> = writers.into_iter().map(|h| h.join()).collect();
        done.store(true, Ordering::SeqCst);
        let reads = reader.join();
        let runs: Vec<i64> = joined
            .into_iter()
            .map(|r| r.unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect();
        (runs, reads.unwrap_or_else(|e| std::panic::resume_unwind(e)))
    });
    assert!(reads > 0);
    let s = env.open();
    let all = s.runs().unwrap();
    assert_eq!(all.len(), WRITERS);
    let mut trials = 0;
    for (w, id) in runs.iter().enumerate() {
        let d = s.load_run(*id).unwrap();
        assert_eq!(d.run.label, format!("writer{w}"));
        assert_eq!(d.run.status, "complete");
        assert_eq!(d.run.cases_done, CASES);
        for c in &d.cases {
            let want: Vec<f64> = (0..TRIALS).map(|t| (w * 1000) as f64 + t as f64).collect();
            assert_eq!(c.values("latency"), want, "writer {w}, case {}", c.seq);
            trials += c.trials.len() as i64;
        }
    }
    assert_eq!(trials, WRITERS as i64 * CASES * TRIALS);
}

/// Bad PostgreSQL input: one line each, naming what is wrong, never the
/// password.
#[cfg(feature = "postgres")]
#[test]
fn postgres_bad_urls_refused_connections_and_bad_passwords() {
    let one_line = |e: &StoreError| {
        let s = e.to_string();
        assert_eq!(s.lines().count(), 1, "{s}");
        assert!(
            !s.contains("hunter2") && !s.contains(crate::pg_harness::PgCluster::PW),
            "{s}"
        );
        s
    };
    for url in [
        "postgres://u:hunter2@host:notaport/db",
        "postgres://u:hunter2@host/db?nosuchoption=1",
        "postgres://u:hunter2@/db",
        "postgres://u:hunter2@host",
    ] {
        let e = Store::open_url(url).err().unwrap();
        assert!(matches!(e, StoreError::BadUrl { .. }), "{url}: {e}");
        assert!(one_line(&e).contains("u:***@"), "{e}");
    }
    let e = Store::open(Path::new("mysql://u:hunter2@host/db"))
        .err()
        .unwrap();
    assert!(one_line(&e).contains("unsupported scheme"), "{e}");
    // Nothing listens on this socket directory.
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "postgres://u:hunter2@{}/db",
        dir.path().display().to_string().replace('/', "%2F")
    );
    let e = Store::open_url(&url).err().unwrap();
    assert!(matches!(e, StoreError::Connect { .. }), "{e}");
    assert!(one_line(&e).contains("No such file"), "{e}");

    let Some(c) = crate::pg_harness::cluster_or_skip("postgres_bad_passwords") else {
        return;
    };
    c.create_db("lab").unwrap();
    let e = Store::open_url(&c.password_url("lab", "hunter2"))
        .err()
        .unwrap();
    assert!(matches!(e, StoreError::Connect { .. }), "{e}");
    assert!(
        one_line(&e).contains("password authentication failed"),
        "{e}"
    );
    let s = Store::open_url(&c.password_url("lab", crate::pg_harness::PgCluster::PW)).unwrap();
    assert_eq!(s.location(), c.password_url("lab", "***"));
    assert!(s.runs().unwrap().is_empty());
    // A database that does not exist.
    let e = Store::open_url(&c.url("nosuchdb")).err().unwrap();
    assert!(one_line(&e).contains("does not exist"), "{e}");
}

/// A run records its owner; a `running` run reads `killed` when its
/// process is gone or its host rebooted, and is not judged when it runs on
/// another host. Nothing is written back; resuming makes the resumer the
/// owner.
fn a_running_run_whose_process_is_gone_reads_killed(env: &Env) {
    let Some(me) = Owner::current() else {
        return; // no /proc: nothing to judge by
    };
    let s = env.open();
    let run = s.create_run(&new_run("own")).unwrap();
    let row = s.run(run).unwrap();
    assert_eq!(row.owner.as_ref(), Some(&me));
    assert_eq!(row.status, "running", "this process is alive");
    let set = |sql: &str| {
        s.db.execute(sql, &[&run]).unwrap();
    };
    // A pid no process has (above pid_max's ceiling).
    set("UPDATE runs SET pid = 2147483647 WHERE id = $1");
    assert_eq!(s.run(run).unwrap().status, "killed");
    assert!(s.runs().unwrap()[0].killed());
    assert_eq!(
        s.run(run).unwrap().status_line(),
        format!("killed (continue it: kscale run --resume {run})")
    );
    let stored = |s: &Store| {
        s.db.query_one("SELECT status FROM runs WHERE id = $1", &[&run], |r| {
            r.get::<String>(0)
        })
        .unwrap()
    };
    assert_eq!(stored(&s), "running", "judged on read, not written back");
    set("UPDATE runs SET host = 'another-host' WHERE id = $1");
    assert_eq!(s.run(run).unwrap().status, "running", "not ours to judge");
    s.db.execute(
        "UPDATE runs SET host = $1, pid = $2, boot_id = 'an-earlier-boot' WHERE id = $3",
        &[&me.host, &me.pid, &run],
    )
    .unwrap();
    assert_eq!(s.run(run).unwrap().status, "killed", "rebooted since");
    s.set_run_status(run, RunStatus::Running).unwrap();
    let row = s.run(run).unwrap();
    assert_eq!(
        (row.status.as_str(), row.owner.as_ref()),
        ("running", Some(&me))
    );
    s.set_run_status(run, RunStatus::Complete).unwrap();
    set("UPDATE runs SET pid = 2147483647 WHERE id = $1");
    assert_eq!(s.run(run).unwrap().status, "complete", "only running runs");
    // Stored before owners were recorded: unjudged unless it started on
    // this host before its last boot.
    s.db.execute(
        "UPDATE runs SET status = 'running', host = NULL, boot_id = NULL, pid = NULL,
             pid_start = NULL WHERE id = $1",
        &[&run],
    )
    .unwrap();
    assert_eq!(s.run(run).unwrap().owner, None);
    assert_eq!(s.run(run).unwrap().status, "running");
    let snapshot = serde_json::json!({ "hostname": me.host }).to_string();
    s.db.execute(
        "UPDATE runs SET snapshot = $1, started_at = '2000-01-01T00:00:00Z' WHERE id = $2",
        &[&snapshot, &run],
    )
    .unwrap();
    assert_eq!(
        s.run(run).unwrap().status,
        "killed",
        "started before this boot"
    );
}

/// `Store::series`: the done cases of the asked workloads across runs,
/// each with its counted trials, metrics and profiled events, and each run
/// with the host and kernel of its snapshot; other workloads, warm-ups and
/// unfinished cases left out.
fn series_reads_a_workload_across_runs(env: &Env) {
    let s = env.open();
    assert!(s.series(&[]).unwrap().cases.is_empty());
    let mut runs = Vec::new();
    for (i, kernel) in ["6.1", "6.8"].iter().enumerate() {
        let mut r = new_run(&format!("r{i}"));
        r.snapshot = serde_json::json!({"hostname": "lab1", "kernel": {"release": kernel}});
        r.options = serde_json::json!({"rule": {"estimator": "trimmed"}});
        let run = s.create_run(&r).unwrap();
        let c = mem_rd_4k(&s, run);
        let vals = BTreeMap::from([("latency".to_string(), 50.0)]);
        s.add_trial(
            c,
            &NewTrial {
                idx: 0,
                warmup: true,
                wall_s: 0.01,
                iterations: None,
                values: &vals,
                accounting: None,
                histograms: &BTreeMap::new(),
                roles: &[],
            },
        )
        .unwrap();
        for t in 1..4 {
            trial(&s, c, t, i as f64 + t as f64);
        }
        s.finish_case(c, CaseStatus::Done, Some(true), None, None, &[])
            .unwrap();
        // Another workload, and an unfinished case of the asked one.
        let other = converging_case(&s, run, 1, "mem.wr", "4k");
        trial(&s, other, 1, 9.0);
        s.finish_case(other, CaseStatus::Done, Some(true), None, None, &[])
            .unwrap();
        converging_case(&s, run, 2, "mem.rd", "8k");
        runs.push((run, c));
    }
    s.add_profile(
        runs[1].1,
        &kscale_core::profile::ProfileBuilder::new("cpu-clock", "cpu").finish(),
    )
    .unwrap();
    let got = s.series(&["mem.rd".to_string()]).unwrap();
    assert_eq!(got.cases.len(), 2, "the two done mem.rd cases");
    assert_eq!(
        got.runs.keys().copied().collect::<Vec<_>>(),
        vec![runs[0].0, runs[1].0]
    );
    let r1 = &got.runs[&runs[1].0];
    assert_eq!(r1.hostname.as_deref(), Some("lab1"));
    assert_eq!(r1.kernel.as_deref(), Some("6.8"));
    assert_eq!(r1.label, "r1");
    for (i, sc) in got.cases.iter().enumerate() {
        assert_eq!(sc.run_id, runs[i].0);
        assert_eq!(sc.case.id, runs[i].1);
        assert_eq!(sc.case.key, key("mem.rd", "4k"));
        assert_eq!(sc.case.estimator, Estimator::Trimmed);
        let base = i as f64;
        assert_eq!(
            sc.case.values("latency"),
            vec![base + 1.0, base + 2.0, base + 3.0],
            "counted trials only, in order"
        );
        assert_eq!(sc.case.primary().map(|m| m.name.as_str()), Some("latency"));
        // The same case as a whole run's loading reads it.
        let whole = s.load_run(sc.run_id).unwrap();
        let same = whole.cases.iter().find(|c| c.id == sc.case.id).unwrap();
        assert_eq!(same.values("latency"), sc.case.values("latency"));
        assert_eq!(same.converged, sc.case.converged);
    }
    assert!(got.cases[0].profiled.is_empty());
    assert_eq!(got.cases[1].profiled, vec!["cpu-clock".to_string()]);
    let both = s
        .series(&["mem.rd".to_string(), "mem.wr".to_string()])
        .unwrap();
    assert_eq!(both.cases.len(), 4);
}

/// The series' case lookup goes through the `cases_workload` index, not a
/// scan of every case (SQLite's plan; PostgreSQL's planner picks by table
/// size, so a tiny test table says nothing there).
#[test]
fn series_finds_cases_through_the_workload_index() {
    let env = Env::sqlite();
    let s = env.open();
    let plan: Vec<String> =
        s.db.query_rows(
            "EXPLAIN QUERY PLAN SELECT c.id FROM cases c
             WHERE c.workload IN ($1, $2) AND c.status = 'done'",
            &[&"mem.rd", &"mem.wr"],
            |r| r.get::<String>(3),
        )
        .unwrap();
    assert!(
        plan.iter()
            .any(|l| l.contains("USING INDEX cases_workload")),
        "{plan:?}"
    );
}

fn a_case_left_out_is_gone_and_named(env: &Env) {
    let s = env.open();
    let run = s.create_run(&new_run("left")).unwrap();
    let kept = mem_rd_4k(&s, run);
    let gone = converging_case(&s, run, 1, "mem.rd", "8m");
    for t in 0..3 {
        trial(&s, kept, t, 1.0 + t as f64);
        trial(&s, gone, t, 1.0 + 10.0 * t as f64);
    }
    s.leave_out_case(
        run,
        gone,
        "mem.rd size=8m [cpus 1]: left out after 5 trials",
        false,
    )
    .unwrap();
    s.leave_out_case(run, gone + 1000, "a second line", false)
        .unwrap();
    let data = s.load_run(run).unwrap();
    assert_eq!(
        data.cases.len(),
        1,
        "the left-out case is gone with its trials"
    );
    assert_eq!(data.cases[0].id, kept);
    assert_eq!(
        data.run.options["left_out"],
        serde_json::json!([
            "mem.rd size=8m [cpus 1]: left out after 5 trials",
            "a second line"
        ])
    );
    // The options it had are kept.
    assert_eq!(data.run.options["quick"], true);
    // Beside a twin that stays, the row stays, skipped with its line, and
    // its trials go.
    let beside = converging_case(&s, run, 2, "mem.rd", "16m");
    trial(&s, beside, 0, 3.0);
    s.leave_out_case(run, beside, "mem.rd size=16m [cpus 1]: left out", true)
        .unwrap();
    let data = s.load_run(run).unwrap();
    let c = data.cases.iter().find(|c| c.id == beside).unwrap();
    assert_eq!(c.status, CaseStatus::Skipped);
    assert_eq!(
        c.error.as_deref(),
        Some("mem.rd size=16m [cpus 1]: left out")
    );
    assert!(c.trials.is_empty(), "{:?}", c.trials.len());
    assert_eq!(data.run.options["left_out"].as_array().unwrap().len(), 3);
}

/// A run's level for a comparison between runs is its counted trials'
/// plain mean, whatever the case's estimator: ten trials, seven at one
/// speed and three at another, level 2.3; warm-ups left out.
#[test]
fn a_runs_level_is_its_counted_trials_mean() {
    let s = Env::sqlite().open();
    let run = s.create_run(&new_run("level")).unwrap();
    let c = converging_case(&s, run, 0, "syscall.null", "0");
    timed_trial(&s, c, 0, true, 0.01, 100.0);
    for i in 1..=10 {
        trial(&s, c, i, if i <= 7 { 2.0 } else { 3.0 });
    }
    s.finish_case(c, CaseStatus::Done, Some(true), None, None, &[])
        .unwrap();
    let case = &s.load_run(run).unwrap().cases[0];
    let level = case.level("latency").unwrap();
    assert!((level - 2.3).abs() < 1e-9, "{level}");
    assert_eq!(case.level("no such metric"), None);
}
