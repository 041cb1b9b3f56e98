//! Process hygiene for workers and the servers they start: die with the
//! parent, and be killable as a whole process group.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// Asks the kernel to SIGKILL this process when its parent thread dies, so a
/// worker can never outlive a killed kscale. Also re-checks the parent after
/// setting it, closing the race where the parent died before the call.
pub fn die_with_parent() {
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes plain integers and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
    if nix::unistd::getppid() == Pid::from_raw(1) {
        std::process::exit(1);
    }
}

/// SIGKILLs every process of a process group; a group that is already gone is
/// not an error.
pub fn kill_group(pgid: i32) {
    if pgid > 1 {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
}

/// Is a process with this pid still there (zombies count as there)?
pub fn alive(pid: i32) -> bool {
    pid > 0 && nix::sys::signal::kill(Pid::from_raw(pid), None).is_ok()
}

/// Names the calling thread (and so a single-threaded process) as `ps`,
/// `top` and perf's samples show it; the kernel keeps 15 bytes.
pub fn set_name(name: &str) {
    let mut buf = [0u8; 16];
    for (b, c) in buf.iter_mut().zip(name.bytes().take(15)) {
        *b = c;
    }
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes
    // from a buffer that lives across the call.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, buf.as_ptr() as libc::c_ulong, 0, 0, 0);
    }
}
