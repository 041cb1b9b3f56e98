//! Ctrl-C and SIGTERM handling. The signals are blocked in every thread and
//! received by one dedicated thread, which kills every live worker's process
//! group at once; the main thread then sees its worker die, notices the flag,
//! and unwinds normally so every guard (temp dir, run status) runs.

use nix::sys::signal::{SigSet, Signal};
use std::collections::HashSet;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};

static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

fn groups() -> &'static Mutex<HashSet<i32>> {
    static G: OnceLock<Mutex<HashSet<i32>>> = OnceLock::new();
    G.get_or_init(|| Mutex::new(HashSet::new()))
}

/// Must be called before any other thread is started, so all inherit the mask.
/// A second call does nothing: a command may reach it along several paths
/// (`check --kernel` boots once a run).
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(install_now);
}

fn install_now() {
    let mut set = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(s);
    }
    if set.thread_block().is_err() {
        return;
    }
    std::thread::spawn(move || loop {
        let Ok(sig) = set.wait() else { return };
        INTERRUPTED.store(sig as i32, Ordering::SeqCst);
        kill_all();
    });
}

/// Sleeps until `until`, in steps of at most 50 ms so that Ctrl-C cuts
/// the wait short: `Err` with the signal's number.
pub fn sleep_until(until: std::time::Instant) -> Result<(), i32> {
    loop {
        if let Some(sig) = interrupted() {
            return Err(sig);
        }
        let now = std::time::Instant::now();
        if now >= until {
            return Ok(());
        }
        std::thread::sleep((until - now).min(std::time::Duration::from_millis(50)));
    }
}

pub fn interrupted() -> Option<i32> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

fn kill_all() {
    if let Ok(g) = groups().lock() {
        for &pgid in g.iter() {
            kscale_sys::process::kill_group(pgid);
        }
    }
}

/// Tracks a worker's process group for the life of the guard.
pub struct Registered(i32);

impl Registered {
    pub fn new(pgid: i32) -> Self {
        if let Ok(mut g) = groups().lock() {
            g.insert(pgid);
        }
        // A signal that arrived between the caller's check and the insert
        // would otherwise miss this group.
        if interrupted().is_some() {
            kscale_sys::process::kill_group(pgid);
        }
        Registered(pgid)
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        // Reap stragglers (servers a worker forked) before forgetting the group.
        kscale_sys::process::kill_group(self.0);
        if let Ok(mut g) = groups().lock() {
            g.remove(&self.0);
        }
    }
}
