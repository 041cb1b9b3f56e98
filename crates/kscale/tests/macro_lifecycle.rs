//! Runs of macro workloads that end badly — Ctrl-C, SIGTERM, SIGKILL of the
//! parent, a crashing server, a hung load generator — and of `ctx`, whose
//! worker forks a ring of processes. After each: no process of the run, no
//! listening socket, no scratch directory. Each run happens in a network
//! namespace of its own, so its sockets can be counted exactly.

mod common;
use common::netns::Netns;
use common::{assert_no_marked_processes, comm, marked_processes, skip, wait_for, Env};
use nix::sys::signal::Signal;
use std::process::{Child, Stdio};

/// A short net.tcp_rr run: two connections, 0.3 s windows, two counted
/// trials per case, on 1 CPU (so the load runs on the other).
const TCP_RR: &[&str] = &[
    "run",
    "net.tcp_rr",
    "--cpus",
    "1",
    "--quick",
    "--param",
    "conns=2",
    "--param",
    "duration=0.3",
    "--min-trials",
    "2",
    "--max-trials",
    "2",
    "--no-progress",
];

fn netns(tag: &str) -> Option<Netns> {
    match Netns::new(tag) {
        Ok(n) => Some(n),
        Err(e) => {
            skip(&format!("network namespaces refused: {e}"));
            None
        }
    }
}

fn spawn_in(ns: &Netns, env: &Env, mark: &str, args: &[&str], extra: &[(&str, &str)]) -> Child {
    let mut c = ns.kscale(env, Some(mark));
    c.args(args).stdout(Stdio::null()).stderr(Stdio::piped());
    for (k, v) in extra {
        c.env(k, v);
    }
    c.spawn().expect("spawn kscale")
}

fn scratch_dirs(env: &Env) -> Vec<String> {
    std::fs::read_dir(env.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".kscale-tmp-"))
        .collect()
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
        assert!(scratch_dirs(env).is_empty(), "{:?}", scratch_dirs(env));
    }
}

fn wait_for_role(mark: &str, name: &str) -> bool {
    wait_for(
        || marked_processes(mark).iter().any(|p| comm(*p) == name),
        60,
    )
}

#[test]
fn a_macro_run_that_ends_normally_leaves_nothing() {
    let Some(ns) = netns("ok") else { return };
    let env = Env::new();
    let mark = format!("mok-{}", std::process::id());
    let child = spawn_in(&ns, &env, &mark, TCP_RR, &[]);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_clean(&ns, &env, &mark, true);
    let j = env.export("latest");
    let r = &j["results"][0];
    assert_eq!(r["status"], "done", "{r}");
}

fn interrupt_macro(sig: Signal, code: i32) {
    let Some(ns) = netns(&format!("s{}", sig as i32)) else {
        return;
    };
    let env = Env::new();
    let mark = format!("msig{}-{}", sig as i32, std::process::id());
    let mut child = spawn_in(&ns, &env, &mark, TCP_RR, &[]);
    assert!(
        wait_for_role(&mark, "kscale-load"),
        "no load generator appeared"
    );
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
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
    let Some(ns) = netns("kill") else { return };
    let env = Env::new();
    let mark = format!("mkill-{}", std::process::id());
    let mut child = spawn_in(&ns, &env, &mark, TCP_RR, &[]);
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
    let Some(ns) = netns("crash") else { return };
    let env = Env::new();
    let mark = format!("mcrash-{}", std::process::id());
    let child = spawn_in(
        &ns,
        &env,
        &mark,
        TCP_RR,
        &[("KSCALE_FAULT", "crash:net.tcp_rr:server")],
    );
    let out = child.wait_with_output().unwrap();
    // The run's only case failed: the run is `failed`, status 1.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_clean(&ns, &env, &mark, true);
    let j = env.export("latest");
    assert_eq!(j["run"]["status"], "failed");
    let r = &j["results"][0];
    assert_eq!(r["status"], "failed", "{r}");
    let err = r["error"].as_str().unwrap_or("");
    assert!(
        err.contains("signal 6") || err.contains("closed") || err.contains("failed"),
        "{err}"
    );
}

#[test]
fn a_hung_load_generator_is_killed() {
    let Some(ns) = netns("hang") else { return };
    let env = Env::new();
    let mark = format!("mhang-{}", std::process::id());
    let child = spawn_in(
        &ns,
        &env,
        &mark,
        TCP_RR,
        &[
            ("KSCALE_FAULT", "hang:net.tcp_rr:load"),
            ("KSCALE_TRIAL_TIMEOUT", "3"),
        ],
    );
    let out = child.wait_with_output().unwrap();
    // The run's only case failed: the run is `failed`, status 1.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_clean(&ns, &env, &mark, true);
    let j = env.export("latest");
    assert_eq!(j["run"]["status"], "failed");
    let r = &j["results"][0];
    assert_eq!(r["status"], "failed", "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap_or("")
            .contains("did not answer in time"),
        "{r}"
    );
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
    assert!(
        wait_for(|| marked_processes(&mark).is_empty(), 10),
        "left behind: {:?}",
        marked_processes(&mark)
    );
}
