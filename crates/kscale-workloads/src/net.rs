//! `net`: network request/response and streaming, the Netperf workloads of
//! the seed studies (docs/families/net.md). Each is a macro workload: the
//! server role is the system under test, confined to the CPU configuration;
//! the load role drives it from the free CPUs or from `kscale peer`s.
//!
//! `tcp_rr` follows netperf's TCP_RR: every connection sends a `req`-byte
//! request and waits for the `rsp`-byte response before sending the next, as
//! fast as it can; the seed ran 1 to 40 such connections at once. Both ends
//! use blocking sockets and one thread per connection, as netperf's client
//! and netserver's per-test process do, so one connection costs what it costs
//! there: a send and a receive per transaction on each side.

use crate::roles::{self, Combined, Endpoint, Phase, RoleCtx, RoleOutput, Roles, Timing};
use crate::{ChartDef, Family, TrialOutput, WorkloadDef};
use anyhow::{bail, Context, Result};
use kscale_core::{hist, MetricDef, ParamDef, ParamKind, Params};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TPS: MetricDef = MetricDef::higher("tps", "tx/s");
const P50: MetricDef = MetricDef::quantile("p50", "µs", "latency", 0.50, 1e-3);
const P99: MetricDef = MetricDef::quantile("p99", "µs", "latency", 0.99, 1e-3);
const P999: MetricDef = MetricDef::quantile("p99.9", "µs", "latency", 0.999, 1e-3);
/// netperf's service demand: CPU time per transaction, on each side.
const SD_SERVER: MetricDef = MetricDef::lower("sd_server", "µs/tx");
const SD_LOAD: MetricDef = MetricDef::lower("sd_load", "µs/tx");

/// How long a blocked send or receive may wait before the transaction is
/// declared lost: far above any round trip, far below the trial limit.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

const CONNS: ParamDef = ParamDef {
    name: "conns",
    help: "Connections, each doing request/response as fast as it can (the seed's x-axis: \
           1 to 40). With peers, split evenly among them.",
    kind: ParamKind::Int {
        min: 1,
        max: 100_000,
    },
    default: &["1", "2", "4", "8", "16", "32", "40"],
    quick: &["1", "4", "16"],
};
const REQ: ParamDef = ParamDef {
    name: "req",
    help: "Request size in bytes (netperf -r REQ,RSP; the seed's 4).",
    kind: ParamKind::Size {
        min: 1,
        max: 1 << 24,
    },
    default: &["4"],
    quick: &[],
};
const RSP: ParamDef = ParamDef {
    name: "rsp",
    help: "Response size in bytes.",
    kind: ParamKind::Size {
        min: 1,
        max: 1 << 24,
    },
    default: &["4"],
    quick: &[],
};
const SOCKBUF: ParamDef = ParamDef {
    name: "sockbuf",
    help: "SO_SNDBUF and SO_RCVBUF of every socket on both ends (netperf -s/-S; the seed's \
           128 KB); 0 leaves the kernel's defaults and autotuning.",
    kind: ParamKind::Size {
        min: 0,
        max: 1 << 30,
    },
    default: &["128k"],
    quick: &[],
};

static TCP_RR: Roles = Roles {
    server: Some(rr_server),
    load: rr_load,
    timing: Timing::Duration,
    spread: Some("conns"),
    combine: rr_combine,
};

pub static FAMILY: Family = Family {
    name: "net",
    title: "Network request/response and streaming",
    help: "netperf's TCP_RR, UDP_RR, TCP_CRR and TCP_STREAM between a server confined to the \
           CPU configuration and load generators on the other CPUs or on `kscale peer`s, for a \
           fixed duration (seeds 000 and 004).",
    workloads: &[WorkloadDef {
        family: "net",
        name: "tcp_rr",
        title: "TCP request/response",
        help: "Transactions/s of `conns` TCP_NODELAY connections, each sending `req` bytes and \
               waiting for `rsp` bytes back (netperf TCP_RR), with p50/p99/p99.9 latency from \
               a histogram of every transaction and the CPU µs per transaction of server and \
               load (netperf's service demand, -c -C).",
        params: &[CONNS, REQ, RSP, SOCKBUF, roles::DURATION],
        metrics: &[TPS, P50, P99, P999, SD_SERVER, SD_LOAD],
        charts: &[ChartDef::against("conns").log().metrics(&["tps", "p99"])],
        timeout: Duration::from_secs(60),
        roles: Some(&TCP_RR),
        ..WorkloadDef::BASE
    }],
};

/// Sets SO_SNDBUF/SO_RCVBUF (when `bytes` > 0) and TCP_NODELAY.
pub(crate) fn tune(fd: &impl AsRawFd, bytes: u64) -> Result<()> {
    use nix::sys::socket::{setsockopt, sockopt};
    // SAFETY: the descriptor is owned by the caller's socket for the call.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd.as_raw_fd()) };
    if bytes > 0 {
        let b = usize::try_from(bytes).context("sockbuf too large")?;
        setsockopt(&fd, sockopt::SndBuf, &b).context("SO_SNDBUF")?;
        setsockopt(&fd, sockopt::RcvBuf, &b).context("SO_RCVBUF")?;
    }
    setsockopt(&fd, sockopt::TcpNoDelay, &true).context("TCP_NODELAY")?;
    Ok(())
}

/// A listener on the role's bind address, port chosen by the kernel, with
/// the socket buffers set before `listen` so accepted sockets inherit them
/// (as netserver does).
pub(crate) fn listen(ctx: &RoleCtx, sockbuf: u64) -> Result<TcpListener> {
    use nix::sys::socket::{
        bind, listen as nix_listen, setsockopt, socket, sockopt, AddressFamily, Backlog, SockFlag,
        SockType, SockaddrStorage,
    };
    let ip: IpAddr = ctx
        .bind
        .parse()
        .with_context(|| format!("bad bind address {}", ctx.bind))?;
    let family = if ip.is_ipv6() {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    let fd = socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None).context("socket")?;
    setsockopt(&fd, sockopt::ReuseAddr, &true).context("SO_REUSEADDR")?;
    if sockbuf > 0 {
        let b = usize::try_from(sockbuf).context("sockbuf too large")?;
        setsockopt(&fd, sockopt::SndBuf, &b).context("SO_SNDBUF")?;
        setsockopt(&fd, sockopt::RcvBuf, &b).context("SO_RCVBUF")?;
    }
    let addr = SockaddrStorage::from(SocketAddr::new(ip, 0));
    bind(fd.as_raw_fd(), &addr).with_context(|| format!("bind {ip}"))?;
    nix_listen(&fd, Backlog::new(1024).unwrap_or(Backlog::MAXCONN)).context("listen")?;
    Ok(TcpListener::from(fd))
}

/// Accepts connections until the parent says stop, one serving thread each.
/// Counting happens on the load side; the server's CPU time is measured by
/// the role mechanism over the window.
fn rr_server(ctx: &RoleCtx) -> Result<RoleOutput> {
    let p = &ctx.params;
    let (req, rsp) = (p.size("req")? as usize, p.size("rsp")? as usize);
    let sockbuf = p.size("sockbuf")?;
    let listener = listen(ctx, sockbuf)?;
    let port = listener.local_addr()?.port();
    listener.set_nonblocking(true)?;
    ctx.ready(Endpoint {
        host: String::new(),
        port,
        extra: serde_json::Value::Null,
    })?;
    let errors = Arc::new(AtomicU64::new(0));
    while ctx.phase() < Phase::Stop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                tune(&s, sockbuf)?;
                let errors = errors.clone();
                std::thread::Builder::new()
                    .stack_size(64 << 10)
                    .spawn(move || {
                        if serve_rr(s, req, rsp).is_err() {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                    .context("cannot start a server thread")?;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                crate::util::wait_readable_fd(
                    std::os::fd::AsFd::as_fd(&listener),
                    Duration::from_millis(20),
                )?;
            }
            Err(e) => return Err(e).context("accept"),
        }
    }
    Ok(RoleOutput::default().count("errors", errors.load(Ordering::Relaxed) as f64))
}

/// Echoes `rsp` bytes for every `req` bytes until the client closes.
fn serve_rr(mut s: TcpStream, req: usize, rsp: usize) -> io::Result<()> {
    let mut inb = vec![0u8; req];
    let out = vec![0x5au8; rsp];
    loop {
        match s.read_exact(&mut inb) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        s.write_all(&out)?;
    }
}

/// One load thread per connection: request, wait for the response, repeat;
/// inside the measured window each transaction is counted and its latency
/// recorded. One clock read per transaction: its end is the next one's start.
fn rr_load(ctx: &RoleCtx) -> Result<RoleOutput> {
    let p = &ctx.params;
    let (req, rsp) = (p.size("req")? as usize, p.size("rsp")? as usize);
    let sockbuf = p.size("sockbuf")?;
    let conns = ctx.share_of(p.int("conns")?);
    let ep = ctx
        .endpoint
        .as_ref()
        .context("tcp_rr's load needs the server's endpoint")?;
    let addr: SocketAddr = ep
        .addr()
        .parse()
        .with_context(|| format!("bad server address {}", ep.addr()))?;
    let mut streams = Vec::with_capacity(conns as usize);
    for _ in 0..conns {
        let s = connect(addr, sockbuf)?;
        streams.push(s);
    }
    let mut out = RoleOutput::default();
    let mut latency = hist::new();
    let (mut tx, mut errors) = (0u64, 0u64);
    std::thread::scope(|scope| -> Result<()> {
        let mut threads = Vec::with_capacity(streams.len());
        for s in streams {
            let t = std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn_scoped(scope, move || rr_client(s, req, rsp, ctx))
                .context("cannot start a load thread")?;
            threads.push(t);
        }
        ctx.ready(Endpoint::default())?;
        for t in threads {
            match t.join() {
                Ok(Ok((n, h))) => {
                    tx += n;
                    hist::merge(&mut latency, &h)?;
                }
                Ok(Err(e)) => {
                    errors += 1;
                    out.notes.push(format!("a connection failed: {e:#}"));
                }
                Err(_) => bail!("a load thread panicked"),
            }
        }
        Ok(())
    })?;
    if errors > 0 && tx == 0 {
        bail!("every connection failed: {}", out.notes.join("; "));
    }
    Ok(out
        .count("transactions", tx as f64)
        .count("errors", errors as f64)
        .histogram("latency", &latency))
}

pub(crate) fn connect(addr: SocketAddr, sockbuf: u64) -> Result<TcpStream> {
    use nix::sys::socket::{connect as nix_connect, socket, AddressFamily, SockFlag, SockType};
    let family = if addr.is_ipv6() {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    let fd = socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None).context("socket")?;
    // Buffers before connect, so the window scale is negotiated for them.
    tune(&fd, sockbuf)?;
    let sa = nix::sys::socket::SockaddrStorage::from(addr);
    nix_connect(fd.as_raw_fd(), &sa).with_context(|| format!("connect to {addr}"))?;
    let s = TcpStream::from(fd);
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(s)
}

fn rr_client(
    mut s: TcpStream,
    req: usize,
    rsp: usize,
    ctx: &RoleCtx,
) -> Result<(u64, hdrhistogram::Histogram<u64>)> {
    let out = vec![0xa5u8; req];
    let mut inb = vec![0u8; rsp];
    let mut h = hist::new();
    let mut n = 0u64;
    let mut t0 = Instant::now();
    loop {
        let phase = ctx.phase();
        if phase >= Phase::Done {
            break;
        }
        s.write_all(&out).context("send")?;
        s.read_exact(&mut inb).context("receive")?;
        let t1 = Instant::now();
        if phase == Phase::Measure {
            n += 1;
            hist::record(&mut h, (t1 - t0).as_nanos() as u64);
        }
        t0 = t1;
    }
    Ok((n, h))
}

fn rr_combine(_: &Params, c: &Combined) -> Result<TrialOutput> {
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
    let errors = c.load_sum("errors")
        + c.server
            .as_ref()
            .map_or(0.0, |s| s.counts.get("errors").copied().unwrap_or(0.0));
    if errors > 0.0 {
        out = out.note(format!("{errors} connection(s) failed during the trial"));
    }
    Ok(out)
}
