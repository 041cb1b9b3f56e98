//! The UDP and TCP hot potatoes and the TCP connection cost (lmbench
//! lat_udp, lat_tcp, lat_connect), each with its forked server.

use super::{
    finish_server, loopback, read_msg, set_accept_timeout, spawn_server, BACKLOG_PARAM, IO_TIMEOUT,
    LAT, MSG, NODELAY_PARAM, PORTS_PARAM, SERVER_IDLE,
};
use crate::shared::place::Placement;
use crate::timing::median_time_per_op;
use crate::{timed, TrialCtx, TrialOutput};
use anyhow::{ensure, Context, Result};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;

pub(super) fn udp(ctx: &TrialCtx) -> Result<TrialOutput> {
    let server = UdpSocket::bind(loopback()).context("binding UDP server socket")?;
    let addr = server.local_addr().context("UDP server address")?;
    let place = Placement::from_ctx(ctx)?;
    let guard = spawn_server(&place, move || udp_echo_server(server))?;

    let client = UdpSocket::bind(loopback()).context("binding UDP client socket")?;
    client.connect(addr).context("connecting UDP client")?;
    client
        .set_read_timeout(Some(IO_TIMEOUT))
        .context("UDP client timeout")?;
    let mut seq: u32 = 0;
    let (per_op, n) = median_time_per_op(ctx, |n| {
        timed(|| {
            let mut buf = [0u8; 2 * MSG];
            for _ in 0..n {
                seq = seq.wrapping_add(1);
                let msg = seq.to_be_bytes();
                client.send(&msg).context("UDP send")?;
                let got = client
                    .recv(&mut buf)
                    .context("UDP receive from echo server")?;
                ensure!(
                    buf[..got] == msg,
                    "UDP echo returned {:?} for {msg:?}",
                    &buf[..got]
                );
            }
            Ok(())
        })
    })?;
    // An empty datagram tells the server to exit.
    client.send(&[]).context("UDP stop message")?;
    finish_server(guard)?;
    Ok(TrialOutput::new(n)
        .with(&LAT, per_op * 1e6)
        .note(place.note(2, "server")))
}

fn udp_echo_server(sock: UdpSocket) -> Result<()> {
    sock.set_read_timeout(Some(SERVER_IDLE))?;
    let mut buf = [0u8; 2 * MSG];
    loop {
        let (len, peer) = sock.recv_from(&mut buf).context("UDP server receive")?;
        if len == 0 {
            return Ok(());
        }
        ensure!(len == MSG, "UDP server got a {len}-byte datagram");
        sock.send_to(&buf[..len], peer).context("UDP server send")?;
    }
}

// ---------------------------------------------------------------- TCP

/// Reads `nodelay`: true (the default) sets TCP_NODELAY on both ends.
fn nodelay(ctx: &TrialCtx) -> Result<bool> {
    Ok(ctx.param(&NODELAY_PARAM)? == "on")
}

pub(super) fn tcp(ctx: &TrialCtx) -> Result<TrialOutput> {
    let nodelay = nodelay(ctx)?;
    let listener = TcpListener::bind(loopback()).context("binding TCP server socket")?;
    let addr = listener.local_addr().context("TCP server address")?;
    let place = Placement::from_ctx(ctx)?;
    let guard = spawn_server(&place, move || tcp_echo_server(listener, nodelay))?;

    let mut s = TcpStream::connect(addr).context("connecting to TCP echo server")?;
    // Set either way, so the trial states what the socket holds.
    s.set_nodelay(nodelay).context("TCP_NODELAY")?;
    s.set_read_timeout(Some(IO_TIMEOUT))
        .context("TCP client timeout")?;
    let mut seq: u32 = 0;
    let (per_op, n) = median_time_per_op(ctx, |n| {
        timed(|| {
            let mut buf = [0u8; MSG];
            for _ in 0..n {
                seq = seq.wrapping_add(1);
                let msg = seq.to_be_bytes();
                s.write_all(&msg).context("TCP send")?;
                ensure!(read_msg(&mut s, &mut buf)?, "TCP echo server closed");
                ensure!(buf == msg, "TCP echo returned {buf:?} for {msg:?}");
            }
            Ok(())
        })
    })?;
    // End of stream tells the server to exit.
    drop(s);
    finish_server(guard)?;
    let out = TrialOutput::new(n)
        .with(&LAT, per_op * 1e6)
        .note(place.note(2, "server"));
    Ok(if nodelay {
        out
    } else {
        out.note("nodelay=off: Nagle's algorithm on at both ends, as lmbench lat_tcp")
    })
}

fn tcp_echo_server(listener: TcpListener, nodelay: bool) -> Result<()> {
    set_accept_timeout(&listener, SERVER_IDLE)?;
    let (mut s, _) = listener.accept().context("TCP server accept")?;
    drop(listener);
    s.set_nodelay(nodelay)?;
    s.set_read_timeout(Some(SERVER_IDLE))?;
    let mut buf = [0u8; MSG];
    while read_msg(&mut s, &mut buf)? {
        s.write_all(&buf).context("TCP server send")?;
    }
    Ok(())
}

// ---------------------------------------------------------------- connect

/// Connection cost, as lmbench's lat_connect measures it: the client
/// connects and closes, nothing more — it does not wait for the server,
/// which accepts, reads until the client's FIN and closes. (Waiting for the
/// server's close as well makes a TCP_CRR-like exchange without data; that
/// is `net.tcp_crr`.)
///
/// The client is the active closer, so its TIME_WAIT sockets hold (client
/// port, server port) tuples, and on loopback Linux lets a connect reuse
/// one only after a second (`net.ipv4.tcp_tw_reuse` = 2). Against one
/// server port a 0.5 s trial runs out of ephemeral ports
/// (`ip_local_port_range`, 28k) and every connect then searches the range:
/// that measured 69 µs instead of 16. lmbench's source warns of exactly
/// this ("we can only measure the TCP connection cost accurately if we do
/// just a few connections"). So the server listens on [`CONNECT_PORTS`]
/// ports, one thread each, and the client takes them in turn: each port
/// gets its own range of client ports, while each connect is still one
/// connect and one close. Connects that find no port anyway are retried,
/// counted and noted.
///
/// `ports` (default [`CONNECT_PORTS`]) and `backlog` (default
/// [`DEFAULT_BACKLOG`]) set that up; lat_connect's own is one port
/// listening with a backlog of 100 (`ports=1 backlog=100`). With client
/// and server on one CPU its client runs ahead of the server and fills the
/// queue, and each SYN the kernel then drops is retransmitted after 1 s
/// (`nstat`: TcpExtListenOverflows = TcpExtTCPSynRetrans): that is what
/// lat_connect's milliseconds per connect are. The SYN retransmissions the
/// machine made during the trial are noted.
pub(super) fn tcp_connect(ctx: &TrialCtx) -> Result<TrialOutput> {
    let ports = usize::try_from(ctx.param_int(&PORTS_PARAM)?).context("ports too large")?;
    let backlog = i32::try_from(ctx.param_int(&BACKLOG_PARAM)?).context("backlog too large")?;
    let listeners = (0..ports)
        .map(|_| listen_loopback(backlog))
        .collect::<Result<Vec<_>>>()?;
    let addrs = listeners
        .iter()
        .map(|l| l.local_addr().context("TCP server address"))
        .collect::<Result<Vec<_>>>()?;
    let place = Placement::from_ctx(ctx)?;
    let guard = spawn_server(&place, move || {
        std::thread::scope(|s| {
            let servers: Vec<_> = listeners
                .into_iter()
                .map(|l| s.spawn(move || accept_close_server(l)))
                .collect();
            for t in servers {
                t.join()
                    .map_err(|_| anyhow::anyhow!("a server thread panicked"))??;
            }
            Ok(())
        })
    })?;

    let syn_retrans_before = syn_retransmits();
    let mut no_port = 0u64;
    let mut next = 0usize;
    let (per_op, n) = ctx.time_per_op(|n| {
        timed(|| {
            let mut i = 0;
            while i < n {
                next = (next + 1) % addrs.len();
                match connect_close(addrs[next]) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => {
                        no_port += 1;
                        continue;
                    }
                    Err(e) => return Err(e).context("connecting to TCP server"),
                }
                i += 1;
            }
            Ok(())
        })
    })?;
    // The servers have no connection to see closing; the guard kills them.
    drop(guard);
    let mut out = TrialOutput::new(n)
        .with(&LAT, per_op * 1e6)
        .note(place.note(2, "server"));
    if ports != CONNECT_PORTS || backlog != DEFAULT_BACKLOG {
        out = out.note(format!(
            "{ports} server port(s), listen backlog {backlog} (lmbench lat_connect: 1, 100)"
        ));
    }
    if no_port > 0 {
        out = out.note(format!(
            "{no_port} connect(s) found every local port in TIME_WAIT and were retried"
        ));
    }
    // Machine-wide, so another program's retransmissions count too; zero
    // says no connect of this trial waited for one.
    if let (Some(a), Some(b)) = (syn_retrans_before, syn_retransmits()) {
        if b > a {
            out = out.note(format!(
                "{} SYN retransmission(s) on the machine during the trial (a full accept \
                 queue drops SYNs; each waits 1 s)",
                b - a
            ));
        }
    }
    Ok(out)
}

/// The listen backlog `tcp_connect` asks for by default.
const DEFAULT_BACKLOG: i32 = 4096;

/// The kernel's count of retransmitted SYNs (TcpExt TCPSynRetrans in
/// /proc/net/netstat), or `None` where it cannot be read.
fn syn_retransmits() -> Option<u64> {
    netstat_field(
        &std::fs::read_to_string("/proc/net/netstat").ok()?,
        "TcpExt:",
        "TCPSynRetrans",
    )
}

/// Field `name` of the `prefix` table in /proc/net/netstat's format: a
/// line of names followed by a line of values, both starting with `prefix`.
fn netstat_field(text: &str, prefix: &str, name: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with(prefix));
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        let i = names.split_whitespace().position(|w| w == name);
        if let Some(i) = i {
            return values.split_whitespace().nth(i)?.parse().ok();
        }
    }
    None
}

/// lat_connect's client operation: connect, close; the server's answer
/// (accept, its own close) is not waited for.
#[inline]
fn connect_close(addr: SocketAddr) -> io::Result<()> {
    TcpStream::connect(addr).map(drop)
}

/// Server ports `tcp_connect` spreads its connects over (see there).
const CONNECT_PORTS: usize = 8;

/// A listener on 127.0.0.1, port chosen by the kernel, with room for
/// `backlog` connections not yet accepted: the client of `tcp_connect`
/// runs ahead of its server, and a full queue drops SYNs (a 1 s retransmit).
fn listen_loopback(backlog: i32) -> Result<TcpListener> {
    use nix::sys::socket::{
        bind, listen, setsockopt, socket, sockopt, AddressFamily, Backlog, SockFlag, SockType,
        SockaddrIn,
    };
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .context("socket")?;
    setsockopt(&fd, sockopt::ReuseAddr, &true).context("SO_REUSEADDR")?;
    bind(fd.as_raw_fd(), &SockaddrIn::new(127, 0, 0, 1, 0)).context("binding TCP server socket")?;
    listen(&fd, Backlog::new(backlog).unwrap_or(Backlog::MAXCONN)).context("listen")?;
    Ok(TcpListener::from(fd))
}

/// lmbench's server: accept, read until the client's FIN, close.
fn accept_close_server(listener: TcpListener) -> Result<()> {
    set_accept_timeout(&listener, SERVER_IDLE)?;
    let mut b = [0u8; 1];
    loop {
        // No read timeout: one more system call per connection, and the
        // client's FIN comes at once (or with its death, as does ours).
        let (mut s, _) = listener.accept().context("TCP server accept")?;
        let got = s
            .read(&mut b)
            .context("TCP server waiting for the client's close")?;
        ensure!(got == 0, "connect client sent data");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn netstat_fields_are_found_by_name() {
        let text = "TcpExt: SyncookiesSent TCPSynRetrans\nTcpExt: 0 12\n\
                    IpExt: InNoRoutes TCPSynRetrans\nIpExt: 1 99\n";
        assert_eq!(netstat_field(text, "TcpExt:", "TCPSynRetrans"), Some(12));
        assert_eq!(netstat_field(text, "IpExt:", "InNoRoutes"), Some(1));
        assert_eq!(netstat_field(text, "TcpExt:", "Nope"), None);
        assert_eq!(netstat_field("", "TcpExt:", "TCPSynRetrans"), None);
        // This machine's own file has the field (where /proc/net is there).
        if std::path::Path::new("/proc/net/netstat").exists() {
            assert!(syn_retransmits().is_some());
        }
    }

    /// The client does not wait for its server: connects to a listener that
    /// never accepts (nor closes) complete at once, up to its backlog.
    #[test]
    fn connect_close_does_not_wait_for_the_server() {
        let l = listen_loopback(DEFAULT_BACKLOG).unwrap();
        let addr = l.local_addr().unwrap();
        let t = Instant::now();
        for _ in 0..200 {
            connect_close(addr).unwrap();
        }
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        drop(l);
    }
}
