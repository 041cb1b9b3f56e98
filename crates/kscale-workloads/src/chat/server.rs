//! chat's server role in its `threads` design, and what both designs
//! share: the role's entry point and the accept loop.

use super::epoll_server::epoll_server;
use super::limits::{provide, spawn};
use super::proto::{check_sender, Header, JOIN, WELCOME};
use super::rooms::Rooms;
use super::{common, Common};
use crate::roles::{Endpoint, Phase, RoleCtx, RoleOutput};
use anyhow::{bail, Context, Result};
use kscale_sys::threads::{count_threads, ThreadSampler};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The server: listens, tells the parent where, serves in the `mode`'s
/// thread model until the parent says stop, and reports the messages it
/// relayed (for the cross-check), its errors and its threads.
pub(super) fn server(ctx: &RoleCtx) -> Result<RoleOutput> {
    let p = &ctx.params;
    let c = common(p)?;
    let total_users = p.int("rooms")? * c.users as u64;
    let epoll = p.get("mode")? == "epoll";
    let loops = ctx.config_cpus.len().max(1);
    let threads = if epoll { loops as u64 } else { 2 * total_users };
    provide(threads + 8, total_users + 64)?;
    let listener = crate::shared::sock::listen(ctx, 0)?;
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
pub(super) fn accept_loop(
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
                crate::shared::sock::tune(&s, 0, true)?;
                serve(s)?;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                crate::shared::fd::wait_readable_fd(
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
