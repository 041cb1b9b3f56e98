//! fileserver.trace on the real binary, with a short loadfile of the
//! test's own (dbench need not be installed): a quick run and what it
//! leaves, a corrupted file failing its case, and a missing loadfile.

mod common;
use common::{assert_none_marked, Env};
use std::path::{Path, PathBuf};

/// Every kind of call, four recorded failures and one call recorded as
/// failing that succeeds on Linux (crates/kscale-workloads's unit tests
/// replay the same file).
const SHORT_TRACE: &str = include_str!("../../kscale-workloads/src/fileserver/short-trace.txt");

/// The short loadfile written into the test's directory, by absolute path.
fn short_trace(env: &Env) -> PathBuf {
    let p = env.path().join("short.load");
    std::fs::write(&p, SHORT_TRACE).unwrap();
    p
}

fn trace_param(p: &Path) -> String {
    format!("trace={}", p.display())
}

/// Every file and directory under `dir` but the database and the loadfile.
fn leftovers(dir: &Path) -> Vec<String> {
    common::leftovers(dir, |e, at_top| at_top && e.file_name() == "short.load")
}

#[test]
fn quick_run_replays_counts_mismatches_and_leaves_nothing() {
    let env = Env::new();
    let trace = trace_param(&short_trace(&env));
    let mark = format!("fstq-{}", std::process::id());
    let mut args = common::two_trials("fileserver.trace", &[&trace, "duration=1"]);
    args.push("--quick");
    let out = env
        .cmd(&args)
        .env("KSCALE_TEST_MARK", &mark)
        .output()
        .unwrap();
    let text = common::stdout_of_success(&out, "run fileserver.trace");
    assert!(
        text.contains("clients=1") && text.contains("clients=4"),
        "{text}"
    );
    for m in ["MB/s", "ops/s", "mismatches", "p99_readx", "p99_flush"] {
        assert!(text.contains(m), "no {m} in:\n{text}");
    }
    assert!(text.contains("every read verified"), "{text}");
    assert!(text.contains("36 calls a pass"), "{text}");
    assert!(text.contains("failed as the trace recorded"), "{text}");
    // Line 28 succeeds where the trace recorded a failure, every pass.
    assert!(
        text.contains("mismatch: line 28 (QUERY_PATH_INFORMATION) succeeded"),
        "{text}"
    );
    env.assert_primary_done("mbps", 2);
    let mismatches: Vec<f64> = env
        .results("latest")
        .iter()
        .filter(|r| r["metric"] == "mismatches")
        .filter_map(|r| r["mean"].as_f64())
        .collect();
    assert_eq!(mismatches.len(), 2, "{mismatches:?}");
    assert!(mismatches.iter().all(|&m| m >= 1.0), "{mismatches:?}");
    assert_none_marked(&mark);
    assert_eq!(leftovers(env.path()), Vec::<String>::new());
}

/// A byte flipped behind client 0's back is read back, noticed, and the
/// case fails.
#[test]
fn a_corrupted_file_fails_the_case() {
    let env = Env::new();
    let trace = trace_param(&short_trace(&env));
    env.run_corrupted("fileserver.trace", &[&trace]);
    let err = common::failed_case_error(&env.export("latest"));
    assert!(
        err.contains("client 0") && err.contains("data mismatch: clients/client0/sub/"),
        "{err}"
    );
    assert_eq!(leftovers(env.path()), Vec::<String>::new());
}

/// A loadfile that is not there: the case fails with one line naming the
/// value and what is accepted.
#[test]
fn a_missing_trace_fails_its_case_with_one_line() {
    let env = Env::new();
    let missing = env.path().join("nope.txt");
    let out = env
        .cmd(&[
            "run",
            "fileserver.trace",
            "--param",
            "clients=1",
            "--param",
            &trace_param(&missing),
            "--param",
            "duration=0.2",
            "--no-progress",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = common::failed_case_error(&env.export("latest"));
    assert!(
        err.starts_with(&format!("trace={}: cannot read it", missing.display()))
            && err.contains("accepted: the absolute path of a dbench loadfile")
            && !err.contains('\n'),
        "{err}"
    );
    assert_eq!(leftovers(env.path()), Vec::<String>::new());
}
