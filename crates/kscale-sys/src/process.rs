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
