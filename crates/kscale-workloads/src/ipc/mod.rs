//! `ipc`: interprocess communication latency over localhost (docs/families/ipc.md, seed
//! 003, lmbench `lat_udp`/`lat_tcp`/`lat_rpc`/`lat_connect`).
//!
//! Every workload is a "hot potato" between this worker and a forked server
//! process. The server's socket is bound to port 0 on 127.0.0.1 in the worker
//! and inherited by the child, so the port is known before the fork and
//! concurrent runs never collide. Servers end when the client closes (TCP),
//! on an explicit stop message (UDP), after [`SERVER_IDLE`] without traffic,
//! or with the worker (PDEATHSIG); the [`ChildGuard`] kills and reaps them on
//! every error path.
//!
//! This file holds the definitions and the client/server harness;
//! `sockets.rs` the UDP, TCP and connect workloads, `rpc_calls.rs` the RPC
//! workloads on the codec of `rpc.rs`.

pub mod rpc;
mod rpc_calls;
mod sockets;

use crate::shared::child::ChildGuard;
use crate::shared::place::{place_help, Placement, PLACE_PARAM};
use crate::{Family, WorkloadDef};
use anyhow::{bail, ensure, Context, Result};
use kscale_core::{MetricDef, ParamDef, ParamKind};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use rpc_calls::{rpc_tcp, rpc_udp};
use sockets::{tcp, tcp_connect, udp};
use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

pub(super) const LAT: MetricDef = MetricDef::lower("latency", "µs");
const LAT_METRICS: &[MetricDef] = &[LAT];

/// How long a client waits for a reply before declaring the server dead. Far
/// above any round trip, far below the worker's timeout, so a lost server
/// yields an error message rather than a killed worker.
pub(super) const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// A server with no traffic for this long exits: its client is gone.
pub(super) const SERVER_IDLE: Duration = Duration::from_secs(30);
/// How long a finished client waits for its server to exit cleanly.
const SERVER_EXIT: Duration = Duration::from_secs(5);

/// lmbench sends 4-byte messages for UDP (its sequence number) and the spec
/// fixes TCP at 4 bytes too.
pub(super) const MSG: usize = 4;

/// Where the client (this worker) and its server run (docs/families/ipc.md).
const PLACE_PARAMS: &[ParamDef] = &[PLACE_PARAM];

/// `tcp`'s Nagle setting. kscale sets TCP_NODELAY, as netperf TCP_RR does;
/// lmbench's lat_tcp sets no socket option at all (lib_tcp.c, SOCKOPT_NONE).
pub(super) const NODELAY_PARAM: ParamDef = ParamDef {
    name: "nodelay",
    help: "TCP_NODELAY on both ends of the connection: on (default, as netperf TCP_RR) or off \
           (Nagle's algorithm left on, as lmbench lat_tcp, which sets no socket option).",
    kind: ParamKind::Choice(&["on", "off"]),
    default: &["on"],
    quick: &[],
};

/// `tcp_connect`'s listen backlog per server port. lmbench's lat_connect
/// listens with 100 (lib_tcp.c); kscale asks for 4096 (the kernel caps it
/// at net.core.somaxconn) so that a client running ahead of its server on
/// one CPU never overflows the accept queue, whose dropped SYN costs a 1 s
/// retransmission.
pub(super) const BACKLOG_PARAM: ParamDef = ParamDef {
    name: "backlog",
    help: "listen() backlog of each server port (default 4096, capped by net.core.somaxconn; \
           lmbench lat_connect: 100). A client that runs ahead of its server fills a short \
           queue, and each SYN dropped then waits for a 1 s retransmission.",
    kind: ParamKind::Int { min: 1, max: 65535 },
    default: &["4096"],
    quick: &[],
};

/// `tcp_connect`'s server ports, taken in turn (see `sockets::tcp_connect`).
pub(super) const PORTS_PARAM: ParamDef = ParamDef {
    name: "ports",
    help: "Server ports the connects rotate over, one accepting thread each (default 8, so \
           TIME_WAIT tuples do not exhaust the ephemeral ports; lmbench lat_connect: 1).",
    kind: ParamKind::Int { min: 1, max: 64 },
    default: &["8"],
    quick: &[],
};

const TCP_PARAMS: &[ParamDef] = &[PLACE_PARAM, NODELAY_PARAM];
const CONNECT_PARAMS: &[ParamDef] = &[PLACE_PARAM, BACKLOG_PARAM, PORTS_PARAM];

/// What every ipc workload shares: its placement param and latency.
const IPC: WorkloadDef = WorkloadDef {
    params: PLACE_PARAMS,
    metrics: LAT_METRICS,
    ..WorkloadDef::family("ipc")
};

pub static FAMILY: Family = Family {
    name: "ipc",
    title: "Interprocess communication latency",
    help: "Round-trip time of a token passed between two processes over localhost UDP, TCP and \
           ONC RPC, and the cost of a TCP connection (lmbench lat_udp, lat_tcp, lat_rpc, \
           lat_connect).",
    workloads: &[
        IPC.named(
            "udp",
            "UDP latency",
            concat!(
                "4-byte datagram sent to a server on 127.0.0.1 that echoes it back (lmbench \
                 lat_udp).",
                place_help!()
            ),
            udp,
        ),
        WorkloadDef {
            params: TCP_PARAMS,
            ..IPC.named(
                "tcp",
                "TCP latency",
                concat!(
                    "4-byte message echoed over an established TCP connection on 127.0.0.1, \
                     TCP_NODELAY set unless nodelay=off (lmbench lat_tcp -m 4 sets no option: \
                     nodelay=off; netperf TCP_RR sets it).",
                    place_help!()
                ),
                tcp,
            )
        },
        IPC.named(
            "rpc_tcp",
            "RPC/tcp latency",
            concat!(
                "ONC RPC v2 call (RFC 5531, record marking) over TCP to a procedure that echoes an \
                 XDR unsigned int (lmbench lat_rpc -p tcp). Client and server are kscale's own, \
                 written to the RFC: lat_rpc's libtirpc does more per call (its record stream and \
                 XDR layers), about 15 % more on the development VM.",
                place_help!()
            ),
            rpc_tcp,
        ),
        IPC.named(
            "rpc_udp",
            "RPC/udp latency",
            concat!(
                "ONC RPC v2 call (RFC 5531) over UDP to a procedure that echoes an XDR unsigned int \
                 (lmbench lat_rpc -p udp).",
                place_help!()
            ),
            rpc_udp,
        ),
        WorkloadDef {
            params: CONNECT_PARAMS,
            ..IPC.named(
                "tcp_connect",
                "TCP/IP connection cost",
                concat!(
                    "connect() to a server on 127.0.0.1, then close() without waiting for the \
                     server, which accepts, reads to the client's FIN and closes (lmbench \
                     lat_connect). Connects rotate over `ports` server ports, each listening \
                     with `backlog`; lat_connect's one port with a backlog of 100 is ports=1 \
                     backlog=100, where a client on the server's CPU overflows the accept queue \
                     and waits out 1 s SYN retransmissions.",
                    place_help!()
                ),
                tcp_connect,
            )
        },
    ],
};

pub(super) fn loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// Pins this worker (the client, rank 0) and forks a server (rank 1)
/// running `f` where `place` says; its error, if any, goes to stderr and
/// makes the child exit 1 so [`finish_server`] can report it.
pub(super) fn spawn_server(
    place: &Placement,
    f: impl FnOnce() -> Result<()>,
) -> Result<ChildGuard> {
    place.pin(0)?;
    let pid = place.fork(1, || match f() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ipc server: {e:#}");
            1
        }
    })?;
    Ok(ChildGuard(pid))
}

/// Waits for a server that was told to stop and fails if it reported an
/// error, so a server-side validation failure is not silently dropped.
pub(super) fn finish_server(guard: ChildGuard) -> Result<()> {
    let deadline = Instant::now() + SERVER_EXIT;
    loop {
        match waitpid(guard.0, Some(WaitPidFlag::WNOHANG)).context("waitpid on ipc server")? {
            WaitStatus::StillAlive => {
                if Instant::now() >= deadline {
                    bail!("ipc server did not exit within {SERVER_EXIT:?} of being told to");
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            WaitStatus::Exited(_, code) => {
                // Reaped: the guard must not signal a pid that may be reused.
                std::mem::forget(guard);
                ensure!(code == 0, "ipc server exited with status {code}");
                return Ok(());
            }
            WaitStatus::Signaled(_, sig, _) => {
                std::mem::forget(guard);
                bail!("ipc server killed by {sig:?}");
            }
            _ => {}
        }
    }
}

/// Makes a blocking `accept` on `l` give up after `t` (Linux honours
/// SO_RCVTIMEO on listening sockets), which bounds a server whose client
/// never comes.
pub(super) fn set_accept_timeout(l: &TcpListener, t: Duration) -> Result<()> {
    let tv = nix::sys::time::TimeVal::new(t.as_secs() as libc::time_t, 0);
    nix::sys::socket::setsockopt(&l.as_fd(), nix::sys::socket::sockopt::ReceiveTimeout, &tv)
        .context("SO_RCVTIMEO on listening socket")
}

/// Reads exactly `buf.len()` bytes; false on end of stream before the first.
pub(super) fn read_msg(s: &mut TcpStream, buf: &mut [u8]) -> Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => bail!("connection closed inside a {}-byte message", buf.len()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("TCP read"),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TrialCtx;

    fn quick_ctx() -> TrialCtx {
        crate::test_ctx(&[], 20)
    }

    fn check(name: &str) -> f64 {
        let w = FAMILY
            .workloads
            .iter()
            .find(|w| w.name == name)
            .expect("workload");
        // In a scratch thread: the worker pins itself, the test thread must not.
        let out = std::thread::spawn(move || (w.run)(&quick_ctx()))
            .join()
            .unwrap()
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let v = out.values["latency"];
        assert!(v.is_finite() && v > 0.0 && v < 100_000.0, "{name}: {v}");
        assert!(out.iterations > 0);
        v
    }

    /// Every ipc workload puts client and server where `place` says on two
    /// CPUs (the server's mask is checked before the note is written).
    #[test]
    fn every_workload_places_client_and_server() {
        let Some(cpus) = crate::shared::place::tests::two_cpus() else {
            return;
        };
        for w in FAMILY.workloads {
            for place in ["spread", "same"] {
                let on = cpus.clone();
                let out = std::thread::spawn(move || {
                    let mut ctx = crate::test_ctx(&[("place", place)], 10);
                    ctx.cpus = on;
                    (w.run)(&ctx)
                })
                .join()
                .unwrap()
                .unwrap_or_else(|e| panic!("{} {place}: {e:#}", w.name));
                let want = Placement::new(place, &cpus).unwrap().note(2, "server");
                assert!(
                    out.notes.contains(&want),
                    "{} {place}: {:?}",
                    w.name,
                    out.notes
                );
            }
        }
    }

    #[test]
    fn udp_runs() {
        check("udp");
    }

    #[test]
    fn tcp_runs() {
        check("tcp");
    }

    #[test]
    fn rpc_tcp_runs() {
        check("rpc_tcp");
    }

    #[test]
    fn rpc_udp_runs() {
        check("rpc_udp");
    }

    #[test]
    fn tcp_connect_runs() {
        check("tcp_connect");
    }

    /// tcp takes `nodelay`, tcp_connect `backlog` and `ports`; the values
    /// that reproduce lmbench's are accepted and nonsense is refused.
    #[test]
    fn lmbench_params_are_declared_and_checked() {
        let w = |name: &str| FAMILY.workloads.iter().find(|w| w.name == name).unwrap();
        assert!(w("tcp").param("nodelay").is_some());
        assert!(w("tcp").param("place").is_some());
        for p in ["backlog", "ports", "place"] {
            assert!(w("tcp_connect").param(p).is_some(), "{p}");
        }
        assert!(w("udp").param("nodelay").is_none());
        for (p, good, bad) in [
            (NODELAY_PARAM, "off", "no"),
            (BACKLOG_PARAM, "100", "0"),
            (PORTS_PARAM, "1", "65"),
        ] {
            p.validate("ipc.x", good).unwrap();
            p.validate("ipc.x", p.default[0]).unwrap();
            assert!(p.validate("ipc.x", bad).is_err(), "{} {bad}", p.name);
        }
    }

    #[test]
    fn param_readers_default_and_refuse() {
        let none = crate::test_ctx(&[], 10);
        assert_eq!(none.param(&NODELAY_PARAM).unwrap(), "on");
        assert_eq!(none.param_int(&BACKLOG_PARAM).unwrap(), 4096);
        assert_eq!(none.param_int(&PORTS_PARAM).unwrap(), 8);
        let set = crate::test_ctx(
            &[("nodelay", "off"), ("backlog", "100"), ("ports", "1")],
            10,
        );
        assert_eq!(set.param(&NODELAY_PARAM).unwrap(), "off");
        assert_eq!(set.param_int(&BACKLOG_PARAM).unwrap(), 100);
        assert_eq!(set.param_int(&PORTS_PARAM).unwrap(), 1);
        let bad = crate::test_ctx(
            &[("nodelay", "maybe"), ("backlog", "x"), ("ports", "0")],
            10,
        );
        let e = bad.param(&NODELAY_PARAM).unwrap_err().to_string();
        assert!(
            e.contains("`maybe`") && e.ends_with("expected one of on, off"),
            "{e}"
        );
        assert!(bad.param_int(&BACKLOG_PARAM).is_err());
        let e = bad.param_int(&PORTS_PARAM).unwrap_err().to_string();
        assert!(e.contains("`0`") && e.contains("param `ports`"), "{e}");
    }

    /// lat_tcp's setting: no TCP_NODELAY, said in a note.
    #[test]
    fn tcp_runs_with_nagle_on() {
        let out = std::thread::spawn(|| tcp(&crate::test_ctx(&[("nodelay", "off")], 20)))
            .join()
            .unwrap()
            .unwrap();
        assert!(out.values["latency"] > 0.0);
        assert!(
            out.notes.iter().any(|n| n.starts_with("nodelay=off")),
            "{:?}",
            out.notes
        );
    }

    /// lat_connect's setting: one port, backlog 100. Fewer connects than
    /// the backlog, so no SYN is dropped however far the client runs ahead.
    #[test]
    fn tcp_connect_runs_as_lat_connect() {
        let out = std::thread::spawn(|| {
            let mut ctx = crate::test_ctx(&[("ports", "1"), ("backlog", "100")], 20);
            ctx.iterations = Some(50);
            tcp_connect(&ctx)
        })
        .join()
        .unwrap()
        .unwrap();
        assert_eq!(out.iterations, 50);
        assert!(
            out.notes
                .iter()
                .any(|n| n.starts_with("1 server port(s), listen backlog 100")),
            "{:?}",
            out.notes
        );
    }

    #[test]
    fn fixed_iterations_are_honoured() {
        let mut ctx = quick_ctx();
        ctx.iterations = Some(123);
        let out = std::thread::spawn(move || tcp(&ctx))
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(out.iterations, 123);
    }

    /// Numbers for the comparison with lmbench: run with
    /// `cargo test -p kscale-workloads --release ipc::tests::measure -- --ignored --nocapture`
    /// (`KSCALE_IPC_ONLY=udp,tcp` picks workloads).
    #[test]
    #[ignore]
    fn measure() {
        let only = std::env::var("KSCALE_IPC_ONLY").unwrap_or_default();
        for w in FAMILY.workloads {
            if !only.is_empty() && !only.split(',').any(|n| n == w.name) {
                continue;
            }
            let mut ctx = quick_ctx();
            ctx.trial_time = Duration::from_millis(500);
            let mut vals = Vec::new();
            for _ in 0..5 {
                let out = (w.run)(&ctx).unwrap_or_else(|e| panic!("{}: {e:#}", w.name));
                vals.push(out.values["latency"]);
            }
            vals.sort_by(f64::total_cmp);
            println!(
                "{:<12} median {:8.3} µs  (min {:.3}, max {:.3})",
                w.name,
                vals[vals.len() / 2],
                vals[0],
                vals[vals.len() - 1]
            );
        }
    }
}
