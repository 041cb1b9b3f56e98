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
    // Rooms of this share have ids unique over every peer's share.
    let rooms: Vec<LoadRoom> = (0..nrooms)
        .map(|i| LoadRoom {
            id: (ctx.share.index as u64 + i * ctx.share.count.max(1) as u64) as u32,
            pending: (0..users).map(|_| AtomicU32::new(0)).collect(),
            senders: (0..users).map(|_| OnceLock::new()).collect(),
        })
        .collect();
    let mut streams = Vec::with_capacity(total as usize);
    for r in &rooms {
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
            s.write_all(&join.frame(c.size)).context("joining")?;
            streams.push(s);
        }
    }
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
    let mut at_begin = 0;
    let mut latency = hist::new();
    let (mut got, mut sent, mut first_error) = (0u64, 0u64, None::<String>);
    let mut start = Instant::now();
    let mut last = start;
    std::thread::scope(|scope| -> Result<()> {
        let (sh, rooms) = (&sh, &rooms);
        let mut receivers = Vec::with_capacity(total as usize);
        let mut senders = Vec::with_capacity(total as usize);
        let mut streams = streams.into_iter();
        let started = (|| -> Result<()> {
            for r in rooms {
                for u in 0..users {
                    let s = streams.next().context("a stream per user")?;
                    let w = s.try_clone()?;
                    let b = || std::thread::Builder::new().stack_size(c.stack);
                    receivers.push(
                        b().spawn_scoped(scope, move || {
                            receive(sh, r, u, s).inspect_err(|_| sh.fail())
                        })
                        .context("cannot start a user thread")?,
                    );
                    senders.push(
                        b().spawn_scoped(scope, move || {
                            send(sh, r, u, w).inspect_err(|_| sh.fail())
                        })
                        .context("cannot start a user thread")?,
                    );
                }
            }
            // Ready once every room is full on the server.
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
            at_begin = count_threads();
            Ok(())
        })();
        if let Err(e) = started {
            sh.fail();
            first_error = Some(format!("{e:#}"));
        }
        start = Instant::now();
        sh.open_gate();
        let mut note = |e: anyhow::Error| {
            let m = format!("{e:#}");
            if m != "stopped" && first_error.is_none() {
                first_error = Some(m);
            }
        };
        for t in receivers {
            match t.join() {
                Ok(Ok(r)) => {
                    got += r.got;
                    last = last.max(r.last);
                    hist::merge(&mut latency, &r.latency)?;
                }
                Ok(Err(e)) => note(e),
                Err(_) => note(anyhow::anyhow!("a receiver thread panicked")),
            }
        }
        for t in senders {
            match t.join() {
                Ok(Ok(n)) => sent += n,
                Ok(Err(e)) => note(e),
                Err(_) => note(anyhow::anyhow!("a sender thread panicked")),
            }
        }
        Ok(())
    })?;
    // As in the server: the count at the window's start is a sample too.
    let peak = sampler.finish().max(at_begin);
    if let Some(e) = first_error {
        bail!("{e}");
    }
    let elapsed = last.saturating_duration_since(start).as_secs_f64();
    Ok(RoleOutput::default()
        .count("delivered", got as f64)
        .count("sent", sent as f64)
        .count("elapsed_s", elapsed)
        .count("threads", at_begin as f64)
        .count("threads_peak", peak as f64)
        .histogram("latency", &latency))
}
