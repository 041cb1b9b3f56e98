//! `web`: SPECweb99-style web serving (seeds 000 and 004, docs/families/web.md).
//!
//! The server role runs a real web server — Debian's nginx — confined to the
//! CPU configuration, serving a generated SPECweb99 file set from the run's
//! scratch directory. The load role is kscale's own HTTP/1.1 generator:
//! `conns` keep-alive connections, each throttled to `rate` kbit/s like
//! SPECweb99's clients, issuing the SPECweb99 request mix. A connection is
//! *conforming* when it sustains at least 80 % of the throttle (320 of 400
//! kbit/s) with under 1 % errors; the count of conforming connections is the
//! primary metric, as it was SPECweb99's.
//!
//! nginx is owned by the server role and dies with it however the run ends:
//! it runs in the foreground (`daemon off`) in a process group of its own,
//! and a guardian shell holding a pipe from the role kills that group and
//! removes nginx's directory as soon as the pipe closes — when the role
//! stops normally, fails, or is killed with its parent (PDEATHSIG). The
//! role's own process group is not used for this, because the parent
//! SIGKILLs that group, guardian included, before anyone could clean up.

use crate::roles::{self, Combined, Endpoint, Phase, RoleCtx, RoleOutput, Roles, Share, Timing};
use crate::{ChartDef, Family, TrialOutput, WorkloadDef};
use anyhow::{bail, Context, Result};
use kscale_core::{hist, MetricDef, ParamDef, ParamKind, Params, RunRule};
use std::collections::BinaryHeap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

const CONFORMING: MetricDef = MetricDef::higher("conforming", "conns");
const OPS: MetricDef = MetricDef::higher("ops", "ops/s");
const KBPS: MetricDef = MetricDef::higher("kbps", "kbit/s");
const MBPS: MetricDef = MetricDef::higher("mbps", "Mbit/s");
const LAT_MEAN: MetricDef = MetricDef::lower("lat_mean", "ms");
const P99: MetricDef = MetricDef::quantile("p99", "ms", "latency", 0.99, 1e-6);
const ERRORS: MetricDef = MetricDef::lower("errors", "errors");
const SERVER_CPU: MetricDef = MetricDef::lower("server_cpu", "%");
const SD_SERVER: MetricDef = MetricDef::lower("sd_server", "µs/op");
/// The load generator's CPU per request: how cheaply kscale makes load,
/// compared with wrk's by scripts/validate-web.
const SD_LOAD: MetricDef = MetricDef::lower("sd_load", "µs/op");

/// SPECweb99's four file classes: file k (1…9) of class c is `BASE[c]·k`
/// bytes; a directory holds all 36.
const CLASS_BASE: [u64; 4] = [102, 1024, 10_240, 102_400];
const FILES_PER_CLASS: u64 = 9;
/// Static requests per class, SPECweb99's 35/50/14/1 %.
const CLASS_SHARE: [f64; 4] = [0.35, 0.50, 0.14, 0.01];
/// The bytes of one directory: 45 = 1 + … + 9 multiples of each class base.
const DIR_BYTES: u64 = 45 * (102 + 1024 + 10_240 + 102_400);
/// A connection conforms at 80 % of the throttle (SPECweb99's 320 of 400
/// kbit/s) with errors under 1 % of its operations.
const CONFORM_SHARE: f64 = 0.8;
const CONFORM_MAX_ERRORS: f64 = 0.01;
/// A response that takes longer than this is an error and its connection
/// is reopened: far above a loaded server's latency, below the trial limit.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

const CONNS: ParamDef = ParamDef {
    name: "conns",
    help: "Simultaneous keep-alive connections (SPECweb99's load; the seed's x-axis: 420 to \
           820). Load from `--peer`s is not supported yet: nginx listens on loopback.",
    kind: ParamKind::Int {
        min: 1,
        max: 100_000,
    },
    default: &["100", "200", "400", "600", "800"],
    quick: &["50", "200", "800"],
};
const RATE: ParamDef = ParamDef {
    name: "rate",
    help: "Throttle of each connection in kbit/s (SPECweb99's 400); 0 = unthrottled, for \
           comparison with wrk. A connection conforms at 80 % of it.",
    kind: ParamKind::Int {
        min: 0,
        max: 100_000_000,
    },
    default: &["400"],
    quick: &[],
};
const MIX: ParamDef = ParamDef {
    name: "mix",
    help: "Request mix: `specweb` (70 % static GET, 12.45 % dynamic GET, 12.6 % GET with \
           cookie and ad rotation, 4.8 % POST, 0.15 % CGI), `static` (the static 70 % alone), \
           or `class0`…`class3` (static GETs of one file class, for the wrk comparison).",
    kind: ParamKind::Choice(&["specweb", "static", "class0", "class1", "class2", "class3"]),
    default: &["specweb"],
    quick: &[],
};
const FILESET: ParamDef = ParamDef {
    name: "fileset",
    help: "Cap on the generated file set's bytes; 0 = a quarter of the free memory and of \
           the free disk. SPECweb99 sizes it from `conns` (5 MB per directory, \
           (25 + 3.28·conns)/5 directories); the result says when the cap applied.",
    kind: ParamKind::Size {
        min: 0,
        max: u64::MAX,
    },
    default: &["0"],
    quick: &["64m"],
};
const SEED: ParamDef = ParamDef {
    name: "seed",
    help: "Seed of the file contents and of every connection's request sequence.",
    kind: ParamKind::Int {
        min: 0,
        max: u64::MAX,
    },
    default: &["1"],
    quick: &[],
};

static WEB: Roles = Roles {
    server: Some(nginx_server),
    load,
    timing: Timing::Duration,
    spread: Some("conns"),
    combine,
};

pub static FAMILY: Family = Family {
    name: "web",
    title: "Web serving (SPECweb99-style)",
    help: "SPECweb99's method against a real web server: nginx confined to the CPU \
           configuration serves a generated SPECweb99 file set to throttled keep-alive \
           connections from kscale's load generator (seeds 000 and 004).",
    workloads: &[WorkloadDef {
        family: "web",
        name: "nginx",
        title: "SPECweb99-style load on nginx",
        help: "Conforming connections (at least 320 of 400 kbit/s, under 1 % errors) of \
               `conns` keep-alive HTTP/1.1 connections issuing SPECweb99's request mix to \
               Debian's nginx (package nginx-light) on the measured CPUs, with ops/s, Mbit/s, \
               bit rate per connection, mean and p99 latency from histograms, errors, the \
               server's CPU utilisation and CPU µs per operation of server and load. Three \
               trials, the \
               median, as SPECweb99 ruled.",
        params: &[CONNS, RATE, MIX, FILESET, SEED, roles::DURATION],
        metrics: &[
            CONFORMING, OPS, KBPS, MBPS, LAT_MEAN, P99, ERRORS, SERVER_CPU, SD_SERVER, SD_LOAD,
        ],
        charts: &[ChartDef::against("conns").metrics(&[
            "conforming",
            "kbps",
            "lat_mean",
            "p99",
            "ops",
            "server_cpu",
        ])],
        timeout: Duration::from_secs(300),
        roles: Some(&WEB),
        rule: RunRule::MedianOf(3),
        ..WorkloadDef::BASE
    }],
};

// ---------------------------------------------------------------- file set

/// SPECweb99's directory count for a connection count:
/// ⌊(25 + 400000/122000 · conns)/5⌋.
pub fn spec_dirs(conns: u64) -> u64 {
    ((25.0 + 400_000.0 / 122_000.0 * conns as f64) / 5.0).floor() as u64
}

/// The directories served: SPECweb99's count, capped by `cap` bytes (at
/// least one directory). Returns (dirs, capped).
pub fn fileset_dirs(conns: u64, cap: u64) -> (u64, bool) {
    let spec = spec_dirs(conns).max(1);
    let fit = (cap / DIR_BYTES).max(1);
    if fit < spec {
        (fit, true)
    } else {
        (spec, false)
    }
}

/// The default cap: a quarter of the available memory and of the free
/// space of `dir`, whichever is smaller, so the set is served from the page
/// cache and never fills the disk.
fn auto_cap(dir: &Path) -> u64 {
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(u64::MAX, |kb| kb * 1024);
    let disk = nix::sys::statvfs::statvfs(dir)
        .map(|s| s.blocks_available() * s.fragment_size())
        .unwrap_or(u64::MAX);
    (mem.min(disk) / 4).max(DIR_BYTES)
}

/// The URL path of a static file (SPECweb99's `dirNNNNN/classC_K`).
pub fn file_path(dir: u64, class: usize, k: u64) -> String {
    format!("/dir{dir:05}/class{class}_{k}")
}

/// [`file_path`] written straight into a request, without a String.
struct FilePath<'a>(&'a Request);

impl std::fmt::Display for FilePath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = self.0;
        write!(f, "/dir{:05}/class{}_{}", r.dir, r.class, r.file)
    }
}

pub fn file_size(class: usize, k: u64) -> u64 {
    CLASS_BASE[class] * k
}

/// SplitMix64: small, fast, and the same everywhere, so a seed names one
/// file set and one request sequence.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Writes the file set for `dirs` directories under `root` once: a marker
/// file names a complete set, so later trials of the run reuse it.
pub fn write_fileset(root: &Path, dirs: u64, seed: u64) -> Result<()> {
    let marker = root.join(".complete");
    if marker.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(root).with_context(|| format!("cannot create {}", root.display()))?;
    // One pseudo-random block per file, repeated: contents differ between
    // files (no dedup or compression shortcut) at little generation cost.
    let mut block = vec![0u8; 64 << 10];
    for d in 0..dirs {
        let dp = root.join(format!("dir{d:05}"));
        std::fs::create_dir_all(&dp).with_context(|| format!("cannot create {}", dp.display()))?;
        for (class, _) in CLASS_BASE.iter().enumerate() {
            for k in 1..=FILES_PER_CLASS {
                let mut rng = Rng::new(seed ^ (d << 16) ^ ((class as u64) << 8) ^ k);
                for chunk in block.chunks_mut(8) {
                    let v = rng.next_u64().to_le_bytes();
                    chunk.copy_from_slice(&v[..chunk.len()]);
                }
                let p = root.join(file_path(d, class, k).trim_start_matches('/'));
                let mut f = std::fs::File::create(&p)
                    .with_context(|| format!("cannot write {}", p.display()))?;
                let mut left = file_size(class, k) as usize;
                while left > 0 {
                    let n = left.min(block.len());
                    f.write_all(&block[..n])
                        .with_context(|| format!("cannot write {}", p.display()))?;
                    left -= n;
                }
            }
        }
    }
    std::fs::write(&marker, b"").with_context(|| format!("cannot write {}", marker.display()))?;
    Ok(())
}

// ------------------------------------------------------------- request mix

/// Cumulative weights of a Zipf(α = 1) choice over `n` ranks: rank i (from
/// 0) is chosen with probability ∝ 1/(i+1).
#[derive(Clone, Debug)]
pub struct Zipf(Vec<f64>);

impl Zipf {
    pub fn new(n: usize) -> Zipf {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (1..=n.max(1))
            .map(|i| {
                acc += 1.0 / i as f64;
                acc
            })
            .collect();
        for c in cdf.iter_mut() {
            *c /= acc;
        }
        Zipf(cdf)
    }
    pub fn pick(&self, u: f64) -> usize {
        self.0
            .partition_point(|c| *c <= u)
            .min(self.0.len().saturating_sub(1))
    }
}

/// The kinds of SPECweb99 request, with their shares of the full mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Static,
    DynGet,
    Cookie,
    Post,
    Cgi,
}

pub const KIND_SHARE: [(Kind, f64); 5] = [
    (Kind::Static, 0.70),
    (Kind::DynGet, 0.1245),
    (Kind::Cookie, 0.126),
    (Kind::Post, 0.048),
    (Kind::Cgi, 0.0015),
];

/// What requests to issue, from the `mix` param.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MixKind {
    Specweb,
    Static,
    Class(usize),
}

impl MixKind {
    pub fn parse(s: &str) -> Result<MixKind> {
        Ok(match s {
            "specweb" => MixKind::Specweb,
            "static" => MixKind::Static,
            "class0" => MixKind::Class(0),
            "class1" => MixKind::Class(1),
            "class2" => MixKind::Class(2),
            "class3" => MixKind::Class(3),
            _ => bail!("mix={s}: accepted: specweb, static, class0…class3"),
        })
    }
}

/// One generated request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub kind: Kind,
    pub dir: u64,
    pub class: usize,
    pub file: u64,
}

/// Generates a connection's request sequence.
pub struct Mix {
    kind: MixKind,
    dirs: Zipf,
    files: Zipf,
    rng: Rng,
    user: u64,
}

impl Mix {
    pub fn new(kind: MixKind, dirs: u64, seed: u64) -> Mix {
        Mix {
            kind,
            dirs: Zipf::new(dirs as usize),
            files: Zipf::new(FILES_PER_CLASS as usize),
            rng: Rng::new(seed),
            user: seed % 10_000,
        }
    }

    pub fn pick(&mut self) -> Request {
        let kind = match self.kind {
            MixKind::Specweb => {
                let u = self.rng.unit();
                let mut acc = 0.0;
                let mut k = Kind::Static;
                for (kind, share) in KIND_SHARE {
                    acc += share;
                    k = kind;
                    if u < acc {
                        break;
                    }
                }
                k
            }
            _ => Kind::Static,
        };
        let class = match self.kind {
            MixKind::Class(c) => c,
            _ => {
                let u = self.rng.unit();
                let mut acc = 0.0;
                let mut c = 3;
                for (i, share) in CLASS_SHARE.iter().enumerate() {
                    acc += share;
                    if u < acc {
                        c = i;
                        break;
                    }
                }
                c
            }
        };
        let dir = self.dirs.pick(self.rng.unit()) as u64;
        let file = self.files.pick(self.rng.unit()) as u64 + 1;
        Request {
            kind,
            dir,
            class,
            file,
        }
    }

    /// The request's bytes on the wire. Dynamic kinds go to the locations
    /// the server's configuration defines for them (see [`nginx_conf`]).
    pub fn encode(&self, r: &Request, out: &mut Vec<u8>) {
        out.clear();
        let path = FilePath(r);
        let u = self.user;
        let _ = match r.kind {
            Kind::Static => write!(out, "GET {path} HTTP/1.1\r\nHost: kscale\r\n\r\n"),
            Kind::DynGet => write!(
                out,
                "GET /dyn?file={path}&user={u} HTTP/1.1\r\nHost: kscale\r\n\r\n"
            ),
            Kind::Cookie => write!(
                out,
                "GET /ad?file={path} HTTP/1.1\r\nHost: kscale\r\n\
                 Cookie: my_cookie=user_id={u}&last_ad={}\r\n\r\n",
                r.dir % 360
            ),
            Kind::Cgi => write!(
                out,
                "GET /cgi?file={path}&user={u} HTTP/1.1\r\nHost: kscale\r\n\r\n"
            ),
            Kind::Post => {
                let body = format!(
                    "urlroot=/&dir={}&class={}&num={}&client={u}",
                    r.dir, r.class, r.file
                );
                write!(
                    out,
                    "POST /post HTTP/1.1\r\nHost: kscale\r\n\
                     Content-Type: application/x-www-form-urlencoded\r\n\
                     Content-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            }
        };
    }
}

// ---------------------------------------------------------------- response

/// Where reading a response stands.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// More bytes are needed.
    Partial,
    /// The head is complete: the response has this status and is `len`
    /// bytes long, head and body (which may still be on its way).
    Done { status: u16, len: usize },
}

/// Parses the head of one HTTP/1.1 response at the start of `buf` with
/// httparse and returns the response's length from its `Content-Length`. Chunked bodies are not expected
/// from a server of static files and fixed responses, and are an error.
pub fn parse_response(buf: &[u8]) -> Result<Parsed> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut r = httparse::Response::new(&mut headers);
    let head = match r.parse(buf).context("malformed HTTP response")? {
        httparse::Status::Partial => return Ok(Parsed::Partial),
        httparse::Status::Complete(n) => n,
    };
    let status = r.code.unwrap_or(0);
    let mut body = None;
    for h in r.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .context("bad Content-Length")?;
            body = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            bail!("chunked responses are not supported");
        }
    }
    let body = match (body, status) {
        (Some(b), _) => b,
        (None, 204 | 304) => 0,
        (None, s) if (100..200).contains(&s) => 0,
        (None, _) => bail!("response without Content-Length"),
    };
    Ok(Parsed::Done {
        status,
        len: head + body,
    })
}

/// SPECweb99's conformance of one connection over a window.
pub fn conforms(bits: f64, window_s: f64, ops: u64, errors: u64, rate_kbps: u64) -> bool {
    if window_s <= 0.0 {
        return false;
    }
    // A connection may spend a whole window on one large file's throttle
    // span (a 921,600-byte class-3 file lasts 18 s at 400 kbit/s) and
    // complete nothing in it: its credited bits decide.
    let total = ops + errors;
    if errors > 0 && errors as f64 >= CONFORM_MAX_ERRORS * total as f64 {
        return false;
    }
    // Unthrottled runs keep SPECweb99's 400 kbit/s as the yardstick.
    let rate = if rate_kbps == 0 { 400 } else { rate_kbps };
    bits / window_s >= CONFORM_SHARE * rate as f64 * 1000.0
}

// ------------------------------------------------------------------ server

/// nginx: `$KSCALE_NGINX`, /usr/sbin/nginx, or on PATH.
fn find_nginx() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("KSCALE_NGINX") {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("nginx not found at KSCALE_NGINX={}", p.display());
        }
        return Ok(p);
    }
    let mut cands = vec![PathBuf::from("/usr/sbin/nginx")];
    if let Some(path) = std::env::var_os("PATH") {
        cands.extend(std::env::split_paths(&path).map(|d| d.join("nginx")));
    }
    cands
        .into_iter()
        .find(|p| p.is_file())
        .context("nginx not found (web needs Debian's nginx-light: /usr/sbin/nginx or on PATH)")
}

/// Lifts the soft limit of open files to the hard limit: thousands of
/// connections need thousands of descriptors on both ends.
fn raise_nofile(need: u64) -> Result<()> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).context("getrlimit RLIMIT_NOFILE")?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).context("setrlimit RLIMIT_NOFILE")?;
    }
    if hard < need {
        bail!("RLIMIT_NOFILE is {hard}, {need} open files are needed: raise it (ulimit -n)");
    }
    Ok(())
}

/// nginx's configuration: the file set as document root, sendfile,
/// unlimited keep-alive, and in-process handlers for the dynamic kinds.
pub fn nginx_conf(dir: &Path, docroot: &Path, port: u16, workers: usize, conns: u64) -> String {
    let d = dir.display();
    let root = docroot.display();
    let user = if nix::unistd::geteuid().is_root() {
        "user root;\n"
    } else {
        ""
    };
    // Every POST holds two more connections (the internal proxy hop), and
    // one worker may accept nearly all clients.
    let wc = (2 * conns + 1024).max(4096);
    format!(
        "{user}daemon off;
master_process on;
worker_processes {workers};
worker_rlimit_nofile {nofile};
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections {wc}; use epoll; multi_accept on; }}
http {{
  access_log off;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_timeout 300s;
  keepalive_requests 100000000;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  default_type application/octet-stream;
  log_format post '$msec $remote_addr $request_body';
  server {{
    listen 127.0.0.1:{port} backlog=65535;
    root {root};
    location = /dyn {{ default_type text/html;
      return 200 '<html><body>dynamic GET user=$arg_user file=$arg_file at $msec</body></html>'; }}
    location = /cgi {{ default_type text/html;
      return 200 '<html><body>CGI user=$arg_user file=$arg_file at $msec</body></html>'; }}
    location = /ad {{ default_type text/html;
      add_header Set-Cookie 'found_cookie=Ad_id=$cookie_my_cookie&Ad_weight=1&Expired=0';
      return 200 '<html><body>ad for $cookie_my_cookie file=$arg_file</body></html>'; }}
    location = /post {{ access_log {d}/post.log post;
      proxy_http_version 1.1; proxy_set_header Connection '';
      proxy_pass http://127.0.0.1:{port}/posted; }}
    location = /posted {{ default_type text/html; return 200 '<html><body>posted</body></html>'; }}
  }}
}}
",
        nofile = wc * 2 + 64,
    )
}

/// A running nginx and its guardian. Dropping it — or the role process
/// dying — closes the guardian's pipe; the guardian then SIGKILLs nginx's
/// process group (master and workers) and removes nginx's directory.
struct Nginx {
    master: Child,
    guardian: Option<(Child, ChildStdin)>,
    dir: PathBuf,
}

impl Nginx {
    fn start(nginx: &Path, dir: &Path, conf: &Path) -> Result<Nginx> {
        use std::os::unix::process::CommandExt;
        let master = Command::new(nginx)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(conf)
            .arg("-e")
            .arg(dir.join("error.log"))
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {}", nginx.display()))?;
        let pgid = master.id();
        let mut n = Nginx {
            master,
            guardian: None,
            dir: dir.to_path_buf(),
        };
        let mut g = Command::new("/bin/sh")
            .arg("-c")
            .arg(r#"read _ ; kill -9 -"$1" 2>/dev/null ; rm -rf "$2""#)
            .arg("kscale-web-guard")
            .arg(pgid.to_string())
            .arg(dir)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start nginx's guardian (/bin/sh)")?;
        let pipe = g.stdin.take().context("guardian pipe")?;
        n.guardian = Some((g, pipe));
        Ok(n)
    }

    /// The last line nginx wrote to its error log, for error messages.
    fn last_error(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "no message in its error log".into())
    }

    /// Waits until nginx accepts connections on `port`.
    fn wait_listening(&mut self, port: u16) -> Result<()> {
        let end = Instant::now() + Duration::from_secs(15);
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        loop {
            if let Some(st) = self.master.try_wait().context("waiting for nginx")? {
                bail!("nginx exited ({st}): {}", self.last_error());
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= end {
                bail!(
                    "nginx did not listen on {addr} within 15 s: {}",
                    self.last_error()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// CPU seconds of every process in nginx's group (master and workers),
    /// from /proc: they are not our waited-for children, so getrusage does
    /// not see them inside the window.
    fn cpu_seconds(&self) -> f64 {
        let pgid = self.master.id() as i64;
        // SAFETY: sysconf takes a constant and touches no memory.
        let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let mut ticks = 0u64;
        let Ok(rd) = std::fs::read_dir("/proc") else {
            return 0.0;
        };
        for e in rd.flatten() {
            if !e
                .file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
            {
                continue;
            }
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            // Fields after the parenthesised command name: state is 3, pgrp
            // 5, utime 14, stime 15 (1-based, as in proc(5)).
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            let f: Vec<&str> = rest.split_whitespace().collect();
            if f.len() > 12 && f[2].parse::<i64>().ok() == Some(pgid) {
                ticks += f[11].parse::<u64>().unwrap_or(0) + f[12].parse::<u64>().unwrap_or(0);
            }
        }
        ticks as f64 / tck
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if let Some((mut g, pipe)) = self.guardian.take() {
            drop(pipe);
            let _ = g.wait();
        } else {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(self.master.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        let _ = self.master.kill();
        let _ = self.master.wait();
    }
}

/// A free loopback port. nginx binds it itself a moment later; a lost race
/// shows as nginx exiting with "Address already in use" and is retried.
fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

fn nginx_server(ctx: &RoleCtx) -> Result<RoleOutput> {
    let nginx = find_nginx()?;
    if ctx.bind != "127.0.0.1" {
        bail!("web serves on loopback only for now: load from peers is not supported yet");
    }
    let p = &ctx.params;
    let conns = p.int("conns")?;
    let seed = p.int("seed")?;
    raise_nofile(conns + 256)?;
    let cap = match p.size("fileset")? {
        0 => auto_cap(&ctx.dir),
        c => c,
    };
    let (dirs, capped) = fileset_dirs(conns, cap);
    let mut out = RoleOutput::default();
    if capped {
        let spec = spec_dirs(conns);
        out = out.note(format!(
            "file set capped by fileset: {dirs} directories ({} MB) served; SPECweb99 would \
             use {spec} ({} MB)",
            (dirs * DIR_BYTES) >> 20,
            (spec * DIR_BYTES) >> 20
        ));
    }
    let docroot = ctx.dir.join(format!("web-files-s{seed}-d{dirs}"));
    write_fileset(&docroot, dirs, seed)?;

    let ndir = ctx.dir.join(format!("web-nginx-{}", std::process::id()));
    let workers = ctx.config_cpus.len().max(1);
    let mut attempt = 0;
    let (server, port) = loop {
        attempt += 1;
        let _ = std::fs::remove_dir_all(&ndir);
        std::fs::create_dir_all(&ndir)
            .with_context(|| format!("cannot create {}", ndir.display()))?;
        let port = free_port()?;
        let conf = ndir.join("nginx.conf");
        std::fs::write(&conf, nginx_conf(&ndir, &docroot, port, workers, conns))
            .with_context(|| format!("cannot write {}", conf.display()))?;
        let mut n = Nginx::start(&nginx, &ndir, &conf)?;
        match n.wait_listening(port) {
            Ok(()) => break (n, port),
            Err(e) if attempt < 3 && format!("{e:#}").contains("in use") => continue,
            Err(e) => return Err(e),
        }
    };
    ctx.ready(Endpoint {
        host: String::new(),
        port,
        extra: serde_json::json!({ "dirs": dirs }),
    })?;
    let limit = Duration::from_secs(7 * 86_400);
    ctx.wait_for(Phase::Measure, limit);
    let cpu0 = server.cpu_seconds();
    ctx.wait_for(Phase::Done, limit);
    let cpu1 = server.cpu_seconds();
    ctx.wait_for(Phase::Stop, limit);
    drop(server);
    Ok(out
        .count("nginx_cpu_s", (cpu1 - cpu0).max(0.0))
        .note("server: nginx; CGI requests (0.15 %) are answered in-process (nginx runs no CGI)"))
}

// -------------------------------------------------------------------- load

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    /// Waiting for its throttle time to send the next request.
    Idle,
    Sending,
    Receiving,
}

/// One keep-alive connection of the load generator.
struct Conn {
    s: Option<TcpStream>,
    st: St,
    mix: Mix,
    req: Vec<u8>,
    sent: usize,
    buf: Vec<u8>,
    /// The response's status and whole length once its head is parsed
    /// (`need` 0: not yet), and the bytes of it received so far.
    status: u16,
    need: usize,
    got: usize,
    t0: Instant,
    /// The last response's bytes and the span its throttle spreads them
    /// over: from its request to the later of its arrival and the throttle's
    /// next send time.
    last: (Instant, Instant, u64),
    // Over the measured window:
    ops: u64,
    errors: u64,
    bytes: f64,
}

/// The share of `bytes`, spread evenly over `from..to`, that falls inside
/// `lo..hi`. A throttled connection receives a response at once and then
/// waits; counting the bytes over the span it paid for them keeps a short
/// window from crediting a large file's whole wait-to-come.
pub fn credit(bytes: u64, from: Instant, to: Instant, lo: Instant, hi: Option<Instant>) -> f64 {
    let span = to.saturating_duration_since(from).as_secs_f64();
    let a = from.max(lo);
    let b = hi.map_or(to, |h| to.min(h));
    if span <= 0.0 {
        let inside = match hi {
            Some(h) => from >= lo && from <= h,
            None => from >= lo,
        };
        return if inside { bytes as f64 } else { 0.0 };
    }
    bytes as f64 * b.saturating_duration_since(a).as_secs_f64() / span
}

/// Per-thread results.
#[derive(Default)]
struct ThreadOut {
    ops: u64,
    errors: u64,
    bytes: f64,
    lat_ns: f64,
    conforming: u64,
    window_s: f64,
    notes: Vec<String>,
}

struct Epoll(std::os::fd::OwnedFd);

impl Epoll {
    fn new() -> Result<Epoll> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain flags; a non-negative result is a new descriptor we own.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error()).context("epoll_create1");
        }
        // SAFETY: fd is fresh and owned by nobody else.
        Ok(Epoll(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }))
    }
    fn ctl(&self, op: i32, fd: i32, events: u32, key: usize) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events,
            u64: key as u64,
        };
        // SAFETY: ev lives for the call; fd is a socket the caller owns.
        let r = unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut ev) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
    /// Waits up to `timeout` with nanosecond precision (epoll_pwait2,
    /// Linux 5.11): epoll_wait's milliseconds would either spin through the
    /// last millisecond before every throttled request or send it late.
    /// Older kernels get epoll_wait with the timeout rounded up.
    fn wait(&self, evs: &mut [libc::epoll_event], timeout: Duration) -> io::Result<usize> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: evs is a valid writable array of its length, ts a live
        // timespec; no signal mask is passed.
        let n = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                self.0.as_raw_fd(),
                evs.as_mut_ptr(),
                evs.len() as libc::c_int,
                &ts as *const libc::timespec,
                std::ptr::null::<libc::sigset_t>(),
                0usize,
            )
        };
        let n = if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            let ms = timeout.as_nanos().div_ceil(1_000_000);
            let ms = i32::try_from(ms).unwrap_or(i32::MAX);
            // SAFETY: as above.
            let r = unsafe {
                libc::epoll_wait(self.0.as_raw_fd(), evs.as_mut_ptr(), evs.len() as i32, ms)
            };
            r as i64
        } else {
            n as i64
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(n as usize)
    }
}

fn open(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// One event loop of the load generator: its connections, each sending a
/// request when its throttle allows, reading the response, repeating.
struct Worker<'a> {
    ctx: &'a RoleCtx,
    addr: SocketAddr,
    ep: Epoll,
    conns: Vec<Conn>,
    timers: BinaryHeap<std::cmp::Reverse<(Instant, usize)>>,
    /// Nanoseconds a byte may take under the throttle (0: unthrottled).
    ns_per_byte: f64,
    hist: hdrhistogram::Histogram<u64>,
    lat_ns: f64,
    begin: Option<Instant>,
    notes: Vec<String>,
    /// Where responses are read into; bodies are counted and dropped.
    chunk: Vec<u8>,
}

impl Worker<'_> {
    fn register(&self, i: usize, events: u32) -> io::Result<()> {
        if let Some(s) = &self.conns[i].s {
            self.ep
                .ctl(libc::EPOLL_CTL_MOD, s.as_raw_fd(), events, i)
                .or_else(|_| self.ep.ctl(libc::EPOLL_CTL_ADD, s.as_raw_fd(), events, i))?;
        }
        Ok(())
    }

    fn measuring(&self) -> bool {
        self.ctx.phase() == Phase::Measure
    }

    /// A failed request: counted, the connection reopened, the next request
    /// issued after a pause so a refusing server is not spun on.
    fn fail(&mut self, i: usize, why: String) {
        if self.measuring() {
            self.conns[i].errors += 1;
        }
        if self.notes.len() < 3 && !self.notes.contains(&why) {
            self.notes.push(why);
        }
        let c = &mut self.conns[i];
        c.s = None;
        c.st = St::Idle;
        c.need = 0;
        c.got = 0;
        c.buf.clear();
        self.timers.push(std::cmp::Reverse((
            Instant::now() + Duration::from_millis(10),
            i,
        )));
    }

    /// Sends connection `i`'s next request (opening it again if it failed).
    fn send(&mut self, i: usize) {
        if self.conns[i].s.is_none() {
            match open(self.addr) {
                Ok(s) => {
                    if let Err(e) =
                        self.ep
                            .ctl(libc::EPOLL_CTL_ADD, s.as_raw_fd(), libc::EPOLLIN as u32, i)
                    {
                        return self.fail(i, format!("epoll: {e}"));
                    }
                    self.conns[i].s = Some(s);
                }
                Err(e) => return self.fail(i, format!("connect to {}: {e}", self.addr)),
            }
        }
        let c = &mut self.conns[i];
        let r = c.mix.pick();
        let mut req = std::mem::take(&mut c.req);
        c.mix.encode(&r, &mut req);
        c.req = req;
        c.sent = 0;
        c.buf.clear();
        c.need = 0;
        c.got = 0;
        c.t0 = Instant::now();
        c.st = St::Sending;
        self.write(i);
    }

    fn write(&mut self, i: usize) {
        let c = &mut self.conns[i];
        let Some(s) = c.s.as_mut() else { return };
        while c.sent < c.req.len() {
            match s.write(&c.req[c.sent..]) {
                Ok(0) => return self.fail(i, "server closed the connection".into()),
                Ok(n) => c.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let ev = (libc::EPOLLIN | libc::EPOLLOUT) as u32;
                    if let Err(e) = self.register(i, ev) {
                        self.fail(i, format!("epoll: {e}"));
                    }
                    return;
                }
                Err(e) => return self.fail(i, format!("send: {e}")),
            }
        }
        c.st = St::Receiving;
    }

    /// Reads what has arrived. The head is kept until httparse has it;
    /// body bytes are only counted, never copied.
    fn read(&mut self, i: usize) {
        let chunk = &mut self.chunk;
        loop {
            let c = &mut self.conns[i];
            let Some(s) = c.s.as_mut() else { return };
            match s.read(chunk) {
                Ok(0) => return self.fail(i, "server closed the connection".into()),
                Ok(n) => {
                    if c.need > 0 {
                        c.got += n;
                    } else {
                        // Most heads arrive whole in one read: parse them
                        // where they landed and copy only a partial one.
                        let fresh = c.buf.is_empty();
                        let parsed = if fresh {
                            parse_response(&chunk[..n])
                        } else {
                            c.buf.extend_from_slice(&chunk[..n]);
                            parse_response(&c.buf)
                        };
                        match parsed {
                            Ok(Parsed::Partial) => {
                                if fresh {
                                    c.buf.extend_from_slice(&chunk[..n]);
                                }
                                if c.buf.len() > 64 << 10 {
                                    return self.fail(i, "response head over 64 KB".into());
                                }
                            }
                            Err(e) => return self.fail(i, format!("{e:#}")),
                            Ok(Parsed::Done { status, len }) => {
                                c.status = status;
                                c.need = len;
                                c.got = if fresh { n } else { c.buf.len() };
                                c.buf.clear();
                            }
                        }
                    }
                    // The response is whole (nothing else is in flight) or
                    // the socket is drained: a further read would only say
                    // EAGAIN, one wasted system call per request.
                    if (c.need > 0 && c.got >= c.need) || n < chunk.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return self.fail(i, format!("receive: {e}")),
            }
        }
        self.complete(i);
    }

    /// Finishes connection `i`'s response if it is all there.
    fn complete(&mut self, i: usize) {
        let c = &self.conns[i];
        if c.st != St::Receiving || c.need == 0 || c.got < c.need {
            return;
        }
        if c.got > c.need {
            return self.fail(i, "bytes after the response".into());
        }
        let now = Instant::now();
        let measuring = self.measuring();
        let c = &mut self.conns[i];
        let (status, len) = (c.status, c.need);
        c.need = 0;
        c.got = 0;
        if !(200..300).contains(&status) {
            return self.fail(i, format!("HTTP status {status}"));
        }
        let at = c.t0 + Duration::from_nanos((len as f64 * self.ns_per_byte) as u64);
        c.last = (c.t0, at.max(now), len as u64);
        if measuring {
            if let Some(b) = self.begin {
                c.ops += 1;
                c.bytes += credit(len as u64, c.t0, at.max(now), b, None);
                let ns = now.duration_since(c.t0).as_nanos() as u64;
                hist::record(&mut self.hist, ns);
                self.lat_ns += ns as f64;
            }
        }
        c.st = St::Idle;
        if at <= now {
            self.send(i);
        } else {
            self.timers.push(std::cmp::Reverse((at, i)));
        }
    }

    fn run(&mut self) -> Result<ThreadOut> {
        let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        for i in 0..self.conns.len() {
            self.send(i);
        }
        let mut next_scan = Instant::now();
        let end = loop {
            let phase = self.ctx.phase();
            if phase == Phase::Measure && self.begin.is_none() {
                let b = Instant::now();
                self.begin = Some(b);
                for c in self.conns.iter_mut() {
                    c.ops = 0;
                    c.errors = 0;
                    // The part of a response before the window that its
                    // throttle spreads into the window.
                    c.bytes = credit(c.last.2, c.last.0, c.last.1, b, None);
                }
            }
            if phase >= Phase::Done {
                let e = Instant::now();
                if let Some(b) = self.begin {
                    // The part of the last response spread beyond the window.
                    for c in self.conns.iter_mut() {
                        let (from, to, n) = c.last;
                        let late = credit(n, from, to, b, None) - credit(n, from, to, b, Some(e));
                        c.bytes = (c.bytes - late).max(0.0);
                    }
                }
                break e;
            }
            let now = Instant::now();
            while let Some(std::cmp::Reverse((at, i))) = self.timers.peek().copied() {
                if at > now {
                    break;
                }
                self.timers.pop();
                if self.conns[i].st == St::Idle {
                    self.send(i);
                }
            }
            let wait = self
                .timers
                .peek()
                .map_or(Duration::from_millis(20), |r| {
                    r.0 .0.saturating_duration_since(now)
                })
                .min(Duration::from_millis(20));
            let n = self.ep.wait(&mut evs, wait).context("epoll_wait")?;
            for ev in evs.iter().take(n) {
                let (i, flags) = (ev.u64 as usize, ev.events);
                if i >= self.conns.len() {
                    continue;
                }
                if flags & libc::EPOLLOUT as u32 != 0 && self.conns[i].st == St::Sending {
                    if let Err(e) = self.register(i, libc::EPOLLIN as u32) {
                        self.fail(i, format!("epoll: {e}"));
                        continue;
                    }
                    self.write(i);
                }
                if flags & (libc::EPOLLIN | libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
                    match self.conns[i].st {
                        St::Receiving => self.read(i),
                        // Data or a close while nothing was asked: the
                        // server dropped the keep-alive connection.
                        St::Idle | St::Sending => {
                            self.fail(i, "server closed an idle connection".into())
                        }
                    }
                }
            }
            // Stalled responses: errors after IO_TIMEOUT (looked for every
            // 100 ms: a scan of every connection per event would cost more
            // than the events).
            let now = Instant::now();
            if now < next_scan {
                continue;
            }
            next_scan = now + Duration::from_millis(100);
            for i in 0..self.conns.len() {
                let c = &self.conns[i];
                if c.st != St::Idle && now.duration_since(c.t0) > IO_TIMEOUT {
                    self.fail(i, format!("no response within {} s", IO_TIMEOUT.as_secs()));
                }
            }
        };
        let window_s = self
            .begin
            .map_or(0.0, |b| end.duration_since(b).as_secs_f64());
        let rate = self.ctx.params.int("rate")?;
        let mut o = ThreadOut {
            window_s,
            lat_ns: self.lat_ns,
            notes: std::mem::take(&mut self.notes),
            ..Default::default()
        };
        for c in &self.conns {
            o.ops += c.ops;
            o.errors += c.errors;
            o.bytes += c.bytes;
            if conforms(c.bytes * 8.0, window_s, c.ops, c.errors, rate) {
                o.conforming += 1;
            }
        }
        Ok(o)
    }
}

fn load(ctx: &RoleCtx) -> Result<RoleOutput> {
    let p = &ctx.params;
    let conns = ctx.share_of(p.int("conns")?) as usize;
    let rate = p.int("rate")?;
    let seed = p.int("seed")?;
    let mix = MixKind::parse(p.get("mix")?)?;
    let ep = ctx
        .endpoint
        .as_ref()
        .context("web's load needs the server's endpoint")?;
    let addr: SocketAddr = ep
        .addr()
        .parse()
        .with_context(|| format!("bad server address {}", ep.addr()))?;
    let dirs = ep.extra.get("dirs").and_then(|d| d.as_u64()).unwrap_or(1);
    raise_nofile(conns as u64 + 256)?;
    let threads = ctx.cpus.len().clamp(1, conns.max(1));
    let ns_per_byte = if rate == 0 {
        0.0
    } else {
        8.0 * 1e9 / (rate as f64 * 1000.0)
    };
    // Every connection is open before the load says it is ready.
    let mut workers = Vec::with_capacity(threads);
    // Connection numbers, unique across threads and load processes: each
    // seeds its own request sequence.
    let mut id = (ctx.share.index * conns) as u64;
    for t in 0..threads {
        let n = Share {
            index: t,
            count: threads,
        }
        .of(conns as u64) as usize;
        let mut cs = Vec::with_capacity(n);
        for _ in 0..n {
            let s =
                open(addr).with_context(|| format!("cannot connect to the server at {addr}"))?;
            id += 1;
            cs.push(Conn {
                s: Some(s),
                st: St::Idle,
                mix: Mix::new(mix, dirs, seed.wrapping_mul(1_000_003).wrapping_add(id)),
                req: Vec::with_capacity(512),
                sent: 0,
                buf: Vec::with_capacity(4096),
                status: 0,
                need: 0,
                got: 0,
                t0: Instant::now(),
                last: (Instant::now(), Instant::now(), 0),
                ops: 0,
                errors: 0,
                bytes: 0.0,
            });
        }
        let w = Worker {
            ctx,
            addr,
            ep: Epoll::new()?,
            conns: cs,
            timers: BinaryHeap::new(),
            ns_per_byte,
            hist: hist::new(),
            lat_ns: 0.0,
            begin: None,
            notes: Vec::new(),
            chunk: vec![0u8; 64 << 10],
        };
        for (i, c) in w.conns.iter().enumerate() {
            if let Some(s) = &c.s {
                w.ep.ctl(libc::EPOLL_CTL_ADD, s.as_raw_fd(), libc::EPOLLIN as u32, i)
                    .context("epoll_ctl")?;
            }
        }
        workers.push(w);
    }
    let mut total = ThreadOut::default();
    let mut latency = hist::new();
    std::thread::scope(|scope| -> Result<()> {
        let mut handles = Vec::with_capacity(workers.len());
        for mut w in workers {
            let h = std::thread::Builder::new()
                .name("kscale-web".into())
                .spawn_scoped(scope, move || w.run().map(|o| (o, w.hist)))
                .context("cannot start a load thread")?;
            handles.push(h);
        }
        ctx.ready(Endpoint::default())?;
        for h in handles {
            match h.join() {
                Ok(Ok((o, hh))) => {
                    hist::merge(&mut latency, &hh)?;
                    total.ops += o.ops;
                    total.errors += o.errors;
                    total.bytes += o.bytes;
                    total.lat_ns += o.lat_ns;
                    total.conforming += o.conforming;
                    total.window_s = total.window_s.max(o.window_s);
                    for n in o.notes {
                        if !total.notes.contains(&n) {
                            total.notes.push(n);
                        }
                    }
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => bail!("a load thread panicked"),
            }
        }
        Ok(())
    })?;
    let mut out = RoleOutput::default()
        .count("ops", total.ops as f64)
        .count("errors", total.errors as f64)
        .count("bytes", total.bytes)
        .count("lat_ns", total.lat_ns)
        .count("conforming", total.conforming as f64)
        .count("conns", conns as f64)
        .histogram("latency", &latency);
    if total.errors > 0 {
        for n in total.notes {
            out = out.note(format!("load: {n}"));
        }
    }
    if rate == 0 {
        out = out.note("unthrottled connections (rate=0); conformance judged at 400 kbit/s");
    }
    if mix != MixKind::Specweb {
        out = out.note(format!("static-only mix ({})", p.get("mix")?));
    }
    Ok(out)
}

fn combine(_: &Params, c: &Combined) -> Result<TrialOutput> {
    let ops = c.load_sum("ops");
    if ops <= 0.0 {
        bail!("no request completed in the measured window");
    }
    let conns = c.load_sum("conns").max(1.0);
    let mbps = c.load_rate("bytes") * 8.0 / 1e6;
    let mut out = TrialOutput::new(ops as u64)
        .with(&CONFORMING, c.load_sum("conforming"))
        .with(&OPS, c.load_rate("ops"))
        .with(&MBPS, mbps)
        .with(&KBPS, mbps * 1000.0 / conns)
        .with(&LAT_MEAN, c.load_sum("lat_ns") / ops / 1e6)
        .with(&ERRORS, c.load_sum("errors"))
        .with(&SD_LOAD, c.load_cpu_s() / ops * 1e6);
    if let Some(s) = &c.server {
        let cpu = s.cpu.cpu_s + s.counts.get("nginx_cpu_s").copied().unwrap_or(0.0);
        let cap = s.cpu.window_s * s.cpu.cpus.max(1) as f64;
        if cap > 0.0 {
            out = out.with(&SERVER_CPU, cpu / cap * 100.0);
        }
        out = out.with(&SD_SERVER, cpu / ops * 1e6);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pearson's chi-square statistic of observed counts against expected
    /// probabilities.
    fn chi2(obs: &[u64], p: &[f64]) -> f64 {
        let n: u64 = obs.iter().sum();
        obs.iter()
            .zip(p)
            .map(|(o, p)| {
                let e = p * n as f64;
                (*o as f64 - e).powi(2) / e
            })
            .sum()
    }

    #[test]
    fn spec_directory_rule_and_cap() {
        // SPECweb99: (25 + 3.2787·conns)/5.
        assert_eq!(spec_dirs(0), 5);
        assert_eq!(spec_dirs(50), 37);
        assert_eq!(spec_dirs(800), 529);
        assert_eq!(spec_dirs(10_000), 6562);
        assert_eq!(DIR_BYTES, 5_119_470);
        assert_eq!(fileset_dirs(50, 1 << 40), (37, false));
        assert_eq!(fileset_dirs(800, 64 << 20), (13, true));
        assert_eq!(fileset_dirs(800, 1), (1, true));
    }

    #[test]
    fn request_mix_matches_specweb99_proportions() {
        let mut m = Mix::new(MixKind::Specweb, 20, 42);
        let n = 100_000;
        let (mut kinds, mut classes) = ([0u64; 5], [0u64; 4]);
        let mut dirs = vec![0u64; 20];
        let mut files = [0u64; 9];
        for _ in 0..n {
            let r = m.pick();
            let k = KIND_SHARE.iter().position(|(k, _)| *k == r.kind).unwrap();
            kinds[k] += 1;
            classes[r.class] += 1;
            dirs[r.dir as usize] += 1;
            files[(r.file - 1) as usize] += 1;
        }
        let kp: Vec<f64> = KIND_SHARE.iter().map(|(_, p)| *p).collect();
        // 99.9 % critical values: 4 dof 18.47, 3 dof 16.27, 19 dof 43.82, 8 dof 26.12.
        assert!(chi2(&kinds, &kp) < 18.47, "{kinds:?}");
        assert!(chi2(&classes, &CLASS_SHARE) < 16.27, "{classes:?}");
        let zipf = |n: usize| {
            let h: f64 = (1..=n).map(|i| 1.0 / i as f64).sum();
            (1..=n).map(|i| 1.0 / i as f64 / h).collect::<Vec<_>>()
        };
        assert!(chi2(&dirs, &zipf(20)) < 43.82, "{dirs:?}");
        assert!(chi2(&files, &zipf(9)) < 26.12, "{files:?}");
        // A wrong distribution fails the same test.
        assert!(chi2(&files, &[1.0 / 9.0; 9]) > 26.12);
    }

    #[test]
    fn single_class_mix_is_static_of_that_class() {
        let mut m = Mix::new(MixKind::Class(2), 5, 1);
        for _ in 0..1000 {
            let r = m.pick();
            assert_eq!((r.kind, r.class), (Kind::Static, 2));
            assert!(r.dir < 5 && (1..=9).contains(&r.file));
        }
        let mut s = Mix::new(MixKind::Static, 5, 1);
        assert!((0..1000).all(|_| s.pick().kind == Kind::Static));
    }

    #[test]
    fn same_seed_same_sequence() {
        let mut a = Mix::new(MixKind::Specweb, 50, 7);
        let mut b = Mix::new(MixKind::Specweb, 50, 7);
        let mut c = Mix::new(MixKind::Specweb, 50, 8);
        let sa: Vec<Request> = (0..100).map(|_| a.pick()).collect();
        let sb: Vec<Request> = (0..100).map(|_| b.pick()).collect();
        let sc: Vec<Request> = (0..100).map(|_| c.pick()).collect();
        assert_eq!(sa, sb);
        assert_ne!(sa, sc);
    }

    #[test]
    fn requests_are_well_formed_http() {
        let m = Mix::new(MixKind::Specweb, 3, 1);
        let mut buf = Vec::new();
        for kind in [
            Kind::Static,
            Kind::DynGet,
            Kind::Cookie,
            Kind::Post,
            Kind::Cgi,
        ] {
            let r = Request {
                kind,
                dir: 2,
                class: 1,
                file: 4,
            };
            m.encode(&r, &mut buf);
            let mut h = [httparse::EMPTY_HEADER; 16];
            let mut req = httparse::Request::new(&mut h);
            let httparse::Status::Complete(n) = req.parse(&buf).unwrap() else {
                panic!("partial {kind:?}")
            };
            if kind == Kind::Post {
                assert_eq!(req.path, Some("/post"));
                assert!(String::from_utf8_lossy(&buf[n..]).contains("dir=2&class=1&num=4"));
                let cl: usize = req
                    .headers
                    .iter()
                    .find(|h| h.name == "Content-Length")
                    .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
                    .unwrap();
                assert_eq!(buf.len() - n, cl);
            } else {
                assert!(req.path.unwrap().contains("/dir00002/class1_4"), "{kind:?}");
                assert_eq!(n, buf.len());
            }
        }
    }

    #[test]
    fn responses_parse_in_pieces() {
        let r = b"HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 5\r\n\r\nhello";
        let head = r.len() - 5;
        for cut in 0..head {
            assert_eq!(parse_response(&r[..cut]).unwrap(), Parsed::Partial, "{cut}");
        }
        for cut in head..=r.len() {
            assert_eq!(
                parse_response(&r[..cut]).unwrap(),
                Parsed::Done {
                    status: 200,
                    len: r.len()
                }
            );
        }
        let nf = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(
            parse_response(nf).unwrap(),
            Parsed::Done {
                status: 404,
                len: nf.len()
            }
        );
        assert!(parse_response(b"garbage\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").is_err());
    }

    #[test]
    fn conformance_rule() {
        // 400 kbit/s for 10 s is 4 Mbit: conforming down to 320 kbit/s.
        assert!(conforms(4e6, 10.0, 100, 0, 400));
        assert!(conforms(3.2e6, 10.0, 100, 0, 400));
        assert!(!conforms(3.19e6, 10.0, 100, 0, 400));
        // Errors: under 1 % conforms, 1 % does not.
        assert!(conforms(4e6, 10.0, 1000, 9, 400));
        assert!(!conforms(4e6, 10.0, 990, 10, 400));
        assert!(!conforms(0.0, 10.0, 0, 0, 400));
        assert!(!conforms(4e6, 0.0, 10, 0, 400));
        // A window spent on one large file at the throttle's rate conforms.
        assert!(conforms(4e6, 10.0, 0, 0, 400));
        assert!(!conforms(4e6, 10.0, 0, 1, 400));
        // Unthrottled: judged against 400 kbit/s.
        assert!(conforms(4e6, 10.0, 100, 0, 0));
    }

    #[test]
    fn bytes_are_credited_over_their_throttle_span() {
        let t = Instant::now();
        let s = |ms| t + Duration::from_millis(ms);
        // 1000 bytes over 0..100 ms; window 50..: half of them.
        assert!((credit(1000, s(0), s(100), s(50), None) - 500.0).abs() < 1e-6);
        // Window 50..75: a quarter.
        assert!((credit(1000, s(0), s(100), s(50), Some(s(75))) - 250.0).abs() < 1e-6);
        // Entirely before or after the window: nothing.
        assert_eq!(credit(1000, s(0), s(100), s(200), None), 0.0);
        assert_eq!(credit(1000, s(100), s(200), s(0), Some(s(50))), 0.0);
        // An instantaneous response inside the window counts whole.
        assert_eq!(credit(1000, s(10), s(10), s(0), None), 1000.0);
    }

    #[test]
    fn zipf_picks_within_range() {
        let z = Zipf::new(3);
        assert_eq!(z.pick(0.0), 0);
        assert_eq!(z.pick(0.999_999), 2);
        assert_eq!(Zipf::new(1).pick(0.5), 0);
    }

    #[test]
    fn fileset_is_written_once_with_spec_sizes() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("fs");
        write_fileset(&root, 2, 1).unwrap();
        let meta = std::fs::metadata(root.join("dir00001/class3_9")).unwrap();
        assert_eq!(meta.len(), 921_600);
        let total: u64 = (0..2)
            .flat_map(|dd| {
                let root = &root;
                (0..4).flat_map(move |c| {
                    (1..=9).map(move |k| {
                        std::fs::metadata(root.join(file_path(dd, c, k).trim_start_matches('/')))
                            .unwrap()
                            .len()
                    })
                })
            })
            .sum();
        assert_eq!(total, 2 * DIR_BYTES);
        let a = std::fs::read(root.join("dir00000/class0_1")).unwrap();
        let b = std::fs::read(root.join("dir00001/class0_1")).unwrap();
        assert_ne!(a, b);
    }
}
