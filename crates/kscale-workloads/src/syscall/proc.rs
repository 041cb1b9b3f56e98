//! Process creation: fork+exit, fork+execve of the helper program, and
//! fork+/bin/sh -c running it.

use super::latency;
use crate::shared::exec::{fork_wait, install_hello, HELLO, HELLO_DYN, HELLO_LINKAGE};
use crate::{timed, TrialCtx, TrialOutput};
use anyhow::{ensure, Context, Result};
use std::ffi::{CStr, CString};
use std::fs::File;
use std::os::fd::AsRawFd;

/// How `fork_exit`'s child leaves, from the `exit` param.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ChildExit {
    /// `_exit()`: straight to exit_group, nothing run in user space (default).
    Raw,
    /// The C library's `exit()`, as lat_proc's child: atexit handlers, the
    /// shared objects' destructors (`_dl_fini`) and the stdio flush run
    /// first, writing to pages the child shares copy-on-write with the
    /// parent, so each write is a page fault and a page copy.
    Libc,
}

impl ChildExit {
    pub(super) fn from_ctx(ctx: &TrialCtx) -> Result<Self> {
        match ctx.param(&super::EXIT_PARAMS[0])?.as_str() {
            "_exit" => Ok(ChildExit::Raw),
            "exit" => Ok(ChildExit::Libc),
            other => anyhow::bail!("exit={other}: accepted values are _exit and exit"),
        }
    }
}

pub(super) fn fork_exit(ctx: &TrialCtx) -> Result<TrialOutput> {
    let how = ChildExit::from_ctx(ctx)?;
    let (per_op, n) = ctx.time_per_op(|n| {
        timed(|| {
            for _ in 0..n {
                match how {
                    ChildExit::Raw => fork_wait(|| 0)?,
                    // SAFETY: exit() is not async-signal-safe: it takes the C
                    // library's atexit and stdio locks. A worker is
                    // single-threaded when it forks here (the unit tests run
                    // this workload in a forked single-threaded child), so no
                    // lock can be held by a thread the child does not have.
                    // Nothing of the worker's is buffered in C stdio (Rust's
                    // own stdout buffer is not flushed by exit()).
                    ChildExit::Libc => fork_wait(|| unsafe { libc::exit(0) })?,
                }
            }
            Ok(())
        })
    })?;
    Ok(latency(per_op, n))
}

/// The helper the `helper` param names, and a note when it is not what the
/// param asked for.
fn helper_program(ctx: &TrialCtx) -> Result<(&'static [u8], Option<&'static str>)> {
    match ctx.param(&super::HELPER_PARAMS[0])?.as_str() {
        "dynamic" => {
            ensure!(
                !HELLO_DYN.is_empty(),
                "the dynamically linked helper program was not built (see the build warnings)"
            );
            Ok((HELLO_DYN, None))
        }
        _ if HELLO_LINKAGE != "static" => Ok((
            HELLO,
            Some("helper program is dynamically linked (no static libc)"),
        )),
        _ => Ok((HELLO, None)),
    }
}

/// Runs `argv` (with `envp`, or the current environment when `None`) in a
/// forked child with stdout on /dev/null, `n` times, timing the whole.
fn time_exec(
    ctx: &TrialCtx,
    prog: &CStr,
    argv: &[&CStr],
    envp: Option<&[&CStr]>,
) -> Result<(f64, u64)> {
    // stdout goes to /dev/null rather than being closed as lmbench does: the
    // worker's stdout carries results, and a closed fd 1 could be reused.
    let devnull = File::options()
        .write(true)
        .open("/dev/null")
        .context("open /dev/null")?;
    let null_fd = devnull.as_raw_fd();
    let mut argv_p: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_p.push(std::ptr::null());
    let envp_p: Option<Vec<*const libc::c_char>> = envp.map(|e| {
        let mut v: Vec<_> = e.iter().map(|a| a.as_ptr()).collect();
        v.push(std::ptr::null());
        v
    });
    let child = || {
        // SAFETY: dup2 and execve/execv on pointers prepared before the fork.
        unsafe {
            if libc::dup2(null_fd, 1) < 0 {
                return 126;
            }
            match &envp_p {
                Some(env) => libc::execve(prog.as_ptr(), argv_p.as_ptr(), env.as_ptr()),
                None => libc::execv(prog.as_ptr(), argv_p.as_ptr()),
            };
        }
        127
    };
    // One run outside the timing shows an unusable scratch directory (noexec
    // mount) as a clear error.
    fork_wait(child).with_context(|| {
        format!(
            "run {} (is the scratch directory mounted noexec?)",
            prog.to_string_lossy()
        )
    })?;
    ctx.time_per_op(|n| {
        timed(|| {
            for _ in 0..n {
                fork_wait(child)?;
            }
            Ok(())
        })
    })
}

pub(super) fn fork_exec(ctx: &TrialCtx) -> Result<TrialOutput> {
    let (program, note) = helper_program(ctx)?;
    let hello = install_hello(&ctx.dir, program)?;
    // An empty environment, as lmbench passes.
    let (per_op, n) = time_exec(ctx, &hello.c_path, &[hello.c_path.as_c_str()], Some(&[]))?;
    let out = latency(per_op, n);
    Ok(match note {
        Some(n) => out.note(n),
        None => out,
    })
}

pub(super) fn fork_sh(ctx: &TrialCtx) -> Result<TrialOutput> {
    let (program, note) = helper_program(ctx)?;
    let hello = install_hello(&ctx.dir, program)?;
    // Quoted for the shell; the scratch directory may contain spaces.
    let quoted = format!("'{}'", hello.path.to_string_lossy().replace('\'', r"'\''"));
    let cmd = CString::new(quoted).context("helper path contains a NUL byte")?;
    // execv keeps the environment, as lmbench's execlp does.
    let (per_op, n) = time_exec(ctx, c"/bin/sh", &[c"sh", c"-c", cmd.as_c_str()], None)?;
    let out = latency(per_op, n);
    Ok(match note {
        Some(n) => out.note(n),
        None => out,
    })
}
