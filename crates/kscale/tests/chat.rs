//! chat.relay driven through the real binary: both server modes with
//! `--quick`, the exact delivery count, the threads counted in /proc, and
//! bad params refused at parse time.

mod common;
use common::Env;
use serde_json::Value;

/// Small rooms and few messages: the mechanism, not a measurement.
fn run(env: &Env, params: &[&str]) -> Value {
    let mut args = vec!["run", "chat", "--quick", "--no-progress"];
    for p in params {
        args.extend(["--param", p]);
    }
    let out = env.cmd(&args).output().expect("run chat");
    common::assert_exit(&out, 0);
    env.export("latest")
}

fn rows<'a>(j: &'a Value, mode: &str, metric: &str) -> Vec<&'a Value> {
    j["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["params"]["mode"] == mode && r["metric"] == metric)
        .collect()
}

#[test]
fn quick_runs_both_server_modes() {
    let env = Env::new();
    let j = run(&env, &["rooms=2", "messages=20"]);
    for mode in ["threads", "epoll"] {
        let r = rows(&j, mode, "delivered");
        assert_eq!(r.len(), 1, "{mode}: {j}");
        let r = r[0];
        assert_eq!(r["status"], "done", "{r}");
        assert!(r["mean"].as_f64().unwrap_or(0.0) > 1000.0, "{r}");
        // Every message reached the 19 others of its room, in every trial.
        assert_eq!(r["iterations"], 2 * 20 * 20 * 19, "{r}");
        for m in ["sent", "p50", "p99", "sd_server", "sd_load"] {
            let v = rows(&j, mode, m)[0]["mean"].as_f64().unwrap_or(-1.0);
            assert!(v > 0.0, "{mode} {m}: {v}");
        }
        let sent = rows(&j, mode, "sent")[0]["mean"].as_f64().unwrap_or(0.0);
        let delivered = r["mean"].as_f64().unwrap_or(0.0);
        // Each message sent is delivered to 19 users.
        let ratio = delivered / sent;
        assert!((18.0..20.0).contains(&ratio), "{mode}: {ratio}");
    }
    let threads = |mode| rows(&j, mode, "threads")[0]["mean"].as_f64().unwrap_or(0.0);
    // threads: 4 per user (reader + writer on the server, sender + receiver
    // in the load) plus a few per process; epoll: the load's 2 per user and
    // one loop per CPU.
    let users = 2.0 * 20.0;
    let t = threads("threads");
    assert!((4.0 * users..4.0 * users + 12.0).contains(&t), "{t}");
    let e = threads("epoll");
    assert!((2.0 * users..2.0 * users + 12.0 + 64.0).contains(&e), "{e}");
    let peak = rows(&j, "threads", "threads_peak")[0]["mean"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(peak >= t, "{peak} < {t}");
}

#[test]
fn a_small_room_delivers_exactly_messages_times_others() {
    let env = Env::new();
    let j = run(
        &env,
        &["rooms=3", "users=4", "messages=7", "size=24", "mode=epoll"],
    );
    let r = rows(&j, "epoll", "delivered");
    assert_eq!(r.len(), 1, "{j}");
    assert_eq!(r[0]["status"], "done", "{}", r[0]);
    assert_eq!(r[0]["iterations"], 3 * 4 * 7 * 3, "{}", r[0]);
}

#[test]
fn bad_params_are_refused_at_parse_time() {
    let env = Env::new();
    for (p, needle) in [
        ("rooms=0", "rooms"),
        ("users=1", "users"),
        ("mode=green", "mode"),
        ("size=8", "size"),
    ] {
        common::refused(&env, &["run", "chat.relay", "--param", p], needle);
    }
}
