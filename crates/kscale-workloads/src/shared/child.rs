//! Forked helper processes: started so that they die with the worker, and
//! killed and reaped on every path out of a trial.

use anyhow::{Context, Result};
use nix::unistd::{fork, ForkResult, Pid};

/// Forks a child that runs `f` and exits with its status, without returning
/// into the caller's code. The child dies with the worker (PDEATHSIG) so a
/// killed worker never leaves a server behind.
///
/// Only call from a single-threaded process (workers are).
pub fn fork_child(f: impl FnOnce() -> i32) -> Result<Pid> {
    // SAFETY: workers are single-threaded when they fork helpers, so the child
    // may run arbitrary code; it leaves with _exit and never unwinds.
    match unsafe { fork() }.context("fork")? {
        ForkResult::Parent { child } => Ok(child),
        ForkResult::Child => {
            kscale_sys::process::die_with_parent();
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(101);
            // SAFETY: _exit skips atexit handlers and destructors shared with the parent.
            unsafe { libc::_exit(code) }
        }
    }
}

/// Kills and reaps a child started by [`fork_child`].
pub fn reap(child: Pid) {
    let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
    let _ = nix::sys::wait::waitpid(child, None);
}

/// Guard that kills and reaps a forked child when dropped, so early returns
/// with `?` cannot leak a server process.
pub struct ChildGuard(pub Pid);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        reap(self.0);
    }
}
