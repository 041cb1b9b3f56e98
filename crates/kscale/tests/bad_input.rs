//! docs/method.md: every kind of bad input gets one line on stderr and status 2.

mod common;
use common::{refused, Env};

#[test]
fn bad_inputs_exit_2_with_one_line() {
    let env = Env::new();
    refused(
        &env,
        &["run", "nosuch.workload"],
        "unknown workload or family `nosuch.workload`",
    );
    refused(
        &env,
        &["run", "--suite", "nosuch"],
        "unknown suite `nosuch`",
    );
    refused(&env, &["run"], "nothing to run");
    refused(&env, &["run", "syscall.null", "--cpus", "0"], "at least 1");
    refused(
        &env,
        &["run", "syscall.null", "--cpus", "1,,2"],
        "bad CPU list",
    );
    refused(
        &env,
        &["run", "syscall.null", "--cpus", "two"],
        "`two` is not a count",
    );
    refused(&env, &["run", "syscall.null", "--cpus", "4096"], "exceeds");
    refused(
        &env,
        &["run", "syscall.null", "--cpus", "0-4095"],
        "does not offer",
    );
    refused(&env, &["run", "syscall.null", "--ci", "5"], "bad --ci `5`");
    refused(&env, &["run", "syscall.null", "--ci", "5@100"], "bad --ci");
    refused(
        &env,
        &["run", "syscall.null", "--min-trials", "1"],
        "--min-trials",
    );
    refused(
        &env,
        &[
            "run",
            "syscall.null",
            "--min-trials",
            "5",
            "--max-trials",
            "3",
        ],
        "--max-trials",
    );
    refused(
        &env,
        &["run", "syscall.null", "--trial-time", "-1"],
        "--trial-time",
    );
    refused(
        &env,
        &["run", "syscall.null", "--trial-time", "abc"],
        "invalid value",
    );
    refused(
        &env,
        &["run", "syscall.null", "--param", "size=4k"],
        "has no param `size`",
    );
    refused(
        &env,
        &["run", "syscall.null", "--param", "size"],
        "bad --param",
    );
    // A choice param names the bad value and every accepted one.
    refused(
        &env,
        &["run", "syscall.pipe", "--param", "place=foo"],
        "bad value `foo` for syscall.pipe param `place`: expected one of spread, same, os",
    );
    refused(
        &env,
        &["run", "syscall.null", "--dir", "/nonexistent/dir"],
        "not an existing directory",
    );
    refused(
        &env,
        &["run", "syscall.null", "--label", "42"],
        "bad --label",
    );
    refused(&env, &["run", "--bogus-flag"], "--bogus-flag");
    refused(&env, &["list", "--family", "nope"], "unknown family `nope`");
    // No database yet.
    refused(&env, &["show", "latest"], "no database");
    refused(&env, &["results"], "no database");
    refused(&env, &["run", "--resume", "latest"], "no database");
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
