//! TCP_STREAM: the load sends `msg`-byte writes on `streams` connections
//! as fast as the server, the system under test, drains them. As netperf
//! does, the throughput is what the sender got written in the window (the
//! sockets' buffers hold at most `sockbuf` more than was received, a
//! rounding error over seconds of gigabits), and the receiver reads in
//! chunks of its socket's receive buffer.

use super::{accept_loop, drive, failures, server_addr, Tally, IO_TIMEOUT};
use super::{MBPS, SD_RECV, SD_SEND};
use crate::roles::{Combined, Phase, RoleCtx, RoleOutput, Roles, Timing};
use crate::shared::sock::Dial;
use crate::TrialOutput;
use anyhow::{bail, Context, Result};
use kscale_core::{ParamDef, ParamKind, Params};
use std::io::{self, Read, Write};
use std::net::TcpStream;

pub(super) static TCP_STREAM: Roles = Roles {
    server: Some(server),
    load,
    timing: Timing::Duration,
    spread: Some("streams"),
    combine,
};

pub(super) const MSG: ParamDef = ParamDef {
    name: "msg",
    help: "Bytes per send (netperf -m, iperf3 -l).",
    kind: ParamKind::Size {
        min: 1,
        max: 1 << 26,
    },
    default: &["1k", "16k", "64k"],
    quick: &["1k", "64k"],
};

pub(super) const STREAMS: ParamDef = ParamDef {
    name: "streams",
    help: "Parallel connections (iperf3 -P). With peers, split evenly among them.",
    kind: ParamKind::Int {
        min: 1,
        max: 10_000,
    },
    default: &["1", "4"],
    quick: &["1"],
};

fn server(ctx: &RoleCtx) -> Result<RoleOutput> {
    let sockbuf = ctx.params.size("sockbuf")?;
    accept_loop(ctx, sockbuf, false, drain)
}

/// Reads until the sender closes, in chunks of the socket's receive buffer
/// (netserver's default receive size).
fn drain(mut s: TcpStream) -> io::Result<()> {
    use nix::sys::socket::{getsockopt, sockopt};
    let size = getsockopt(&s, sockopt::RcvBuf)
        .unwrap_or(128 << 10)
        .clamp(4 << 10, 16 << 20);
    let mut buf = vec![0u8; size];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn load(ctx: &RoleCtx) -> Result<RoleOutput> {
    let p = &ctx.params;
    let msg = p.size("msg")? as usize;
    let addr = server_addr(ctx)?;
    let dial = Dial {
        sockbuf: p.size("sockbuf")?,
        nodelay: false,
        timeout: Some(IO_TIMEOUT),
    };
    let streams = (0..ctx.share_of(p.int("streams")?))
        .map(|_| {
            dial.connect(addr)
                .with_context(|| format!("connect to {addr}"))
        })
        .collect::<Result<Vec<_>>>()?;
    drive(ctx, streams, |s, ctx| send(s, msg, ctx))
}

fn send(mut s: TcpStream, msg: usize, ctx: &RoleCtx) -> Result<Tally> {
    let buf = vec![0xa5u8; msg];
    let mut t = Tally::new();
    loop {
        let phase = ctx.phase();
        if phase >= Phase::Done {
            return Ok(t);
        }
        s.write_all(&buf).context("send")?;
        if phase == Phase::Measure {
            t.bytes += msg as u64;
        }
    }
}

fn combine(_: &Params, c: &Combined) -> Result<TrialOutput> {
    let bytes = c.load_sum("bytes");
    if bytes <= 0.0 {
        bail!("nothing was sent in the measured window");
    }
    let mb = bytes / 1e6;
    let mut out = TrialOutput::new(bytes as u64)
        .with(&MBPS, c.load_rate("bytes") * 8.0 / 1e6)
        .with(&SD_SEND, c.load_cpu_s() / mb * 1e6);
    if let Some(s) = c.server_cpu_s() {
        out = out.with(&SD_RECV, s / mb * 1e6);
    }
    Ok(failures(c, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kscale_core::RoleCpu;

    #[test]
    fn megabits_and_service_demand_per_megabyte() {
        let cpu = |cpu_s| RoleCpu {
            window_s: 2.0,
            cpu_s,
            ..RoleCpu::default()
        };
        let load = RoleOutput {
            cpu: cpu(0.5),
            ..RoleOutput::default()
        }
        .count("bytes", 250e6);
        let server = RoleOutput {
            cpu: cpu(1.0),
            ..RoleOutput::default()
        };
        let c = Combined {
            server: Some(server),
            loads: vec![load],
        };
        let out = combine(&Params::default(), &c).unwrap();
        assert_eq!(out.values["mbps"], 1000.0); // 125 MB/s
        assert_eq!(out.values["sd_recv"], 4000.0); // 1 s over 250 MB
        assert_eq!(out.values["sd_send"], 2000.0);
        assert!(combine(&Params::default(), &Combined::default()).is_err());
    }
}
