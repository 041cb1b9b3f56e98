//! `kscale peer`: the load end of network workloads on another host, the way
//! netperf's netserver answers netperf — except that here the peer generates
//! the load and the machine that runs `kscale run` is the one measured
//! (docs/macro.md). A peer runs only kscale's own load roles, never a command.

use crate::engine::peers::{
    FromPeer, Hello, LineReader, Read, ToPeer, Welcome, LOST_AFTER, PROTOCOL,
};
use crate::engine::roles::RoleProc;
use crate::error::user;
use crate::idle::CpuIdle;
use anyhow::Result;
use kscale_workloads::roles::Role;
use kscale_workloads::TrialRequest;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kscale peer                                          loopback only, port 12866
  kscale peer --listen 10.0.0.2:12866 --token s3cret   reachable from the measured host
  kscale run net.tcp_rr --peer 10.0.0.2 --token s3cret   (on the measured host)")]
pub struct Args {
    /// Address and port to listen on; anything but loopback needs --token.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:12866")]
    listen: String,
    /// Shared secret a run must present (default: $KSCALE_PEER_TOKEN).
    #[arg(long, value_name = "T")]
    token: Option<String>,
    /// How this host's idle CPUs wait while it serves a run, by the rule
    /// `kscale run --cpu-idle` follows (auto: poll in a virtual machine). The
    /// request is held only while a run is connected.
    #[arg(long, value_enum, default_value = "auto")]
    cpu_idle: CpuIdle,
}

pub fn run(args: Args) -> Result<ExitCode> {
    crate::signals::install();
    let token = crate::engine::peers::token(args.token);
    let addr: SocketAddr = parse_listen(&args.listen)?;
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(user(format!(
            "--listen {addr} is reachable from other hosts: give --token T (or ${})",
            crate::engine::peers::TOKEN_ENV
        )));
    }
    // An explicit `poll` this host cannot hold is refused now, not at the
    // first run; `auto` says once what it will do.
    let idle = crate::idle::hold(args.cpu_idle)?;
    let mode = args.cpu_idle;
    let listener =
        TcpListener::bind(addr).map_err(|e| user(format!("cannot listen on {addr}: {e}")))?;
    listener.set_nonblocking(true)?;
    let shown = listener.local_addr().unwrap_or(addr);
    eprintln!(
        "kscale peer: listening on {shown} (protocol {PROTOCOL}, kscale {}); Ctrl-C stops",
        crate::engine::VERSION
    );
    eprintln!("kscale peer: while a run is connected, {}", idle.why);
    drop(idle);
    let snapshot = kscale_sys::snapshot::take(crate::engine::VERSION, crate::engine::GIT_REV);
    let cpus = kscale_sys::affinity::available_cpus()?;
    loop {
        if let Some(sig) = crate::signals::interrupted() {
            eprintln!("kscale peer: stopped by signal {sig}");
            return Ok(ExitCode::from(128 + sig as u8));
        }
        match listener.accept() {
            Ok((stream, from)) => {
                let (token, snapshot, cpus) = (token.clone(), snapshot.clone(), cpus.clone());
                std::thread::spawn(move || {
                    if let Err(e) = serve(stream, token.as_deref(), snapshot, &cpus, mode) {
                        eprintln!("kscale peer: {from}: {e}");
                    }
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => eprintln!("kscale peer: accept: {e}"),
        }
    }
}

/// The kscale version this peer announces; kscale's tests make a peer
/// pretend to be another version to check the refusal.
fn version() -> String {
    std::env::var("KSCALE_TEST_PEER_VERSION")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| crate::engine::VERSION.to_string())
}

fn parse_listen(s: &str) -> Result<SocketAddr> {
    let bad = || {
        user(format!(
            "bad --listen `{s}`: expected ADDR:PORT with an IP address, e.g. 127.0.0.1:12866"
        ))
    };
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    // An address without a port gets the default one.
    let ip: std::net::IpAddr = s.trim_matches(['[', ']']).parse().map_err(|_| bad())?;
    Ok(SocketAddr::new(ip, crate::engine::peers::DEFAULT_PORT))
}

fn reply(stream: &mut TcpStream, msg: &FromPeer) -> std::io::Result<()> {
    let mut line = serde_json::to_string(msg).map_err(std::io::Error::other)?;
    line.push('\n');
    stream.write_all(line.as_bytes())
}

/// One run's control connection: greeting, then one load at a time.
fn serve(
    stream: TcpStream,
    token: Option<&str>,
    mut snapshot: serde_json::Value,
    cpus: &[usize],
    cpu_idle: CpuIdle,
) -> Result<(), String> {
    let _ = stream.set_nodelay(true);
    let mut out = stream.try_clone().map_err(|e| e.to_string())?;
    let mut input =
        LineReader::new(stream, Duration::from_millis(50)).map_err(|e| e.to_string())?;
    let Some(hello) = greeting(&mut input, &mut out)? else {
        return Ok(());
    };
    let mine = version();
    if let Some(why) = refusal(&hello, token, &mine) {
        let _ = reply(&mut out, &FromPeer::Refused(why.clone()));
        return Err(why);
    }
    // Held for this connection (docs/host.md, "Idle CPUs"); the kernel
    // drops it when the connection's thread lets go or the peer dies.
    let _idle = match crate::idle::hold_for_run(cpu_idle, &mut snapshot) {
        Ok(h) => h,
        Err(e) => {
            let why = format!("{e:#}");
            let _ = reply(&mut out, &FromPeer::Refused(why.clone()));
            return Err(why);
        }
    };
    reply(
        &mut out,
        &FromPeer::Welcome(Box::new(Welcome {
            protocol: PROTOCOL,
            kscale: mine,
            cpus: cpus.len(),
            snapshot,
        })),
    )
    .map_err(|e| e.to_string())?;
    let scratch = tempfile::Builder::new()
        .prefix(".kscale-peer-")
        .tempdir()
        .map_err(|e| format!("cannot create a scratch directory: {e}"))?;
    let mut session = Session {
        out: &mut out,
        load: None,
        cpus,
        dir: scratch.path(),
    };
    let mut heard = Instant::now();
    loop {
        match input.read() {
            Read::Line(l) => {
                heard = Instant::now();
                session.message(&l)?;
            }
            // The run is gone: whatever it started goes with it.
            Read::Closed => return Ok(()),
            Read::Idle => {}
        }
        if heard.elapsed() > LOST_AFTER {
            return Err("control connection lost (no word for 0.8 s): load stopped".into());
        }
        if crate::signals::interrupted().is_some() {
            return Ok(());
        }
        session.forward()?;
    }
}

/// The run's greeting, waited for 10 s at most; `None` when the run
/// closed the connection first. Anything else is refused.
fn greeting(input: &mut LineReader, out: &mut TcpStream) -> Result<Option<Hello>, String> {
    let greeted = Instant::now();
    loop {
        match input.read() {
            Read::Line(l) => match serde_json::from_str::<ToPeer>(&l) {
                Ok(ToPeer::Hello(h)) => return Ok(Some(h)),
                _ => {
                    let _ = reply(out, &FromPeer::Refused("expected a greeting".into()));
                    return Err("did not greet".into());
                }
            },
            Read::Closed => return Ok(None),
            Read::Idle if greeted.elapsed() > Duration::from_secs(10) => {
                return Err("no greeting within 10 s".into())
            }
            Read::Idle => {}
        }
    }
}

/// Why this peer will not serve the run that greeted it: another kscale
/// (whose roles may speak otherwise) or the wrong token.
fn refusal(hello: &Hello, token: Option<&str>, mine: &str) -> Option<String> {
    if hello.protocol != PROTOCOL || hello.kscale != mine {
        Some(format!(
            "version mismatch: this peer runs kscale {mine} (protocol {PROTOCOL}), the run kscale {} (protocol {})",
            hello.kscale,
            hello.protocol
        ))
    } else if token.is_some() && hello.token.as_deref() != token {
        Some("wrong token".to_string())
    } else {
        None
    }
}

/// A welcomed run's connection: where its replies go, the load it has
/// running, and where loads run here.
struct Session<'a> {
    out: &'a mut TcpStream,
    load: Option<RoleProc>,
    cpus: &'a [usize],
    dir: &'a std::path::Path,
}

impl Session<'_> {
    /// One message from the run: a ping, a control line for the load, or
    /// a load to start — refused in a reply, not by hanging up, when it is
    /// not admitted or one is already running.
    fn message(&mut self, l: &str) -> Result<(), String> {
        match serde_json::from_str::<ToPeer>(l) {
            Ok(ToPeer::Cmd(c)) if c == "ping" => {}
            Ok(ToPeer::Cmd(c)) => {
                if let Some(p) = self.load.as_mut() {
                    p.send(&c);
                }
            }
            Ok(ToPeer::Load(req)) => {
                let started = if self.load.is_some() {
                    Err("a load is already running on this connection".to_string())
                } else {
                    admit(*req, self.cpus, self.dir).and_then(|r| RoleProc::spawn(&r))
                };
                match started {
                    Ok(p) => self.load = Some(p),
                    Err(e) => reply(self.out, &FromPeer::Error(e)).map_err(|e| e.to_string())?,
                }
            }
            Ok(ToPeer::Hello(_)) | Err(_) => {
                return Err(format!("unexpected message {:?}", l.trim()));
            }
        }
        Ok(())
    }

    /// Forwards the load's lines that have arrived; its output ends it.
    fn forward(&mut self) -> Result<(), String> {
        while let Some(p) = self.load.as_mut() {
            match p.try_line("the load generator") {
                Ok(Some(line)) => {
                    let done = line.starts_with("{\"output\"");
                    self.out
                        .write_all(format!("{}\n", line.trim_end()).as_bytes())
                        .map_err(|e| e.to_string())?;
                    if done {
                        self.load = None;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    self.load = None;
                    reply(self.out, &FromPeer::Error(e)).map_err(|e| e.to_string())?;
                }
            }
        }
        Ok(())
    }
}

/// Checks that a request names a kscale load role with valid params, and
/// places it on this peer's CPUs and scratch directory.
fn admit(
    mut req: TrialRequest,
    cpus: &[usize],
    dir: &std::path::Path,
) -> Result<TrialRequest, String> {
    let w = kscale_workloads::find(&req.workload)
        .ok_or_else(|| format!("unknown workload {}", req.workload))?;
    if w.roles.is_none() {
        return Err(format!("{} has no load role", w.id()));
    }
    match &req.role {
        Some(r) if r.role == Role::Load => {}
        _ => return Err("a peer only runs load roles".into()),
    }
    for (k, v) in &req.params {
        let p = w
            .param(k)
            .ok_or_else(|| format!("{} has no param `{k}`", w.id()))?;
        p.validate(&w.id(), v).map_err(|e| e.to_string())?;
    }
    req.cpus = cpus.to_vec();
    req.dir = dir.to_path_buf();
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        assert_eq!(
            parse_listen("127.0.0.1").unwrap(),
            "127.0.0.1:12866".parse().unwrap()
        );
        assert_eq!(parse_listen("[::1]:9").unwrap(), "[::1]:9".parse().unwrap());
        assert!(parse_listen("localhost:9").is_err());
        assert!(parse_listen("1.2.3.4:99999").is_err());
    }
}
