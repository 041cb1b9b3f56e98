//! Runs of macro workloads that end badly — Ctrl-C, SIGTERM, SIGKILL of the
//! parent, a crashing server, a hung load generator — and of `ctx`, whose
//! worker forks a ring of processes. After each: no process of the run, no
//! listening socket, no scratch directory. Each run happens in a network
//! namespace of its own, so its sockets can be counted exactly.

mod common;
use common::netns::Netns;
use common::{
    assert_exit, assert_no_marked_processes, comm, marked_processes, signal, wait_for, Env,
};
use nix::sys::signal::Signal;
use std::process::{Child, Stdio};

/// A short net.tcp_rr run: two connections, 0.3 s windows.
fn tcp_rr() -> Vec<&'static str> {
    common::short_tcp_rr("conns=2", "duration=0.3")
}

fn spawn_in(ns: &Netns, env: &Env, mark: &str, args: &[&str], extra: &[(&str, &str)]) -> Child {
    let mut c = ns.kscale(env, Some(mark));
    c.args(args).stdout(Stdio::null()).stderr(Stdio::piped());
    for (k, v) in extra {
        c.env(k, v);
    }
    c.spawn().expect("spawn kscale")
}

/// Nothing of the run is left: processes, listening sockets, scratch.
fn assert_clean(ns: &Netns, env: &Env, mark: &str, scratch_too: bool) {
    assert_no_marked_processes(mark);
    assert!(
        wait_for(|| ns.listening_sockets() == 0, 5),
        "{} listening socket(s) left",
        ns.listening_sockets()
    );
    if scratch_too {
        assert!(env.scratch_dirs().is_empty(), "{:?}", env.scratch_dirs());
    }
}

fn wait_for_role(mark: &str, name: &str) -> bool {
    wait_for(
        || marked_processes(mark).iter().any(|p| comm(*p) == name),
        60,
    )
}

/// Runs [`tcp_rr`] in its own namespace with `extra` in its environment,
/// waits for it to exit with `code`, and fails unless it left nothing
/// behind; returns the run's export.
fn run_to_end(tag: &str, code: i32, extra: &[(&str, &str)]) -> Option<serde_json::Value> {
    let ns = Netns::or_skip(tag)?;
    let env = Env::new();
    let mark = format!("m{tag}-{}", std::process::id());
    let child = spawn_in(&ns, &env, &mark, &tcp_rr(), extra);
    let out = child.wait_with_output().unwrap();
    assert_exit(&out, code);
    assert_clean(&ns, &env, &mark, true);
    Some(env.export("latest"))
}

/// A run whose only case failed is `failed`, with the case's error.
fn failed_case_error(j: &serde_json::Value) -> String {
    assert_eq!(j["run"]["status"], "failed");
    let r = &j["results"][0];
    assert_eq!(r["status"], "failed", "{r}");
    r["error"].as_str().unwrap_or("").to_string()
}

#[test]
fn a_macro_run_that_ends_normally_leaves_nothing() {
    let Some(j) = run_to_end("ok", 0, &[]) else {
        return;
    };
    let r = &j["results"][0];
    assert_eq!(r["status"], "done", "{r}");
}

fn interrupt_macro(sig: Signal, code: i32) {
    let Some(ns) = Netns::or_skip(&format!("s{}", sig as i32)) else {
        return;
    };
    let env = Env::new();
    let mark = format!("msig{}-{}", sig as i32, std::process::id());
    let mut child = spawn_in(&ns, &env, &mark, &tcp_rr(), &[]);
    assert!(
        wait_for_role(&mark, "kscale-load"),
        "no load generator appeared"
    );
    signal(&child, sig);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(code), "{status:?}");
    assert_clean(&ns, &env, &mark, true);
    assert_eq!(env.export("latest")["run"]["status"], "interrupted");
}

#[test]
fn ctrl_c_stops_server_and_load() {
    interrupt_macro(Signal::SIGINT, 130);
}

#[test]
fn sigterm_stops_server_and_load() {
    interrupt_macro(Signal::SIGTERM, 143);
}

#[test]
fn sigkill_of_the_parent_takes_every_role_with_it() {
    let Some(ns) = Netns::or_skip("kill") else {
        return;
    };
    let env = Env::new();
    let mark = format!("mkill-{}", std::process::id());
    let mut child = spawn_in(&ns, &env, &mark, &tcp_rr(), &[]);
    assert!(wait_for_role(&mark, "kscale-server"), "no server appeared");
    assert!(
        wait_for_role(&mark, "kscale-load"),
        "no load generator appeared"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    // The scratch directory of a SIGKILLed run is removed by the next run.
    assert_clean(&ns, &env, &mark, false);
}

#[test]
fn a_crashing_server_costs_its_case() {
    // The run's only case failed: the run is `failed`, status 1.
    let fault = [("KSCALE_FAULT", "crash:net.tcp_rr:server")];
    let Some(j) = run_to_end("crash", 1, &fault) else {
        return;
    };
    let err = failed_case_error(&j);
    assert!(
        err.contains("signal 6") || err.contains("closed") || err.contains("failed"),
        "{err}"
    );
}

#[test]
fn a_hung_load_generator_is_killed() {
    // The run's only case failed: the run is `failed`, status 1.
    let fault = [
        ("KSCALE_FAULT", "hang:net.tcp_rr:load"),
        ("KSCALE_TRIAL_TIMEOUT", "3"),
    ];
    let Some(j) = run_to_end("hang", 1, &fault) else {
        return;
    };
    let err = failed_case_error(&j);
    assert!(err.contains("did not answer in time"), "{err}");
}

/// ctx's worker forks a ring of processes: a SIGKILLed run takes all of
/// them with it.
#[test]
fn sigkill_during_ctx_leaves_no_ring_process() {
    let env = Env::new();
    let mark = format!("mctx-{}", std::process::id());
    let mut child = env.spawn_marked(
        &mark,
        &[
            "run",
            "ctx",
            "--param",
            "procs=16",
            "--param",
            "size=0",
            "--quick",
            // Long enough to be caught with its ring up: on a quiet machine
            // three 0.1 s trials converge the case, and the run ended
            // between two looks of the test.
            "--trial-time",
            "1",
            "--min-trials",
            "20",
            "--no-progress",
        ],
    );
    // The ring is up once the worker has forked its 15 other members.
    assert!(
        wait_for(|| marked_processes(&mark).len() >= 10, 60),
        "the ring never formed: {:?}",
        marked_processes(&mark)
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert_no_marked_processes(&mark);
}
