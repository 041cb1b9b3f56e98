//! chat's server role in its `epoll` design: one event loop per measured
//! CPU, non-blocking connections, output queued when a socket is full.

use super::proto::{check_sender, Header, JOIN, WELCOME};
use super::rooms::{Room, Rooms};
use super::server::accept_loop;
use super::Common;
use crate::roles::RoleCtx;
use crate::shared::epoll::Epoll;
use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// The token of the stop eventfd in every event loop's epoll set.
const STOP_TOKEN: u64 = u64::MAX;

/// A connection in `epoll` mode. Only its owner loop reads it; any loop may
/// write to it (a relay from another room member), so its output goes
/// through `out`: written at once when nothing is pending, otherwise queued
/// and flushed when the owner sees EPOLLOUT.
struct Conn {
    stream: TcpStream,
    token: u64,
    ep: Arc<Epoll>,
    user: AtomicU32,
    room: OnceLock<Arc<Room<Conn>>>,
    inb: Mutex<Vec<u8>>,
    out: Mutex<Vec<u8>>,
}

impl Conn {
    fn arm(&self, out: bool) -> io::Result<()> {
        let ev = libc::EPOLLIN as u32 | if out { libc::EPOLLOUT as u32 } else { 0 };
        self.ep.ctl(
            libc::EPOLL_CTL_MOD,
            self.stream.as_raw_fd(),
            ev,
            self.token as usize,
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
    fn run(&self, ep: &Epoll) -> Result<()> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        loop {
            // An interrupted wait is no events: the loop waits again.
            let n = ep.wait_blocking(&mut events).context("epoll_wait")?;
            for ev in &events[..n] {
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
                    let _ = ep.ctl(libc::EPOLL_CTL_DEL, c.stream.as_raw_fd(), 0, 0);
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

/// `epoll` mode: one event loop per CPU of the configuration, connections
/// dealt to them in turn; the accepting thread is the role's main thread.
pub(super) fn epoll_server(
    ctx: &RoleCtx,
    listener: &std::net::TcpListener,
    c: &Common,
    loops: usize,
    at_begin: &AtomicU64,
) -> Result<u64> {
    let rooms = Rooms::<Conn>::new(c.users);
    let conns = RwLock::new(HashMap::new());
    let relayed = AtomicU64::new(0);
    let eps: Vec<Arc<Epoll>> = (0..loops)
        .map(|_| Epoll::new().map(Arc::new))
        .collect::<Result<_>>()?;
    for ep in &eps {
        ep.ctl(
            libc::EPOLL_CTL_ADD,
            ctx.stop_fd().as_raw_fd(),
            libc::EPOLLIN as u32,
            STOP_TOKEN as usize,
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
            let (lp, ep) = (&lp, &**ep);
            let h = std::thread::Builder::new()
                .stack_size(c.stack)
                .spawn_scoped(scope, move || lp.run(ep))
                .context("cannot start an event loop")?;
            handles.push(h);
        }
        let mut next = 0u64;
        let accepted = accept_loop(ctx, listener, at_begin, |s| {
            s.set_nonblocking(true)?;
            let ep = eps[next as usize % loops].clone();
            let fd = s.as_raw_fd();
            let conn = Arc::new(Conn {
                stream: s,
                token: next,
                ep: ep.clone(),
                user: AtomicU32::new(0),
                room: OnceLock::new(),
                inb: Mutex::new(Vec::new()),
                out: Mutex::new(Vec::new()),
            });
            conns
                .write()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .insert(next, conn);
            ep.ctl(libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, next as usize)
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
