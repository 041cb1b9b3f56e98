//! epoll(7), wrapped once for every event loop of kscale: web's load
//! generator and own server, chat's epoll server.

use anyhow::{Context, Result};
use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// An epoll set, closed when dropped.
pub(crate) struct Epoll(std::os::fd::OwnedFd);

impl Epoll {
    pub(crate) fn new() -> Result<Epoll> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain flags; a non-negative result is a new descriptor we own.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error()).context("epoll_create1");
        }
        // SAFETY: fd is fresh and owned by nobody else.
        Ok(Epoll(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }))
    }
    pub(crate) fn ctl(&self, op: i32, fd: i32, events: u32, key: usize) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events,
            u64: key as u64,
        };
        // SAFETY: ev lives for the call; fd is a socket the caller owns.
        let r = unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut ev) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
    /// Waits up to `timeout` with nanosecond precision (epoll_pwait2,
    /// Linux 5.11): epoll_wait's milliseconds would either spin through the
    /// last millisecond before every throttled request or send it late.
    /// Older kernels get epoll_wait with the timeout rounded up.
    pub(crate) fn wait(
        &self,
        evs: &mut [libc::epoll_event],
        timeout: Duration,
    ) -> io::Result<usize> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: evs is a valid writable array of its length, ts a live
        // timespec; no signal mask is passed.
        let n = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                self.0.as_raw_fd(),
                evs.as_mut_ptr(),
                evs.len() as libc::c_int,
                &ts as *const libc::timespec,
                std::ptr::null::<libc::sigset_t>(),
                0usize,
            )
        };
        let n = if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            let ms = timeout.as_nanos().div_ceil(1_000_000);
            let ms = i32::try_from(ms).unwrap_or(i32::MAX);
            // SAFETY: as above.
            let r = unsafe {
                libc::epoll_wait(self.0.as_raw_fd(), evs.as_mut_ptr(), evs.len() as i32, ms)
            };
            r as i64
        } else {
            n as i64
        };
        ready(n)
    }

    /// Waits for events without a timeout (epoll_wait with -1), for a loop
    /// that a descriptor in its set wakes to stop. An interrupted wait is 0
    /// events.
    pub(crate) fn wait_blocking(&self, evs: &mut [libc::epoll_event]) -> io::Result<usize> {
        // SAFETY: evs is a valid writable array of its length.
        let n =
            unsafe { libc::epoll_wait(self.0.as_raw_fd(), evs.as_mut_ptr(), evs.len() as i32, -1) };
        ready(n as i64)
    }
}

/// An epoll wait's return as a count of ready events: an interrupted wait
/// is none, so callers re-check their stop condition and wait again.
fn ready(n: i64) -> io::Result<usize> {
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(n as usize)
}
