//! `kscale peer` across two network namespaces joined by a veth pair: the
//! measured host runs `kscale run … --peer`, the other generates the load.
//! Also the peer's refusals and how it stops a load whose run went away.

mod common;
use common::netns::Pair;
use common::{assert_exit, assert_refused, marked_processes, wait_for, Env};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A veth pair and a peer in its `b` end taking token `token`, with
/// processes marked `p{tag}-PID`; or `None` after a skip.
fn pair_with_peer(tag: &str, token: &str) -> Option<(Pair, Peer, String)> {
    let p = Pair::or_skip(tag)?;
    let mark = format!("p{tag}-{}", std::process::id());
    let peer = Peer::start(&p, &mark, token, &[]);
    Some((p, peer, mark))
}

/// A peer in namespace `b`, listening on its veth address.
struct Peer {
    child: Child,
    addr: String,
}

impl Peer {
    fn start(p: &Pair, mark: &str, token: &str, extra: &[(&str, &str)]) -> Peer {
        let addr = format!("{}:12866", p.b_ip);
        let mut c = p.b.command(&common::bin());
        c.env("KSCALE_TEST_MARK", mark)
            .args(["peer", "--listen", &addr, "--token", token])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in extra {
            c.env(k, v);
        }
        let child = c.spawn().expect("spawn kscale peer");
        // Ready once it accepts connections.
        let ok = wait_for(|| p.b.tcp_table().is_some_and(|t| t.contains(" 0A ")), 10);
        assert!(ok, "the peer never listened");
        Peer { child, addr }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run_args<'a>(peer: &'a str, token: &'a str, duration: &'a str) -> Vec<&'a str> {
    let mut args = common::short_tcp_rr("conns=3", duration);
    args.extend(["--peer", peer, "--token", token]);
    args
}

fn run_in_a(p: &Pair, env: &Env, args: &[&str]) -> std::process::Output {
    p.a.kscale(env, None)
        .args(args)
        .output()
        .expect("kscale run")
}

/// A 30 s run in namespace `a` with its load on `peer`, started in the
/// background once the peer's load process (a second marked process) runs.
fn long_run_in_a(p: &Pair, env: &Env, peer: &Peer, mark: &str) -> Child {
    let run =
        p.a.kscale(env, None)
            .args(run_args(&peer.addr, "t", "duration=30"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
    assert!(
        wait_for(|| marked_processes(mark).len() >= 2, 30),
        "the peer never started a load"
    );
    run
}

#[test]
fn a_peer_in_another_namespace_drives_the_load() {
    let Some((p, peer, mark)) = pair_with_peer("ok", "s3cret") else {
        return;
    };
    let env = Env::new();
    let out = run_in_a(&p, &env, &run_args(&peer.addr, "s3cret", "duration=0.3"));
    assert_exit(&out, 0);
    let j = env.export("latest");
    let peers = &j["system"]["peers"];
    assert_eq!(peers[0]["addr"], peer.addr.as_str(), "{peers}");
    assert!(peers[0]["snapshot"]["kernel"]["release"].is_string());
    assert!(
        !j["run"]["args"].to_string().contains("s3cret"),
        "the token was stored: {}",
        j["run"]["args"]
    );
    let tps = j["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "tps")
        .unwrap();
    assert_eq!(tps["status"], "done", "{tps}");
    assert!(tps["mean"].as_f64().unwrap() > 0.0);
    // The load ran on the peer, the server here.
    let roles = env.first_trial_roles();
    assert!(roles.contains(&peer.addr), "{roles}");
    assert!(roles.contains("\"server\""), "{roles}");
    // The peer keeps serving after the run; its load processes are gone.
    assert!(wait_for(|| marked_processes(&mark).len() == 1, 5));
}

#[test]
fn the_peer_stops_its_load_when_the_run_dies() {
    let Some((p, peer, mark)) = pair_with_peer("lost", "t") else {
        return;
    };
    let env = Env::new();
    let mut run = long_run_in_a(&p, &env, &peer, &mark);
    run.kill().unwrap();
    run.wait().unwrap();
    let killed = Instant::now();
    assert!(
        wait_for(|| marked_processes(&mark).len() == 1, 5),
        "the peer's load outlived its run: {:?}",
        marked_processes(&mark)
    );
    assert!(
        killed.elapsed() < Duration::from_millis(1500),
        "took {:?}",
        killed.elapsed()
    );
}

#[test]
fn refusals_are_one_line_and_exit_2() {
    let Some((p, peer, mark)) = pair_with_peer("bad", "right") else {
        return;
    };
    let env = Env::new();
    let check = |args: &[&str], needle: &str| {
        assert_refused(&run_in_a(&p, &env, args), needle, &format!("{args:?}"));
    };
    check(
        &run_args(&peer.addr, "wrong", "duration=0.3"),
        "wrong token",
    );
    let unreachable = format!("{}:1", p.b_ip);
    check(
        &run_args(&unreachable, "right", "duration=0.3"),
        "cannot connect",
    );
    check(
        &run_args("not an address", "right", "duration=0.3"),
        "not HOST:PORT",
    );
    // Nothing ran: no run was stored.
    assert!(!env.db().exists() || env.export("latest")["run"].is_null());
    drop(peer);

    // A peer of another kscale version refuses the run.
    let old = Peer::start(&p, &mark, "right", &[("KSCALE_TEST_PEER_VERSION", "0.0.1")]);
    check(
        &run_args(&old.addr, "right", "duration=0.3"),
        "version mismatch",
    );
    drop(old);

    // The peer itself: a port in use, another host's address without a token.
    let busy = Peer::start(&p, &mark, "right", &[]);
    let again =
        p.b.command(&common::bin())
            .args(["peer", "--listen", &busy.addr, "--token", "x"])
            .output()
            .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("cannot listen"));
    let open =
        p.b.command(&common::bin())
            .args(["peer", "--listen", &format!("{}:12867", p.b_ip)])
            .env_remove("KSCALE_PEER_TOKEN")
            .output()
            .unwrap();
    assert_eq!(open.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&open.stderr).contains("--token"));
}

/// A control connection that goes silent (the link is cut, no FIN or RST
/// reaches the peer) is taken for lost within a second.
#[test]
fn the_peer_stops_its_load_when_the_link_goes_silent() {
    let Some((p, peer, mark)) = pair_with_peer("cut", "t") else {
        return;
    };
    let env = Env::new();
    let mut run = long_run_in_a(&p, &env, &peer, &mark);
    let down = Command::new("ip")
        .args(["-n", &p.a.name, "link", "set", &p.a_veth, "down"])
        .status()
        .unwrap();
    assert!(down.success());
    let cut = Instant::now();
    let stopped = wait_for(|| marked_processes(&mark).len() == 1, 5);
    let took = cut.elapsed();
    let _ = run.kill();
    let _ = run.wait();
    assert!(stopped, "the peer's load survived a silent link");
    // 0.8 s of silence and the peer's 50 ms poll: within a second, give or
    // take this test's own 100 ms polling.
    assert!(took < Duration::from_millis(1100), "took {took:?}");
}
