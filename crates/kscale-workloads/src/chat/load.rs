//! chat's load role: simulated users, two threads each (a sender and a
//! receiver) on blocking sockets, every message checked on arrival.

use super::limits::provide;
use super::proto::{Header, Tally, JOIN, WELCOME};
use super::{common, IO_TIMEOUT};
use crate::roles::{Endpoint, Phase, RoleCtx, RoleOutput};
use anyhow::{bail, Context, Result};
use kscale_core::hist;
use kscale_sys::threads::{count_threads, ThreadSampler};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::thread::ScopedJoinHandle;
use std::time::{Duration, Instant};

/// A room as its simulated users share it: for each user, how many members
/// its last message has yet to reach, and its sender thread to wake when
/// that falls to zero.
struct LoadRoom {
    id: u32,
    pending: Vec<AtomicU32>,
    senders: Vec<OnceLock<std::thread::Thread>>,
}

/// What the load's threads share.
struct Shared {
    base: Instant,
    users: u32,
    messages: u32,
    size: usize,
    /// Opened when the window begins.
    gate: (Mutex<bool>, Condvar),
    /// Users welcomed by the server (their rooms are full).
    welcomed: (Mutex<u64>, Condvar),
    abort: AtomicBool,
    streams: Vec<TcpStream>,
}

impl Shared {
    /// Stops every thread: the flag for senders, shut sockets for receivers.
    fn fail(&self) {
        self.abort.store(true, Ordering::SeqCst);
        for s in &self.streams {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        let _g = self.gate.0.lock();
        self.gate.1.notify_all();
    }
    fn open_gate(&self) {
        if let Ok(mut g) = self.gate.0.lock() {
            *g = true;
        }
        self.gate.1.notify_all();
    }
    fn wait_gate(&self) {
        let Ok(mut g) = self.gate.0.lock() else {
            return;
        };
        while !*g && !self.abort.load(Ordering::SeqCst) {
            g = match self.gate.1.wait(g) {
                Ok(g) => g,
                Err(_) => return,
            };
        }
    }
    fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }
}

struct Received {
    got: u64,
    latency: hdrhistogram::Histogram<u64>,
    last: Instant,
}

/// A user's receiver thread: the welcome, then every message of the other
/// users, each checked ([`Tally`]), its delivery latency recorded, and its
/// sender woken when it was the last member the message had to reach.
fn receive(sh: &Shared, room: &LoadRoom, me: u32, mut s: TcpStream) -> Result<Received> {
    let mut buf = vec![0u8; sh.size];
    s.read_exact(&mut buf)
        .with_context(|| format!("user {me} of room {} got no welcome", room.id))?;
    if Header::read(&buf).seq != WELCOME {
        bail!(
            "user {me} of room {}: a message before the welcome",
            room.id
        );
    }
    if let Ok(mut n) = sh.welcomed.0.lock() {
        *n += 1;
    }
    sh.welcomed.1.notify_all();
    let mut tally = Tally::new(room.id, me, sh.users, sh.messages);
    let mut latency = hist::new();
    while !tally.complete() {
        if let Err(e) = s.read_exact(&mut buf) {
            if sh.abort.load(Ordering::SeqCst) {
                bail!("stopped");
            }
            bail!(
                "user {me} of room {} received {} of {} messages: {e}",
                room.id,
                tally.got,
                tally.expected()
            );
        }
        let h = Header::read(&buf);
        tally.accept(&h)?;
        hist::record(&mut latency, sh.now_ns().saturating_sub(h.sent_ns));
        let from = h.user as usize;
        if room.pending[from].fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Some(t) = room.senders[from].get() {
                t.unpark();
            }
        }
    }
    Ok(Received {
        got: tally.got,
        latency,
        last: Instant::now(),
    })
}

/// A user's sender thread: from the start of the window, a message, then
/// wait until it has reached every other user of the room, `messages` times.
fn send(sh: &Shared, room: &LoadRoom, me: u32, mut s: TcpStream) -> Result<u64> {
    let _ = room.senders[me as usize].set(std::thread::current());
    sh.wait_gate();
    let mut f = vec![b'.'; sh.size];
    let pending = &room.pending[me as usize];
    for seq in 0..sh.messages {
        if sh.abort.load(Ordering::SeqCst) {
            bail!("stopped");
        }
        pending.store(sh.users - 1, Ordering::Release);
        Header {
            room: room.id,
            user: me,
            seq,
            sent_ns: sh.now_ns(),
        }
        .write(&mut f);
        s.write_all(&f)
            .with_context(|| format!("user {me} of room {} sending message {seq}", room.id))?;
        let limit = Instant::now() + IO_TIMEOUT;
        while pending.load(Ordering::Acquire) > 0 {
            if sh.abort.load(Ordering::SeqCst) {
                bail!("stopped");
            }
            if Instant::now() >= limit {
                bail!(
                    "message {seq} of user {me} in room {} reached {} of {} users in {}s",
                    room.id,
                    sh.users - 1 - pending.load(Ordering::Acquire),
                    sh.users - 1,
                    IO_TIMEOUT.as_secs()
                );
            }
            std::thread::park_timeout(Duration::from_millis(100));
        }
    }
    Ok(u64::from(sh.messages))
}

/// The load: this share's rooms, every user connected and joined, two
/// threads per user; ready once every room is full; from `begin`, all send
/// and it returns when every message has reached every other user.
pub(super) fn load(ctx: &RoleCtx) -> Result<RoleOutput> {
    let p = &ctx.params;
    let c = common(p)?;
    let users = u32::try_from(c.users).context("users")?;
    let messages = u32::try_from(p.int("messages")?).context("messages")?;
    let nrooms = ctx.share_of(p.int("rooms")?);
    let total = nrooms * u64::from(users);
    provide(2 * total + 8, total + 64)?;
    let ep = ctx
        .endpoint
        .as_ref()
        .context("chat's load needs the server's endpoint")?;
    let addr: SocketAddr = ep
        .addr()
        .parse()
        .with_context(|| format!("bad server address {}", ep.addr()))?;
    let rooms = share_rooms(ctx, nrooms, users);
    let streams = join_rooms(addr, &rooms, users, c.size)?;
    let sh = Shared {
        base: Instant::now(),
        users,
        messages,
        size: c.size,
        gate: (Mutex::new(false), Condvar::new()),
        welcomed: (Mutex::new(0), Condvar::new()),
        abort: AtomicBool::new(false),
        streams: streams
            .iter()
            .map(|s| s.try_clone())
            .collect::<io::Result<_>>()?,
    };
    let sampler = ThreadSampler::start()?;
    let o = run_users(ctx, &sh, &rooms, streams, c.stack)?;
    // As in the server: the count at the window's start is a sample too.
    let peak = sampler.finish().max(o.at_begin);
    if let Some(e) = o.first_error {
        bail!("{e}");
    }
    let elapsed = o.last.saturating_duration_since(o.start).as_secs_f64();
    Ok(RoleOutput::default()
        .count("delivered", o.got as f64)
        .count("sent", o.sent as f64)
        .count("elapsed_s", elapsed)
        .count("threads", o.at_begin as f64)
        .count("threads_peak", peak as f64)
        .histogram("latency", &o.latency))
}

/// This share's rooms, with ids unique over every peer's share.
fn share_rooms(ctx: &RoleCtx, nrooms: u64, users: u32) -> Vec<LoadRoom> {
    (0..nrooms)
        .map(|i| LoadRoom {
            id: (ctx.share.index as u64 + i * ctx.share.count.max(1) as u64) as u32,
            pending: (0..users).map(|_| AtomicU32::new(0)).collect(),
            senders: (0..users).map(|_| OnceLock::new()).collect(),
        })
        .collect()
}

/// Connects every user of every room and sends its join, all before any
/// thread starts: a stream per user, room by room.
fn join_rooms(
    addr: SocketAddr,
    rooms: &[LoadRoom],
    users: u32,
    size: usize,
) -> Result<Vec<TcpStream>> {
    let mut streams = Vec::with_capacity(rooms.len() * users as usize);
    for r in rooms {
        for u in 0..users {
            let mut s = crate::shared::sock::Dial {
                sockbuf: 0,
                nodelay: true,
                timeout: Some(IO_TIMEOUT),
            }
            .connect(addr)
            .with_context(|| format!("connect to {addr}"))?;
            let join = Header {
                room: r.id,
                user: u,
                seq: JOIN,
                sent_ns: 0,
            };
            s.write_all(&join.frame(size)).context("joining")?;
            streams.push(s);
        }
    }
    Ok(streams)
}

/// What the users' threads brought back, and when the window ran.
struct Outcome {
    got: u64,
    sent: u64,
    latency: hdrhistogram::Histogram<u64>,
    /// The first fault of any thread but the "stopped" of those that the
    /// fault then stopped.
    first_error: Option<String>,
    /// When the gate opened, and when the last receiver had every message.
    start: Instant,
    last: Instant,
    /// The process's threads at the window's start.
    at_begin: u64,
}

/// The threads of the simulated users, joined once the window is over.
struct UserThreads<'scope> {
    receivers: Vec<ScopedJoinHandle<'scope, Result<Received>>>,
    senders: Vec<ScopedJoinHandle<'scope, Result<u64>>>,
}

/// Starts two threads per user, opens the gate when the window begins and
/// joins them all. A fault while starting stops every thread already
/// started, and is reported after they are joined.
fn run_users(
    ctx: &RoleCtx,
    sh: &Shared,
    rooms: &[LoadRoom],
    streams: Vec<TcpStream>,
    stack: usize,
) -> Result<Outcome> {
    let start = Instant::now();
    let mut o = Outcome {
        got: 0,
        sent: 0,
        latency: hist::new(),
        first_error: None,
        start,
        last: start,
        at_begin: 0,
    };
    let total = rooms.len() as u64 * u64::from(sh.users);
    std::thread::scope(|scope| -> Result<()> {
        let mut threads = UserThreads {
            receivers: Vec::with_capacity(total as usize),
            senders: Vec::with_capacity(total as usize),
        };
        let started = spawn_users(scope, sh, rooms, streams, stack, &mut threads)
            .and_then(|()| await_window(ctx, sh, total));
        match started {
            Ok(n) => o.at_begin = n,
            Err(e) => {
                sh.fail();
                o.first_error = Some(format!("{e:#}"));
            }
        }
        o.start = Instant::now();
        sh.open_gate();
        join_users(threads, &mut o)
    })?;
    Ok(o)
}

/// A receiver and a sender thread for each user, room by room, each taking
/// its user's stream.
fn spawn_users<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    sh: &'env Shared,
    rooms: &'env [LoadRoom],
    streams: Vec<TcpStream>,
    stack: usize,
    threads: &mut UserThreads<'scope>,
) -> Result<()> {
    let mut streams = streams.into_iter();
    for r in rooms {
        for u in 0..sh.users {
            let s = streams.next().context("a stream per user")?;
            let w = s.try_clone()?;
            let b = || std::thread::Builder::new().stack_size(stack);
            threads.receivers.push(
                b().spawn_scoped(scope, move || {
                    receive(sh, r, u, s).inspect_err(|_| sh.fail())
                })
                .context("cannot start a user thread")?,
            );
            threads.senders.push(
                b().spawn_scoped(scope, move || send(sh, r, u, w).inspect_err(|_| sh.fail()))
                    .context("cannot start a user thread")?,
            );
        }
    }
    Ok(())
}

/// Says the load is ready once the server has welcomed all `total` users
/// (every room is full), then waits for the window; the process's threads
/// at its start.
fn await_window(ctx: &RoleCtx, sh: &Shared, total: u64) -> Result<u64> {
    let limit = Instant::now() + IO_TIMEOUT;
    let mut n = sh
        .welcomed
        .0
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?;
    while *n < total {
        if sh.abort.load(Ordering::SeqCst) || Instant::now() >= limit {
            bail!("{} of {total} users were welcomed by the server", *n);
        }
        n = sh
            .welcomed
            .1
            .wait_timeout(n, Duration::from_millis(100))
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .0;
    }
    drop(n);
    ctx.ready(Endpoint::default())?;
    if !ctx.wait_for(Phase::Measure, Duration::from_secs(3600)) {
        bail!("the window never began");
    }
    Ok(count_threads())
}

/// Joins every receiver, then every sender, summing what they counted and
/// keeping the first fault that was not merely a stop.
fn join_users(threads: UserThreads<'_>, o: &mut Outcome) -> Result<()> {
    let mut note = |e: anyhow::Error| {
        let m = format!("{e:#}");
        if m != "stopped" && o.first_error.is_none() {
            o.first_error = Some(m);
        }
    };
    for t in threads.receivers {
        match t.join() {
            Ok(Ok(r)) => {
                o.got += r.got;
                o.last = o.last.max(r.last);
                hist::merge(&mut o.latency, &r.latency)?;
            }
            Ok(Err(e)) => note(e),
            Err(_) => note(anyhow::anyhow!("a receiver thread panicked")),
        }
    }
    for t in threads.senders {
        match t.join() {
            Ok(Ok(n)) => o.sent += n,
            Ok(Err(e)) => note(e),
            Err(_) => note(anyhow::anyhow!("a sender thread panicked")),
        }
    }
    Ok(())
}
