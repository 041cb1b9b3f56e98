//! What thousands of chat threads and connections need from the machine:
//! limits raised or refused by name, and threads with a small stack.

use anyhow::{bail, Context, Result};
use kscale_sys::threads::system_threads;

fn read_u64(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Raises what this role needs — open files (`RLIMIT_NOFILE`, one per
/// connection) and the user's thread allowance (`RLIMIT_NPROC`) up to their
/// hard limits — and refuses, naming the limit, what the machine cannot
/// give: the hard limits, `kernel.threads-max` and `kernel.pid_max`.
pub(super) fn provide(threads: u64, fds: u64) -> Result<()> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).context("getrlimit NOFILE")?;
    if fds > soft {
        if fds > hard {
            bail!(
                "chat needs {fds} open files but RLIMIT_NOFILE (ulimit -n) allows {hard}: \
                 raise it or run fewer rooms"
            );
        }
        setrlimit(Resource::RLIMIT_NOFILE, fds, hard).context("raising RLIMIT_NOFILE")?;
    }
    let total = system_threads() + threads;
    let (soft, hard) = getrlimit(Resource::RLIMIT_NPROC).context("getrlimit NPROC")?;
    let root = nix::unistd::geteuid().is_root();
    if !root && soft != libc::RLIM_INFINITY && total > soft {
        if hard != libc::RLIM_INFINITY && total > hard {
            bail!(
                "chat needs {threads} more threads ({total} on the machine) but RLIMIT_NPROC \
                 (ulimit -u) allows {hard}: raise it or run fewer rooms"
            );
        }
        setrlimit(Resource::RLIMIT_NPROC, hard, hard).context("raising RLIMIT_NPROC")?;
    }
    for (path, name) in [
        ("/proc/sys/kernel/threads-max", "kernel.threads-max"),
        ("/proc/sys/kernel/pid_max", "kernel.pid_max"),
    ] {
        if let Some(max) = read_u64(path) {
            if total > max {
                bail!(
                    "chat needs {threads} more threads ({total} on the machine) but {name} is \
                     {max}: raise it (sysctl) or run fewer rooms"
                );
            }
        }
    }
    Ok(())
}

/// Starts a thread with the `stack` param's stack size.
pub(super) fn spawn(stack: usize, f: impl FnOnce() + Send + 'static) -> Result<()> {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(f)
        .map(|_| ())
        .context("cannot start a chat thread")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_named_when_refused() {
        let e = provide(u64::MAX / 4, 10).unwrap_err().to_string();
        assert!(
            e.contains("RLIMIT_NPROC") || e.contains("threads-max") || e.contains("pid_max"),
            "{e}"
        );
        let e = provide(1, u64::MAX / 4).unwrap_err().to_string();
        assert!(e.contains("RLIMIT_NOFILE"), "{e}");
        provide(10, 100).unwrap();
    }
}
