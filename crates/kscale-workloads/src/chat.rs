//! `chat`: a VolanoMark-style chat server and its simulated users, the
//! first workload of seed 000 (docs/families/chat.md). VolanoMark is a
//! closed Java product; this is kscale's own code following its published
//! method: rooms of 20 users, about 100-byte messages, every message relayed
//! by the server to the other 19 users of its room, and a trial that ends
//! when every user has sent its messages and every one has reached every
//! other user of its room.
//!
//! The server role is the system under test, confined to the CPU
//! configuration, in one of two thread models (`mode`): `threads`, a reader
//! and a writer thread per connection like the Java servers of the seed, or
//! `epoll`, one event loop per measured CPU. The load role is the same in
//! both, so a difference between modes is the server's: two threads per
//! user (a sender and a receiver), blocking sockets.

use crate::roles::{
    Combined, Endpoint, Phase, RoleCtx, RoleOutput, Roles, Timing, LATENCY_P50, LATENCY_P99,
};
use crate::{ChartDef, Family, TrialOutput, WorkloadDef};
use anyhow::{bail, Context, Result};
use kscale_core::{hist, MetricDef, ParamDef, ParamKind, Params};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

const DELIVERED: MetricDef = MetricDef::higher("delivered", "msg/s");
const SENT: MetricDef = MetricDef::higher("sent", "msg/s");
/// CPU time per delivered message on each side (netperf's service demand).
const SD_SERVER: MetricDef = MetricDef::lower("sd_server", "µs/msg");
const SD_LOAD: MetricDef = MetricDef::lower("sd_load", "µs/msg");
/// Threads of server and load, counted in /proc/self/status when the window
/// begins, and their peak; "lower" only because fewer threads doing the same
/// work is the cheaper design.
const THREADS: MetricDef = MetricDef::lower("threads", "threads");
const THREADS_PEAK: MetricDef = MetricDef::lower("threads_peak", "threads");

/// How long a user may wait for its next message, or a sender for its
/// message to reach the whole room, before the trial is declared broken:
/// far above any delivery time even with thousands of threads on two CPUs.
const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// Every frame starts with this header; the rest is filler up to `size`.
const HEADER: usize = 24;
/// `seq` of the frame a user sends first to name its room and itself.
const JOIN: u32 = u32::MAX;
/// `seq` of the frame the server sends every member once its room is full.
const WELCOME: u32 = u32::MAX - 1;

const ROOMS: ParamDef = ParamDef {
    name: "rooms",
    help: "Chat rooms (VolanoMark's default 10). Each holds `users` users; with peers, rooms \
           are split evenly among them.",
    kind: ParamKind::Int { min: 1, max: 1000 },
    default: &["1", "5", "10", "20"],
    quick: &["2", "10"],
};
const USERS: ParamDef = ParamDef {
    name: "users",
    help: "Users per room (VolanoMark's 20); each message goes to the other users - 1.",
    kind: ParamKind::Int { min: 2, max: 1000 },
    default: &["20"],
    quick: &[],
};
const MESSAGES: ParamDef = ParamDef {
    name: "messages",
    help: "Messages each user sends (VolanoMark's 100).",
    kind: ParamKind::Int {
        min: 1,
        max: 1_000_000,
    },
    default: &["100"],
    quick: &[],
};
const SIZE: ParamDef = ParamDef {
    name: "size",
    help: "Bytes per message, a 24-byte header included (VolanoMark's are about 100).",
    kind: ParamKind::Size {
        min: HEADER as u64,
        max: 1 << 16,
    },
    default: &["100"],
    quick: &[],
};
const MODE: ParamDef = ParamDef {
    name: "mode",
    help: "Server thread model: threads (a reader and a writer thread per connection, like \
           the seed's Java servers) or epoll (one event loop per measured CPU).",
    kind: ParamKind::Choice(&["threads", "epoll"]),
    default: &["threads", "epoll"],
    quick: &[],
};
const STACK: ParamDef = ParamDef {
    name: "stack",
    help: "Stack size of every server and user thread: 2,000 threads at 8 MB each would \
           reserve 16 GB of address space for stacks that use a few KB.",
    kind: ParamKind::Size {
        min: 64 << 10,
        max: 1 << 30,
    },
    default: &["128k"],
    quick: &[],
};

static RELAY: Roles = Roles {
    server: Some(server),
    load,
    timing: Timing::Work,
    spread: Some("rooms"),
    combine,
};

pub static FAMILY: Family = Family {
    name: "chat",
    title: "VolanoMark-style chat",
    help: "A chat server confined to the CPU configuration relays every message of a user to \
           the other users of its room; simulated users on the other CPUs (or on `kscale \
           peer`s) send as fast as delivery allows (seeds 000 and 004).",
    workloads: &[WorkloadDef {
        family: "chat",
        name: "relay",
        title: "Chat message relay",
        help: "Messages delivered per second when `rooms` rooms of `users` users each send \
               `messages` messages of `size` bytes, a user sending its next message once its \
               last one reached every other user of the room; the trial ends when all are \
               delivered, and a lost or duplicated message fails it. Also sent messages/s, \
               delivery latency p50/p99, CPU µs per delivered message of server and load, \
               and the threads of both counted in /proc (at the start and at the peak).",
        params: &[ROOMS, USERS, MESSAGES, SIZE, MODE, STACK],
        metrics: &[
            DELIVERED,
            SENT,
            LATENCY_P50,
            LATENCY_P99,
            SD_SERVER,
            SD_LOAD,
            THREADS,
            THREADS_PEAK,
        ],
        charts: &[ChartDef::against("rooms").metrics(&["delivered", "p99", "threads"])],
        timeout: Duration::from_secs(120),
        roles: Some(&RELAY),
        ..WorkloadDef::BASE
    }],
};

// ---------------------------------------------------------------- protocol

/// A frame's header: little-endian `room`, `user`, `seq`, 4 reserved bytes,
/// and the sender's clock in ns (only the load reads it: sender and
/// receivers of a room live in one load process, so one clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    room: u32,
    user: u32,
    seq: u32,
    sent_ns: u64,
}

impl Header {
    fn write(&self, buf: &mut [u8]) {
        buf[0..4].copy_from_slice(&self.room.to_le_bytes());
        buf[4..8].copy_from_slice(&self.user.to_le_bytes());
        buf[8..12].copy_from_slice(&self.seq.to_le_bytes());
        buf[12..16].fill(0);
        buf[16..24].copy_from_slice(&self.sent_ns.to_le_bytes());
    }
    fn read(buf: &[u8]) -> Header {
        let u32_at = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let mut ns = [0u8; 8];
        ns.copy_from_slice(&buf[16..24]);
        Header {
            room: u32_at(0),
            user: u32_at(4),
            seq: u32_at(8),
            sent_ns: u64::from_le_bytes(ns),
        }
    }
    /// A whole frame of `size` bytes: this header and filler text.
    fn frame(&self, size: usize) -> Vec<u8> {
        let mut f = vec![b'.'; size.max(HEADER)];
        self.write(&mut f);
        f
    }
}

/// A room on the server: members join until it holds `users`; from then on
/// its member list is fixed and read without a lock.
struct Room<M> {
    id: u32,
    joining: Mutex<Vec<Arc<M>>>,
    full: OnceLock<Members<M>>,
}

/// A room's fixed member list, once full.
type Members<M> = Arc<[Arc<M>]>;
/// What a join gives back: the room, and its members if the join filled it.
type Joined<M> = (Arc<Room<M>>, Option<Members<M>>);

/// Every room of the server, by id. A user names its room in its first
/// frame; rooms are created on first use.
struct Rooms<M> {
    users: usize,
    map: Mutex<HashMap<u32, Arc<Room<M>>>>,
}

impl<M> Rooms<M> {
    fn new(users: usize) -> Self {
        Rooms {
            users,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Adds `m` to room `id`; returns the room, and its members when this
    /// join filled it (the caller welcomes them all).
    fn join(&self, id: u32, m: Arc<M>) -> Result<Joined<M>> {
        let room = {
            let mut map = self
                .map
                .lock()
                .map_err(|_| anyhow::anyhow!("rooms poisoned"))?;
            map.entry(id)
                .or_insert_with(|| {
                    Arc::new(Room {
                        id,
                        joining: Mutex::new(Vec::with_capacity(self.users)),
                        full: OnceLock::new(),
                    })
                })
                .clone()
        };
        let mut j = room
            .joining
            .lock()
            .map_err(|_| anyhow::anyhow!("room poisoned"))?;
        if j.len() >= self.users {
            bail!("room {id} already has its {} users", self.users);
        }
        j.push(m);
        if j.len() < self.users {
            return Ok((room.clone(), None));
        }
        let all: Members<M> = j.iter().cloned().collect();
        let _ = room.full.set(all.clone());
        drop(j);
        Ok((room, Some(all)))
    }
}

/// A user's check of what it receives: from every other user of its room,
/// each message exactly once and in order (TCP and the server keep a
/// sender's order), so a lost or duplicated message is caught where it
/// happens, with the counts.
#[derive(Debug)]
struct Tally {
    room: u32,
    me: u32,
    messages: u32,
    next: Vec<u32>,
    got: u64,
}

impl Tally {
    fn new(room: u32, me: u32, users: u32, messages: u32) -> Tally {
        Tally {
            room,
            me,
            messages,
            next: vec![0; users as usize],
            got: 0,
        }
    }
    fn expected(&self) -> u64 {
        u64::from(self.messages) * (self.next.len() as u64 - 1)
    }
    fn complete(&self) -> bool {
        self.got == self.expected()
    }
    fn accept(&mut self, h: &Header) -> Result<()> {
        let whose = format!("user {} of room {}", self.me, self.room);
        if h.room != self.room {
            bail!("{whose} got a message of room {}", h.room);
        }
        if h.user == self.me {
            bail!("{whose} got its own message {} back", h.seq);
        }
        let expected = self.expected();
        let got = self.got;
        let Some(next) = self.next.get_mut(h.user as usize) else {
            bail!("{whose} got a message from unknown user {}", h.user);
        };
        if h.seq != *next || h.seq >= self.messages {
            let what = if h.seq < *next { "duplicated" } else { "lost" };
            bail!(
                "{whose}: message {what}: from user {} came message {} where {} was due \
                 ({} of {} received)",
                h.user,
                h.seq,
                *next,
                got,
                expected
            );
        }
        *next += 1;
        self.got += 1;
        Ok(())
    }
}

// ------------------------------------------------------- threads and limits

/// Threads of this process as the kernel counts them (`Threads:` of
/// /proc/self/status), not computed: one small read, where listing
/// /proc/self/task grows with the thread count.
fn count_threads() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| threads_in_status(&s))
        .unwrap_or(0)
}

fn threads_in_status(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}

/// Samples this process's thread count every 100 ms until finished: the
/// peak. (The count when the window begins is taken by the role's main
/// thread, which sees `begin`.)
struct ThreadSampler {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<u64>>,
}

impl ThreadSampler {
    fn start() -> Result<ThreadSampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        // Unnamed: it keeps the role's name, as a profile names a process
        // after the last name one of its threads took.
        let handle = std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || {
                let mut peak = 0;
                while !s.load(Ordering::Relaxed) {
                    peak = peak.max(count_threads());
                    std::thread::sleep(Duration::from_millis(100));
                }
                peak.max(count_threads())
            })
            .context("cannot start the thread sampler")?;
        Ok(ThreadSampler {
            stop,
            handle: Some(handle),
        })
    }
    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().and_then(|h| h.join().ok()).unwrap_or(0)
    }
}

impl Drop for ThreadSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The threads of every process on the machine (/proc/loadavg's total).
fn system_threads() -> u64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(3)
                .and_then(|f| f.split('/').nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn read_u64(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Raises what this role needs — open files (`RLIMIT_NOFILE`, one per
/// connection) and the user's thread allowance (`RLIMIT_NPROC`) up to their
/// hard limits — and refuses, naming the limit, what the machine cannot
/// give: the hard limits, `kernel.threads-max` and `kernel.pid_max`.
fn provide(threads: u64, fds: u64) -> Result<()> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).context("getrlimit NOFILE")?;
    if fds > soft {
        if fds > hard {
            bail!(
                "chat needs {fds} open files but RLIMIT_NOFILE (ulimit -n) allows {hard}: \
                 raise it or run fewer rooms"
            );
        }
        setrlimit(Resource::RLIMIT_NOFILE, fds, hard).context("raising RLIMIT_NOFILE")?;
    }
    let total = system_threads() + threads;
    let (soft, hard) = getrlimit(Resource::RLIMIT_NPROC).context("getrlimit NPROC")?;
    let root = nix::unistd::geteuid().is_root();
    if !root && soft != libc::RLIM_INFINITY && total > soft {
        if hard != libc::RLIM_INFINITY && total > hard {
            bail!(
                "chat needs {threads} more threads ({total} on the machine) but RLIMIT_NPROC \
                 (ulimit -u) allows {hard}: raise it or run fewer rooms"
            );
        }
        setrlimit(Resource::RLIMIT_NPROC, hard, hard).context("raising RLIMIT_NPROC")?;
    }
    for (path, name) in [
        ("/proc/sys/kernel/threads-max", "kernel.threads-max"),
        ("/proc/sys/kernel/pid_max", "kernel.pid_max"),
    ] {
        if let Some(max) = read_u64(path) {
            if total > max {
                bail!(
                    "chat needs {threads} more threads ({total} on the machine) but {name} is \
                     {max}: raise it (sysctl) or run fewer rooms"
                );
            }
        }
    }
    Ok(())
}

/// Starts a thread with the `stack` param's stack size.
fn spawn(stack: usize, f: impl FnOnce() + Send + 'static) -> Result<()> {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(f)
        .map(|_| ())
        .context("cannot start a chat thread")
}

struct Common {
    users: usize,
    size: usize,
    stack: usize,
    errors: Arc<AtomicU64>,
}

fn common(p: &Params) -> Result<Common> {
    Ok(Common {
        users: p.int("users")? as usize,
        size: p.size("size")? as usize,
        stack: usize::try_from(p.size("stack")?).context("stack too large")?,
        errors: Arc::new(AtomicU64::new(0)),
    })
}

// ------------------------------------------------------------------ server

/// The server: listens, tells the parent where, serves in the `mode`'s
/// thread model until the parent says stop, and reports the messages it
/// relayed (for the cross-check), its errors and its threads.
fn server(ctx: &RoleCtx) -> Result<RoleOutput> {
    let p = &ctx.params;
    let c = common(p)?;
    let total_users = p.int("rooms")? * c.users as u64;
    let epoll = p.get("mode")? == "epoll";
    let loops = ctx.config_cpus.len().max(1);
    let threads = if epoll { loops as u64 } else { 2 * total_users };
    provide(threads + 8, total_users + 64)?;
    let listener = crate::net::listen(ctx, 0)?;
    let port = listener.local_addr()?.port();
    listener.set_nonblocking(true)?;
    ctx.ready(Endpoint::on_port(port, serde_json::Value::Null))?;
    let sampler = ThreadSampler::start()?;
    let at_begin = AtomicU64::new(0);
    let relayed = if epoll {
        epoll_server(ctx, &listener, &c, loops, &at_begin)?
    } else {
        threads_server(ctx, &listener, &c, &at_begin)?
    };
    let at_begin = at_begin.load(Ordering::Relaxed);
    // The sampler looks every 100 ms and can miss a short trial's full
    // count; the count at the window's start is a sample too.
    let peak = sampler.finish().max(at_begin);
    Ok(RoleOutput::default()
        .count("relayed", relayed as f64)
        .count("errors", c.errors.load(Ordering::Relaxed) as f64)
        .count("threads", at_begin as f64)
        .count("threads_peak", peak as f64))
}

/// Accepts until stop, handing each connection to `serve`; counts the
/// process's threads into `at_begin` once the window has begun.
fn accept_loop(
    ctx: &RoleCtx,
    listener: &std::net::TcpListener,
    at_begin: &AtomicU64,
    mut serve: impl FnMut(TcpStream) -> Result<()>,
) -> Result<()> {
    while ctx.phase() < Phase::Stop {
        if at_begin.load(Ordering::Relaxed) == 0 && ctx.phase() >= Phase::Measure {
            at_begin.store(count_threads(), Ordering::Relaxed);
        }
        match listener.accept() {
            Ok((s, _)) => {
                crate::net::tune(&s, 0, true)?;
                serve(s)?;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                crate::util::wait_readable_fd(
                    std::os::fd::AsFd::as_fd(listener),
                    Duration::from_millis(20),
                )?;
            }
            Err(e) => return Err(e).context("accept"),
        }
    }
    Ok(())
}

/// A member in `threads` mode: the queue its writer thread drains.
struct Member {
    user: u32,
    queue: Mutex<VecDeque<Arc<[u8]>>>,
    cv: Condvar,
    closed: AtomicBool,
}

impl Member {
    fn push(&self, f: Arc<[u8]>) {
        if let Ok(mut q) = self.queue.lock() {
            q.push_back(f);
        }
        self.cv.notify_one();
    }
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _g = self.queue.lock();
        self.cv.notify_one();
    }
    /// The next frame to write, or `None` once closed and drained.
    fn pop(&self) -> Option<Arc<[u8]>> {
        let mut q = self.queue.lock().ok()?;
        loop {
            if let Some(f) = q.pop_front() {
                return Some(f);
            }
            if self.closed.load(Ordering::SeqCst) {
                return None;
            }
            q = self.cv.wait(q).ok()?;
        }
    }
}

/// `threads` mode: per connection a reader thread (blocking reads, relays
/// each message to the other members' queues) and a writer thread (drains
/// its member's queue, one write per message), as VolanoChat on the seed's
/// Java runtimes.
fn threads_server(
    ctx: &RoleCtx,
    listener: &std::net::TcpListener,
    c: &Common,
    at_begin: &AtomicU64,
) -> Result<u64> {
    let rooms = Arc::new(Rooms::<Member>::new(c.users));
    let relayed = Arc::new(AtomicU64::new(0));
    let (size, stack) = (c.size, c.stack);
    accept_loop(ctx, listener, at_begin, |s| {
        s.set_nonblocking(false)?;
        let (rooms, relayed, errors) = (rooms.clone(), relayed.clone(), c.errors.clone());
        spawn(stack, move || {
            if let Err(e) = threads_reader(s, &rooms, &relayed, size, stack) {
                errors.fetch_add(1, Ordering::Relaxed);
                eprintln!("chat server: {e:#}");
            }
        })
    })?;
    Ok(relayed.load(Ordering::Relaxed))
}

fn threads_reader(
    mut s: TcpStream,
    rooms: &Rooms<Member>,
    relayed: &Arc<AtomicU64>,
    size: usize,
    stack: usize,
) -> Result<()> {
    let mut buf = vec![0u8; size];
    s.read_exact(&mut buf).context("reading a join")?;
    let h = Header::read(&buf);
    if h.seq != JOIN {
        bail!(
            "a connection began with message {} instead of a join",
            h.seq
        );
    }
    let me = Arc::new(Member {
        user: h.user,
        queue: Mutex::new(VecDeque::new()),
        cv: Condvar::new(),
        closed: AtomicBool::new(false),
    });
    let (room, full) = rooms.join(h.room, me.clone())?;
    let mut w = s.try_clone().context("cloning a connection")?;
    let (m, counter) = (me.clone(), relayed.clone());
    spawn(stack, move || {
        while let Some(f) = m.pop() {
            if f[8..12] != WELCOME.to_le_bytes() {
                // Counted before the write: the user may have it (and the
                // parent may ask for the count) before write returns here.
                counter.fetch_add(1, Ordering::Relaxed);
            }
            if w.write_all(&f).is_err() {
                break;
            }
        }
    })?;
    if let Some(all) = full {
        let welcome: Arc<[u8]> = Header {
            room: h.room,
            user: 0,
            seq: WELCOME,
            sent_ns: 0,
        }
        .frame(size)
        .into();
        for m in all.iter() {
            m.push(welcome.clone());
        }
    }
    let r = (|| -> Result<()> {
        loop {
            match s.read_exact(&mut buf) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e).context("reading a message"),
            }
            let m = Header::read(&buf);
            check_sender(&m, room.id, me.user)?;
            let members = room
                .full
                .get()
                .with_context(|| format!("a message in room {} before it was full", room.id))?;
            let f: Arc<[u8]> = Arc::from(&buf[..]);
            for o in members.iter().filter(|o| o.user != m.user) {
                o.push(f.clone());
            }
        }
    })();
    me.close();
    r
}

/// A message must come from the user the connection joined as.
fn check_sender(h: &Header, room: u32, user: u32) -> Result<()> {
    if h.room != room || h.user != user || h.seq >= WELCOME {
        bail!(
            "user {user} of room {room} sent a frame as user {} of room {} (seq {})",
            h.user,
            h.room,
            h.seq
        );
    }
    Ok(())
}

/// The token of the stop eventfd in every event loop's epoll set.
const STOP_TOKEN: u64 = u64::MAX;

/// A connection in `epoll` mode. Only its owner loop reads it; any loop may
/// write to it (a relay from another room member), so its output goes
/// through `out`: written at once when nothing is pending, otherwise queued
/// and flushed when the owner sees EPOLLOUT.
struct Conn {
    stream: TcpStream,
    token: u64,
    ep: RawFd,
    user: AtomicU32,
    room: OnceLock<Arc<Room<Conn>>>,
    inb: Mutex<Vec<u8>>,
    out: Mutex<Vec<u8>>,
}

fn epoll_ctl(ep: RawFd, op: i32, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event { events, u64: token };
    // SAFETY: ep and fd are open descriptors; ev lives for the call.
    if unsafe { libc::epoll_ctl(ep, op, fd, &mut ev) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Conn {
    fn arm(&self, out: bool) -> io::Result<()> {
        let ev = libc::EPOLLIN as u32 | if out { libc::EPOLLOUT as u32 } else { 0 };
        epoll_ctl(
            self.ep,
            libc::EPOLL_CTL_MOD,
            self.stream.as_raw_fd(),
            ev,
            self.token,
        )
    }

    /// Sends one frame: one write when nothing is queued, else queued.
    fn send(&self, f: &[u8]) -> io::Result<()> {
        let mut out = self
            .out
            .lock()
            .map_err(|_| io::Error::other("output poisoned"))?;
        if !out.is_empty() {
            out.extend_from_slice(f);
            return Ok(());
        }
        let n = match (&self.stream).write(f) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        if n < f.len() {
            out.extend_from_slice(&f[n..]);
            self.arm(true)?;
        }
        Ok(())
    }

    /// Writes what is queued; stops watching EPOLLOUT once it is all out.
    fn flush(&self) -> io::Result<()> {
        let mut out = self
            .out
            .lock()
            .map_err(|_| io::Error::other("output poisoned"))?;
        while !out.is_empty() {
            match (&self.stream).write(&out) {
                Ok(n) => {
                    out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        self.arm(false)
    }
}

struct Loop<'a> {
    rooms: &'a Rooms<Conn>,
    conns: &'a RwLock<HashMap<u64, Arc<Conn>>>,
    relayed: &'a AtomicU64,
    errors: &'a AtomicU64,
    size: usize,
}

impl Loop<'_> {
    fn run(&self, ep: RawFd) -> Result<()> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        loop {
            // SAFETY: events has room for 256 entries for the call.
            let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), 256, -1) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e).context("epoll_wait");
            }
            for ev in &events[..n as usize] {
                let (token, bits) = (ev.u64, ev.events);
                if token == STOP_TOKEN {
                    return Ok(());
                }
                let Some(c) = self.conns.read().ok().and_then(|m| m.get(&token).cloned()) else {
                    continue;
                };
                let mut open = true;
                if bits & libc::EPOLLOUT as u32 != 0 {
                    open = c.flush().is_ok();
                }
                if open && bits & (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
                    // A broken connection is closed; the loop goes on.
                    open = self.readable(&c).unwrap_or_else(|e| {
                        self.errors.fetch_add(1, Ordering::Relaxed);
                        eprintln!("chat server: {e:#}");
                        false
                    });
                }
                if !open {
                    let _ = epoll_ctl(ep, libc::EPOLL_CTL_DEL, c.stream.as_raw_fd(), 0, 0);
                    if let Ok(mut m) = self.conns.write() {
                        m.remove(&token);
                    }
                }
            }
        }
    }

    /// One read (the set is level-triggered), then every whole frame in
    /// the buffer. False once the user is gone.
    fn readable(&self, c: &Arc<Conn>) -> Result<bool> {
        let mut inb = c.inb.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        let mut chunk = [0u8; 16 << 10];
        let open = match (&c.stream).read(&mut chunk) {
            Ok(0) => false,
            Ok(n) => {
                inb.extend_from_slice(&chunk[..n]);
                true
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => true,
            Err(_) => false,
        };
        let mut off = 0;
        while inb.len() - off >= self.size {
            self.frame(c, &inb[off..off + self.size])?;
            off += self.size;
        }
        inb.drain(..off);
        Ok(open)
    }

    fn frame(&self, c: &Arc<Conn>, f: &[u8]) -> Result<()> {
        let h = Header::read(f);
        let Some(room) = c.room.get() else {
            if h.seq != JOIN {
                bail!(
                    "a connection began with message {} instead of a join",
                    h.seq
                );
            }
            c.user.store(h.user, Ordering::Relaxed);
            let (room, full) = self.rooms.join(h.room, c.clone())?;
            let _ = c.room.set(room);
            if let Some(all) = full {
                let w = Header {
                    room: h.room,
                    user: 0,
                    seq: WELCOME,
                    sent_ns: 0,
                }
                .frame(self.size);
                for m in all.iter() {
                    m.send(&w).context("welcoming a user")?;
                }
            }
            return Ok(());
        };
        check_sender(&h, room.id, c.user.load(Ordering::Relaxed))?;
        let members = room
            .full
            .get()
            .with_context(|| format!("a message in room {} before it was full", room.id))?;
        for o in members.iter().filter(|o| o.token != c.token) {
            self.relayed.fetch_add(1, Ordering::Relaxed);
            // A member that is gone is its owner loop's to close.
            if o.send(f).is_err() {
                self.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

fn epoll_create() -> Result<OwnedFd> {
    // SAFETY: plain flag argument; a non-negative result is our descriptor.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error()).context("epoll_create1");
    }
    // SAFETY: fd is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `epoll` mode: one event loop per CPU of the configuration, connections
/// dealt to them in turn; the accepting thread is the role's main thread.
fn epoll_server(
    ctx: &RoleCtx,
    listener: &std::net::TcpListener,
    c: &Common,
    loops: usize,
    at_begin: &AtomicU64,
) -> Result<u64> {
    let rooms = Rooms::<Conn>::new(c.users);
    let conns = RwLock::new(HashMap::new());
    let relayed = AtomicU64::new(0);
    let eps: Vec<OwnedFd> = (0..loops).map(|_| epoll_create()).collect::<Result<_>>()?;
    for ep in &eps {
        epoll_ctl(
            ep.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            ctx.stop_fd().as_raw_fd(),
            libc::EPOLLIN as u32,
            STOP_TOKEN,
        )
        .context("epoll_ctl")?;
    }
    let lp = Loop {
        rooms: &rooms,
        conns: &conns,
        relayed: &relayed,
        errors: &c.errors,
        size: c.size,
    };
    std::thread::scope(|scope| -> Result<()> {
        let mut handles = Vec::new();
        for ep in &eps {
            let (lp, fd) = (&lp, ep.as_raw_fd());
            let h = std::thread::Builder::new()
                .stack_size(c.stack)
                .spawn_scoped(scope, move || lp.run(fd))
                .context("cannot start an event loop")?;
            handles.push(h);
        }
        let mut next = 0u64;
        let accepted = accept_loop(ctx, listener, at_begin, |s| {
            s.set_nonblocking(true)?;
            let ep = eps[next as usize % loops].as_raw_fd();
            let fd = s.as_raw_fd();
            let conn = Arc::new(Conn {
                stream: s,
                token: next,
                ep,
                user: AtomicU32::new(0),
                room: OnceLock::new(),
                inb: Mutex::new(Vec::new()),
                out: Mutex::new(Vec::new()),
            });
            conns
                .write()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .insert(next, conn);
            epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, next)
                .context("epoll_ctl")?;
            next += 1;
            Ok(())
        });
        for h in handles {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    c.errors.fetch_add(1, Ordering::Relaxed);
                    eprintln!("chat server: {e:#}");
                }
                Err(_) => bail!("an event loop panicked"),
            }
        }
        accepted
    })?;
    Ok(relayed.load(Ordering::Relaxed))
}

// -------------------------------------------------------------------- load

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
fn load(ctx: &RoleCtx) -> Result<RoleOutput> {
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
            let mut s = crate::net::Dial {
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

/// Messages every user of every room must receive in one trial.
fn expected(p: &Params) -> Result<u64> {
    let (rooms, users, messages) = (p.int("rooms")?, p.int("users")?, p.int("messages")?);
    Ok(rooms * users * messages * (users - 1))
}

/// The trial's metrics, after the cross-check: every message reached every
/// other user of its room exactly once, by the users' count and by the
/// server's.
fn combine(p: &Params, c: &Combined) -> Result<TrialOutput> {
    let want = expected(p)?;
    let got = c.load_sum("delivered");
    if got != want as f64 {
        bail!("the users received {got} messages, {want} were due");
    }
    let server = |k: &str| {
        c.server
            .as_ref()
            .and_then(|s| s.counts.get(k).copied())
            .unwrap_or(0.0)
    };
    if c.server.is_some() && server("relayed") != want as f64 {
        bail!(
            "the server relayed {} messages, {want} were due",
            server("relayed")
        );
    }
    let rate = |k: &str| -> f64 {
        c.loads
            .iter()
            .filter_map(|l| {
                let t = l.counts.get("elapsed_s").copied().unwrap_or(0.0);
                (t > 0.0).then(|| l.counts.get(k).copied().unwrap_or(0.0) / t)
            })
            .sum()
    };
    let mut out = TrialOutput::new(want)
        .with(&DELIVERED, rate("delivered"))
        .with(&SENT, rate("sent"))
        .with(&SD_LOAD, c.load_cpu_s() / got * 1e6)
        .with(&THREADS, server("threads") + c.load_sum("threads"))
        .with(
            &THREADS_PEAK,
            server("threads_peak") + c.load_sum("threads_peak"),
        );
    if let Some(s) = c.server_cpu_s() {
        out = out.with(&SD_SERVER, s / got * 1e6);
    }
    if server("errors") > 0.0 {
        out = out.note(format!(
            "the server saw {} broken connection(s)",
            server("errors")
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(room: u32, user: u32, seq: u32) -> Header {
        Header {
            room,
            user,
            seq,
            sent_ns: 7,
        }
    }

    #[test]
    fn frames_round_trip() {
        let x = Header {
            room: 3,
            user: 19,
            seq: 99,
            sent_ns: 123_456_789_012,
        };
        let f = x.frame(100);
        assert_eq!(f.len(), 100);
        assert_eq!(Header::read(&f), x);
        assert!(f[HEADER..].iter().all(|b| *b == b'.'));
        assert_eq!(Header::read(&h(1, 2, JOIN).frame(24)).seq, JOIN);
    }

    #[test]
    fn a_room_fills_then_refuses() {
        let rooms = Rooms::<u32>::new(3);
        assert!(rooms.join(5, Arc::new(0)).unwrap().1.is_none());
        assert!(rooms.join(6, Arc::new(0)).unwrap().1.is_none());
        assert!(rooms.join(5, Arc::new(1)).unwrap().1.is_none());
        let (room, full) = rooms.join(5, Arc::new(2)).unwrap();
        let full = full.expect("the third join fills the room");
        assert_eq!(full.iter().map(|m| **m).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(room.full.get().map(|f| f.len()), Some(3));
        let e = rooms.join(5, Arc::new(3)).err().unwrap().to_string();
        assert!(e.contains("room 5 already has its 3 users"), "{e}");
    }

    #[test]
    fn a_tally_completes_at_messages_times_others() {
        let mut t = Tally::new(1, 0, 3, 2);
        assert_eq!(t.expected(), 4);
        for seq in 0..2 {
            for user in 1..3 {
                assert!(!t.complete());
                t.accept(&h(1, user, seq)).unwrap();
            }
        }
        assert!(t.complete());
    }

    #[test]
    fn a_tally_catches_duplicates_losses_and_strays() {
        let mut t = Tally::new(1, 0, 3, 5);
        t.accept(&h(1, 1, 0)).unwrap();
        let dup = t.accept(&h(1, 1, 0)).unwrap_err().to_string();
        assert!(
            dup.contains("duplicated") && dup.contains("(1 of 10 received)"),
            "{dup}"
        );
        let lost = t.accept(&h(1, 2, 1)).unwrap_err().to_string();
        assert!(
            lost.contains("lost") && lost.contains("message 1 where 0"),
            "{lost}"
        );
        assert!(t
            .accept(&h(1, 0, 0))
            .unwrap_err()
            .to_string()
            .contains("own"));
        assert!(t
            .accept(&h(2, 1, 1))
            .unwrap_err()
            .to_string()
            .contains("room 2"));
        assert!(t
            .accept(&h(1, 3, 0))
            .unwrap_err()
            .to_string()
            .contains("unknown"));
        // Past the last message is a duplicate of nothing: still refused.
        let mut t = Tally::new(1, 0, 2, 1);
        t.accept(&h(1, 1, 0)).unwrap();
        assert!(t.accept(&h(1, 1, 1)).is_err());
    }

    #[test]
    fn senders_must_be_who_they_joined_as() {
        assert!(check_sender(&h(1, 2, 0), 1, 2).is_ok());
        assert!(check_sender(&h(1, 3, 0), 1, 2).is_err());
        assert!(check_sender(&h(2, 2, 0), 1, 2).is_err());
        assert!(check_sender(&h(1, 2, JOIN), 1, 2).is_err());
    }

    #[test]
    fn threads_are_counted_in_proc() {
        // Other tests of this harness start and end threads meanwhile, so
        // the live count is only checked for sense; the parsing exactly.
        let status = "Name:\tkscale\nState:\tS (sleeping)\nThreads:\t806\nSigQ:\t0/1\n";
        assert_eq!(threads_in_status(status), Some(806));
        assert_eq!(threads_in_status("Name:\tx\n"), None);
        let now = count_threads();
        assert!(now >= 1);
        assert!(system_threads() >= 1);
    }

    #[test]
    fn limits_are_named_when_refused() {
        let e = provide(u64::MAX / 4, 10).unwrap_err().to_string();
        assert!(
            e.contains("RLIMIT_NPROC") || e.contains("threads-max") || e.contains("pid_max"),
            "{e}"
        );
        let e = provide(1, u64::MAX / 4).unwrap_err().to_string();
        assert!(e.contains("RLIMIT_NOFILE"), "{e}");
        provide(10, 100).unwrap();
    }

    #[test]
    fn combine_cross_checks_the_counts() {
        let p = Params(
            [("rooms", "2"), ("users", "3"), ("messages", "4")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        assert_eq!(expected(&p).unwrap(), 2 * 3 * 4 * 2);
        let load = |d: f64| {
            RoleOutput::default()
                .count("delivered", d)
                .count("sent", 24.0)
                .count("elapsed_s", 0.5)
                .count("threads", 14.0)
                .count("threads_peak", 15.0)
        };
        let server = |r: f64| {
            RoleOutput::default()
                .count("relayed", r)
                .count("threads", 16.0)
        };
        let ok = Combined {
            server: Some(server(48.0)),
            loads: vec![load(48.0)],
        };
        let out = combine(&p, &ok).unwrap();
        assert_eq!(out.values["delivered"], 96.0);
        assert_eq!(out.values["sent"], 48.0);
        assert_eq!(out.values["threads"], 30.0);
        let short = Combined {
            server: Some(server(48.0)),
            loads: vec![load(47.0)],
        };
        let e = combine(&p, &short).unwrap_err().to_string();
        assert!(
            e.contains("received 47") && e.contains("48 were due"),
            "{e}"
        );
        let dup = Combined {
            server: Some(server(49.0)),
            loads: vec![load(48.0)],
        };
        assert!(combine(&p, &dup)
            .unwrap_err()
            .to_string()
            .contains("relayed 49"));
    }
}
