//! docs/method.md: every kind of bad input gets one line on stderr and status 2.

mod common;
use common::{refused, Env};

#[test]
fn bad_inputs_exit_2_with_one_line() {
    let env = Env::new();
    let cases: &[(&[&str], &str)] = &[
        (
            &["run", "nosuch.workload"],
            "unknown workload or family `nosuch.workload`",
        ),
        (&["run", "--suite", "nosuch"], "unknown suite `nosuch`"),
        (&["run"], "nothing to run"),
        (&["run", "syscall.null", "--cpus", "0"], "at least 1"),
        (&["run", "syscall.null", "--cpus", "1,,2"], "bad CPU list"),
        (
            &["run", "syscall.null", "--cpus", "two"],
            "`two` is not a count",
        ),
        (&["run", "syscall.null", "--cpus", "4096"], "exceeds"),
        (
            &["run", "syscall.null", "--cpus", "0-4095"],
            "does not offer",
        ),
        (&["run", "syscall.null", "--ci", "5"], "bad --ci `5`"),
        (
            &["run", "syscall.null", "--cpu-idle", "halt"],
            "invalid value 'halt' for '--cpu-idle <CPU_IDLE>' [possible values: auto, poll, as-is]",
        ),
        (&["run", "syscall.null", "--ci", "5@100"], "bad --ci"),
        (
            &["run", "syscall.null", "--min-trials", "1"],
            "--min-trials",
        ),
        (
            &[
                "run",
                "syscall.null",
                "--min-trials",
                "5",
                "--max-trials",
                "3",
            ],
            "--max-trials",
        ),
        (
            &["run", "syscall.null", "--trial-time", "-1"],
            "--trial-time",
        ),
        (
            &["run", "syscall.null", "--trial-time", "abc"],
            "invalid value",
        ),
        (
            &["run", "syscall.null", "--param", "size=4k"],
            "has no param `size`",
        ),
        (&["run", "syscall.null", "--param", "size"], "bad --param"),
        // A choice param names the bad value and every accepted one.
        (
            &["run", "syscall.pipe", "--param", "place=foo"],
            "bad value `foo` for syscall.pipe param `place`: expected one of spread, same, os",
        ),
        (
            &["run", "syscall.null", "--dir", "/nonexistent/dir"],
            "not an existing directory",
        ),
        (&["run", "syscall.null", "--label", "42"], "bad --label"),
        (&["run", "--bogus-flag"], "--bogus-flag"),
        (&["list", "--family", "nope"], "unknown family `nope`"),
        // One --format for every command; each refuses what it cannot write.
        (
            &["cpus", "--format", "csv"],
            "bad --format `csv`: kscale cpus writes terminal or json",
        ),
        (
            &["list", "--format", "md"],
            "bad --format `md`: kscale list writes terminal or json",
        ),
        // tune interleaves its steps itself; a pace it would not keep is refused.
        (
            &["tune", "--span", "20s", "plan.toml"],
            "--span 20s does not apply to tune",
        ),
        // No database yet.
        (&["show", "latest"], "no database"),
        (&["results"], "no database"),
        (&["run", "--resume", "latest"], "no database"),
    ];
    for (args, needle) in cases {
        refused(&env, args, needle);
    }
}

#[test]
fn bad_databases_and_runs() {
    let env = Env::new();
    // An empty but valid store: unknown runs are refused.
    env.tiny_run(&["syscall.null"], "1", "a").assert().success();
    refused(&env, &["show", "nosuchlabel"], "no run `nosuchlabel`");
    refused(&env, &["show", "999"], "no run `999`");
    refused(
        &env,
        &["export", "latest", "--format", "xml"],
        "invalid value 'xml'",
    );
    refused(
        &env,
        &["export", "latest", "--format", "terminal"],
        "bad --format `terminal`: kscale export writes json or csv",
    );
    refused(
        &env,
        &["show", "latest", "--format", "json"],
        "bad --format `json`: kscale show writes terminal, md or csv",
    );
    refused(&env, &["run", "--resume", "a"], "already complete");
    // A metric no case records.
    refused(
        &env,
        &["compare", "a", "a", "--metric", "p99"],
        "no case of these runs has a metric `p99` (metrics: latency)",
    );
    refused(
        &env,
        &["scale", "a", "--metric", "p99"],
        "has a metric `p99`",
    );

    // A file that is not a database at all.
    let junk = env.path().join("junk.db");
    std::fs::write(
        &junk,
        "not a database, just a text file of sufficient length to look like a header",
    )
    .unwrap();
    let out = common::kscale()
        .arg("--db")
        .arg(&junk)
        .args(["results"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a kscale database"));

    // A database from a newer kscale.
    {
        let c = rusqlite::Connection::open(env.db()).unwrap();
        c.pragma_update(None, "user_version", 999).unwrap();
    }
    refused(&env, &["results"], "newer kscale");
}
