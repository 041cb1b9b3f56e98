//! The control protocol between `kscale run … --peer` and `kscale peer`
//! (docs/macro.md). A peer generates load; the local kscale measures. One TCP
//! connection per peer carries JSON lines:
//!
//! - run → peer: `{"hello": {protocol, kscale, token}}`, then per trial
//!   `{"load": TRIAL_REQUEST}` and `{"cmd": "begin"|"end"|"stop"|"ping"}`;
//! - peer → run: `{"welcome": {…, snapshot}}` or `{"refused": why}`, then per
//!   trial `{"ready": ENDPOINT}`, `{"output": ROLE_OUTPUT}` or `{"error": why}`.
//!
//! The run pings every 200 ms; a peer that hears nothing for 0.8 s takes
//! the connection for lost and kills its load.

use super::load::LoadHandle;
use crate::error::user;
use anyhow::Result;
use kscale_workloads::roles::{Endpoint, Role, RoleLine, RoleOutput, RoleRequest, Share};
use kscale_workloads::TrialRequest;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::{IpAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bumped whenever a message changes shape.
pub const PROTOCOL: u32 = 1;
/// The port `kscale peer` listens on by default (netserver's is 12865).
pub const DEFAULT_PORT: u16 = 12866;
/// How often the run tells a peer it is still there.
pub const PING_EVERY: Duration = Duration::from_millis(200);
/// How long a peer waits without a word before it stops its load.
pub const LOST_AFTER: Duration = Duration::from_millis(800);
/// The environment variable a token may come from instead of `--token`.
pub const TOKEN_ENV: &str = "KSCALE_PEER_TOKEN";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    pub kscale: String,
    #[serde(default)]
    pub token: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Welcome {
    pub protocol: u32,
    pub kscale: String,
    pub cpus: usize,
    pub snapshot: serde_json::Value,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToPeer {
    Hello(Hello),
    Load(Box<TrialRequest>),
    Cmd(String),
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FromPeer {
    Welcome(Box<Welcome>),
    Refused(String),
    Ready(Endpoint),
    Output(Box<RoleOutput>),
    Error(String),
}

/// Reads JSON lines from a socket with a short read timeout, keeping a
/// partial line across timeouts.
pub struct LineReader {
    reader: BufReader<TcpStream>,
    pending: String,
}

pub enum Read {
    Line(String),
    Idle,
    Closed,
}

impl LineReader {
    pub fn new(stream: TcpStream, poll: Duration) -> std::io::Result<LineReader> {
        stream.set_read_timeout(Some(poll))?;
        Ok(LineReader {
            reader: BufReader::new(stream),
            pending: String::new(),
        })
    }

    pub fn read(&mut self) -> Read {
        match self.reader.read_line(&mut self.pending) {
            Ok(0) => Read::Closed,
            Ok(_) if self.pending.ends_with('\n') => Read::Line(std::mem::take(&mut self.pending)),
            Ok(_) => Read::Idle,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Read::Idle,
            Err(e) if e.kind() == ErrorKind::Interrupted => Read::Idle,
            Err(_) => Read::Closed,
        }
    }
}

/// Writes one message as a line; the writer is shared with the ping thread,
/// so lines never interleave.
fn send(w: &Mutex<TcpStream>, msg: &ToPeer) -> std::io::Result<()> {
    let mut line = serde_json::to_string(msg).map_err(std::io::Error::other)?;
    line.push('\n');
    let mut s = w.lock().map_err(|_| std::io::Error::other("poisoned"))?;
    s.write_all(line.as_bytes())
}

/// One connected, greeted peer.
pub struct PeerConn {
    pub addr: String,
    pub welcome: Welcome,
    /// This host's address on the path to the peer: where the peer's load
    /// reaches the server under test.
    pub local_ip: IpAddr,
    writer: Arc<Mutex<TcpStream>>,
    reader: LineReader,
    alive: Arc<AtomicBool>,
}

impl Drop for PeerConn {
    fn drop(&mut self) {
        self.alive.store(false, Ordering::SeqCst);
        if let Ok(s) = self.writer.lock() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// The peers of a run.
pub struct PeerSet {
    pub peers: Vec<PeerConn>,
}

impl PeerSet {
    /// Connects to and greets every peer before anything is measured, so a
    /// wrong token, another protocol version or an unreachable peer stops the
    /// run with one line naming the peer (exit status 2).
    pub fn connect(addrs: &[String], token: Option<&str>) -> Result<PeerSet> {
        let mut peers = Vec::new();
        for a in addrs {
            peers.push(connect_one(a, token)?);
        }
        Ok(PeerSet { peers })
    }

    /// What the run stores beside its own snapshot.
    pub fn snapshots(&self) -> serde_json::Value {
        serde_json::Value::Array(
            self.peers
                .iter()
                .map(|p| {
                    serde_json::json!({
                        "addr": p.addr,
                        "kscale": p.welcome.kscale,
                        "cpus": p.welcome.cpus,
                        "snapshot": p.welcome.snapshot,
                    })
                })
                .collect(),
        )
    }

    /// Asks every peer to start one load process, sharing the spread param
    /// among them; the endpoint's host becomes this host's address as each
    /// peer sees it.
    pub fn start_loads<'a>(
        &'a mut self,
        req: &TrialRequest,
        endpoint: Option<&Endpoint>,
    ) -> Result<Vec<Box<dyn LoadHandle + 'a>>, String> {
        let count = self.peers.len();
        let mut out: Vec<Box<dyn LoadHandle + 'a>> = Vec::new();
        for (index, p) in self.peers.iter_mut().enumerate() {
            let mut r = req.clone();
            r.role = Some(RoleRequest {
                role: Role::Load,
                config_cpus: req.cpus.clone(),
                endpoint: endpoint.cloned().map(|mut e| {
                    e.host = p.local_ip.to_string();
                    e
                }),
                bind: String::new(),
                share: Share { index, count },
            });
            // The peer decides its own CPUs and scratch directory.
            r.cpus = Vec::new();
            send(&p.writer, &ToPeer::Load(Box::new(r)))
                .map_err(|e| format!("peer {}: lost the control connection ({e})", p.addr))?;
            out.push(Box::new(PeerLoad { conn: p }));
        }
        Ok(out)
    }
}

fn connect_one(addr: &str, token: Option<&str>) -> Result<PeerConn> {
    let bad = |why: String| user(format!("peer {addr}: {why}"));
    let (host, port) = kscale_core::params::parse_addr(addr)
        .ok_or_else(|| bad("not HOST:PORT or [IPV6]:PORT".into()))?;
    let port = port.unwrap_or(DEFAULT_PORT);
    let target = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| bad(format!("cannot resolve {host}: {e}")))?
        .next()
        .ok_or_else(|| bad(format!("{host} has no address")))?;
    let stream = TcpStream::connect_timeout(&target, Duration::from_secs(5))
        .map_err(|e| bad(format!("cannot connect to {target}: {e}")))?;
    let _ = stream.set_nodelay(true);
    let local_ip = stream.local_addr().map_err(|e| bad(e.to_string()))?.ip();
    let writer = Arc::new(Mutex::new(
        stream.try_clone().map_err(|e| bad(e.to_string()))?,
    ));
    let mut reader =
        LineReader::new(stream, Duration::from_millis(100)).map_err(|e| bad(e.to_string()))?;
    send(
        &writer,
        &ToPeer::Hello(Hello {
            protocol: PROTOCOL,
            kscale: super::VERSION.into(),
            token: token.map(String::from),
        }),
    )
    .map_err(|e| bad(format!("lost the connection: {e}")))?;
    let end = Instant::now() + Duration::from_secs(10);
    let welcome = loop {
        match reader.read() {
            Read::Line(l) => match serde_json::from_str::<FromPeer>(&l) {
                Ok(FromPeer::Welcome(w)) => break *w,
                Ok(FromPeer::Refused(why)) => return Err(bad(format!("refused: {why}"))),
                _ => return Err(bad(format!("not a kscale peer (it said {:?})", l.trim()))),
            },
            Read::Closed => return Err(bad("closed the connection during the greeting".into())),
            Read::Idle if Instant::now() > end => {
                return Err(bad("did not answer the greeting within 10 s".into()))
            }
            Read::Idle => {}
        }
    };
    let alive = Arc::new(AtomicBool::new(true));
    {
        let (w, alive) = (writer.clone(), alive.clone());
        std::thread::spawn(move || {
            while alive.load(Ordering::SeqCst) {
                if send(&w, &ToPeer::Cmd("ping".into())).is_err() {
                    break;
                }
                std::thread::sleep(PING_EVERY);
            }
        });
    }
    Ok(PeerConn {
        addr: addr.to_string(),
        welcome,
        local_ip,
        writer,
        reader,
        alive,
    })
}

/// A load process on a peer, seen through its control connection.
struct PeerLoad<'a> {
    conn: &'a mut PeerConn,
}

impl LoadHandle for PeerLoad<'_> {
    fn send(&mut self, cmd: &str) {
        let _ = send(&self.conn.writer, &ToPeer::Cmd(cmd.into()));
    }

    fn next_line(&mut self, deadline: Instant) -> Result<RoleLine, String> {
        let addr = self.conn.addr.clone();
        loop {
            match self.conn.reader.read() {
                Read::Line(l) => {
                    return match serde_json::from_str::<FromPeer>(&l) {
                        Ok(FromPeer::Ready(e)) => Ok(RoleLine::Ready(e)),
                        Ok(FromPeer::Output(o)) => Ok(RoleLine::Output(*o)),
                        Ok(FromPeer::Error(e)) => Err(format!("peer {addr}: {e}")),
                        _ => Err(format!("peer {addr} sent {:?}", l.trim())),
                    }
                }
                Read::Closed => return Err(format!("peer {addr} closed the control connection")),
                Read::Idle => {
                    if let Some(sig) = crate::signals::interrupted() {
                        return Err(format!("interrupted by signal {sig}"));
                    }
                    if Instant::now() >= deadline {
                        return Err(format!("peer {addr} did not answer in time"));
                    }
                }
            }
        }
    }

    fn host(&self) -> String {
        self.conn.addr.clone()
    }
}

/// The token a command was given, else the environment's.
pub fn token(flag: Option<String>) -> Option<String> {
    flag.or_else(|| std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_keep_their_shape() {
        let m = serde_json::to_string(&ToPeer::Cmd("begin".into())).unwrap();
        assert_eq!(m, r#"{"cmd":"begin"}"#);
        let r: FromPeer = serde_json::from_str(r#"{"ready":{"host":"","port":5}}"#).unwrap();
        assert!(matches!(r, FromPeer::Ready(e) if e.port == 5));
        let e: FromPeer = serde_json::from_str(r#"{"error":"boom"}"#).unwrap();
        assert!(matches!(e, FromPeer::Error(s) if s == "boom"));
        // The worker's own lines pass through a peer unchanged.
        let line = kscale_workloads::roles::output_line(&RoleOutput::default()).unwrap();
        assert!(matches!(
            serde_json::from_str::<FromPeer>(&line).unwrap(),
            FromPeer::Output(_)
        ));
    }
}
