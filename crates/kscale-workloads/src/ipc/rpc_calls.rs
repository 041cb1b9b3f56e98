//! ONC RPC calls over TCP and UDP (lmbench lat_rpc): the clients, the
//! forked servers and their dispatcher, on the codec of `rpc.rs`.

use super::rpc;
use super::{
    finish_server, loopback, set_accept_timeout, spawn_server, IO_TIMEOUT, LAT, SERVER_IDLE,
};
use crate::shared::fd::{poll_many, wait_readable};
use crate::shared::place::Placement;
use crate::timing::median_time_per_op;
use crate::{timed, TrialCtx, TrialOutput};
use anyhow::{bail, ensure, Context, Result};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

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

/// What both transports' clients do: a call, and lat_rpc's echo on it.
trait RpcClient {
    /// Sends call `proc_` and returns the xid and the reply message.
    fn call(&mut self, proc_: u32, args: &[u8]) -> Result<(u32, &[u8])>;

    fn echo(&mut self, v: u32) -> Result<()> {
        let (xid, reply) = self.call(PROC_ECHO, &v.to_be_bytes())?;
        check_echo(reply, xid, v)
    }
}

/// lat_rpc's timed loop, one echo call after another with the value
/// counting up: the time per call and the calls a repetition made.
fn timed_echoes(ctx: &TrialCtx, client: &mut impl RpcClient) -> Result<(f64, u64)> {
    let mut v: u32 = 0;
    median_time_per_op(ctx, |n| {
        timed(|| {
            for _ in 0..n {
                v = v.wrapping_add(1);
                client.echo(v)?;
            }
            Ok(())
        })
    })
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
}

impl RpcClient for TcpRpcClient {
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
}

pub(super) fn rpc_tcp(ctx: &TrialCtx) -> Result<TrialOutput> {
    let listener = TcpListener::bind(loopback()).context("binding RPC/tcp server socket")?;
    let addr = listener.local_addr().context("RPC/tcp server address")?;
    let place = Placement::from_ctx(ctx)?;
    let guard = spawn_server(&place, move || rpc_tcp_server(listener))?;

    let mut client = TcpRpcClient::connect(addr)?;
    let (per_op, n) = timed_echoes(ctx, &mut client)?;
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
}

impl RpcClient for UdpRpcClient {
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
}

pub(super) fn rpc_udp(ctx: &TrialCtx) -> Result<TrialOutput> {
    let server = UdpSocket::bind(loopback()).context("binding RPC/udp server socket")?;
    let addr = server.local_addr().context("RPC/udp server address")?;
    let place = Placement::from_ctx(ctx)?;
    let guard = spawn_server(&place, move || rpc_udp_server(server))?;

    let mut client = UdpRpcClient::connect(addr)?;
    let (per_op, n) = timed_echoes(ctx, &mut client)?;
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
}
