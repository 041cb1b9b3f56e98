//! The shared PostgreSQL store through the real binary (docs/store.md):
//! four `kscale run` processes writing one store at once with every trial
//! present, readers working meanwhile, the password masked wherever the URL
//! is shown or stored, and bad URLs, refused connections and bad passwords
//! each one line and exit status 2. The server is a throw-away cluster
//! (kscale_store::pg_harness); without Debian's server binaries the
//! PostgreSQL tests skip with a printed reason (a failure under `CI`).

mod common;

use common::kscale;
use kscale_store::pg_harness::{cluster_or_skip, PgCluster};
use kscale_store::Store;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WRITERS: usize = 4;
const TARGETS: [&str; 3] = ["syscall.null", "syscall.read", "syscall.write"];
const TRIALS: i64 = 5;

/// `kscale run` of three cases with exactly five counted trials each.
fn writer(db: &str, label: &str) -> Child {
    Command::new(common::bin())
        .env_remove("KSCALE_DB")
        .env("NO_COLOR", "1")
        .args(["--db", db, "run"])
        .args(TARGETS)
        .args(["--quick", "--cpus", "1", "--trial-time", "0.05"])
        .args(["--min-trials", &TRIALS.to_string()])
        .args(["--max-trials", &TRIALS.to_string()])
        .args(["--no-progress", "--label", label])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kscale")
}

/// Runs four writers at once against `db` while `results`, `show` and
/// `report` read it in a loop, then counts every trial through `open`.
fn four_writers_and_readers(db: &str, open: impl Fn() -> Store, tmp: &Path) {
    let mut children: Vec<Child> = (0..WRITERS).map(|w| writer(db, &format!("w{w}"))).collect();
    let mut reads = 0;
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let running = children
            .iter_mut()
            .any(|c| c.try_wait().expect("wait").is_none());
        if !running {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "writers still running after 300 s"
        );
        // Readers while the runs are being written, once there is
        // something to read: a SQLite file once a writer created it, a run
        // once one is registered.
        if !kscale_store::is_url(db) && !Path::new(db).exists() {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        let out = kscale().args(["--db", db, "results"]).output().unwrap();
        assert!(
            out.status.success(),
            "results: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if String::from_utf8_lossy(&out.stdout).contains(" w") {
            for args in [vec!["show", "latest"], vec!["report", "latest", "-o"]] {
                let mut c = kscale();
                c.args(["--db", db]).args(&args);
                if args[0] == "report" {
                    c.arg(tmp.join("live.html"));
                }
                let out = c.output().unwrap();
                assert!(
                    out.status.success(),
                    "{args:?} while writing: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            reads += 1;
        }
    }
    for (w, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "writer w{w}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    eprintln!("{reads} rounds of results/show/report while the writers ran");
    assert!(reads > 0, "no reader ran while the runs were written");

    let store = open();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), WRITERS, "one run per writer");
    let mut counted = 0;
    for w in 0..WRITERS {
        let id = store.resolve(&format!("w{w}")).unwrap();
        let data = store.load_run(id).unwrap();
        assert_eq!(data.run.status, "complete");
        assert_eq!(data.cases.len(), TARGETS.len());
        for c in &data.cases {
            // Trial indices 0..n without a gap: nothing lost in between.
            let idx: Vec<i64> = c.trials.iter().map(|t| t.idx).collect();
            assert_eq!(
                idx,
                (0..idx.len() as i64).collect::<Vec<_>>(),
                "{}",
                c.key.workload
            );
            let n = c.trials.iter().filter(|t| !t.warmup).count() as i64;
            assert_eq!(
                n, TRIALS,
                "w{w} {}: every counted trial stored",
                c.key.workload
            );
            counted += n;
        }
    }
    assert_eq!(counted, (WRITERS * TARGETS.len()) as i64 * TRIALS);
    // compare across the four runs works as for local runs.
    let out = kscale()
        .args(["--db", db, "compare", "w0", "w1", "w2", "w3"])
        .output()
        .unwrap();
    common::assert_exit(&out, 0);
}

#[test]
fn four_concurrent_writers_fill_one_postgres_store() {
    let Some(pg) = cluster_or_skip("four_concurrent_writers_fill_one_postgres_store") else {
        return;
    };
    let url = pg.create_db("lab").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    four_writers_and_readers(&url, || Store::open_url(&url).unwrap(), tmp.path());
}

/// The same promise on SQLite: WAL and a busy timeout let four processes
/// write one file.
#[test]
fn four_concurrent_writers_fill_one_sqlite_file() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("k.db");
    let s = db.display().to_string();
    four_writers_and_readers(&s, || Store::open(&db).unwrap(), tmp.path());
}

/// A password given in the URL is shown masked and stored masked: in the
/// run's header line, its stored command line and its export.
#[test]
fn postgres_password_is_masked_in_output_and_stored_args() {
    let Some(pg) = cluster_or_skip("postgres_password_is_masked_in_output_and_stored_args") else {
        return;
    };
    pg.create_db("lab").unwrap();
    let url = pg.password_url("lab", PgCluster::PW);
    let null_run = |before: &[&str], label| {
        let mut c = kscale();
        c.args(before).args([
            "run",
            "syscall.null",
            "--quick",
            "--cpus",
            "1",
            "--trial-time",
            "0.05",
            "--no-progress",
            "--label",
            label,
        ]);
        c
    };
    let out = null_run(&[], "masked")
        .args(["--db", &url])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains(PgCluster::PW), "{stderr}");
    assert!(
        stderr.contains(&format!("db {}", pg.password_url("lab", "***"))),
        "{stderr}"
    );
    let store = Store::open_url(&url).unwrap();
    let run = store.run(store.resolve("masked").unwrap()).unwrap();
    let stored = serde_json::to_string(&(&run.args, &run.options)).unwrap();
    assert!(!stored.contains(PgCluster::PW), "{stored}");
    assert!(
        run.args.iter().any(|a| a.contains("kscale_pw:***@")),
        "{:?}",
        run.args
    );
    // The same through KSCALE_DB and `--db=URL`.
    let out = kscale()
        .env("KSCALE_DB", &url)
        .args(["export", "masked", "--format", "json"])
        .output()
        .unwrap();
    common::assert_exit(&out, 0);
    assert!(!String::from_utf8_lossy(&out.stdout).contains(PgCluster::PW));
    let out = null_run(&[&format!("--db={url}")], "masked2")
        .output()
        .unwrap();
    common::assert_exit(&out, 0);
    let run = store.run(store.resolve("masked2").unwrap()).unwrap();
    assert!(
        !format!("{:?}", run.args).contains(PgCluster::PW),
        "{:?}",
        run.args
    );
    // A password from $PGPASSWORD keeps it off the command line altogether.
    let bare = url.replace(&format!(":{}@", PgCluster::PW), "@");
    assert!(!bare.contains(PgCluster::PW));
    let out = kscale()
        .env("PGPASSWORD", PgCluster::PW)
        .args(["--db", &bare, "results"])
        .output()
        .unwrap();
    common::assert_exit(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("masked2"));
    // No user in the URL: the login name, as libpq does.
    let no_user = pg.url("lab").replace("postgres@", "");
    let out = kscale()
        .env("USER", "postgres")
        .args(["--db", &no_user, "results"])
        .output()
        .unwrap();
    common::assert_exit(&out, 0);
}

/// One line on stderr, exit status 2, the password never echoed.
fn refused(mut c: assert_cmd::Command, secret: &str, want: &str) {
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(!stderr.contains(secret), "{stderr}");
    assert!(stderr.contains(want), "want `{want}` in: {stderr}");
}

#[test]
fn bad_postgres_urls_and_refused_connections_exit_2() {
    let secret = "hunter2-secret";
    for (url, want) in [
        (
            format!("postgres://u:{secret}@host:notaport/db"),
            "invalid value for option `port`",
        ),
        (
            format!("postgres://u:{secret}@host/db?colour=blue"),
            "unknown option `colour`",
        ),
        (format!("postgres://u:{secret}@host"), "no database name"),
        (format!("mysql://u:{secret}@host/db"), "unsupported scheme"),
    ] {
        let mut c = kscale();
        c.args(["results", "--db", &url]);
        refused(c, secret, want);
        let mut c = kscale();
        c.env("KSCALE_DB", &url).args(["show", "latest"]);
        refused(c, secret, "u:***@");
    }
    // Nothing listens in this socket directory.
    let empty = tempfile::tempdir().unwrap();
    let url = format!(
        "postgres://u:{secret}@{}/db",
        empty.path().display().to_string().replace('/', "%2F")
    );
    let mut c = kscale();
    c.args(["run", "syscall.null", "--quick", "--db", &url]);
    refused(c, secret, "cannot connect to postgres://u:***@");

    let Some(pg) = cluster_or_skip("bad_postgres_urls_and_refused_connections_exit_2") else {
        return;
    };
    pg.create_db("lab").unwrap();
    let mut c = kscale();
    c.env("KSCALE_DB", pg.password_url("lab", secret))
        .args(["results"]);
    refused(c, secret, "password authentication failed");
    let mut c = kscale();
    c.args(["results", "--db", &pg.url("nosuchdb")]);
    refused(c, secret, "database \"nosuchdb\" does not exist");
}

/// Every trial in the store, 0 if it cannot be read yet.
fn stored_trials(url: &str) -> (usize, usize) {
    let Ok(s) = Store::open_url(url) else {
        return (0, 0);
    };
    let mut n = (0, 0);
    for r in s.runs().unwrap_or_default() {
        if let Ok(d) = s.load_run(r.id) {
            for c in &d.cases {
                n.0 += c.trials.len();
                n.1 += c.trials.iter().filter(|t| t.warmup).count();
            }
        }
    }
    n
}

/// "Each trial committed as it ends" on PostgreSQL through the binary: a
/// SIGKILLed run keeps its trials and `--resume` finishes it without
/// redoing them; Ctrl-C marks a run interrupted.
#[test]
fn postgres_run_killed_then_resumed_and_interrupted() {
    let Some(pg) = cluster_or_skip("postgres_run_killed_then_resumed_and_interrupted") else {
        return;
    };
    let url = pg.create_db("lab").unwrap();
    let slow = |label: &str| {
        Command::new(common::bin())
            .env("NO_COLOR", "1")
            .args(["--db", &url])
            .args(common::SLOW_RUN)
            .args(["--label", label])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn kscale")
    };
    let wait_trials = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while stored_trials(&url).0 < n {
            assert!(Instant::now() < deadline, "fewer than {n} trials stored");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let mut child = slow("killed");
    wait_trials(4);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let store = Store::open_url(&url).unwrap();
    let id = store.resolve("killed").unwrap();
    assert_eq!(
        store.run(id).unwrap().status,
        "killed",
        "its process is gone"
    );
    let before = stored_trials(&url).0;
    assert!(before >= 4);

    let out = kscale()
        .args(["--db", &url, "run", "--resume", "killed", "--no-progress"])
        .output()
        .unwrap();
    common::assert_exit(&out, 0);
    let data = store.load_run(id).unwrap();
    assert_eq!(data.run.status, "complete");
    assert_eq!(data.cases.len(), 6, "3 workloads × 2 configurations");
    let (after, warmups) = stored_trials(&url);
    assert!(after > before, "resume added trials");
    assert_eq!(warmups, 6, "exactly one warm-up per case: none redone");

    let mut child = slow("stopped");
    wait_trials(after + 2);
    common::signal(&child, nix::sys::signal::Signal::SIGINT);
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let id = store.resolve("stopped").unwrap();
    assert_eq!(store.run(id).unwrap().status, "interrupted");
}
