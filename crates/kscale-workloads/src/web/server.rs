//! kscale's own web server, the server role of `web.own`
//! (docs/families/web.md). It serves the same file set and the same
//! request kinds as the nginx configuration, in one of two designs whose
//! scaling the family compares:
//!
//! - `thread-pool`: a fixed pool of threads sharing one epoll set in
//!   one-shot mode; a thread takes a ready connection, serves it with
//!   blocking reads and writes, and re-arms it. A thread is busy for as
//!   long as a response takes to write, as in a classic pooled server.
//! - `epoll`: one non-blocking event loop per CPU of the configuration,
//!   each accepting from the shared listener (EPOLLEXCLUSIVE).
//!
//! Static files go out with `sendfile`; dynamic GETs, cookie/ad rotation
//! and POSTs (appended to a log file) are handled in-process; a CGI request
//! forks and execs the static helper program `syscall.fork_exec` uses. The
//! role process runs confined to the configuration's CPUs, and its CPU time
//! (CGI children included, once waited for) is the server's.

use super::mix::Rng;
use super::raise_nofile;
use crate::roles::{Endpoint, Phase, RoleCtx, RoleOutput};
use crate::shared::epoll::Epoll;
use anyhow::{bail, ensure, Context, Result};
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The server's designs, from the `mode` param.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    ThreadPool,
    Epoll,
}

impl Mode {
    pub fn parse(s: &str) -> Result<Mode> {
        Ok(match s {
            "thread-pool" => Mode::ThreadPool,
            "epoll" => Mode::Epoll,
            _ => bail!("mode={s}: accepted: thread-pool, epoll"),
        })
    }
}

/// Pool threads per CPU of the configuration: enough that CGI forks and
/// large writes on some connections leave threads for the others.
const POOL_PER_CPU: usize = 16;
/// A request head or body larger than this is refused (400).
const MAX_REQUEST: usize = 64 << 10;
/// The ads a cookie request rotates through (SPECweb99 had 360).
const ADS: usize = 360;
/// A blocking read or write of the thread-pool that takes longer than
/// this closes its connection, so a stalled client cannot hold a thread.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
const LISTENER: u64 = u64::MAX;

/// What every thread of the server shares.
struct Site {
    root: PathBuf,
    post_log: File,
    cgi: PathBuf,
    /// Each ad's demographic bits; a user is shown the next ad sharing one.
    ads: Vec<u32>,
    requests: AtomicU64,
    cgi_runs: AtomicU64,
    errors: AtomicU64,
}

/// One parsed request, owned so the input buffer can move on.
#[derive(Debug, PartialEq, Eq)]
pub struct Req {
    pub method: String,
    pub path: String,
    pub cookie: Option<String>,
    pub body: Vec<u8>,
    /// The client asked to close after the response (or spoke HTTP/1.0).
    pub close: bool,
}

/// Parses one request at the start of `buf`: `None` until it is whole
/// (head and `Content-Length` body), then the request and its length.
pub fn parse_request(buf: &[u8]) -> Result<Option<(Req, usize)>> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut r = httparse::Request::new(&mut headers);
    let head = match r.parse(buf).context("malformed HTTP request")? {
        httparse::Status::Partial => return Ok(None),
        httparse::Status::Complete(n) => n,
    };
    let mut len = 0usize;
    let mut cookie = None;
    let mut close = r.version == Some(0);
    for h in r.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            len = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .context("bad Content-Length")?;
            ensure!(len <= MAX_REQUEST, "request body over 64 KB");
        } else if h.name.eq_ignore_ascii_case("cookie") {
            cookie = Some(String::from_utf8_lossy(h.value).into_owned());
        } else if h.name.eq_ignore_ascii_case("connection") {
            close = h.value.eq_ignore_ascii_case(b"close");
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            bail!("chunked requests are not supported");
        }
    }
    if buf.len() < head + len {
        return Ok(None);
    }
    let req = Req {
        method: r.method.unwrap_or("").to_string(),
        path: r.path.unwrap_or("").to_string(),
        cookie,
        body: buf[head..head + len].to_vec(),
        close,
    };
    Ok(Some((req, head + len)))
}

/// The value of `name` in a `a=1&b=2` string ("" when absent).
fn arg<'a>(q: &'a str, name: &str) -> &'a str {
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map_or("", |(_, v)| v)
}

/// The ad after `last` whose demographics share a bit with the user's,
/// SPECweb99's rotation; the next ad when none does.
pub fn next_ad(ads: &[u32], user: u32, last: usize) -> usize {
    let n = ads.len().max(1);
    (1..=n)
        .map(|i| (last + i) % n)
        .find(|a| ads[*a] & user != 0)
        .unwrap_or((last + 1) % n)
}

/// A user's demographic bits, the same for every request of that user.
fn user_bits(user: &str) -> u32 {
    let id = user.parse::<u64>().unwrap_or(0);
    Rng::new(id ^ 0x5eed).next_u64() as u32 | 1
}

/// A response: its head (with any small body), and a file to follow it.
pub struct Response {
    pub head: Vec<u8>,
    pub file: Option<(File, u64)>,
}

fn fixed(status: &str, headers: &str, body: &str) -> Response {
    Response {
        head: format!(
            "HTTP/1.1 {status}\r\nServer: kscale\r\nContent-Type: text/html\r\n{headers}\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
        file: None,
    }
}

fn handle(site: &Site, req: &Req) -> Response {
    site.requests.fetch_add(1, Ordering::Relaxed);
    let (path, query) = req.path.split_once('?').unwrap_or((&req.path, ""));
    match (req.method.as_str(), path) {
        ("GET", "/dyn") => fixed(
            "200 OK",
            "",
            &format!(
                "<html><body>dynamic GET user={} file={} request {}</body></html>",
                arg(query, "user"),
                arg(query, "file"),
                site.requests.load(Ordering::Relaxed)
            ),
        ),
        ("GET", "/ad") => {
            let c = req.cookie.as_deref().unwrap_or("");
            let c = c.strip_prefix("my_cookie=").unwrap_or(c);
            let user = arg(c, "user_id");
            let last = arg(c, "last_ad").parse::<usize>().unwrap_or(0) % ADS;
            let ad = next_ad(&site.ads, user_bits(user), last);
            fixed(
                "200 OK",
                &format!(
                    "Set-Cookie: found_cookie=Ad_id={ad}&Ad_weight={}&Expired=0\r\n",
                    site.ads[ad].count_ones()
                ),
                &format!(
                    "<html><body>ad {ad} for user {user} file={}</body></html>",
                    arg(query, "file")
                ),
            )
        }
        ("POST", "/post") => {
            let mut line = Vec::with_capacity(req.body.len() + 1);
            line.extend_from_slice(&req.body);
            line.push(b'\n');
            // One write with O_APPEND: lines of concurrent POSTs never mix.
            match (&site.post_log).write_all(&line) {
                Ok(()) => fixed("200 OK", "", "<html><body>posted</body></html>"),
                Err(e) => {
                    site.errors.fetch_add(1, Ordering::Relaxed);
                    fixed("500 Internal Server Error", "", &format!("post log: {e}"))
                }
            }
        }
        ("GET", "/cgi") => match cgi(site, query) {
            Ok(out) => fixed(
                "200 OK",
                "",
                &format!(
                    "<html><body>CGI user={} file={}: {}</body></html>",
                    arg(query, "user"),
                    arg(query, "file"),
                    String::from_utf8_lossy(&out).trim()
                ),
            ),
            Err(e) => {
                site.errors.fetch_add(1, Ordering::Relaxed);
                fixed("500 Internal Server Error", "", &format!("CGI: {e:#}"))
            }
        },
        ("GET", p) => static_file(&site.root, p),
        _ => fixed("405 Method Not Allowed", "", ""),
    }
}

/// A file of the document root; paths leaving it are refused.
fn static_file(root: &Path, path: &str) -> Response {
    let rel = path.trim_start_matches('/');
    if rel.is_empty() || rel.split('/').any(|c| c == ".." || c.is_empty()) {
        return fixed("404 Not Found", "", "");
    }
    let Ok(f) = File::open(root.join(rel)) else {
        return fixed("404 Not Found", "", "");
    };
    match f.metadata() {
        Ok(m) if m.is_file() => Response {
            head: format!(
                "HTTP/1.1 200 OK\r\nServer: kscale\r\nContent-Type: application/octet-stream\r\n\
                 Content-Length: {}\r\n\r\n",
                m.len()
            )
            .into_bytes(),
            file: Some((f, m.len())),
        },
        _ => fixed("404 Not Found", "", ""),
    }
}

/// A CGI request: fork and exec the helper program, read what it prints.
fn cgi(site: &Site, query: &str) -> Result<Vec<u8>> {
    use std::os::unix::process::CommandExt;
    site.cgi_runs.fetch_add(1, Ordering::Relaxed);
    let mut c = Command::new(&site.cgi);
    c.env_clear()
        .env("QUERY_STRING", query)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // SAFETY: the hook does nothing (it is trivially async-signal-safe).
    // Having one makes std fork and exec instead of using posix_spawn's
    // vfork, so a CGI request costs a real fork of the server process, as
    // in the CGI servers SPECweb99 measured.
    unsafe {
        c.pre_exec(|| Ok(()));
    }
    let out = c
        .output()
        .with_context(|| format!("cannot run {}", site.cgi.display()))?;
    ensure!(out.status.success(), "helper failed ({})", out.status);
    Ok(out.stdout)
}

/// What a connection waits for after serving what it had.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    Read,
    Write,
    Close,
}

struct Conn {
    s: TcpStream,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    sent: usize,
    /// The file being sent: descriptor, offset, bytes left.
    file: Option<(File, i64, u64)>,
    close_after: bool,
    /// Registered for EPOLLOUT (epoll mode).
    want_out: bool,
}

impl Conn {
    fn new(s: TcpStream) -> Conn {
        Conn {
            s,
            inbuf: Vec::new(),
            out: Vec::new(),
            sent: 0,
            file: None,
            close_after: false,
            want_out: false,
        }
    }

    fn pending(&self) -> bool {
        self.sent < self.out.len() || self.file.is_some()
    }

    /// Writes pending output: the head, then the file with sendfile.
    /// `Ok(false)` when the socket would block.
    fn flush(&mut self) -> io::Result<bool> {
        while self.sent < self.out.len() {
            match self.s.write(&self.out[self.sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if let Some((f, off, left)) = self.file.as_mut() {
            while *left > 0 {
                let chunk = (*left).min(1 << 30) as usize;
                // SAFETY: both descriptors are open and owned by this
                // connection; `off` is a live i64 the kernel advances.
                let n = unsafe { libc::sendfile(self.s.as_raw_fd(), f.as_raw_fd(), off, chunk) };
                if n < 0 {
                    let e = io::Error::last_os_error();
                    match e.kind() {
                        io::ErrorKind::WouldBlock => return Ok(false),
                        io::ErrorKind::Interrupted => continue,
                        _ => return Err(e),
                    }
                }
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shorter than its size",
                    ));
                }
                *left -= n as u64;
            }
        }
        self.file = None;
        self.out.clear();
        self.sent = 0;
        Ok(true)
    }

    /// Answers every whole request that has arrived, reading as long as
    /// the socket has data. `blocking` (the thread pool): a partial
    /// request is waited for, but once a response is out and nothing more
    /// is buffered the connection goes back to the epoll set.
    fn serve(&mut self, site: &Site, blocking: bool) -> Next {
        let mut answered = false;
        let mut chunk = [0u8; 16 << 10];
        loop {
            if self.pending() {
                match self.flush() {
                    Ok(true) if self.close_after => return Next::Close,
                    Ok(true) => {}
                    // A blocking write that would block has hit IO_TIMEOUT.
                    Ok(false) if blocking => return Next::Close,
                    Ok(false) => return Next::Write,
                    Err(_) => return Next::Close,
                }
            }
            match parse_request(&self.inbuf) {
                Ok(Some((req, n))) => {
                    self.inbuf.drain(..n);
                    let r = handle(site, &req);
                    self.out = r.head;
                    self.file = r.file.map(|(f, len)| (f, 0, len));
                    self.close_after = req.close;
                    answered = true;
                    continue;
                }
                Ok(None) if self.inbuf.len() <= MAX_REQUEST => {}
                _ => {
                    site.errors.fetch_add(1, Ordering::Relaxed);
                    self.out = fixed("400 Bad Request", "Connection: close\r\n", "").head;
                    self.inbuf.clear();
                    self.close_after = true;
                    continue;
                }
            }
            if blocking && answered && self.inbuf.is_empty() {
                return Next::Read;
            }
            match self.s.read(&mut chunk) {
                Ok(0) => return Next::Close,
                Ok(n) => self.inbuf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && !blocking => return Next::Read,
                Err(_) => return Next::Close,
            }
        }
    }
}

/// A listening socket with a backlog deep enough for thousands of
/// connections opened at once (std's is 128).
fn listen(addr: SocketAddrV4) -> Result<TcpListener> {
    use nix::sys::socket::{
        bind as bind_to, listen, setsockopt, socket, sockopt, AddressFamily, Backlog, SockFlag,
        SockType, SockaddrIn,
    };
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .context("socket")?;
    setsockopt(&fd, sockopt::ReuseAddr, &true).context("SO_REUSEADDR")?;
    bind_to(fd.as_raw_fd(), &SockaddrIn::from(addr))
        .with_context(|| format!("cannot listen on {addr}"))?;
    listen(&fd, Backlog::new(65_535).unwrap_or(Backlog::MAXCONN)).context("listen")?;
    Ok(TcpListener::from(fd))
}

/// Accepts what the listener has, handing each socket to `add`.
fn accept_all(l: &TcpListener, site: &Site, mut add: impl FnMut(TcpStream) -> io::Result<()>) {
    loop {
        match l.accept() {
            Ok((s, _)) => {
                if s.set_nodelay(true).and_then(|()| add(s)).is_err() {
                    site.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            // Out of descriptors and the like: the client retries; the
            // level-triggered listener brings us back.
            Err(_) => {
                site.errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    }
}

const TICK: Duration = Duration::from_millis(50);

/// One event loop of the `epoll` mode.
fn event_loop(stop: &(dyn Fn() -> bool + Sync), site: &Site, l: &TcpListener) -> Result<()> {
    let ep = Epoll::new()?;
    let ev_in = libc::EPOLLIN as u32;
    ep.ctl(
        libc::EPOLL_CTL_ADD,
        l.as_raw_fd(),
        ev_in | libc::EPOLLEXCLUSIVE as u32,
        LISTENER as usize,
    )
    .context("epoll_ctl listener")?;
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    while !stop() {
        let n = ep.wait(&mut evs, TICK).context("epoll_wait")?;
        for ev in evs.iter().take(n) {
            let k = ev.u64;
            if k == LISTENER {
                accept_all(l, site, |s| {
                    s.set_nonblocking(true)?;
                    let slot = free.pop().unwrap_or(conns.len());
                    ep.ctl(libc::EPOLL_CTL_ADD, s.as_raw_fd(), ev_in, slot)?;
                    if slot == conns.len() {
                        conns.push(None);
                    }
                    conns[slot] = Some(Conn::new(s));
                    Ok(())
                });
                continue;
            }
            let k = k as usize;
            let Some(c) = conns.get_mut(k).and_then(Option::as_mut) else {
                continue;
            };
            let next = c.serve(site, false);
            if next != Next::Close {
                let want_out = next == Next::Write;
                if want_out == c.want_out {
                    continue;
                }
                let ev = if want_out {
                    ev_in | libc::EPOLLOUT as u32
                } else {
                    ev_in
                };
                if ep.ctl(libc::EPOLL_CTL_MOD, c.s.as_raw_fd(), ev, k).is_ok() {
                    c.want_out = want_out;
                    continue;
                }
            }
            // Closing the socket takes it out of the epoll set.
            conns[k] = None;
            free.push(k);
        }
    }
    Ok(())
}

/// The thread pool's connections, keyed by their epoll key. A connection
/// is taken out while a thread serves it (one-shot: no other thread can
/// get its events meanwhile) and put back before it is re-armed.
#[derive(Default)]
struct Slab {
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
}

/// One thread of the `thread-pool` mode.
fn pool_thread(
    stop: &(dyn Fn() -> bool + Sync),
    site: &Site,
    l: &TcpListener,
    ep: &Epoll,
    slab: &Mutex<Slab>,
) {
    let armed = (libc::EPOLLIN | libc::EPOLLONESHOT) as u32;
    let lock = || match slab.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    // One event at a time: a thread serves one connection.
    let mut evs = [libc::epoll_event { events: 0, u64: 0 }];
    while !stop() {
        let Ok(n) = ep.wait(&mut evs, TICK) else {
            site.errors.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        if n == 0 {
            continue;
        }
        let k = evs[0].u64;
        if k == LISTENER {
            accept_all(l, site, |s| {
                s.set_nonblocking(false)?;
                s.set_read_timeout(Some(IO_TIMEOUT))?;
                s.set_write_timeout(Some(IO_TIMEOUT))?;
                let fd = s.as_raw_fd();
                let slot = {
                    let mut g = lock();
                    let slot = g.free.pop().unwrap_or(g.conns.len());
                    if slot == g.conns.len() {
                        g.conns.push(None);
                    }
                    g.conns[slot] = Some(Conn::new(s));
                    slot
                };
                ep.ctl(libc::EPOLL_CTL_ADD, fd, armed, slot)
                    .inspect_err(|_| {
                        let mut g = lock();
                        g.conns[slot] = None;
                        g.free.push(slot);
                    })
            });
            continue;
        }
        let k = k as usize;
        let Some(mut c) = lock().conns.get_mut(k).and_then(Option::take) else {
            continue;
        };
        let next = c.serve(site, true);
        let fd = c.s.as_raw_fd();
        let mut g = lock();
        if next == Next::Close {
            drop(c);
            g.free.push(k);
            continue;
        }
        g.conns[k] = Some(c);
        drop(g);
        if ep.ctl(libc::EPOLL_CTL_MOD, fd, armed, k).is_err() {
            let mut g = lock();
            g.conns[k] = None;
            g.free.push(k);
        }
    }
}

/// What a server served, for its output.
pub struct Served {
    pub requests: u64,
    pub cgi_runs: u64,
    pub post_log_bytes: u64,
    pub errors: u64,
    /// "2 event loop(s)", "32 threads".
    pub what: String,
}

/// Serves the file set at `root` on `addr` (port 0: any free port) in
/// `mode`, for a configuration of `cpus` CPUs, until `stop` (checked
/// every [`TICK`]); `ready` is
/// told the port once every thread runs. The CGI helper and the POST log
/// live in `scratch/web-own-PID`, removed on return.
pub fn serve(
    root: &Path,
    scratch: &Path,
    addr: SocketAddrV4,
    mode: Mode,
    cpus: usize,
    stop: &(dyn Fn() -> bool + Sync),
    ready: impl FnOnce(u16) -> Result<()>,
) -> Result<Served> {
    let own = scratch.join(format!("web-own-{}", std::process::id()));
    std::fs::create_dir_all(&own).with_context(|| format!("cannot create {}", own.display()))?;
    let _own = RemoveDir(own.clone());
    let helper = crate::shared::exec::install_hello(&own, crate::shared::exec::HELLO)?;
    let log = own.join("post.log");
    let post_log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .with_context(|| format!("cannot open {}", log.display()))?;
    let mut rng = Rng::new(0xad5);
    let site = Site {
        root: root.to_path_buf(),
        post_log,
        cgi: helper.path.clone(),
        ads: (0..ADS).map(|_| rng.next_u64() as u32).collect(),
        requests: AtomicU64::new(0),
        cgi_runs: AtomicU64::new(0),
        errors: AtomicU64::new(0),
    };
    let l = listen(addr)?;
    let port = l.local_addr().context("listener address")?.port();
    let cpus = cpus.max(1);
    let threads = match mode {
        Mode::Epoll => cpus,
        Mode::ThreadPool => cpus * POOL_PER_CPU,
    };
    let pool_ep = Epoll::new()?;
    let slab = Mutex::new(Slab::default());
    if mode == Mode::ThreadPool {
        pool_ep
            .ctl(
                libc::EPOLL_CTL_ADD,
                l.as_raw_fd(),
                libc::EPOLLIN as u32,
                LISTENER as usize,
            )
            .context("epoll_ctl listener")?;
    }
    let mut failed = None;
    std::thread::scope(|scope| -> Result<()> {
        let mut handles = Vec::with_capacity(threads);
        for _ in 0..threads {
            let (site, l, ep, slab) = (&site, &l, &pool_ep, &slab);
            let h = std::thread::Builder::new()
                .name("kscale-httpd".into())
                .stack_size(256 << 10)
                .spawn_scoped(scope, move || match mode {
                    Mode::Epoll => event_loop(stop, site, l),
                    Mode::ThreadPool => {
                        pool_thread(stop, site, l, ep, slab);
                        Ok(())
                    }
                })
                .context("cannot start a server thread")?;
            handles.push(h);
        }
        ready(port)?;
        for h in handles {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failed = Some(e),
                Err(_) => failed = Some(anyhow::anyhow!("a server thread panicked")),
            }
        }
        Ok(())
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(Served {
        requests: site.requests.load(Ordering::Relaxed),
        cgi_runs: site.cgi_runs.load(Ordering::Relaxed),
        post_log_bytes: std::fs::metadata(&log).map_or(0, |m| m.len()),
        errors: site.errors.load(Ordering::Relaxed),
        what: match mode {
            Mode::Epoll => format!("{threads} event loop(s)"),
            Mode::ThreadPool => format!("{threads} threads"),
        },
    })
}

pub(super) fn server(ctx: &RoleCtx) -> Result<RoleOutput> {
    let p = &ctx.params;
    let mode = Mode::parse(p.get("mode")?)?;
    let conns = p.int("conns")?;
    raise_nofile(conns + 256)?;
    let (root, dirs, out) = super::fileset::for_server(ctx)?;
    let ip: std::net::Ipv4Addr = ctx
        .bind
        .parse()
        .with_context(|| format!("kscale's web server listens on IPv4 only, not {}", ctx.bind))?;
    let stop = || ctx.phase() >= Phase::Stop;
    let served = serve(
        &root,
        &ctx.dir,
        SocketAddrV4::new(ip, 0),
        mode,
        ctx.config_cpus.len(),
        &stop,
        |port| ctx.ready(Endpoint::on_port(port, serde_json::json!({ "dirs": dirs }))),
    )?;
    let mut out = out
        .count("server_requests", served.requests as f64)
        .count("cgi_runs", served.cgi_runs as f64)
        .count("post_log_bytes", served.post_log_bytes as f64)
        .note(format!(
            "server: kscale's own, mode={} ({})",
            p.get("mode")?,
            served.what
        ));
    if served.errors > 0 {
        out = out.note(format!(
            "server: {} request or connection errors",
            served.errors
        ));
    }
    Ok(out)
}

/// Removes a directory when dropped.
struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_whole_or_not_at_all() {
        let r = b"POST /post HTTP/1.1\r\nHost: k\r\nContent-Length: 5\r\n\r\nhello";
        for cut in 0..r.len() {
            assert_eq!(parse_request(&r[..cut]).unwrap(), None, "{cut}");
        }
        let (req, n) = parse_request(r).unwrap().unwrap();
        assert_eq!(n, r.len());
        assert_eq!(
            (req.method.as_str(), req.body.as_slice()),
            ("POST", &b"hello"[..])
        );
        assert!(!req.close);
        let g = b"GET /ad?file=/x HTTP/1.0\r\nCookie: my_cookie=user_id=3&last_ad=9\r\n\r\nGET";
        let (req, n) = parse_request(g).unwrap().unwrap();
        assert_eq!(n, g.len() - 3);
        assert!(req.close, "HTTP/1.0 closes");
        assert_eq!(req.cookie.as_deref(), Some("my_cookie=user_id=3&last_ad=9"));
        assert!(parse_request(b"BAD\0\r\n\r\n").is_err());
        assert!(parse_request(b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n").is_err());
    }

    #[test]
    fn ads_rotate_to_the_next_matching_one() {
        let ads = [0b01, 0b10, 0b10, 0b01];
        assert_eq!(next_ad(&ads, 0b01, 0), 3);
        assert_eq!(next_ad(&ads, 0b10, 1), 2);
        assert_eq!(next_ad(&ads, 0b01, 3), 0);
        // No match: the next ad.
        assert_eq!(next_ad(&ads, 0b100, 2), 3);
        assert_eq!(arg("user_id=3&last_ad=9", "last_ad"), "9");
        assert_eq!(arg("a=1", "b"), "");
    }

    #[test]
    fn static_paths_stay_inside_the_root() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("f"), b"12345").unwrap();
        let ok = static_file(d.path(), "/f");
        assert_eq!(ok.file.as_ref().map(|f| f.1), Some(5));
        assert!(String::from_utf8_lossy(&ok.head).contains("Content-Length: 5\r\n"));
        for bad in ["/../etc/passwd", "/", "/a//f", "/missing"] {
            let r = static_file(d.path(), bad);
            assert!(r.file.is_none(), "{bad}");
            assert!(r.head.starts_with(b"HTTP/1.1 404"), "{bad}");
        }
    }

    #[test]
    fn modes_parse() {
        assert_eq!(Mode::parse("epoll").unwrap(), Mode::Epoll);
        assert_eq!(Mode::parse("thread-pool").unwrap(), Mode::ThreadPool);
        assert!(Mode::parse("fork").is_err());
    }
}
