//! Whole-buffer reads and writes on raw descriptors, and waiting for them
//! to become readable.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

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
    wait_readable(fd.as_raw_fd(), timeout)
}

/// [`wait_readable_fd`] for a raw descriptor the caller keeps open.
pub fn wait_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    let mut p = [libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }];
    poll_many(&mut p, timeout)
}

/// poll(2) over several fds; false on timeout, EINTR retries.
pub fn poll_many(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<bool> {
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    loop {
        // SAFETY: `fds` is a valid, exclusively borrowed array of pollfd.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if r >= 0 {
            return Ok(r > 0);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The current `errno` as an error, with what failed.
pub(crate) fn os_err(what: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(io::Error::last_os_error()).context(what.into())
}
