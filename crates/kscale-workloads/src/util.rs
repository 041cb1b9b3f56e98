//! Small helpers shared by workload families.

use anyhow::{Context, Result};
use nix::unistd::{fork, ForkResult, Pid};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

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

/// One write(2) of the whole buffer, as the ping-pong workloads send their
/// token; a short write is an error. Inlined: it sits in measured loops.
#[inline]
pub fn write_exact(fd: RawFd, buf: &[u8]) -> io::Result<()> {
    // SAFETY: buf is a valid readable buffer for the duration of the call.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    if n == buf.len() as isize {
        Ok(())
    } else if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Err(io::Error::new(io::ErrorKind::WriteZero, "short write"))
    }
}

/// One read(2) that must fill the buffer; end of file (the peer went away)
/// or a short read is `UnexpectedEof`. Inlined: it sits in measured loops.
#[inline]
pub fn read_exact(fd: RawFd, buf: &mut [u8]) -> io::Result<()> {
    // SAFETY: buf is a valid writable buffer for the duration of the call.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n == buf.len() as isize {
        Ok(())
    } else if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "peer closed its end",
        ))
    }
}

/// Blocks until `fd` is readable or `timeout` passes (false); EINTR retries.
pub fn wait_readable_fd(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    loop {
        // SAFETY: one valid pollfd that lives for the duration of the call.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        if r >= 0 {
            return Ok(r > 0);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
