//! Run records that keep no secret and take no label that breaks a line
//! (docs/store.md): every command that stores a run masks store passwords
//! and peer tokens in what it stores, `show`, `export` and the report mask
//! again what older kscales stored, and labels with control characters are
//! refused in one line.

mod common;

use common::{assert_refused, kscale, Env};
use kscale_store::pg_harness::{cluster_or_skip, PgCluster};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A one-step tuning plan that needs no root: the step changes a param.
fn param_plan(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("plan.toml");
    std::fs::write(
        &p,
        r#"[target]
workloads = ["syscall.stat"]
cpus = "1"

[[step]]
name = "given-file"
rationale = "stat a given file instead of the scratch one"
settings = [{ kind = "param", key = "file", value = "/etc/hostname" }]
"#,
    )
    .expect("write plan");
    p
}

#[test]
fn labels_with_control_characters_are_refused_in_one_line_by_every_command() {
    let env = Env::new();
    let plan = param_plan(env.path());
    let plan = plan.to_str().expect("utf-8 path");
    for label in ["a\nb", "tab\there", "\u{1b}[31mred", "cr\r"] {
        let commands: [Vec<&str>; 6] = [
            vec!["run", "syscall.null", "--label", label],
            vec!["study", "--quick", "--label", label],
            vec!["check", "--baseline", "x", "syscall.null", "--label", label],
            vec!["tune", plan, "--quick", "--label", label],
            vec!["fleet", "--hosts", "h1", "--label", label, "syscall.null"],
            vec!["import", "--label", label, "nosuch.json"],
        ];
        for args in commands {
            let out = env.cmd(&args).output().expect("start kscale");
            assert_refused(&out, "control characters", &format!("{args:?}"));
        }
    }
    assert!(!env.db().exists(), "a refused label stored nothing");
}

/// `kscale --db URL ARGS` run to the end in the env's directory: the
/// store at `url` rather than the env's own database.
fn kscale_on(url: &str, env: &Env, args: &[&str]) -> std::process::Output {
    kscale()
        .current_dir(env.path())
        .args(["--db", url])
        .args(args)
        .output()
        .expect("start kscale")
}

/// Exits of `kscale ARGS` that store runs; `ok` the statuses accepted.
fn run_to_end(url: &str, env: &Env, args: &[&str], ok: &[i32]) {
    let out = kscale_on(url, env, args);
    let code = out.status.code().unwrap_or(-1);
    assert!(
        ok.contains(&code),
        "kscale {args:?}: status {code}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `kscale ARGS` against `url`, its stdout (and nothing on failure).
fn read(url: &str, env: &Env, args: &[&str]) -> String {
    let out = kscale_on(url, env, args);
    common::stdout_of_success(&out, &format!("{args:?}"))
}

/// Every place a stored run can be seen, as text: the store's own rows,
/// `results`, and each run's `show`, `export` (JSON and CSV) and report.
fn everything_shown(url: &str, env: &Env, raw: String) -> String {
    let mut all = raw;
    all.push_str(&read(url, env, &["results"]));
    let store = kscale_store::Store::open_url(url).expect("open the store");
    let runs = store.runs().expect("runs");
    for r in &runs {
        let id = r.id.to_string();
        all.push_str(&read(url, env, &["show", &id]));
        all.push_str(&read(url, env, &["export", &id, "--format", "json"]));
        all.push_str(&read(url, env, &["export", &id, "--format", "csv"]));
        let html = env.path().join(format!("report-{id}.html"));
        read(
            url,
            env,
            &["report", &id, "-o", html.to_str().expect("utf-8")],
        );
        all.push_str(&std::fs::read_to_string(&html).expect("the report"));
    }
    all
}

/// `tune`, `study`, `check` and `run` with the store's password in `--db`
/// and a peer token in `--token`: neither is in the store, `results`,
/// `show`, `export` or the report, while the masked URL is.
#[test]
fn no_password_or_token_in_any_record() {
    let Some(pg) = cluster_or_skip("no_password_or_token_in_any_record") else {
        return;
    };
    pg.create_db("lab").expect("create db");
    let url = pg.password_url("lab", PgCluster::PW);
    let token = "tok-Secret-77";
    let env = Env::new();
    let tiny = [
        "--quick",
        "--cpus",
        "1",
        "--trial-time",
        "0.02",
        "--min-trials",
        "2",
        "--max-trials",
        "2",
        "--no-progress",
    ];
    let with = |head: &[&str]| -> Vec<String> {
        head.iter()
            .chain(tiny.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let base = with(&["run", "syscall.null", "--label", "base", "--token", token]);
    run_to_end(
        &url,
        &env,
        &base.iter().map(String::as_str).collect::<Vec<_>>(),
        &[0],
    );
    let tokeq = format!("--token={token}");
    let check = with(&[
        "check",
        "--baseline",
        "base",
        "--threshold",
        "50%",
        "syscall.null",
        "--label",
        "now",
        &tokeq,
    ]);
    // Good, regressed, or "cannot tell" from two trials: the run is stored.
    run_to_end(
        &url,
        &env,
        &check.iter().map(String::as_str).collect::<Vec<_>>(),
        &[0, 1, 125],
    );
    let plan = param_plan(env.path());
    let report = env.path().join("tune.html");
    run_to_end(
        &url,
        &env,
        &[
            "tune",
            plan.to_str().expect("utf-8"),
            "--quick",
            "--trial-time",
            "0.02",
            "--max-trials",
            "3",
            "--no-progress",
            "--label",
            "tn",
            "-o",
            report.to_str().expect("utf-8"),
        ],
        &[0],
    );
    let tune_report = std::fs::read_to_string(&report).expect("tune's report");

    // A whole study takes minutes: it is stopped once its run has trials.
    let mut study = std::process::Command::new(common::bin())
        .current_dir(env.path())
        .env("NO_COLOR", "1")
        .args([
            "--db",
            &url,
            "study",
            "--quick",
            "--no-profile",
            "--no-progress",
        ])
        .args(["--suite", "micro", "--label", "st"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn kscale study");
    let store = kscale_store::Store::open_url(&url).expect("open the store");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let trials = store
            .resolve("st")
            .and_then(|id| store.load_run(id))
            .map(|d| d.cases.iter().map(|c| c.trials.len()).sum::<usize>())
            .unwrap_or(0);
        if trials > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the study stored no trial");
        std::thread::sleep(Duration::from_millis(100));
    }
    common::signal(&study, nix::sys::signal::Signal::SIGINT);
    assert_eq!(study.wait().expect("wait").code(), Some(130));

    let mut raw = String::new();
    let mut c = pg.client("lab").expect("client");
    for row in c
        .query("SELECT label, args, options, snapshot FROM runs", &[])
        .expect("runs")
    {
        for i in 0..4 {
            raw.push_str(row.get::<_, &str>(i));
        }
    }
    for row in c
        .query("SELECT plan_file, plan FROM tunes", &[])
        .expect("tunes")
    {
        raw.push_str(row.get::<_, &str>(0));
        raw.push_str(row.get::<_, &str>(1));
    }
    let labels: Vec<String> = store
        .runs()
        .expect("runs")
        .into_iter()
        .map(|r| r.label)
        .collect();
    for l in ["base", "now", "st", "tn.0-baseline", "tn.1-given-file"] {
        assert!(labels.iter().any(|x| x == l), "no run {l} in {labels:?}");
    }
    let all = everything_shown(&url, &env, raw) + &tune_report;
    assert!(!all.contains(PgCluster::PW), "the password was recorded");
    assert!(!all.contains(token), "the token was recorded");
    assert!(all.contains("kscale_pw:***@"), "the masked URL is kept");
}

/// A run stored by a kscale that did not mask (simulated by writing the
/// secret back into its row) comes out masked all the same.
#[test]
fn runs_stored_before_masking_are_masked_on_the_way_out() {
    let env = Env::new();
    env.tiny_run(&["syscall.null"], "1", "old")
        .assert()
        .success();
    let secret = "old-Secret-9";
    let db = rusqlite::Connection::open(env.db()).expect("open");
    db.execute(
        "UPDATE runs SET args = ?1, options = json_set(options, '$.dir', ?2),
             snapshot = json_set(snapshot, '$.peer_token', ?3)",
        [
            serde_json::json!([
                "kscale",
                "--db",
                format!("postgres://u:{secret}@h/lab"),
                "run",
                "--token",
                secret,
            ])
            .to_string(),
            format!("host=/tmp password={secret}"),
            secret.to_string(),
        ],
    )
    .expect("write the secret back");
    drop(db);
    let db = env.db().display().to_string();
    let html = env.path().join("old.html");
    let mut all = env.show("old");
    for args in [
        vec!["export", "old", "--format", "json"],
        vec!["export", "old", "--format", "csv"],
        vec!["results"],
        vec!["report", "old", "-o", html.to_str().expect("utf-8")],
    ] {
        all.push_str(&read(&db, &env, &args));
    }
    all.push_str(&std::fs::read_to_string(&html).expect("report"));
    assert!(!all.contains(secret), "{all}");
    assert!(all.contains("u:***@h/lab"));
}

fn stored_trials(env: &Env) -> i64 {
    rusqlite::Connection::open(env.db())
        .and_then(|c| c.query_row("SELECT count(*) FROM trials", [], |r| r.get(0)))
        .unwrap_or(0)
}

/// SIGKILL in the middle of a macro run (`net.tcp_rr`): the store still
/// says `running`, but `results`, `show` and `export` read `killed` and
/// offer `--resume`, which continues the run to `complete`. While the run
/// lives it reads `running` and `--resume` refuses it.
#[test]
fn a_sigkilled_macro_run_reads_killed_and_resume_finishes_it() {
    let env = Env::new();
    let mark = format!("killed-{}", std::process::id());
    let mut args = common::short_tcp_rr("conns=2", "duration=0.3");
    // Four trials: long enough to be caught midway.
    let four = args.iter().position(|a| *a == "--min-trials").expect("min");
    args[four + 1] = "4";
    args[four + 3] = "4";
    let mut child = env.spawn_marked(&mark, &args);
    assert!(
        common::wait_for(|| stored_trials(&env) >= 1, 60),
        "no trial was stored"
    );
    let results = |env: &Env| read(&env.db().display().to_string(), env, &["results"]);
    assert!(results(&env).contains("running"), "{}", results(&env));
    let out = env
        .cmd(&["run", "--resume", "latest", "--no-progress"])
        .output()
        .expect("start kscale");
    assert_refused(
        &out,
        "is still running as process",
        "--resume of a live run",
    );

    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    common::assert_no_marked_processes(&mark);
    let text = results(&env);
    assert!(text.contains(" killed "), "{text}");
    assert!(
        text.contains("kscale run --resume 1` continues it"),
        "{text}"
    );
    assert!(
        env.show("1")
            .contains("killed (continue it: kscale run --resume 1)"),
        "{}",
        env.show("1")
    );
    assert_eq!(env.export("1")["run"]["status"], "killed");
    let raw: String = rusqlite::Connection::open(env.db())
        .and_then(|c| c.query_row("SELECT status FROM runs", [], |r| r.get(0)))
        .expect("status");
    assert_eq!(raw, "running", "judged on read, not written back");

    let before = stored_trials(&env);
    env.cmd(&["run", "--resume", "1", "--no-progress"])
        .assert()
        .success();
    let j = env.export("1");
    assert_eq!(j["run"]["status"], "complete");
    let r = &j["results"][0];
    assert_eq!(r["status"], "done", "{r}");
    assert_eq!(r["n"], 4, "{r}");
    assert!(stored_trials(&env) > before, "resume added trials");
    assert!(!results(&env).contains("killed"));
}
