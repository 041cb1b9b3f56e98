//! A chat run ended midway — SIGKILL of the parent, SIGTERM — with its
//! hundreds of threads and connections up: afterwards no process of the run
//! (so none of its threads), and no socket at all in the network namespace
//! the run had to itself, listening or connected.

mod common;
use common::netns::Netns;
use common::{marked_processes, wait_for, Env};
use nix::sys::signal::Signal;
use std::process::{Child, Stdio};

/// Enough rooms and messages that the run is still going when it is hit.
const CHAT: &[&str] = &[
    "run",
    "chat.relay",
    "--quick",
    "--param",
    "rooms=5",
    "--param",
    "messages=2000",
    "--param",
    "mode=threads",
    "--no-progress",
];

fn start(ns: &Netns, env: &Env, mark: &str) -> Child {
    let mut c = ns.kscale(env, Some(mark));
    c.args(CHAT).stdout(Stdio::null()).stderr(Stdio::null());
    c.spawn().expect("spawn kscale")
}

/// TCP sockets in the namespace still owned by a process (IPv4 and IPv6).
fn sockets(ns: &Netns) -> usize {
    let Some(table) = ns.tcp_table() else {
        return usize::MAX;
    };
    table
        .lines()
        .filter(|l| l.contains(':') && !l.trim_start().starts_with("sl"))
        // Closing sockets (TIME_WAIT, FIN_WAIT2 …) are the kernel's: inode 0.
        .filter(|l| l.split_whitespace().nth(9).is_some_and(|i| i != "0"))
        .count()
}

/// Threads of the marked processes: the run is in full swing when its
/// users' threads are up.
fn threads(mark: &str) -> usize {
    marked_processes(mark)
        .iter()
        .map(|p| {
            std::fs::read_dir(format!("/proc/{p}/task"))
                .map(|d| d.count())
                .unwrap_or(0)
        })
        .sum()
}

fn end_midway(tag: &str, sig: Signal) {
    let Some(ns) = Netns::or_skip(tag) else {
        return;
    };
    let env = Env::new();
    let mark = format!("chat{tag}-{}", std::process::id());
    let mut child = start(&ns, &env, &mark);
    // 5 rooms of 20 users: 400 threads once every user is connected.
    assert!(
        wait_for(|| threads(&mark) >= 400, 60),
        "the run never reached 400 threads: {}",
        threads(&mark)
    );
    assert!(sockets(&ns) >= 200, "{} sockets", sockets(&ns));
    common::signal(&child, sig);
    child.wait().unwrap();
    assert!(
        wait_for(|| marked_processes(&mark).is_empty(), 10),
        "left behind: {:?} ({} threads)",
        marked_processes(&mark),
        threads(&mark)
    );
    assert!(
        wait_for(|| sockets(&ns) == 0, 10),
        "{} socket(s) left",
        sockets(&ns)
    );
}

#[test]
fn sigkill_of_the_parent_leaves_no_thread_process_or_socket() {
    end_midway("ck", Signal::SIGKILL);
}

#[test]
fn sigterm_leaves_no_thread_process_or_socket() {
    end_midway("ct", Signal::SIGTERM);
}
