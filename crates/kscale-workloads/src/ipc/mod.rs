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

pub mod rpc;

use crate::shared::child::ChildGuard;
use crate::shared::fd::{poll_many, wait_readable};
use crate::shared::place::{place_help, Placement, PLACE_PARAM};
use crate::{timed, Family, TrialCtx, TrialOutput, WorkloadDef};
use anyhow::{bail, ensure, Context, Result};
use kscale_core::{MetricDef, ParamDef};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

const LAT: MetricDef = MetricDef::lower("latency", "µs");
const LAT_METRICS: &[MetricDef] = &[LAT];

/// How long a client waits for a reply before declaring the server dead. Far
/// above any round trip, far below the worker's timeout, so a lost server
/// yields an error message rather than a killed worker.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// A server with no traffic for this long exits: its client is gone.
const SERVER_IDLE: Duration = Duration::from_secs(30);
/// How long a finished client waits for its server to exit cleanly.
const SERVER_EXIT: Duration = Duration::from_secs(5);

/// lmbench sends 4-byte messages for UDP (its sequence number) and the spec
/// fixes TCP at 4 bytes too.
const MSG: usize = 4;

/// Where the client (this worker) and its server run (docs/families/ipc.md).
const PLACE_PARAMS: &[ParamDef] = &[PLACE_PARAM];

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
        IPC.named(
            "tcp",
            "TCP latency",
            concat!(
                "4-byte message echoed over an established TCP_NODELAY connection on 127.0.0.1 \
                 (lmbench lat_tcp -m 4, netperf TCP_RR).",
                place_help!()
            ),
            tcp,
        ),
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
        IPC.named(
            "tcp_connect",
            "TCP/IP connection cost",
            concat!(
                "connect() to a server on 127.0.0.1, then close() without waiting for the \
                 server, which accepts, reads to the client's FIN and closes (lmbench lat_connect).",
                place_help!()
            ),
            tcp_connect,
        ),
    ],
};

fn loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// Pins this worker (the client, rank 0) and forks a server (rank 1)
/// running `f` where `place` says; its error, if any, goes to stderr and
/// makes the child exit 1 so [`finish_server`] can report it.
fn spawn_server(place: &Placement, f: impl FnOnce() -> Result<()>) -> Result<ChildGuard> {
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
fn finish_server(guard: ChildGuard) -> Result<()> {
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

/// Blocks every signal until dropped, as libtirpc's clnt_vc/clnt_dg do for
/// the length of a call so that a handler cannot re-enter the client while a
/// record is half written. It is part of what an ONC RPC call costs in the
/// implementation lmbench's lat_rpc measures (two rt_sigprocmask per call).
struct SignalsBlocked(nix::sys::signal::SigSet);

impl SignalsBlocked {
    fn new() -> Result<Self> {
        use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow};
        let mut old = SigSet::empty();
        pthread_sigmask(
            SigmaskHow::SIG_SETMASK,
            Some(&SigSet::all()),
            Some(&mut old),
        )
        .context("blocking signals for an RPC call")?;
        Ok(SignalsBlocked(old))
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        use nix::sys::signal::{pthread_sigmask, SigmaskHow};
        let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&self.0), None);
    }
}

/// Makes a blocking `accept` on `l` give up after `t` (Linux honours
/// SO_RCVTIMEO on listening sockets), which bounds a server whose client
/// never comes.
fn set_accept_timeout(l: &TcpListener, t: Duration) -> Result<()> {
    let tv = nix::sys::time::TimeVal::new(t.as_secs() as libc::time_t, 0);
    nix::sys::socket::setsockopt(&l.as_fd(), nix::sys::socket::sockopt::ReceiveTimeout, &tv)
        .context("SO_RCVTIMEO on listening socket")
}

/// Reads exactly `buf.len()` bytes; false on end of stream before the first.
fn read_msg(s: &mut TcpStream, buf: &mut [u8]) -> Result<bool> {
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

// ---------------------------------------------------------------- UDP

fn udp(ctx: &TrialCtx) -> Result<TrialOutput> {
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
    let (per_op, n) = ctx.time_per_op(|n| {
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

fn tcp(ctx: &TrialCtx) -> Result<TrialOutput> {
    let listener = TcpListener::bind(loopback()).context("binding TCP server socket")?;
    let addr = listener.local_addr().context("TCP server address")?;
    let place = Placement::from_ctx(ctx)?;
    let guard = spawn_server(&place, move || tcp_echo_server(listener))?;

    let mut s = TcpStream::connect(addr).context("connecting to TCP echo server")?;
    s.set_nodelay(true).context("TCP_NODELAY")?;
    s.set_read_timeout(Some(IO_TIMEOUT))
        .context("TCP client timeout")?;
    let mut seq: u32 = 0;
    let (per_op, n) = ctx.time_per_op(|n| {
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
    Ok(TrialOutput::new(n)
        .with(&LAT, per_op * 1e6)
        .note(place.note(2, "server")))
}

fn tcp_echo_server(listener: TcpListener) -> Result<()> {
    set_accept_timeout(&listener, SERVER_IDLE)?;
    let (mut s, _) = listener.accept().context("TCP server accept")?;
    drop(listener);
    s.set_nodelay(true)?;
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
fn tcp_connect(ctx: &TrialCtx) -> Result<TrialOutput> {
    let listeners = (0..CONNECT_PORTS)
        .map(|_| listen_loopback(4096))
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
    let out = TrialOutput::new(n)
        .with(&LAT, per_op * 1e6)
        .note(place.note(2, "server"));
    Ok(if no_port > 0 {
        out.note(format!(
            "{no_port} connect(s) found every local port in TIME_WAIT and were retried"
        ))
    } else {
        out
    })
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

// ---------------------------------------------------------------- RPC

/// A program number in RFC 5531's "defined by user" range 0x20000000–0x3fffffff.
const XACT_PROG: u32 = 0x2000_4b53;
const XACT_VERS: u32 = 1;
/// Procedure 0 is the conventional null procedure.
const PROC_NULL: u32 = 0;
/// Echoes its XDR unsigned int argument.
const PROC_ECHO: u32 = 1;
/// Replies and makes the server exit (lmbench's RPC_EXIT).
const PROC_EXIT: u32 = 2;
/// Largest record either side accepts; the echo needs well under 100 bytes.
const MAX_RECORD: usize = 64 * 1024;
/// UDP calls are retransmitted after this long without a reply, as RPC over
/// UDP must; a loopback reply takes microseconds, so retransmissions happen
/// only if the server is starved, and duplicates of the echo are harmless.
const UDP_RETRANSMIT: Duration = Duration::from_millis(200);

/// What the server does after answering a call.
#[derive(Debug, PartialEq, Eq)]
enum After {
    Continue,
    Exit,
}

/// The server's dispatcher: answers one call message into `out`.
fn dispatch(req: &[u8], out: &mut Vec<u8>) -> Result<After> {
    use rpc::{Accepted, Incoming, Rejected, ReplyBody, AUTH_NONE_BODY};
    let call = match rpc::decode_call(req).context("RPC server got a malformed call")? {
        Incoming::Call(c) => c,
        Incoming::WrongVersion { xid, .. } => {
            let body = ReplyBody::Denied(Rejected::RpcMismatch {
                low: rpc::RPC_VERS,
                high: rpc::RPC_VERS,
            });
            rpc::encode_reply(out, xid, &body)?;
            return Ok(After::Continue);
        }
    };
    let accepted = |stat| ReplyBody::Accepted {
        verf: AUTH_NONE_BODY,
        stat,
    };
    let mut after = After::Continue;
    let body = if call.cred.flavor != rpc::AUTH_NONE || call.verf.flavor != rpc::AUTH_NONE {
        ReplyBody::Denied(Rejected::AuthError(rpc::AUTH_REJECTEDCRED))
    } else if call.prog != XACT_PROG {
        accepted(Accepted::ProgUnavail)
    } else if call.vers != XACT_VERS {
        accepted(Accepted::ProgMismatch {
            low: XACT_VERS,
            high: XACT_VERS,
        })
    } else {
        match call.proc_ {
            PROC_ECHO if call.args.len() == 4 => accepted(Accepted::Success(call.args)),
            PROC_NULL | PROC_EXIT if call.args.is_empty() => {
                if call.proc_ == PROC_EXIT {
                    after = After::Exit;
                }
                accepted(Accepted::Success(&[]))
            }
            PROC_ECHO | PROC_NULL | PROC_EXIT => accepted(Accepted::GarbageArgs),
            _ => accepted(Accepted::ProcUnavail),
        }
    };
    rpc::encode_reply(out, call.xid, &body)?;
    Ok(after)
}

/// Checks an echo reply: the right call, accepted, and the value sent.
fn check_echo(reply: &[u8], xid: u32, sent: u32) -> Result<()> {
    let results = rpc::expect_success(reply, xid)?;
    let mut r = rpc::XdrReader::new(results);
    let got = r.get_u32().context("RPC echo result")?;
    r.finish().context("RPC echo result")?;
    ensure!(got == sent, "RPC echo returned {got} for {sent}");
    Ok(())
}

/// The client side of RPC over TCP, shaped like libtirpc's clnt_vc: each call
/// is one record-marked write, then a poll bounded by the call timeout, then
/// buffered reads until the reply record is complete.
struct TcpRpcClient {
    s: TcpStream,
    xid: u32,
    out: Vec<u8>,
    reply: Vec<u8>,
    rr: rpc::RecordReader,
}

impl TcpRpcClient {
    fn connect(addr: SocketAddr) -> Result<Self> {
        let s = TcpStream::connect(addr).context("connecting to RPC/tcp server")?;
        s.set_nodelay(true).context("TCP_NODELAY")?;
        Ok(TcpRpcClient {
            s,
            xid: 0x4b53_0000,
            out: Vec::with_capacity(128),
            reply: Vec::with_capacity(128),
            rr: rpc::RecordReader::new(MAX_RECORD),
        })
    }

    /// Sends call `proc_` and returns the xid and the reply message.
    fn call(&mut self, proc_: u32, args: &[u8]) -> Result<(u32, &[u8])> {
        let _blocked = SignalsBlocked::new()?;
        self.xid = self.xid.wrapping_add(1);
        rpc::begin_record(&mut self.out);
        rpc::encode_call(&mut self.out, self.xid, XACT_PROG, XACT_VERS, proc_, args)?;
        rpc::end_record(&mut self.out)?;
        self.s.write_all(&self.out).context("RPC/tcp send")?;
        let s = &mut self.s;
        let fd = s.as_raw_fd();
        let more = self.rr.read_record(&mut self.reply, |buf| {
            if !wait_readable(fd, IO_TIMEOUT)? {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "RPC/tcp call timed out",
                ));
            }
            s.read(buf)
        })?;
        ensure!(more, "RPC/tcp server closed the connection");
        Ok((self.xid, &self.reply))
    }

    fn echo(&mut self, v: u32) -> Result<()> {
        let (xid, reply) = self.call(PROC_ECHO, &v.to_be_bytes())?;
        check_echo(reply, xid, v)
    }
}

fn rpc_tcp(ctx: &TrialCtx) -> Result<TrialOutput> {
    let listener = TcpListener::bind(loopback()).context("binding RPC/tcp server socket")?;
    let addr = listener.local_addr().context("RPC/tcp server address")?;
    let place = Placement::from_ctx(ctx)?;
    let guard = spawn_server(&place, move || rpc_tcp_server(listener))?;

    let mut client = TcpRpcClient::connect(addr)?;
    let mut v: u32 = 0;
    let (per_op, n) = ctx.time_per_op(|n| {
        timed(|| {
            for _ in 0..n {
                v = v.wrapping_add(1);
                client.echo(v)?;
            }
            Ok(())
        })
    })?;
    // End of stream tells the server to exit.
    drop(client);
    finish_server(guard)?;
    Ok(TrialOutput::new(n)
        .with(&LAT, per_op * 1e6)
        .note(place.note(2, "server")))
}

/// Serves the way libtirpc's svc_run + svc_vc do, so the per-call kernel
/// work matches lat_rpc's server: the dispatcher polls every transport (the
/// listening socket and the connection), then the connection waits for
/// readability with its own timeout before one buffered read per record,
/// and each reply is one write. A further connection is accepted and closed
/// at once: this server has one client.
fn rpc_tcp_server(listener: TcpListener) -> Result<()> {
    set_accept_timeout(&listener, SERVER_IDLE)?;
    let (mut s, _) = listener.accept().context("RPC/tcp server accept")?;
    s.set_nodelay(true)?;
    let fd = s.as_raw_fd();
    let mut rr = rpc::RecordReader::new(MAX_RECORD);
    let (mut req, mut out) = (Vec::with_capacity(128), Vec::with_capacity(128));
    let mut fds = [
        libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        ensure!(
            poll_many(&mut fds, SERVER_IDLE).context("RPC/tcp server poll")?,
            "RPC/tcp server idle for {SERVER_IDLE:?}"
        );
        if fds[0].revents != 0 {
            drop(listener.accept().context("RPC/tcp server accept")?);
        }
        if fds[1].revents == 0 {
            continue;
        }
        let more = rr.read_record(&mut req, |buf| {
            if !wait_readable(fd, SERVER_IDLE)? {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "RPC/tcp server idle",
                ));
            }
            s.read(buf)
        })?;
        if !more {
            return Ok(());
        }
        rpc::begin_record(&mut out);
        let after = dispatch(&req, &mut out)?;
        rpc::end_record(&mut out)?;
        s.write_all(&out).context("RPC/tcp server send")?;
        if after == After::Exit {
            return Ok(());
        }
    }
}

/// The client side of RPC over UDP, shaped like libtirpc's clnt_dg: an
/// unconnected socket (one client may address any server) with sendto, a
/// poll bounded by the retransmission timeout, then recvfrom. Replies must
/// come from the server's address; replies to earlier calls (possible only
/// after a retransmission) are discarded, anything else that does not match
/// is an error.
struct UdpRpcClient {
    s: UdpSocket,
    server: SocketAddr,
    xid: u32,
    out: Vec<u8>,
    reply: Vec<u8>,
    retransmitted: bool,
}

impl UdpRpcClient {
    fn connect(addr: SocketAddr) -> Result<Self> {
        let s = UdpSocket::bind(loopback()).context("binding RPC/udp client socket")?;
        Ok(UdpRpcClient {
            s,
            server: addr,
            xid: 0x4b53_0000,
            out: Vec::with_capacity(128),
            reply: vec![0; 8800],
            retransmitted: false,
        })
    }

    fn call(&mut self, proc_: u32, args: &[u8]) -> Result<(u32, &[u8])> {
        let _blocked = SignalsBlocked::new()?;
        self.xid = self.xid.wrapping_add(1);
        let xid = self.xid;
        self.out.clear();
        rpc::encode_call(&mut self.out, xid, XACT_PROG, XACT_VERS, proc_, args)?;
        let fd = self.s.as_raw_fd();
        let tries = (IO_TIMEOUT.as_millis() / UDP_RETRANSMIT.as_millis()).max(1);
        let mut sent = 0;
        loop {
            if sent == tries {
                bail!("RPC/udp call timed out after {sent} transmissions");
            }
            if sent > 0 {
                self.retransmitted = true;
            }
            self.s
                .send_to(&self.out, self.server)
                .context("RPC/udp send")?;
            sent += 1;
            while wait_readable(fd, UDP_RETRANSMIT).context("RPC/udp poll")? {
                let (len, from) = self
                    .s
                    .recv_from(&mut self.reply)
                    .context("RPC/udp receive")?;
                ensure!(
                    from == self.server,
                    "RPC/udp reply from {from}, not the server {}",
                    self.server
                );
                let got = rpc::XdrReader::new(&self.reply[..len])
                    .get_u32()
                    .context("RPC/udp reply")?;
                if got != xid && self.retransmitted && xid.wrapping_sub(got) < 1 << 16 {
                    continue;
                }
                return Ok((xid, &self.reply[..len]));
            }
        }
    }

    fn echo(&mut self, v: u32) -> Result<()> {
        let (xid, reply) = self.call(PROC_ECHO, &v.to_be_bytes())?;
        check_echo(reply, xid, v)
    }
}

fn rpc_udp(ctx: &TrialCtx) -> Result<TrialOutput> {
    let server = UdpSocket::bind(loopback()).context("binding RPC/udp server socket")?;
    let addr = server.local_addr().context("RPC/udp server address")?;
    let place = Placement::from_ctx(ctx)?;
    let guard = spawn_server(&place, move || rpc_udp_server(server))?;

    let mut client = UdpRpcClient::connect(addr)?;
    let mut v: u32 = 0;
    let (per_op, n) = ctx.time_per_op(|n| {
        timed(|| {
            for _ in 0..n {
                v = v.wrapping_add(1);
                client.echo(v)?;
            }
            Ok(())
        })
    })?;
    let (xid, reply) = client.call(PROC_EXIT, &[])?;
    rpc::expect_success(reply, xid).context("RPC/udp exit call")?;
    finish_server(guard)?;
    Ok(TrialOutput::new(n)
        .with(&LAT, per_op * 1e6)
        .note(place.note(2, "server")))
}

/// svc_run + svc_dg in miniature: poll, recvmsg, dispatch, sendmsg. Like
/// svc_dg it asks for IP_PKTINFO and replies from the address the call was
/// sent to, which a UDP server on a multi-homed host must do for clients to
/// accept the reply.
fn rpc_udp_server(sock: UdpSocket) -> Result<()> {
    use nix::sys::socket::{
        recvmsg, sendmsg, setsockopt, sockopt, ControlMessage, ControlMessageOwned, MsgFlags,
        SockaddrIn,
    };
    use std::io::{IoSlice, IoSliceMut};
    setsockopt(&sock, sockopt::Ipv4PacketInfo, &true).context("IP_PKTINFO")?;
    let fd = sock.as_raw_fd();
    let mut buf = vec![0u8; 8800];
    let mut cmsg = nix::cmsg_space!(libc::in_pktinfo);
    let mut out = Vec::with_capacity(128);
    loop {
        ensure!(
            wait_readable(fd, SERVER_IDLE).context("RPC/udp server poll")?,
            "RPC/udp server idle for {SERVER_IDLE:?}"
        );
        let (len, peer, dst) = {
            let mut iov = [IoSliceMut::new(&mut buf)];
            let msg = recvmsg::<SockaddrIn>(fd, &mut iov, Some(&mut cmsg), MsgFlags::empty())
                .context("RPC/udp server receive")?;
            let mut dst = None;
            for c in msg.cmsgs().context("RPC/udp control messages")? {
                if let ControlMessageOwned::Ipv4PacketInfo(info) = c {
                    dst = Some(info.ipi_addr);
                }
            }
            let peer = msg
                .address
                .context("RPC/udp call without a source address")?;
            (msg.bytes, peer, dst)
        };
        out.clear();
        let after = dispatch(&buf[..len], &mut out)?;
        // SAFETY: in_pktinfo is plain old data; all-zero is a valid value.
        let mut info: libc::in_pktinfo = unsafe { std::mem::zeroed() };
        info.ipi_spec_dst = dst.context("RPC/udp call without IP_PKTINFO")?;
        sendmsg(
            fd,
            &[IoSlice::new(&out)],
            &[ControlMessage::Ipv4PacketInfo(&info)],
            MsgFlags::empty(),
            Some(&peer),
        )
        .context("RPC/udp server send")?;
        if after == After::Exit {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The client does not wait for its server: connects to a listener that
    /// never accepts (nor closes) complete at once, up to its backlog.
    #[test]
    fn connect_close_does_not_wait_for_the_server() {
        let l = listen_loopback(4096).unwrap();
        let addr = l.local_addr().unwrap();
        let t = Instant::now();
        for _ in 0..200 {
            connect_close(addr).unwrap();
        }
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        drop(l);
    }

    #[test]
    fn tcp_connect_runs() {
        check("tcp_connect");
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

    fn call(proc_: u32, prog: u32, vers: u32, args: &[u8]) -> Vec<u8> {
        let mut c = Vec::new();
        rpc::encode_call(&mut c, 5, prog, vers, proc_, args).unwrap();
        c
    }

    #[test]
    fn dispatcher_answers_per_rfc() {
        use rpc::{Accepted, ReplyBody};
        let reply = |req: &[u8]| {
            let mut out = Vec::new();
            let after = dispatch(req, &mut out).unwrap();
            (out, after)
        };
        let (out, after) = reply(&call(PROC_ECHO, XACT_PROG, XACT_VERS, &[0, 0, 0, 42]));
        assert_eq!(after, After::Continue);
        check_echo(&out, 5, 42).unwrap();
        assert!(check_echo(&out, 5, 43).is_err());
        assert!(check_echo(&out, 6, 42).is_err());

        let stat = |req: Vec<u8>| match rpc::decode_reply(&reply(&req).0).unwrap().1 {
            ReplyBody::Accepted { stat, .. } => format!("{stat:?}"),
            d => format!("{d:?}"),
        };
        assert_eq!(
            stat(call(PROC_NULL, XACT_PROG, XACT_VERS, &[])),
            "Success([])"
        );
        assert_eq!(
            stat(call(PROC_ECHO, XACT_PROG + 1, XACT_VERS, &[0; 4])),
            "ProgUnavail"
        );
        assert_eq!(
            stat(call(PROC_ECHO, XACT_PROG, 2, &[0; 4])),
            format!("{:?}", Accepted::ProgMismatch { low: 1, high: 1 })
        );
        assert_eq!(stat(call(9, XACT_PROG, XACT_VERS, &[])), "ProcUnavail");
        assert_eq!(
            stat(call(PROC_ECHO, XACT_PROG, XACT_VERS, &[0; 3])),
            "GarbageArgs"
        );
        let mut v3 = call(PROC_NULL, XACT_PROG, XACT_VERS, &[]);
        v3[11] = 3;
        assert_eq!(stat(v3), "Denied(RpcMismatch { low: 2, high: 2 })");
        let mut unix_cred = call(PROC_NULL, XACT_PROG, XACT_VERS, &[]);
        unix_cred[27] = 1;
        assert_eq!(stat(unix_cred), "Denied(AuthError(2))");

        let (_, after) = reply(&call(PROC_EXIT, XACT_PROG, XACT_VERS, &[]));
        assert_eq!(after, After::Exit);
        assert!(dispatch(&[0, 0, 0, 1], &mut Vec::new()).is_err());
    }

    /// A server that answers with garbage must make the client fail, not hang
    /// or report a figure.
    #[test]
    fn client_rejects_bad_replies() {
        let listener = TcpListener::bind(loopback()).unwrap();
        let addr = listener.local_addr().unwrap();
        let guard = spawn_server(&Placement::new("os", &[0]).unwrap(), move || {
            let (mut s, _) = listener.accept()?;
            let mut rr = rpc::RecordReader::new(MAX_RECORD);
            let mut req = Vec::new();
            rr.read_record(&mut req, |b| s.read(b))?;
            let mut out = Vec::new();
            rpc::begin_record(&mut out);
            // A reply to a different xid.
            rpc::encode_reply(
                &mut out,
                1,
                &rpc::ReplyBody::Accepted {
                    verf: rpc::AUTH_NONE_BODY,
                    stat: rpc::Accepted::Success(&[0, 0, 0, 1]),
                },
            )?;
            rpc::end_record(&mut out)?;
            s.write_all(&out)?;
            let _ = s.read(&mut [0u8; 1]);
            Ok(())
        })
        .unwrap();
        let mut c = TcpRpcClient::connect(addr).unwrap();
        let err = c.echo(1).unwrap_err();
        assert!(format!("{err:#}").contains("xid"), "{err:#}");
        drop(c);
        drop(guard);
    }

    /// A lost datagram is retransmitted with the same xid, and a duplicate
    /// reply to an earlier call is skipped rather than taken as an answer.
    #[test]
    fn rpc_udp_retransmits_and_skips_stale_replies() {
        let server = UdpSocket::bind(loopback()).unwrap();
        let addr = server.local_addr().unwrap();
        let guard = spawn_server(&Placement::new("os", &[0]).unwrap(), move || {
            let mut buf = [0u8; 512];
            let mut out = Vec::new();
            // Drop the first transmission of call 1.
            let (len, _) = server.recv_from(&mut buf)?;
            let first = buf[..len].to_vec();
            let (len, peer) = server.recv_from(&mut buf)?;
            ensure!(buf[..len] == first[..], "retransmission differs");
            dispatch(&buf[..len], &mut out)?;
            // Answer it twice; the second copy is stale for call 2.
            server.send_to(&out, peer)?;
            server.send_to(&out, peer)?;
            let (len, peer) = server.recv_from(&mut buf)?;
            out.clear();
            dispatch(&buf[..len], &mut out)?;
            server.send_to(&out, peer)?;
            Ok(())
        })
        .unwrap();
        let mut c = UdpRpcClient::connect(addr).unwrap();
        c.echo(7).unwrap();
        c.echo(8).unwrap();
        finish_server(guard).unwrap();
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
