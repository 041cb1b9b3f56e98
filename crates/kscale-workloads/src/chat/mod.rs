//! `chat`: a VolanoMark-style chat server and its simulated users, the
//! first workload of seed 000 (docs/families/chat.md). VolanoMark is a
//! closed Java product; this is kscale's own code following its published
//! method: rooms of 20 users, about 100-byte messages, every message relayed
//! by the server to the other 19 users of its room, and a trial that ends
//! when every user has sent its messages and every one has reached every
//! other user of its room.
//!
//! The server role is the system under test, confined to the CPU
//! configuration, in one of two thread models (`mode`): `threads`, a reader
//! and a writer thread per connection like the Java servers of the seed, or
//! `epoll`, one event loop per measured CPU. The load role is the same in
//! both, so a difference between modes is the server's: two threads per
//! user (a sender and a receiver), blocking sockets.
//!
//! This file holds the definition, params and the trial's cross-check;
//! `proto.rs` the wire format, `rooms.rs` the server's room bookkeeping,
//! `server.rs` the server role and its `threads` design, `epoll_server.rs`
//! its `epoll` design, `load.rs` the simulated users, `limits.rs` the
//! rlimits and thread stacks both roles need.

mod epoll_server;
mod limits;
mod load;
mod proto;
mod rooms;
mod server;

use crate::roles::{Combined, Roles, Timing, LATENCY_P50, LATENCY_P99};
use crate::{ChartDef, Family, TrialOutput, WorkloadDef};
use anyhow::{bail, Context, Result};
use kscale_core::{MetricDef, ParamDef, ParamKind, Params};
use load::load;
use proto::HEADER;
use server::server;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

const DELIVERED: MetricDef = MetricDef::higher("delivered", "msg/s");
const SENT: MetricDef = MetricDef::higher("sent", "msg/s");
/// CPU time per delivered message on each side (netperf's service demand).
const SD_SERVER: MetricDef = MetricDef::lower("sd_server", "µs/msg");
const SD_LOAD: MetricDef = MetricDef::lower("sd_load", "µs/msg");
/// Threads of server and load, counted in /proc/self/status when the window
/// begins, and their peak; "lower" only because fewer threads doing the same
/// work is the cheaper design.
const THREADS: MetricDef = MetricDef::lower("threads", "threads");
const THREADS_PEAK: MetricDef = MetricDef::lower("threads_peak", "threads");

/// How long a user may wait for its next message, or a sender for its
/// message to reach the whole room, before the trial is declared broken:
/// far above any delivery time even with thousands of threads on two CPUs.
pub(super) const IO_TIMEOUT: Duration = Duration::from_secs(20);

const ROOMS: ParamDef = ParamDef {
    name: "rooms",
    help: "Chat rooms (VolanoMark's default 10). Each holds `users` users; with peers, rooms \
           are split evenly among them.",
    kind: ParamKind::Int { min: 1, max: 1000 },
    default: &["1", "5", "10", "20"],
    quick: &["2", "10"],
};
const USERS: ParamDef = ParamDef {
    name: "users",
    help: "Users per room (VolanoMark's 20); each message goes to the other users - 1.",
    kind: ParamKind::Int { min: 2, max: 1000 },
    default: &["20"],
    quick: &[],
};
const MESSAGES: ParamDef = ParamDef {
    name: "messages",
    help: "Messages each user sends (VolanoMark's 100).",
    kind: ParamKind::Int {
        min: 1,
        max: 1_000_000,
    },
    default: &["100"],
    quick: &[],
};
const SIZE: ParamDef = ParamDef {
    name: "size",
    help: "Bytes per message, a 24-byte header included (VolanoMark's are about 100).",
    kind: ParamKind::Size {
        min: HEADER as u64,
        max: 1 << 16,
    },
    default: &["100"],
    quick: &[],
};
const MODE: ParamDef = ParamDef {
    name: "mode",
    help: "Server thread model: threads (a reader and a writer thread per connection, like \
           the seed's Java servers) or epoll (one event loop per measured CPU).",
    kind: ParamKind::Choice(&["threads", "epoll"]),
    default: &["threads", "epoll"],
    quick: &[],
};
const STACK: ParamDef = ParamDef {
    name: "stack",
    help: "Stack size of every server and user thread: 2,000 threads at 8 MB each would \
           reserve 16 GB of address space for stacks that use a few KB.",
    kind: ParamKind::Size {
        min: 64 << 10,
        max: 1 << 30,
    },
    default: &["128k"],
    quick: &[],
};

static RELAY: Roles = Roles {
    server: Some(server),
    load,
    timing: Timing::Work,
    spread: Some("rooms"),
    combine,
};

pub static FAMILY: Family = Family {
    name: "chat",
    title: "VolanoMark-style chat",
    help: "A chat server confined to the CPU configuration relays every message of a user to \
           the other users of its room; simulated users on the other CPUs (or on `kscale \
           peer`s) send as fast as delivery allows (seeds 000 and 004).",
    workloads: &[WorkloadDef {
        family: "chat",
        name: "relay",
        title: "Chat message relay",
        help: "Messages delivered per second when `rooms` rooms of `users` users each send \
               `messages` messages of `size` bytes, a user sending its next message once its \
               last one reached every other user of the room; the trial ends when all are \
               delivered, and a lost or duplicated message fails it. Also sent messages/s, \
               delivery latency p50/p99, CPU µs per delivered message of server and load, \
               and the threads of both counted in /proc (at the start and at the peak).",
        params: &[ROOMS, USERS, MESSAGES, SIZE, MODE, STACK],
        metrics: &[
            DELIVERED,
            SENT,
            LATENCY_P50,
            LATENCY_P99,
            SD_SERVER,
            SD_LOAD,
            THREADS,
            THREADS_PEAK,
        ],
        charts: &[ChartDef::against("rooms").metrics(&["delivered", "p99", "threads"])],
        timeout: Duration::from_secs(120),
        roles: Some(&RELAY),
        ..WorkloadDef::BASE
    }],
};

pub(super) struct Common {
    pub(super) users: usize,
    pub(super) size: usize,
    pub(super) stack: usize,
    pub(super) errors: Arc<AtomicU64>,
}

pub(super) fn common(p: &Params) -> Result<Common> {
    Ok(Common {
        users: p.int("users")? as usize,
        size: p.size("size")? as usize,
        stack: usize::try_from(p.size("stack")?).context("stack too large")?,
        errors: Arc::new(AtomicU64::new(0)),
    })
}

/// Messages every user of every room must receive in one trial.
fn expected(p: &Params) -> Result<u64> {
    let (rooms, users, messages) = (p.int("rooms")?, p.int("users")?, p.int("messages")?);
    Ok(rooms * users * messages * (users - 1))
}

/// The trial's metrics, after the cross-check: every message reached every
/// other user of its room exactly once, by the users' count and by the
/// server's.
fn combine(p: &Params, c: &Combined) -> Result<TrialOutput> {
    let want = expected(p)?;
    let got = c.load_sum("delivered");
    if got != want as f64 {
        bail!("the users received {got} messages, {want} were due");
    }
    let server = |k: &str| {
        c.server
            .as_ref()
            .and_then(|s| s.counts.get(k).copied())
            .unwrap_or(0.0)
    };
    if c.server.is_some() && server("relayed") != want as f64 {
        bail!(
            "the server relayed {} messages, {want} were due",
            server("relayed")
        );
    }
    let rate = |k: &str| -> f64 {
        c.loads
            .iter()
            .filter_map(|l| {
                let t = l.counts.get("elapsed_s").copied().unwrap_or(0.0);
                (t > 0.0).then(|| l.counts.get(k).copied().unwrap_or(0.0) / t)
            })
            .sum()
    };
    let mut out = TrialOutput::new(want)
        .with(&DELIVERED, rate("delivered"))
        .with(&SENT, rate("sent"))
        .with(&SD_LOAD, c.load_cpu_s() / got * 1e6)
        .with(&THREADS, server("threads") + c.load_sum("threads"))
        .with(
            &THREADS_PEAK,
            server("threads_peak") + c.load_sum("threads_peak"),
        );
    if let Some(s) = c.server_cpu_s() {
        out = out.with(&SD_SERVER, s / got * 1e6);
    }
    if server("errors") > 0.0 {
        out = out.note(format!(
            "the server saw {} broken connection(s)",
            server("errors")
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roles::RoleOutput;

    #[test]
    fn combine_cross_checks_the_counts() {
        let p = Params(
            [("rooms", "2"), ("users", "3"), ("messages", "4")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        assert_eq!(expected(&p).unwrap(), 2 * 3 * 4 * 2);
        let load = |d: f64| {
            RoleOutput::default()
                .count("delivered", d)
                .count("sent", 24.0)
                .count("elapsed_s", 0.5)
                .count("threads", 14.0)
                .count("threads_peak", 15.0)
        };
        let server = |r: f64| {
            RoleOutput::default()
                .count("relayed", r)
                .count("threads", 16.0)
        };
        let ok = Combined {
            server: Some(server(48.0)),
            loads: vec![load(48.0)],
        };
        let out = combine(&p, &ok).unwrap();
        assert_eq!(out.values["delivered"], 96.0);
        assert_eq!(out.values["sent"], 48.0);
        assert_eq!(out.values["threads"], 30.0);
        let short = Combined {
            server: Some(server(48.0)),
            loads: vec![load(47.0)],
        };
        let e = combine(&p, &short).unwrap_err().to_string();
        assert!(
            e.contains("received 47") && e.contains("48 were due"),
            "{e}"
        );
        let dup = Combined {
            server: Some(server(49.0)),
            loads: vec![load(48.0)],
        };
        assert!(combine(&p, &dup)
            .unwrap_err()
            .to_string()
            .contains("relayed 49"));
    }
}
