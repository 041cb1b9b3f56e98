//! `--cpu-idle poll` holds a 0 µs CPU latency request for exactly as long as
//! the run: it is in force while trials run, gone when the run ends, and
//! gone when the run is killed with no chance to clean up (the request is an
//! open file, and workers, being re-executed, never inherit it). One test in
//! its own binary, so no other run of this binary holds a request meanwhile.
//! A `kscale peer` holds its own only while a run is connected to it.

mod common;
use common::*;
use std::io::Read;

const PM_QOS: &str = "/dev/cpu_dma_latency";

/// The CPU latency limit in force (µs), or `None` where this user cannot
/// read it.
fn limit() -> Option<i32> {
    let mut b = [0u8; 4];
    std::fs::File::open(PM_QOS).ok()?.read_exact(&mut b).ok()?;
    Some(i32::from_ne_bytes(b))
}

#[test]
fn the_request_lasts_as_long_as_the_run() {
    let Some(before) = limit() else {
        return skip(&format!("{PM_QOS} cannot be read here (needs root)"));
    };
    assert_ne!(
        before, 0,
        "another process already holds 0 µs: nothing to tell apart"
    );
    let env = Env::new();

    // `kscale run syscall.null` with tiny trials on CPU 1 and `--cpu-idle MODE`.
    let tiny = |mode: &str| {
        let out = env
            .tiny_run(&["syscall.null", "--cpu-idle", mode], "1", mode)
            .output()
            .expect("start kscale");
        assert_exit(&out, 0);
        out
    };

    // A run that ends: the snapshot records the hold, and it is gone after.
    let out = tiny("poll");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("idle CPUs poll"), "{err}");
    assert_eq!(limit(), Some(before), "the request outlived a finished run");
    let snap = &env.export("latest")["system"]["cpu_idle"];
    assert_eq!(snap["kscale"], "poll", "{snap}");
    assert!(snap["states"].is_array(), "{snap}");
    assert!(env.show("latest").contains("idle CPUs polled"));

    // `as-is` leaves the limit alone and says so in the snapshot.
    tiny("as-is");
    assert_eq!(
        env.export("latest")["system"]["cpu_idle"]["kscale"],
        "as-is"
    );
    // Runs that differ in it are compared with a note saying so.
    let cmp = stdout_of_success(
        &env.cmd(&["compare", "1", "2"]).output().expect("run"),
        "compare",
    );
    assert!(cmp.contains("Idle CPUs polled in A only"), "{cmp}");

    // A run killed midway: in force while it runs, gone once it is killed.
    let mark = format!("cpu-idle-{}", std::process::id());
    let mut args = SLOW_RUN.to_vec();
    args.extend(["--cpu-idle", "poll"]);
    let mut child = env.spawn_marked(&mark, &args);
    assert!(
        wait_for(|| limit() == Some(0), 10),
        "the run never held its request"
    );
    assert!(
        wait_for(|| marked_processes(&mark).len() > 1, 10),
        "no worker started under the run"
    );
    child.kill().expect("SIGKILL"); // no chance to clean up
    child.wait().expect("reap");
    // Its worker may finish its trial; the request must not wait for it.
    assert_eq!(limit(), Some(before), "the request outlived a killed run");
    assert_no_marked_processes(&mark);
    assert_eq!(limit(), Some(before));

    // A `kscale peer` holds its own request, only while a run is connected:
    // a run that holds none itself (`as-is`) sees it in force, and it is
    // gone once the run has ended though the peer still listens.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    let peer_mark = format!("cpu-idle-peer-{}", std::process::id());
    let mut peer = env.spawn_marked(
        &peer_mark,
        &["peer", "--listen", &addr, "--cpu-idle", "poll"],
    );
    assert!(
        wait_for(|| std::net::TcpStream::connect(&addr).is_ok(), 10),
        "the peer never listened"
    );
    assert_eq!(limit(), Some(before), "an idle peer holds a request");
    let mut args = short_tcp_rr("conns=1", "duration=1");
    args.extend(["--peer", &addr, "--cpu-idle", "as-is", "--label", "peer"]);
    let mut run = env.spawn_marked(&mark, &args);
    assert!(
        wait_for(|| limit() == Some(0), 20),
        "the peer never held its request during the run"
    );
    assert!(
        run.wait().expect("reap the run").success(),
        "the run with a peer failed"
    );
    assert!(
        wait_for(|| limit() == Some(before), 5),
        "the peer's request outlived the run"
    );
    let peers = &env.export("peer")["system"]["peers"];
    assert_eq!(
        peers[0]["snapshot"]["cpu_idle"]["kscale"], "poll",
        "{peers}"
    );
    let _ = peer.kill();
    let _ = peer.wait();
    assert_eq!(limit(), Some(before));
}

/// Without root: `poll` is refused before a run exists, and `auto` runs
/// with idle CPUs as they are and says why. Holds nothing, so it may run
/// beside the test above.
#[test]
fn without_root_poll_is_refused_and_auto_says_why() {
    use std::os::unix::fs::PermissionsExt;
    let root = nix::unistd::geteuid().is_root();
    if !root || !std::path::Path::new("/usr/bin/setpriv").exists() {
        return skip("needs root and setpriv to run kscale as nobody");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let db = dir.path().join("k.db");
    let as_nobody = |mode: &str| {
        std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin())
            .arg("--db")
            .arg(&db)
            .arg("run")
            .args(common::TINY_NULL)
            .args(["--cpu-idle", mode, "--dir"])
            .arg(dir.path())
            .env("NO_COLOR", "1")
            .output()
            .expect("setpriv")
    };
    let out = as_nobody("poll");
    assert_refused(
        &out,
        "--cpu-idle poll: cannot hold a CPU latency request",
        "poll as nobody",
    );
    assert!(!db.exists(), "a refused run created the database");
    // A peer asked to poll is refused at its start, not at its first run.
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(bin())
        .args(["peer", "--listen", "127.0.0.1:0", "--cpu-idle", "poll"])
        .env("NO_COLOR", "1")
        .output()
        .expect("setpriv");
    assert_refused(
        &out,
        "--cpu-idle poll: cannot hold a CPU latency request",
        "peer poll as nobody",
    );

    let out = as_nobody("auto");
    assert_exit(&out, 0);
    let err = String::from_utf8_lossy(&out.stderr);
    let vm = std::fs::read_to_string("/proc/cpuinfo")
        .is_ok_and(|c| c.split_whitespace().any(|f| f == "hypervisor"))
        || std::path::Path::new("/sys/hypervisor/type").exists();
    let said = if vm {
        "idle CPUs as they are: cannot hold"
    } else {
        "bare metal"
    };
    assert!(err.contains(said), "{err}");
}
