//! The tiny helper program kscale executes (syscall's fork_exec and
//! fork_sh time it; web's own server runs it as its CGI), and forking a
//! child that may only make async-signal-safe calls.

use super::fd::os_err;
use super::scratch::ScratchFile;
use anyhow::{ensure, Context, Result};
use std::io;
use std::path::Path;

/// The helper program built by build.rs (static unless the build warned).
pub(crate) static HELLO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/hello"));
pub(crate) const HELLO_LINKAGE: &str = env!("KSCALE_HELLO_LINKAGE");
/// The same program linked dynamically (empty if the build could not).
pub(crate) static HELLO_DYN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/hello-dyn"));

/// Writes the helper program into the scratch directory, executable. The file
/// is written by a short-lived child process: a descriptor open for writing
/// on an executable makes execve fail with ETXTBSY, and any process forked
/// while this process held one (a test running in another thread) would
/// keep it open; the writer child is the only process that ever holds one.
pub(crate) fn install_hello(dir: &Path, program: &'static [u8]) -> Result<ScratchFile> {
    ensure!(
        !program.is_empty(),
        "the fork_exec helper program was not built (see the build warnings)"
    );
    let file = ScratchFile::name(dir, "hello")?;
    let path = file.c_path.as_ptr();
    fork_wait(|| {
        // SAFETY: open/write/fchmod/close on a path and bytes prepared before
        // the fork; all async-signal-safe.
        unsafe {
            let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC;
            let fd = libc::open(path, flags, 0o755 as libc::c_uint);
            if fd < 0 {
                return 1;
            }
            let mut rest = program;
            while !rest.is_empty() {
                let w = libc::write(fd, rest.as_ptr().cast(), rest.len());
                if w <= 0 {
                    return 2;
                }
                rest = &rest[w as usize..];
            }
            if libc::fchmod(fd, 0o755) != 0 || libc::close(fd) != 0 {
                return 3;
            }
            0
        }
    })
    .with_context(|| format!("write helper program {}", file.path.display()))?;
    Ok(file)
}

/// Forks a child that runs `in_child` and `_exit`s with its value, and waits
/// for it. The child may only make async-signal-safe calls (system calls on
/// memory prepared before the fork): the parent may have other threads (in
/// tests), and their locks are not the child's to take.
pub(crate) fn fork_wait(in_child: impl Fn() -> libc::c_int) -> Result<()> {
    // SAFETY: the child runs only `in_child` (async-signal-safe by contract)
    // and leaves with _exit, never returning into the caller.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(os_err("fork"));
    }
    if pid == 0 {
        // SAFETY: see above; _exit skips the parent's atexit handlers.
        unsafe { libc::_exit(in_child()) };
    }
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child; status is writable.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return Err(os_err("waitpid"));
        }
    }
    ensure!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child process failed (wait status {status:#x})"
    );
    Ok(())
}
