//! Every micro family runs end to end on the real binary with --quick, and
//! every case yields a finite positive figure or a visible failure.

mod common;
use common::Env;

/// Families run one at a time: measurements pinned to the same CPU by
/// parallel tests would disturb each other (ctx's overhead subtraction in
/// particular).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run_family(family: &str, extra: &[&str]) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let mut args = vec![
        "run",
        family,
        "--quick",
        "--cpus",
        "1",
        "--no-progress",
        "--label",
        "t",
    ];
    args.extend_from_slice(extra);
    let out = env.cmd(&args).output().unwrap();
    let stdout = common::stdout_of_success(&out, family);
    assert!(
        stdout.contains(&format!("({family})")),
        "{family}: no table\n{stdout}"
    );
    let results = env.primary("t");
    assert!(!results.is_empty(), "{family}: no results");
    for r in results {
        assert_eq!(r["status"], "done", "{family}: {r}");
        let mean = r["mean"].as_f64().unwrap();
        assert!(mean.is_finite() && mean > 0.0, "{family}: {r}");
        assert!(r["n"].as_u64().unwrap() >= 3, "{family}: {r}");
        assert_eq!(
            r["trials"].as_array().unwrap().len() as u64,
            r["n"].as_u64().unwrap()
        );
        assert!(r["ci_low"].as_f64().unwrap() <= mean && mean <= r["ci_high"].as_f64().unwrap());
    }
}

#[test]
fn syscall_family() {
    run_family("syscall", &["--trial-time", "0.05"]);
}

#[test]
fn ipc_family() {
    run_family("ipc", &["--trial-time", "0.05"]);
}

#[test]
fn ctx_family() {
    run_family(
        "ctx",
        &[
            "--trial-time",
            "0.05",
            "--param",
            "procs=2,8",
            "--param",
            "size=0,16k",
        ],
    );
}

#[test]
fn mem_family() {
    run_family("mem", &["--trial-time", "0.05", "--param", "size=0.5m,8m"]);
}

#[test]
fn fs_family() {
    run_family("fs", &["--trial-time", "0.05"]);
}
