//! kscale's HTTP/1.1 load generator: throttled keep-alive connections on epoll.

use super::mix::{Mix, MixKind};
use super::raise_nofile;
use super::response::{conforms, credit, parse_response, Parsed};
use crate::roles::{Endpoint, Phase, RoleCtx, RoleOutput, Share};
use crate::shared::epoll::Epoll;
use anyhow::{bail, Context, Result};
use kscale_core::hist;
use std::collections::BinaryHeap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// A response that takes longer than this is an error and its connection
/// is reopened: far above a loaded server's latency, below the trial limit.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

// -------------------------------------------------------------------- load

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    /// Waiting for its throttle time to send the next request.
    Idle,
    /// send=writable: its next request is due, written when epoll says
    /// the socket is writable.
    Due,
    Sending,
    Receiving,
}

/// One keep-alive connection of the load generator.
struct Conn {
    s: Option<TcpStream>,
    /// The source address it connects from (None: the kernel's choice).
    src: Option<Ipv4Addr>,
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

/// Opens a connection, from source address `src` when given (several
/// loopback addresses carry more connections than one address has
/// ephemeral ports).
fn open(addr: SocketAddr, src: Option<Ipv4Addr>) -> io::Result<TcpStream> {
    let s = match src {
        None => TcpStream::connect_timeout(&addr, IO_TIMEOUT)?,
        Some(ip) => {
            use nix::sys::socket::{
                bind, connect, socket, AddressFamily, SockFlag, SockType, SockaddrIn,
                SockaddrStorage,
            };
            let fd = socket(
                AddressFamily::Inet,
                SockType::Stream,
                SockFlag::SOCK_CLOEXEC,
                None,
            )?;
            // The port is picked at connect, for this destination only:
            // bind alone would reserve one of the address's ports for good.
            let one: libc::c_int = 1;
            // SAFETY: a valid socket and a live c_int of the right size.
            unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::IPPROTO_IP,
                    libc::IP_BIND_ADDRESS_NO_PORT,
                    (&one as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
            bind(fd.as_raw_fd(), &SockaddrIn::from(SocketAddrV4::new(ip, 0)))?;
            let s = TcpStream::from(fd);
            // SO_SNDTIMEO bounds a blocking connect as well.
            s.set_write_timeout(Some(IO_TIMEOUT))?;
            connect(s.as_raw_fd(), &SockaddrStorage::from(addr))?;
            s
        }
    };
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// The source addresses connections are spread over.
struct Sources {
    count: u64,
    ports: u64,
}

impl Sources {
    /// One address (the kernel's choice) while the ephemeral ports of one
    /// address suffice with room to spare (a fifth, for connections in
    /// TIME_WAIT and other programs); else, towards a loopback server,
    /// enough of 127.0.0.x; towards another server, a one-line refusal
    /// naming the limit.
    fn for_conns(addr: SocketAddr, conns: u64) -> Result<Sources> {
        let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|r| {
                let mut it = r.split_whitespace().filter_map(|v| v.parse::<u64>().ok());
                Some((it.next()?, it.next()?))
            })
            .unwrap_or((32_768, 60_999));
        let ports = (range.1 + 1).saturating_sub(range.0).max(1);
        let usable = (ports * 4 / 5).max(1);
        if conns <= usable {
            return Ok(Sources { count: 1, ports });
        }
        if !addr.ip().is_loopback() || !addr.is_ipv4() {
            bail!(
                "conns={conns} from one address to {addr} needs more than the {ports} ephemeral \
                 ports of net.ipv4.ip_local_port_range ({}–{}): widen it or spread the load \
                 over --peer hosts",
                range.0,
                range.1
            );
        }
        let count = conns.div_ceil(usable);
        if count > 254 {
            bail!("conns={conns} needs {count} loopback source addresses; at most 254 are used");
        }
        Ok(Sources { count, ports })
    }

    /// Connection `id`'s source address (None: one address, the kernel's).
    fn source(&self, id: u64) -> Option<Ipv4Addr> {
        (self.count > 1).then(|| Ipv4Addr::new(127, 0, 0, 1 + (id % self.count) as u8))
    }
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
    /// wait=spin: poll for events without ever sleeping in epoll_wait.
    spin: bool,
    /// send=writable: a due request waits for the socket's EPOLLOUT.
    on_writable: bool,
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

    /// Connection `i`'s next request is due: sent now, or with
    /// send=writable when epoll next reports the socket writable, as wrk
    /// sends (its `aeCreateFileEvent(AE_WRITABLE)` when a response
    /// completes): the requests of one turn's responses then leave
    /// together on the next turn, which changes when the server's
    /// responses find the load asleep (docs/families/web.md).
    fn due(&mut self, i: usize) {
        if !self.on_writable || self.conns[i].s.is_none() {
            return self.send(i);
        }
        if let Err(e) = self.register(i, (libc::EPOLLIN | libc::EPOLLOUT) as u32) {
            return self.fail(i, format!("epoll: {e}"));
        }
        self.conns[i].st = St::Due;
    }

    /// Sends connection `i`'s next request (opening it again if it failed).
    fn send(&mut self, i: usize) {
        if self.conns[i].s.is_none() {
            match open(self.addr, self.conns[i].src) {
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
            self.due(i);
        } else {
            self.timers.push(std::cmp::Reverse((at, i)));
        }
    }

    fn run(&mut self) -> Result<ThreadOut> {
        let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        for i in 0..self.conns.len() {
            self.due(i);
        }
        let mut next_scan = Instant::now();
        let end = loop {
            let phase = self.ctx.phase();
            if phase == Phase::Measure && self.begin.is_none() {
                self.open_window();
            }
            if phase >= Phase::Done {
                break self.close_window();
            }
            let now = Instant::now();
            while let Some(std::cmp::Reverse((at, i))) = self.timers.peek().copied() {
                if at > now {
                    break;
                }
                self.timers.pop();
                if self.conns[i].st == St::Idle {
                    self.due(i);
                }
            }
            let wait = self
                .timers
                .peek()
                .map_or(Duration::from_millis(20), |r| {
                    r.0 .0.saturating_duration_since(now)
                })
                .min(Duration::from_millis(20));
            // Spinning, the load never sleeps, so the server's response
            // never has to wake it: as a generator saturating its CPU
            // (wrk at its rate) always finds a response ready when it looks.
            let wait = if self.spin { Duration::ZERO } else { wait };
            let n = self.ep.wait(&mut evs, wait).context("epoll_wait")?;
            for ev in evs.iter().take(n) {
                let (i, flags) = (ev.u64 as usize, ev.events);
                if i >= self.conns.len() {
                    continue;
                }
                let due = self.conns[i].st == St::Due;
                if flags & libc::EPOLLOUT as u32 != 0 && (self.conns[i].st == St::Sending || due) {
                    if let Err(e) = self.register(i, libc::EPOLLIN as u32) {
                        self.fail(i, format!("epoll: {e}"));
                        continue;
                    }
                    if due {
                        self.send(i);
                    } else {
                        self.write(i);
                    }
                }
                if flags & (libc::EPOLLIN | libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
                    match self.conns[i].st {
                        St::Receiving => self.read(i),
                        // Data or a close while nothing was asked: the
                        // server dropped the keep-alive connection.
                        St::Idle | St::Due | St::Sending => {
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
                if !matches!(c.st, St::Idle | St::Due) && now.duration_since(c.t0) > IO_TIMEOUT {
                    self.fail(i, format!("no response within {} s", IO_TIMEOUT.as_secs()));
                }
            }
        };
        self.totals(end)
    }

    /// The measured window begins: the counts start again from zero, but a
    /// response before the window is credited with the part of it that its
    /// throttle spreads into the window.
    fn open_window(&mut self) {
        let b = Instant::now();
        self.begin = Some(b);
        for c in self.conns.iter_mut() {
            c.ops = 0;
            c.errors = 0;
            c.bytes = credit(c.last.2, c.last.0, c.last.1, b, None);
        }
    }

    /// The window ends now: each connection gives back the part of its last
    /// response that its throttle spreads beyond the window.
    fn close_window(&mut self) -> Instant {
        let e = Instant::now();
        if let Some(b) = self.begin {
            for c in self.conns.iter_mut() {
                let (from, to, n) = c.last;
                let late = credit(n, from, to, b, None) - credit(n, from, to, b, Some(e));
                c.bytes = (c.bytes - late).max(0.0);
            }
        }
        e
    }

    /// The thread's counts over a window that ended at `end`, with how many
    /// of its connections conformed.
    fn totals(&mut self, end: Instant) -> Result<ThreadOut> {
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

/// What one load process drives, read from its parameters before any
/// connection opens.
struct Plan {
    conns: usize,
    rate: u64,
    seed: u64,
    spin: bool,
    on_writable: bool,
    mix: MixKind,
    /// The `target` URL that a load without a server role of its own drives.
    target: Option<super::target::Target>,
    addr: SocketAddr,
    dirs: u64,
    /// The target has no dynamic paths: a SPECweb99 mix keeps only its
    /// static share.
    no_dynamic: bool,
}

impl Plan {
    /// Reads the parameters, resolving the target of a load without a
    /// server of its own.
    fn new(ctx: &RoleCtx) -> Result<Plan> {
        let p = &ctx.params;
        let conns = ctx.share_of(p.int("conns")?) as usize;
        let rate = p.int("rate")?;
        let seed = p.int("seed")?;
        let spin = p.get("wait")? == "spin";
        let on_writable = p.get("send")? == "writable";
        let mut mix = MixKind::parse(p.get("mix")?)?;
        let target = match &ctx.endpoint {
            Some(_) => None,
            None => Some(super::target::resolve(p)?),
        };
        let (addr, dirs) = match (&ctx.endpoint, &target) {
            (Some(ep), _) => (
                ep.addr()
                    .parse::<SocketAddr>()
                    .with_context(|| format!("bad server address {}", ep.addr()))?,
                ep.extra.get("dirs").and_then(|d| d.as_u64()).unwrap_or(1),
            ),
            (None, Some(t)) => (t.addr, t.dirs),
            (None, None) => bail!("web's load has neither a server nor a target"),
        };
        let no_dynamic = target.as_ref().is_some_and(|t| t.dynamic.is_none());
        if no_dynamic && mix == MixKind::Specweb {
            mix = MixKind::Static;
        }
        Ok(Plan {
            conns,
            rate,
            seed,
            spin,
            on_writable,
            mix,
            target,
            addr,
            dirs,
            no_dynamic,
        })
    }

    /// Nanoseconds a byte may take under the throttle (0: unthrottled).
    fn ns_per_byte(&self) -> f64 {
        if self.rate == 0 {
            0.0
        } else {
            8.0 * 1e9 / (self.rate as f64 * 1000.0)
        }
    }
}

/// Opens every connection of this load process, spread over one event loop
/// per CPU, before the load says it is ready.
fn workers<'a>(ctx: &'a RoleCtx, plan: &Plan, sources: &Sources) -> Result<Vec<Worker<'a>>> {
    let threads = ctx.cpus.len().clamp(1, plan.conns.max(1));
    let mut workers = Vec::with_capacity(threads);
    // Connection numbers, unique across threads and load processes: each
    // seeds its own request sequence.
    let mut id = (ctx.share.index * plan.conns) as u64;
    for t in 0..threads {
        let n = Share {
            index: t,
            count: threads,
        }
        .of(plan.conns as u64) as usize;
        let conns = connect(plan, sources, n, &mut id)?;
        workers.push(Worker::new(ctx, plan, conns)?);
    }
    Ok(workers)
}

/// Opens `n` connections, numbered on from `id`, each with its own request
/// sequence.
fn connect(plan: &Plan, sources: &Sources, n: usize, id: &mut u64) -> Result<Vec<Conn>> {
    let addr = plan.addr;
    let (base, dynamic) = plan.target.as_ref().map_or(("", ""), |t| {
        (t.base.as_str(), t.dynamic.as_deref().unwrap_or(""))
    });
    let mut cs = Vec::with_capacity(n);
    for _ in 0..n {
        let src = sources.source(*id);
        let s = open(addr, src).with_context(|| match src {
            Some(ip) => format!("cannot connect to the server at {addr} from {ip}"),
            None => format!("cannot connect to the server at {addr}"),
        })?;
        *id += 1;
        let seed = plan.seed.wrapping_mul(1_000_003).wrapping_add(*id);
        cs.push(Conn {
            s: Some(s),
            src,
            st: St::Idle,
            mix: Mix::new(plan.mix, plan.dirs, seed).with_paths(base, dynamic),
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
    Ok(cs)
}

impl<'a> Worker<'a> {
    /// An event loop over `conns`, each already registered for its
    /// responses.
    fn new(ctx: &'a RoleCtx, plan: &Plan, conns: Vec<Conn>) -> Result<Worker<'a>> {
        let w = Worker {
            ctx,
            addr: plan.addr,
            ep: Epoll::new()?,
            conns,
            timers: BinaryHeap::new(),
            ns_per_byte: plan.ns_per_byte(),
            hist: hist::new(),
            lat_ns: 0.0,
            begin: None,
            notes: Vec::new(),
            chunk: vec![0u8; 64 << 10],
            spin: plan.spin,
            on_writable: plan.on_writable,
        };
        for (i, c) in w.conns.iter().enumerate() {
            if let Some(s) = &c.s {
                w.ep.ctl(libc::EPOLL_CTL_ADD, s.as_raw_fd(), libc::EPOLLIN as u32, i)
                    .context("epoll_ctl")?;
            }
        }
        Ok(w)
    }
}

impl ThreadOut {
    /// Adds another thread's counts; its windows overlap this one's, so the
    /// longest stands for all.
    fn absorb(&mut self, o: ThreadOut) {
        self.ops += o.ops;
        self.errors += o.errors;
        self.bytes += o.bytes;
        self.lat_ns += o.lat_ns;
        self.conforming += o.conforming;
        self.window_s = self.window_s.max(o.window_s);
        for n in o.notes {
            if !self.notes.contains(&n) {
                self.notes.push(n);
            }
        }
    }
}

/// Runs every worker on its own thread, says the load is ready, and sums
/// what the threads counted once the window is over.
fn drive(
    ctx: &RoleCtx,
    workers: Vec<Worker<'_>>,
) -> Result<(ThreadOut, hdrhistogram::Histogram<u64>)> {
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
                    total.absorb(o);
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => bail!("a load thread panicked"),
            }
        }
        Ok(())
    })?;
    Ok((total, latency))
}

/// The load: every connection open first, then one event loop per CPU
/// until the window is over.
pub(super) fn load(ctx: &RoleCtx) -> Result<RoleOutput> {
    let plan = Plan::new(ctx)?;
    raise_nofile(plan.conns as u64 + 256)?;
    let sources = Sources::for_conns(plan.addr, plan.conns as u64)?;
    let workers = workers(ctx, &plan, &sources)?;
    let (total, latency) = drive(ctx, workers)?;
    output(ctx, &plan, &sources, total, &latency)
}

/// The load's counts, with notes on what shaped them: errors, extra
/// source addresses, no throttle, an outside target, a static-only mix.
fn output(
    ctx: &RoleCtx,
    plan: &Plan,
    sources: &Sources,
    total: ThreadOut,
    latency: &hdrhistogram::Histogram<u64>,
) -> Result<RoleOutput> {
    let p = &ctx.params;
    let mut out = RoleOutput::default()
        .count("ops", total.ops as f64)
        .count("errors", total.errors as f64)
        .count("bytes", total.bytes)
        .count("lat_ns", total.lat_ns)
        .count("conforming", total.conforming as f64)
        .count("conns", plan.conns as f64)
        .histogram("latency", latency);
    if total.errors > 0 {
        for n in total.notes {
            out = out.note(format!("load: {n}"));
        }
    }
    if sources.count > 1 {
        out = out.note(format!(
            "load: {} loopback source addresses (127.0.0.1–127.0.0.{}): {} ephemeral ports each",
            sources.count, sources.count, sources.ports
        ));
    }
    if plan.rate == 0 {
        out = out.note("unthrottled connections (rate=0); conformance judged at 400 kbit/s");
    }
    if let Some(t) = &plan.target {
        out = out.note(format!(
            "target: {} ({} directories), a server outside kscale: no server CPU measured",
            t.url, t.dirs
        ));
    }
    if plan.no_dynamic && p.get("mix")? == "specweb" {
        out = out.note(
            "static-only mix: the target has no dynamic paths (dynamic=none); SPECweb99's 70 % \
             static share alone",
        );
    } else if plan.mix != MixKind::Specweb {
        out = out.note(format!("static-only mix ({})", p.get("mix")?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_sources_spread_connections_beyond_one_address_ports() {
        let lo: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let one = Sources::for_conns(lo, 100).unwrap();
        assert_eq!((one.count, one.source(7)), (1, None));
        let ports = one.ports;
        let many = Sources::for_conns(lo, ports * 2).unwrap();
        assert!(many.count >= 3, "{}", many.count);
        let srcs: std::collections::BTreeSet<_> = (0..10).filter_map(|i| many.source(i)).collect();
        assert_eq!(srcs.len() as u64, many.count.min(10));
        assert!(srcs.iter().all(|ip| ip.is_loopback()));
        // Towards another host the limit is named, not worked around.
        let far: SocketAddr = "192.0.2.1:80".parse().unwrap();
        let e = Sources::for_conns(far, ports * 2)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("net.ipv4.ip_local_port_range"), "{e}");
    }

    #[test]
    fn connections_open_from_the_given_loopback_source() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let _c = open(addr, Some(Ipv4Addr::new(127, 0, 0, 3))).unwrap();
        let (_s, peer) = l.accept().unwrap();
        assert_eq!(peer.ip(), Ipv4Addr::new(127, 0, 0, 3));
    }
}
