//! `net`: network request/response and streaming, the Netperf workloads of
//! the seed studies (docs/families/net.md). Each is a macro workload: the
//! server role is the system under test, confined to the CPU configuration;
//! the load role drives it from the free CPUs or from `kscale peer`s.
//!
//! Every workload follows one design, netperf's: blocking sockets and one
//! thread per connection (or per flow) on both ends, as netperf's client and
//! netserver's per-test process do, so one connection costs what it costs
//! there. The load counts and times; the server's CPU time over the window
//! gives the service demand. This file holds what the workloads share
//! (params, the load's thread harness, the accept loop); `rr.rs` has the
//! request/response workloads, `stream.rs` the bulk transfer. Sockets are
//! opened by [`crate::shared::sock`].

mod rr;
mod stream;

use crate::roles::{
    self, Combined, Endpoint, Phase, RoleCtx, RoleOutput, LATENCY_P50, LATENCY_P99,
};
use crate::shared::sock::{listen, tune};
use crate::{ChartDef, Family, TrialOutput, WorkloadDef};
use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use kscale_core::{hist, MetricDef, ParamDef, ParamKind};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const TPS: MetricDef = MetricDef::higher("tps", "tx/s");
const P999: MetricDef = MetricDef::quantile("p99.9", "µs", "latency", 0.999, 1e-3);
/// netperf's service demand: CPU time per transaction, on each side.
const SD_SERVER: MetricDef = MetricDef::lower("sd_server", "µs/tx");
const SD_LOAD: MetricDef = MetricDef::lower("sd_load", "µs/tx");
/// Datagrams that got no answer within `rto`, in % of requests sent.
const LOSS: MetricDef = MetricDef::lower("loss", "%");
/// Megabits (10⁶ bits) per second, as netperf's `-f m` and iperf3 report.
const MBPS: MetricDef = MetricDef::higher("mbps", "Mbit/s");
/// CPU time per megabyte (10⁶ bytes) moved, receiver (the server) and sender.
const SD_RECV: MetricDef = MetricDef::lower("sd_recv", "µs/MB");
const SD_SEND: MetricDef = MetricDef::lower("sd_send", "µs/MB");

const RR_METRICS: &[MetricDef] = &[TPS, LATENCY_P50, LATENCY_P99, P999, SD_SERVER, SD_LOAD];

/// How long a blocked send or receive on an established connection may wait
/// before the connection is declared dead: far above any round trip, far
/// below the trial limit.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection-count param: the seed's x-axis for every request/response
/// workload, with each workload's own sweeps.
const fn conns(default: &'static [&'static str], quick: &'static [&'static str]) -> ParamDef {
    ParamDef {
        name: "conns",
        help: "Connections, each doing request/response as fast as it can (the seed's x-axis: \
               1 to 40). With peers, split evenly among them.",
        kind: ParamKind::Int {
            min: 1,
            max: 100_000,
        },
        default,
        quick,
    }
}

const fn size(
    name: &'static str,
    help: &'static str,
    max: u64,
    default: &'static [&'static str],
) -> ParamDef {
    ParamDef {
        name,
        help,
        kind: ParamKind::Size { min: 1, max },
        default,
        quick: &[],
    }
}

/// The largest UDP payload over IPv4.
const UDP_MAX: u64 = 65_507;

const REQ: ParamDef = size(
    "req",
    "Request size in bytes (netperf -r REQ,RSP; the seed's 4).",
    1 << 24,
    &["4"],
);
const RSP: ParamDef = size("rsp", "Response size in bytes.", 1 << 24, &["4"]);
const UDP_REQ: ParamDef = size(
    "req",
    "Request datagram size in bytes (netperf -r REQ,RSP); at most 65507.",
    UDP_MAX,
    &["4"],
);
const UDP_RSP: ParamDef = size(
    "rsp",
    "Response datagram size in bytes; at most 65507.",
    UDP_MAX,
    &["4"],
);

const fn sockbuf(default: &'static [&'static str], quick: &'static [&'static str]) -> ParamDef {
    ParamDef {
        name: "sockbuf",
        help: "SO_SNDBUF and SO_RCVBUF of every socket on both ends (netperf -s/-S; the seed's \
               128 KB); 0 leaves the kernel's defaults and autotuning.",
        kind: ParamKind::Size {
            min: 0,
            max: 1 << 30,
        },
        default,
        quick,
    }
}

const SOCKBUF: ParamDef = sockbuf(&["128k"], &[]);

/// A workload of this family with the fields every one of them shares.
const fn workload(
    name: &'static str,
    title: &'static str,
    help: &'static str,
    params: &'static [ParamDef],
    metrics: &'static [MetricDef],
    charts: &'static [ChartDef],
    roles: &'static roles::Roles,
) -> WorkloadDef {
    WorkloadDef {
        family: "net",
        name,
        title,
        help,
        params,
        metrics,
        charts,
        timeout: Duration::from_secs(60),
        roles: Some(roles),
        ..WorkloadDef::BASE
    }
}

/// Transactions/s and p99 against connections, the seed's figure 4.
const RR_CHARTS: &[ChartDef] = &[ChartDef::against("conns").log().metrics(&["tps", "p99"])];

pub static FAMILY: Family = Family {
    name: "net",
    title: "Network request/response and streaming",
    help: "netperf's TCP_RR, UDP_RR, TCP_CRR and TCP_STREAM between a server confined to the \
           CPU configuration and load generators on the other CPUs or on `kscale peer`s, for a \
           fixed duration (seeds 000 and 004).",
    workloads: &[
        workload(
            "tcp_rr",
            "TCP request/response",
            "Transactions/s of `conns` TCP_NODELAY connections, each sending `req` bytes and \
             waiting for `rsp` bytes back (netperf TCP_RR), with p50/p99/p99.9 latency from a \
             histogram of every transaction and the CPU µs per transaction of server and load \
             (netperf's service demand, -c -C).",
            &[
                conns(&["1", "2", "4", "8", "16", "32", "40"], &["1", "4", "16"]),
                REQ,
                RSP,
                SOCKBUF,
                roles::DURATION,
            ],
            RR_METRICS,
            RR_CHARTS,
            &rr::TCP_RR,
        ),
        workload(
            "udp_rr",
            "UDP request/response",
            "Transactions/s of `conns` UDP sockets, each sending a `req`-byte datagram and \
             waiting for the `rsp`-byte answer (netperf UDP_RR). A request unanswered within \
             `rto` is counted lost and sent again, so a lost datagram never stalls a \
             connection (netperf's does); `loss` is the share of requests lost.",
            &[
                conns(&["1", "2", "4", "8", "16", "32", "40"], &["1", "4"]),
                UDP_REQ,
                UDP_RSP,
                SOCKBUF,
                rr::RTO,
                roles::DURATION,
            ],
            &[
                TPS,
                LATENCY_P50,
                LATENCY_P99,
                P999,
                LOSS,
                SD_SERVER,
                SD_LOAD,
            ],
            RR_CHARTS,
            &rr::UDP_RR,
        ),
        workload(
            "tcp_crr",
            "TCP connect/request/response",
            "Transactions/s of `conns` loops that each connect, send `req` bytes, receive \
             `rsp` bytes and close — a new TCP connection per transaction (netperf TCP_CRR), \
             with latency percentiles and service demand. The server closes first, as \
             netserver does; a note says when the kernel's TIME_WAIT or ephemeral-port bound \
             was hit in the window.",
            &[
                conns(&["1", "2", "4", "8", "16", "32", "40"], &["1", "4"]),
                REQ,
                RSP,
                sockbuf(&["0"], &[]),
                roles::DURATION,
            ],
            RR_METRICS,
            RR_CHARTS,
            &rr::TCP_CRR,
        ),
        workload(
            "tcp_stream",
            "TCP stream",
            "Mbit/s (10⁶) of `streams` TCP connections each sending `msg`-byte writes as fast \
             as the server reads them (netperf TCP_STREAM, iperf3), and the CPU µs per MB \
             (10⁶ bytes) of receiver (the server) and sender: netperf's service demand.",
            &[
                stream::MSG,
                sockbuf(&["128k", "0"], &["128k"]),
                stream::STREAMS,
                roles::DURATION,
            ],
            &[MBPS, SD_RECV, SD_SEND],
            &[ChartDef::against("msg").log().metrics(&["mbps"])],
            &stream::TCP_STREAM,
        ),
    ],
};

/// The server's address, as the load sees it.
fn server_addr(ctx: &RoleCtx) -> Result<SocketAddr> {
    let ep = ctx
        .endpoint
        .as_ref()
        .context("a load role needs the server's endpoint")?;
    ep.addr()
        .parse()
        .with_context(|| format!("bad server address {}", ep.addr()))
}

/// What one load thread counted in the measured window.
struct Tally {
    /// Transactions (request/response) completed.
    tx: u64,
    /// Payload bytes sent (streams).
    bytes: u64,
    /// Requests that got no answer in time (UDP).
    lost: u64,
    /// Requests sent, lost or not (UDP), the base of the loss rate.
    sent: u64,
    /// Connects refused for want of a local port (TCP_CRR): the TIME_WAIT
    /// and ephemeral-port bound.
    no_port: u64,
    latency: Histogram<u64>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            tx: 0,
            bytes: 0,
            lost: 0,
            sent: 0,
            no_port: 0,
            latency: hist::new(),
        }
    }

    fn add(&mut self, o: &Tally) -> Result<()> {
        self.tx += o.tx;
        self.bytes += o.bytes;
        self.lost += o.lost;
        self.sent += o.sent;
        self.no_port += o.no_port;
        hist::merge(&mut self.latency, &o.latency)?;
        Ok(())
    }
}

/// Runs `f(item)` on a thread of its own for each item, in `scope`, with
/// small stacks (thousands of connections, each a thread, as netperf's
/// processes are); `what` names the threads in the error.
fn spawn_each<'scope, I: Send + 'scope, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    items: impl IntoIterator<Item = I>,
    what: &str,
    f: impl Fn(I) -> T + Send + Copy + 'scope,
) -> Result<Vec<std::thread::ScopedJoinHandle<'scope, T>>> {
    items
        .into_iter()
        .map(|it| {
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn_scoped(scope, move || f(it))
                .with_context(|| format!("cannot start a {what} thread"))
        })
        .collect()
}

/// The load role's harness: one thread per item (a connection, a socket, a
/// connect loop) running `f` until the window is over, `ready` once they
/// all run, then their tallies summed and their histograms merged. A thread
/// whose connection fails costs its share, not the trial, unless all do.
fn drive<T: Send>(
    ctx: &RoleCtx,
    items: Vec<T>,
    f: impl Fn(T, &RoleCtx) -> Result<Tally> + Sync,
) -> Result<RoleOutput> {
    let mut out = RoleOutput::default();
    let mut sum = Tally::new();
    let mut errors = 0u64;
    std::thread::scope(|scope| -> Result<()> {
        let f = &f;
        let threads = spawn_each(scope, items, "load", move |it| f(it, ctx))?;
        ctx.ready(Endpoint::default())?;
        for t in threads {
            match t.join() {
                Ok(Ok(t)) => sum.add(&t)?,
                Ok(Err(e)) => {
                    errors += 1;
                    let n = format!("a connection failed: {e:#}");
                    if !out.notes.contains(&n) {
                        out.notes.push(n);
                    }
                }
                Err(_) => bail!("a load thread panicked"),
            }
        }
        Ok(())
    })?;
    if errors > 0 && sum.tx == 0 && sum.bytes == 0 {
        bail!("every connection failed: {}", out.notes.join("; "));
    }
    let mut out = out
        .count("transactions", sum.tx as f64)
        .count("bytes", sum.bytes as f64)
        .count("lost", sum.lost as f64)
        .count("sent", sum.sent as f64)
        .count("no_port", sum.no_port as f64)
        .count("errors", errors as f64);
    if !sum.latency.is_empty() {
        out = out.histogram("latency", &sum.latency);
    }
    Ok(out)
}

/// The server's accept loop for long-lived connections (TCP_RR,
/// TCP_STREAM): accepts until the parent says stop, one detached thread
/// per connection running `serve` until its client closes. Detached, so a
/// load that vanishes without closing cannot keep the server from
/// reporting.
fn accept_loop(
    ctx: &RoleCtx,
    sockbuf: u64,
    nodelay: bool,
    serve: impl Fn(TcpStream) -> io::Result<()> + Clone + Send + 'static,
) -> Result<RoleOutput> {
    let listener = listen(ctx, sockbuf)?;
    let port = listener.local_addr()?.port();
    listener.set_nonblocking(true)?;
    ctx.ready(Endpoint::on_port(port, serde_json::Value::Null))?;
    let errors = Arc::new(AtomicU64::new(0));
    while ctx.phase() < Phase::Stop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                tune(&s, sockbuf, nodelay)?;
                let errors = errors.clone();
                let serve = serve.clone();
                std::thread::Builder::new()
                    .stack_size(64 << 10)
                    .spawn(move || {
                        if serve(s).is_err() {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                    .context("cannot start a server thread")?;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                crate::shared::fd::wait_readable_fd(listener.as_fd(), Duration::from_millis(20))?;
            }
            Err(e) => return Err(e).context("accept"),
        }
    }
    Ok(RoleOutput::default().count("errors", errors.load(Ordering::Relaxed) as f64))
}

/// The count `name` of the server role, 0 when absent.
fn server_count(c: &Combined, name: &str) -> f64 {
    c.server
        .as_ref()
        .and_then(|s| s.counts.get(name).copied())
        .unwrap_or(0.0)
}

/// The trial of a request/response workload: transactions/s and service
/// demand on each side, plus a note for failed connections.
fn rr_output(c: &Combined) -> Result<TrialOutput> {
    let tx = c.load_sum("transactions");
    if tx <= 0.0 {
        bail!("no transaction completed in the measured window");
    }
    let mut out = TrialOutput::new(tx as u64)
        .with(&TPS, c.load_rate("transactions"))
        .with(&SD_LOAD, c.load_cpu_s() / tx * 1e6);
    if let Some(s) = c.server_cpu_s() {
        out = out.with(&SD_SERVER, s / tx * 1e6);
    }
    Ok(failures(c, out))
}

fn failures(c: &Combined, out: TrialOutput) -> TrialOutput {
    let errors = c.load_sum("errors") + server_count(c, "errors");
    if errors > 0.0 {
        out.note(format!("{errors} connection(s) failed during the trial"))
    } else {
        out
    }
}

/// The load's part of a list of `total` per-connection things (UDP server
/// sockets): the slice after every earlier share's.
fn share_range(share: roles::Share, total: u64) -> std::ops::Range<usize> {
    let start: u64 = (0..share.index)
        .map(|i| roles::Share { index: i, ..share }.of(total))
        .sum();
    let n = share.of(total);
    start as usize..(start + n) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_the_list_once() {
        let s = |index| roles::Share { index, count: 3 };
        let r: Vec<_> = (0..3).map(|i| share_range(s(i), 10)).collect();
        assert_eq!(r, [0..4, 4..7, 7..10]);
        assert_eq!(share_range(roles::Share::default(), 5), 0..5);
    }

    #[test]
    fn tallies_add_up() {
        let mut a = Tally::new();
        let mut b = Tally::new();
        a.tx = 3;
        b.tx = 4;
        b.lost = 1;
        b.sent = 5;
        hist::record(&mut a.latency, 1000);
        hist::record(&mut b.latency, 3000);
        a.add(&b).unwrap();
        assert_eq!((a.tx, a.lost, a.sent), (7, 1, 5));
        assert_eq!(a.latency.len(), 2);
    }

    /// The family's own definitions: every workload charts against a param
    /// it has and declares the secondary metrics the issue asks for.
    #[test]
    fn every_workload_reports_its_secondary_metrics() {
        for w in FAMILY.workloads {
            let names: Vec<_> = w.metrics.iter().map(|m| m.name).collect();
            if w.name == "tcp_stream" {
                assert_eq!(names, ["mbps", "sd_recv", "sd_send"]);
            } else {
                for m in ["tps", "p50", "p99", "sd_server", "sd_load"] {
                    assert!(names.contains(&m), "{} lacks {m}", w.id());
                }
            }
            assert!(w.roles.is_some());
            assert!(!w.charts.is_empty());
        }
    }
}
