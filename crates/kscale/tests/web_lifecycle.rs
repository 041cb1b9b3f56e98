//! A `web` run owns a real nginx (master and workers) besides its own role
//! processes. However the run ends — normally, SIGTERM, SIGKILL of the
//! parent, a crashing server role, a hung load generator killed by the
//! trial limit — no nginx, no kscale process, no listening socket and no
//! nginx directory may remain. Each run happens in a network namespace of
//! its own, so every process and socket in it belongs to the test: nginx
//! rewrites its environment for its process titles, so the test mark of
//! macro_lifecycle.rs cannot find it, but its network namespace can.

mod common;
use common::netns::Netns;
use common::{assert_exit, signal, wait_for, Env};
use nix::sys::signal::Signal;
use std::os::unix::fs::MetadataExt;
use std::process::{Child, Stdio};

/// Short trials: 20 connections, 0.5 s windows, a small file set (after
/// `run WORKLOAD`).
const WEB: &[&str] = &[
    "--quick",
    "--param",
    "conns=20",
    "--param",
    "duration=0.5",
    "--param",
    "fileset=8m",
    "--no-progress",
];

fn setup_for(workload: &str, tag: &str) -> Option<Netns> {
    if workload == "web.nginx" {
        common::nginx()?;
    }
    Netns::or_skip(tag)
}

fn spawn_workload(ns: &Netns, env: &Env, workload: &str, extra: &[(&str, &str)]) -> Child {
    let mut c = ns.kscale(env, None);
    c.args(["run", workload])
        .args(WEB)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in extra {
        c.env(k, v);
    }
    c.spawn().expect("spawn kscale")
}

/// Live (not zombie) processes in the namespace, with their names.
fn processes_in(ns: &Netns) -> Vec<(i32, String)> {
    let Ok(want) = std::fs::metadata(format!("/run/netns/{}", ns.name)).map(|m| m.ino()) else {
        return vec![(-1, "namespace gone".into())];
    };
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(m) = std::fs::metadata(e.path().join("ns/net")) else {
            continue;
        };
        if m.ino() != want {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next());
        if state == Some("Z") || stat.is_empty() {
            continue;
        }
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        out.push((pid, comm.trim().to_string()));
    }
    out
}

/// nginx directories (config, logs, pid) left in any scratch directory.
fn nginx_dirs(env: &Env) -> Vec<String> {
    let mut out = Vec::new();
    for s in std::fs::read_dir(env.path()).unwrap().flatten() {
        if !s.file_name().to_string_lossy().starts_with(".kscale-tmp-") {
            continue;
        }
        for d in std::fs::read_dir(s.path()).into_iter().flatten().flatten() {
            let n = d.file_name().to_string_lossy().into_owned();
            if n.starts_with("web-nginx-") || n.starts_with("web-own-") {
                out.push(n);
            }
        }
    }
    out
}

/// No process and no listening socket left in `ns`.
fn assert_ns_empty(ns: &Netns) {
    assert!(
        wait_for(|| processes_in(ns).is_empty(), 10),
        "left behind: {:?}",
        processes_in(ns)
    );
    assert!(
        wait_for(|| ns.listening_sockets() == 0, 5),
        "{} listening socket(s) left",
        ns.listening_sockets()
    );
}

fn assert_clean(ns: &Netns, env: &Env, scratch_too: bool) {
    assert_ns_empty(ns);
    assert!(nginx_dirs(env).is_empty(), "{:?}", nginx_dirs(env));
    if scratch_too {
        assert!(env.scratch_dirs().is_empty(), "{:?}", env.scratch_dirs());
    }
}

/// Runs `workload` in its own namespace, waits for it to exit with `code`,
/// and fails unless it left nothing behind; returns the run's export.
fn run_to_end(
    workload: &str,
    tag: &str,
    code: i32,
    extra: &[(&str, &str)],
) -> Option<serde_json::Value> {
    let ns = setup_for(workload, tag)?;
    let env = Env::new();
    let out = spawn_workload(&ns, &env, workload, extra)
        .wait_with_output()
        .unwrap();
    assert_exit(&out, code);
    assert_clean(&ns, &env, true);
    Some(env.export("latest"))
}

/// Starts `workload` in its own namespace and waits until `running`.
fn start(workload: &str, tag: &str, running: fn(&Netns) -> bool) -> Option<(Netns, Env, Child)> {
    let ns = setup_for(workload, tag)?;
    let env = Env::new();
    let child = spawn_workload(&ns, &env, workload, &[]);
    assert!(running(&ns), "never started: {:?}", processes_in(&ns));
    Some((ns, env, child))
}

/// Starts `workload`, waits until `running`, sends SIGTERM: status 143,
/// nothing left, the run interrupted.
fn sigterm_leaves_nothing(workload: &str, tag: &str, running: fn(&Netns) -> bool) {
    let Some((ns, env, mut child)) = start(workload, tag, running) else {
        return;
    };
    signal(&child, Signal::SIGTERM);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert_clean(&ns, &env, true);
    assert_eq!(env.export("latest")["run"]["status"], "interrupted");
}

/// Waits until nginx's master and at least one worker run in `ns`.
fn wait_for_nginx(ns: &Netns) -> bool {
    wait_for(
        || {
            processes_in(ns)
                .iter()
                .filter(|(_, c)| c == "nginx")
                .count()
                >= 2
        },
        60,
    )
}

#[test]
fn a_web_run_that_ends_normally_leaves_nothing() {
    let Some(j) = run_to_end("web.nginx", "wok", 0, &[]) else {
        return;
    };
    assert_eq!(j["results"][0]["status"], "done");
}

#[test]
fn sigterm_stops_nginx_and_every_role() {
    sigterm_leaves_nothing("web.nginx", "wterm", wait_for_nginx);
}

/// nginx and, once the server answers, the load generator run in `ns`.
fn nginx_and_load_run(ns: &Netns) -> bool {
    wait_for_nginx(ns)
        && wait_for(
            || processes_in(ns).iter().any(|(_, c)| c == "kscale-load"),
            20,
        )
}

#[test]
fn sigkill_of_the_parent_takes_nginx_with_it() {
    let Some((ns, env, mut child)) = start("web.nginx", "wkill", nginx_and_load_run) else {
        return;
    };
    child.kill().unwrap();
    child.wait().unwrap();
    // nginx, its directory and every role are gone at once; the run's
    // scratch directory (the file set) is removed by the next run, as for
    // every family.
    assert_clean(&ns, &env, false);
    env.assert_next_run_clears_scratch();
}

#[test]
fn a_crashing_server_role_takes_nginx_with_it() {
    let fault = [("KSCALE_FAULT", "crash:web.nginx:server")];
    let Some(j) = run_to_end("web.nginx", "wcrash", 1, &fault) else {
        return;
    };
    assert_eq!(j["results"][0]["status"], "failed");
}

#[test]
fn a_hung_load_generator_is_killed_and_nginx_with_the_server() {
    let fault = [
        ("KSCALE_FAULT", "hang:web.nginx:load"),
        ("KSCALE_TRIAL_TIMEOUT", "5"),
    ];
    let Some(j) = run_to_end("web.nginx", "whang", 1, &fault) else {
        return;
    };
    let r = &j["results"][0];
    assert!(
        r["error"]
            .as_str()
            .unwrap_or("")
            .contains("did not answer in time"),
        "{r}"
    );
}

/// Waits until the own server's role and the load generator run in `ns`.
fn wait_for_own_server(ns: &Netns) -> bool {
    wait_for(
        || {
            let p = processes_in(ns);
            p.iter().any(|(_, c)| c == "kscale-server") && p.iter().any(|(_, c)| c == "kscale-load")
        },
        60,
    )
}

#[test]
fn own_server_run_that_ends_normally_leaves_nothing() {
    let Some(j) = run_to_end("web.own", "ook", 0, &[]) else {
        return;
    };
    assert_eq!(j["results"][0]["status"], "done");
}

#[test]
fn sigterm_stops_the_own_server() {
    sigterm_leaves_nothing("web.own", "oterm", wait_for_own_server);
}

#[test]
fn sigkill_of_the_parent_takes_the_own_server_with_it() {
    let Some((ns, env, mut child)) = start("web.own", "okill", wait_for_own_server) else {
        return;
    };
    child.kill().unwrap();
    child.wait().unwrap();
    // The server's threads, CGI children and listening socket go at once;
    // its scratch files (CGI helper, POST log, file set) with the run's
    // scratch directory, removed by the next run as for every family.
    assert_ns_empty(&ns);
    env.assert_next_run_clears_scratch();
}
