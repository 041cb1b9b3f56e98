//! The request/response workloads: TCP_RR over long-lived connections,
//! UDP_RR with loss recovery, TCP_CRR with a connection per transaction.
//! The load measures each transaction from its request to its response with
//! one clock read: a transaction's end is the next one's start.

use super::{
    accept_loop, drive, rr_output, server_addr, server_count, share_range, spawn_each, Tally,
    IO_TIMEOUT, LOSS,
};
use crate::roles::{Combined, Endpoint, Phase, RoleCtx, RoleOutput, Roles, Timing};
use crate::shared::sock::{bound_socket, listen, tune, Dial};
use crate::TrialOutput;
use anyhow::{bail, Context, Result};
use kscale_core::{hist, ParamDef, ParamKind, Params};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

pub(super) static TCP_RR: Roles = Roles {
    server: Some(tcp_rr_server),
    load: tcp_rr_load,
    timing: Timing::Duration,
    spread: Some("conns"),
    combine: tcp_combine,
};

pub(super) static UDP_RR: Roles = Roles {
    server: Some(udp_rr_server),
    load: udp_rr_load,
    timing: Timing::Duration,
    spread: Some("conns"),
    combine: udp_combine,
};

pub(super) static TCP_CRR: Roles = Roles {
    server: Some(crr_server),
    load: crr_load,
    timing: Timing::Duration,
    spread: Some("conns"),
    combine: crr_combine,
};

/// UDP's retransmission timeout.
pub(super) const RTO: ParamDef = ParamDef {
    name: "rto",
    help: "Seconds a UDP request waits for its answer before it is counted lost and sent \
           again (netperf waits forever).",
    kind: ParamKind::Seconds {
        min: 0.001,
        max: 10.0,
    },
    default: &["0.05"],
    quick: &[],
};

fn sizes(p: &Params) -> Result<(usize, usize, u64)> {
    Ok((
        p.size("req")? as usize,
        p.size("rsp")? as usize,
        p.size("sockbuf")?,
    ))
}

/// Counts one completed transaction that ended at `t1` if it falls in the
/// window, and makes `t1` the next one's start.
#[inline]
fn record(t: &mut Tally, phase: Phase, t0: &mut Instant, t1: Instant) {
    if phase == Phase::Measure {
        t.tx += 1;
        hist::record(&mut t.latency, (t1 - *t0).as_nanos() as u64);
    }
    *t0 = t1;
}

// ---------------------------------------------------------------- TCP_RR

fn tcp_rr_server(ctx: &RoleCtx) -> Result<RoleOutput> {
    let (req, rsp, sockbuf) = sizes(&ctx.params)?;
    accept_loop(ctx, sockbuf, true, move |s| serve_rr(s, req, rsp))
}

/// Answers `rsp` bytes to every `req` bytes until the client closes.
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

fn tcp_rr_load(ctx: &RoleCtx) -> Result<RoleOutput> {
    let (req, rsp, sockbuf) = sizes(&ctx.params)?;
    let addr = server_addr(ctx)?;
    let dial = Dial {
        sockbuf,
        nodelay: true,
        timeout: Some(IO_TIMEOUT),
    };
    let conns = ctx.share_of(ctx.params.int("conns")?);
    let streams = (0..conns)
        .map(|_| {
            dial.connect(addr)
                .with_context(|| format!("connect to {addr}"))
        })
        .collect::<Result<Vec<_>>>()?;
    drive(ctx, streams, |s, ctx| tcp_rr_client(s, req, rsp, ctx))
}

fn tcp_rr_client(mut s: TcpStream, req: usize, rsp: usize, ctx: &RoleCtx) -> Result<Tally> {
    let out = vec![0xa5u8; req];
    let mut inb = vec![0u8; rsp];
    let mut t = Tally::new();
    let mut t0 = Instant::now();
    loop {
        let phase = ctx.phase();
        if phase >= Phase::Done {
            return Ok(t);
        }
        s.write_all(&out).context("send")?;
        s.read_exact(&mut inb).context("receive")?;
        record(&mut t, phase, &mut t0, Instant::now());
    }
}

fn tcp_combine(_: &Params, c: &Combined) -> Result<TrialOutput> {
    rr_output(c)
}

// ---------------------------------------------------------------- UDP_RR

/// The request's sequence number travels in its first bytes (as many as
/// fit, up to 4) and the server copies them into its answer, so an answer
/// that arrives after its request was given up is recognised and dropped.
fn stamp(buf: &mut [u8], seq: u32) {
    let n = buf.len().min(4);
    buf[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
}

fn stamped(buf: &[u8], seq: u32) -> bool {
    let n = buf.len().min(4);
    buf[..n] == seq.to_le_bytes()[..n]
}

/// One socket per connection, each served by its own thread (as netperf
/// runs one netserver process per UDP_RR instance); the ports go to the load
/// in the endpoint's `extra.ports`.
fn udp_rr_server(ctx: &RoleCtx) -> Result<RoleOutput> {
    use nix::sys::socket::SockType;
    let (req, rsp, sockbuf) = sizes(&ctx.params)?;
    let conns = ctx.params.int("conns")?;
    let socks = (0..conns)
        .map(|_| {
            let s = UdpSocket::from(bound_socket(ctx, SockType::Datagram, sockbuf)?);
            // Wakes a waiting thread now and then to see whether to stop.
            s.set_read_timeout(Some(Duration::from_millis(100)))?;
            Ok(s)
        })
        .collect::<Result<Vec<_>>>()?;
    let ports = socks
        .iter()
        .map(|s| Ok(s.local_addr()?.port()))
        .collect::<Result<Vec<u16>>>()?;
    let mut errors = 0u64;
    std::thread::scope(|scope| -> Result<()> {
        let threads = spawn_each(scope, &socks, "server", |s| serve_udp(s, req, rsp, ctx))?;
        ctx.ready(Endpoint::on_port(
            ports[0],
            serde_json::json!({ "ports": ports }),
        ))?;
        for t in threads {
            if !matches!(t.join(), Ok(Ok(()))) {
                errors += 1;
            }
        }
        Ok(())
    })?;
    Ok(RoleOutput::default().count("errors", errors as f64))
}

fn serve_udp(s: &UdpSocket, req: usize, rsp: usize, ctx: &RoleCtx) -> io::Result<()> {
    // One byte more than a request, to notice a datagram of the wrong size.
    let mut inb = vec![0u8; req + 1];
    let mut out = vec![0x5au8; rsp];
    while ctx.phase() < Phase::Stop {
        match s.recv_from(&mut inb) {
            Ok((n, from)) => {
                let k = n.min(rsp).min(4);
                out[..k].copy_from_slice(&inb[..k]);
                s.send_to(&out, from)?;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // An ICMP error from a load that went away, reported on the
            // next call: not this socket's failure.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn udp_rr_load(ctx: &RoleCtx) -> Result<RoleOutput> {
    let (req, rsp, sockbuf) = sizes(&ctx.params)?;
    let rto = Duration::from_secs_f64(ctx.params.seconds("rto")?);
    let server = server_addr(ctx)?;
    let ports: Vec<u16> = ctx
        .endpoint
        .as_ref()
        .and_then(|e| serde_json::from_value(e.extra["ports"].clone()).ok())
        .context("udp_rr's server announced no ports")?;
    let range = share_range(ctx.share, ports.len() as u64);
    let ip = server.ip();
    let socks = ports
        .get(range.clone())
        .with_context(|| format!("the server has {} sockets, not {range:?}", ports.len()))?
        .iter()
        .map(|&port| {
            let to = SocketAddr::new(ip, port);
            let any: SocketAddr = if ip.is_ipv6() {
                "[::]:0".parse()?
            } else {
                "0.0.0.0:0".parse()?
            };
            let s = UdpSocket::bind(any).context("bind a UDP socket")?;
            tune(&s, sockbuf, false)?;
            s.connect(to).with_context(|| format!("connect to {to}"))?;
            s.set_read_timeout(Some(rto))?;
            Ok(s)
        })
        .collect::<Result<Vec<_>>>()?;
    drive(ctx, socks, |s, ctx| udp_rr_client(s, req, rsp, ctx))
}

/// Request, wait up to `rto` for its answer; on timeout count a loss and
/// send the request again under a new sequence number. The transaction's
/// latency runs from its first sending to its answer, losses included.
fn udp_rr_client(s: UdpSocket, req: usize, rsp: usize, ctx: &RoleCtx) -> Result<Tally> {
    let mut out = vec![0xa5u8; req];
    let mut inb = vec![0u8; rsp + 1];
    let mut t = Tally::new();
    let mut seq: u32 = 0;
    let mut t0 = Instant::now();
    'tx: loop {
        let phase = ctx.phase();
        if phase >= Phase::Done {
            return Ok(t);
        }
        loop {
            seq = seq.wrapping_add(1);
            stamp(&mut out, seq);
            match s.send(&out) {
                Ok(_) => {}
                // The socket buffer is full or the server's port is not yet
                // (or no longer) open: the request is lost like a dropped one.
                Err(e) if is_transient(&e) => {}
                Err(e) => return Err(e).context("send"),
            }
            if ctx.phase() == Phase::Measure {
                t.sent += 1;
            }
            match recv_answer(&s, &mut inb, seq) {
                Ok(true) => break,
                Ok(false) => {
                    if ctx.phase() == Phase::Measure {
                        t.lost += 1;
                    }
                    if ctx.phase() >= Phase::Done {
                        continue 'tx;
                    }
                }
                Err(e) => return Err(e).context("receive"),
            }
        }
        record(&mut t, phase, &mut t0, Instant::now());
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionRefused | io::ErrorKind::Interrupted
    ) || e.raw_os_error() == Some(libc::ENOBUFS)
}

/// Waits for the answer to `seq`: true when it came, false when the timeout
/// passed first. Answers to earlier requests are dropped.
fn recv_answer(s: &UdpSocket, buf: &mut [u8], seq: u32) -> io::Result<bool> {
    loop {
        match s.recv(buf) {
            Ok(n) if stamped(&buf[..n], seq) => return Ok(true),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(false)
            }
            Err(e) if is_transient(&e) => return Ok(false),
            Err(e) => return Err(e),
        }
    }
}

fn udp_combine(_: &Params, c: &Combined) -> Result<TrialOutput> {
    let (lost, sent) = (c.load_sum("lost"), c.load_sum("sent"));
    let out = rr_output(c)?.with(&LOSS, if sent > 0.0 { lost / sent * 100.0 } else { 0.0 });
    Ok(if lost > 0.0 {
        out.note(format!(
            "{lost} of {sent} UDP requests got no answer in time and were sent again"
        ))
    } else {
        out
    })
}

// ---------------------------------------------------------------- TCP_CRR

/// `conns` threads each accept, read the request, answer and close, one
/// connection at a time, as each netserver process of a TCP_CRR instance
/// does. Closing first puts TIME_WAIT on the server's side, as netserver's
/// does; the kernel keeps at most `tcp_max_tw_buckets` of them, so the
/// window's TIME_WAIT overflows are counted for the note.
fn crr_server(ctx: &RoleCtx) -> Result<RoleOutput> {
    let (req, rsp, sockbuf) = sizes(&ctx.params)?;
    let conns = ctx.params.int("conns")?;
    let listener = listen(ctx, sockbuf)?;
    // Acceptors wake now and then to see whether to stop.
    let tv = nix::sys::time::TimeVal::new(0, 100_000);
    nix::sys::socket::setsockopt(&listener, nix::sys::socket::sockopt::ReceiveTimeout, &tv)
        .context("SO_RCVTIMEO on the listener")?;
    let port = listener.local_addr()?.port();
    let mut errors = 0u64;
    let mut overflow = 0.0;
    std::thread::scope(|scope| -> Result<()> {
        let listener = &listener;
        let threads = spawn_each(scope, 0..conns, "server", |_| {
            crr_acceptor(listener, req, rsp, ctx)
        })?;
        ctx.ready(Endpoint::on_port(port, serde_json::Value::Null))?;
        let limit = Duration::from_secs(86_400);
        if ctx.wait_for(Phase::Measure, limit) {
            let before = tw_overflows();
            ctx.wait_for(Phase::Done, limit);
            overflow = tw_overflows() - before;
        }
        for t in threads {
            match t.join() {
                Ok(Ok(n)) => errors += n,
                _ => errors += 1,
            }
        }
        Ok(())
    })?;
    Ok(RoleOutput::default()
        .count("errors", errors as f64)
        .count("tw_overflow", overflow))
}

/// Serves connections until stop; returns how many failed.
fn crr_acceptor(
    l: &std::net::TcpListener,
    req: usize,
    rsp: usize,
    ctx: &RoleCtx,
) -> io::Result<u64> {
    let mut inb = vec![0u8; req];
    let out = vec![0x5au8; rsp];
    let mut failed = 0;
    while ctx.phase() < Phase::Stop {
        match l.accept() {
            Ok((mut s, _)) => {
                if s.read_exact(&mut inb)
                    .and_then(|_| s.write_all(&out))
                    .is_err()
                {
                    failed += 1;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                        | io::ErrorKind::ConnectionAborted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(failed)
}

/// The kernel's count of TIME_WAIT sockets it could not keep
/// (`TcpExt: TCPTimeWaitOverflow`, in this network namespace).
fn tw_overflows() -> f64 {
    std::fs::read_to_string("/proc/net/netstat")
        .ok()
        .and_then(|s| netstat_field(&s, "TcpExt", "TCPTimeWaitOverflow"))
        .unwrap_or(0.0)
}

/// A field of /proc/net/netstat: a header line of names, then a line of
/// values, per group.
fn netstat_field(text: &str, group: &str, name: &str) -> Option<f64> {
    let prefix = format!("{group}:");
    let mut lines = text.lines().filter(|l| l.starts_with(&prefix));
    let names = lines.next()?;
    let values = lines.next()?;
    let i = names.split_whitespace().position(|n| n == name)?;
    values.split_whitespace().nth(i)?.parse().ok()
}

fn crr_load(ctx: &RoleCtx) -> Result<RoleOutput> {
    let (req, rsp, sockbuf) = sizes(&ctx.params)?;
    let addr = server_addr(ctx)?;
    let conns = ctx.share_of(ctx.params.int("conns")?);
    // No TCP_NODELAY and no timeouts: each costs a system call per
    // transaction, netperf's TCP_CRR sets neither by default, and one small
    // write per side is never held back by Nagle.
    let dial = Dial {
        sockbuf,
        nodelay: false,
        timeout: None,
    };
    drive(ctx, vec![(); conns as usize], |(), ctx| {
        crr_client(addr, dial, req, rsp, ctx)
    })
}

/// Connect, request, response, wait for the server's close, close. A
/// connect refused for want of a local port (EADDRNOTAVAIL: every
/// ephemeral port is held by a connection or TIME_WAIT) is counted and
/// tried again after a pause.
fn crr_client(
    addr: SocketAddr,
    dial: Dial,
    req: usize,
    rsp: usize,
    ctx: &RoleCtx,
) -> Result<Tally> {
    let out = vec![0xa5u8; req];
    let mut inb = vec![0u8; rsp];
    let mut t = Tally::new();
    let mut t0 = Instant::now();
    let mut eof = [0u8; 1];
    loop {
        let phase = ctx.phase();
        if phase >= Phase::Done {
            return Ok(t);
        }
        let mut s = match dial.connect(addr) {
            Ok(s) => s,
            Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => {
                if phase == Phase::Measure {
                    t.no_port += 1;
                }
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("connect to {addr}")),
        };
        s.write_all(&out).context("send")?;
        s.read_exact(&mut inb).context("receive")?;
        if s.read(&mut eof).context("waiting for the server's close")? != 0 {
            bail!("the server sent more than {rsp} bytes");
        }
        drop(s);
        record(&mut t, phase, &mut t0, Instant::now());
    }
}

fn crr_combine(_: &Params, c: &Combined) -> Result<TrialOutput> {
    let mut out = rr_output(c)?;
    let no_port = c.load_sum("no_port");
    if no_port > 0.0 {
        out = out.note(format!(
            "TIME_WAIT bound hit: {no_port} connect(s) found no free local port \
             (net.ipv4.ip_local_port_range) and waited"
        ));
    }
    let overflow = server_count(c, "tw_overflow");
    if overflow > 0.0 {
        out = out.note(format!(
            "TIME_WAIT bound hit: the kernel dropped {overflow} TIME_WAIT socket(s) \
             (net.ipv4.tcp_max_tw_buckets)"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_fit_any_datagram() {
        let mut b = [0u8; 8];
        stamp(&mut b, 0x0102_0304);
        assert!(stamped(&b, 0x0102_0304));
        assert!(!stamped(&b, 0x0102_0305));
        let mut one = [0u8; 1];
        stamp(&mut one, 7);
        assert!(stamped(&one, 7));
        assert!(stamped(&one, 7 + 256)); // one byte tells 256 apart
        assert!(stamped(&[], 9));
    }

    #[test]
    fn netstat_fields_by_name() {
        let t = "TcpExt: SyncookiesSent TCPTimeWaitOverflow\nTcpExt: 0 42\n\
                 IpExt: InNoRoutes\nIpExt: 3\n";
        assert_eq!(
            netstat_field(t, "TcpExt", "TCPTimeWaitOverflow"),
            Some(42.0)
        );
        assert_eq!(netstat_field(t, "IpExt", "InNoRoutes"), Some(3.0));
        assert_eq!(netstat_field(t, "TcpExt", "Nope"), None);
        assert!(tw_overflows() >= 0.0);
    }

    #[test]
    fn a_lost_answer_times_out_and_a_stale_one_is_dropped() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(server.local_addr().unwrap()).unwrap();
        client
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let mut buf = [0u8; 5];
        // Nothing answers: a loss, not a stall.
        assert!(!recv_answer(&client, &mut buf, 1).unwrap());
        // A late answer to request 1, then the answer to request 2.
        let to = client.local_addr().unwrap();
        server.send_to(&1u32.to_le_bytes(), to).unwrap();
        server.send_to(&2u32.to_le_bytes(), to).unwrap();
        assert!(recv_answer(&client, &mut buf, 2).unwrap());
    }

    #[test]
    fn udp_combine_reports_the_loss_rate() {
        use kscale_core::RoleCpu;
        let load = RoleOutput {
            cpu: RoleCpu {
                window_s: 2.0,
                cpu_s: 1.0,
                ..RoleCpu::default()
            },
            ..RoleOutput::default()
        }
        .count("transactions", 1000.0)
        .count("lost", 10.0)
        .count("sent", 1010.0);
        let c = Combined {
            server: None,
            loads: vec![load],
        };
        let out = udp_combine(&Params::default(), &c).unwrap();
        assert_eq!(out.values["tps"], 500.0);
        assert!((out.values["loss"] - 10.0 / 1010.0 * 100.0).abs() < 1e-9);
        assert!(
            out.notes.iter().any(|n| n.contains("10 of 1010")),
            "{:?}",
            out.notes
        );
    }

    #[test]
    fn crr_combine_notes_the_time_wait_bound() {
        use kscale_core::RoleCpu;
        let cpu = RoleCpu {
            window_s: 1.0,
            cpu_s: 0.5,
            ..RoleCpu::default()
        };
        let load = RoleOutput {
            cpu: cpu.clone(),
            ..RoleOutput::default()
        }
        .count("transactions", 100.0)
        .count("no_port", 3.0);
        let server = RoleOutput {
            cpu,
            ..RoleOutput::default()
        }
        .count("tw_overflow", 5.0);
        let c = Combined {
            server: Some(server),
            loads: vec![load],
        };
        let out = crr_combine(&Params::default(), &c).unwrap();
        assert_eq!(out.values["sd_server"], 5000.0);
        assert_eq!(out.notes.len(), 2, "{:?}", out.notes);
        assert!(out
            .notes
            .iter()
            .all(|n| n.starts_with("TIME_WAIT bound hit")));
        // Nothing hit: no note.
        let quiet = Combined {
            server: None,
            loads: vec![RoleOutput {
                cpu: RoleCpu {
                    window_s: 1.0,
                    ..RoleCpu::default()
                },
                ..RoleOutput::default()
            }
            .count("transactions", 1.0)],
        };
        assert!(crr_combine(&Params::default(), &quiet)
            .unwrap()
            .notes
            .is_empty());
    }
}
