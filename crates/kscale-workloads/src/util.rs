//! Small helpers shared by workload families.

use anyhow::{ensure, Context, Result};
use nix::unistd::{fork, ForkResult, Pid};
use std::alloc::Layout;
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

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// A page-aligned heap buffer, as bw_mem's valloc, fio's and the kernel's
/// copies use: an odd alignment would slow memcpy and copy_to_user
/// differently from the references. Not touched until [`AlignedBuf::zero`]
/// or [`AlignedBuf::fill`]: a measured pass must not take its page faults.
pub struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the buffer is plain owned memory; only its owner touches it.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    pub fn new(bytes: usize) -> Result<AlignedBuf> {
        let layout = Layout::from_size_align(bytes.max(1), page_size()).context("buffer layout")?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        ensure!(!ptr.is_null(), "cannot allocate {bytes} bytes");
        Ok(AlignedBuf { ptr, layout })
    }

    /// Writes zeroes over every byte, faulting every page in. black_box keeps
    /// the stores from being dropped as writes to memory nobody reads yet.
    pub fn zero(&mut self) {
        // SAFETY: ptr is valid for layout.size() bytes and uniquely borrowed.
        unsafe { std::ptr::write_bytes(std::hint::black_box(self.ptr), 0, self.len()) };
    }

    /// Writes every byte (non-zero, so no page stays the shared zero page).
    pub fn fill(&mut self) {
        for (i, b) in self.as_mut_slice().iter_mut().enumerate() {
            *b = (i % 251) as u8 + 1;
        }
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The start, for loops that write through raw pointers (mem's passes),
    /// as C code holding the buffer would.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for layout.size() bytes and uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// An mmap(2) mapping, unmapped when dropped.
pub struct Mapping {
    addr: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    /// Maps `len` bytes of `fd` (or anonymous memory with `fd` -1 and
    /// MAP_ANONYMOUS in `flags`) with protection `prot`.
    pub fn new(fd: RawFd, len: usize, prot: libc::c_int, flags: libc::c_int) -> Result<Mapping> {
        ensure!(len > 0, "cannot map 0 bytes");
        // SAFETY: a fresh mapping chosen by the kernel; it aliases nothing.
        let addr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error()).context("mmap");
        }
        Ok(Mapping { addr, len })
    }

    pub fn addr(&self) -> *mut libc::c_void {
        self.addr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: addr/len is a mapping created in `new` and unmapped once.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}
