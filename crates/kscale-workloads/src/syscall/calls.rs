//! The simplest calls: getppid, one-byte read and write, stat, fstat and
//! open+close of a file.

use super::{latency, LAT};
use crate::shared::fd::os_err;
use crate::shared::scratch::ScratchFile;
use crate::{TrialCtx, TrialOutput};
use anyhow::{ensure, Context, Result};
use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;

/// Test-only: `KSCALE_TEST_DELAY_NS=N` makes every `syscall.null`
/// operation N ns slower, the synthetic regression `kscale check`'s tests
/// look for (docs/fleet.md). Read once, outside the measured loop; unset,
/// the loop below is the one measured.
fn test_delay() -> Option<Duration> {
    let ns: u64 = std::env::var("KSCALE_TEST_DELAY_NS").ok()?.parse().ok()?;
    (ns > 0).then(|| Duration::from_nanos(ns))
}

/// Test-only: `KSCALE_TEST_WORK=K` adds K dependent xorshift rounds of
/// user work after every `syscall.null` operation, inside the measured
/// loop: a fixed extra cost per operation that follows the CPU's speed as
/// the system call does, so that a regression of a stated size (~10 % at
/// K = 16 on the 2-vCPU AMD EPYC VM, `scripts/gate-verdicts --slow work`)
/// can be made on purpose.
/// Read once, outside the loop.
fn test_work() -> Option<u64> {
    let k: u64 = std::env::var("KSCALE_TEST_WORK").ok()?.parse().ok()?;
    (k > 0).then_some(k)
}

/// Test-only: `KSCALE_TEST_TRIAL_JUMP=F` makes every other
/// `syscall.null` trial of a run (the warm-up's first) F times as long:
/// the CPU stalled for the rest of each timed loop, as a burst a neighbour
/// runs would stall it, while the gauge's readings between trials see
/// nothing (the case's own trials' spread, `kscale check`'s tests). The
/// trials are counted in a file in the run's scratch directory, one per
/// CPU set, because each may be a fresh worker (a draw from the clock's
/// low digits jumped every trial on a machine whose clock ticks coarsely)
/// and because a run interleaves its configurations' trials: counted
/// together, one configuration's trials all jumped and the other's none.
/// Read once a trial, outside the loop.
fn test_trial_jump(dir: &std::path::Path, cpus: &[usize]) -> Option<f64> {
    let f: f64 = std::env::var("KSCALE_TEST_TRIAL_JUMP").ok()?.parse().ok()?;
    let set: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
    let count = dir.join(format!(".kscale-test-trial-jump-{}", set.join("-")));
    let n: u64 = std::fs::read_to_string(&count)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    std::fs::write(&count, (n + 1).to_string()).ok()?;
    (f > 1.0 && n % 2 == 1).then_some(f)
}

pub(super) fn null(ctx: &TrialCtx) -> Result<TrialOutput> {
    if let Some(f) = test_trial_jump(&ctx.dir, &ctx.cpus) {
        // The stall spins on the CPU, so the case's own clock (the
        // thread's) counts it as the wall does.
        let (per_op, n) = ctx.time_per_op(|n| {
            ctx.timed(|| {
                let start = std::time::Instant::now();
                for _ in 0..n {
                    // SAFETY: as below.
                    std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
                }
                let ran = start.elapsed();
                while start.elapsed() < ran.mul_f64(f) {
                    std::hint::spin_loop();
                }
                Ok(())
            })
        })?;
        return Ok(TrialOutput::new(n).with(&LAT, per_op * 1e6));
    }
    if let Some(k) = test_work() {
        let (per_op, n) = ctx.time_per_op(|n| {
            ctx.timed(|| {
                let mut x: u64 = std::hint::black_box(0x2545_f491_4f6c_dd1d);
                for _ in 0..n {
                    // The work's value goes into the call (an argument
                    // getppid ignores) and the call's result into the work:
                    // without that chain the CPU ran the work of one
                    // iteration beside the next call, and the knob added
                    // nothing up to ~30 rounds and ~40 % beyond.
                    // SAFETY: as below; getppid reads no argument.
                    let ret = std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid, x) });
                    x ^= ret as u64;
                    for _ in 0..k {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                    }
                    x = std::hint::black_box(x);
                }
                Ok(())
            })
        })?;
        return Ok(TrialOutput::new(n).with(&LAT, per_op * 1e6));
    }
    if let Some(delay) = test_delay() {
        let (per_op, n) = ctx.time_per_op(|n| {
            ctx.timed(|| {
                for _ in 0..n {
                    let start = std::time::Instant::now();
                    // SAFETY: as below.
                    std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
                    while start.elapsed() < delay {
                        std::hint::spin_loop();
                    }
                }
                Ok(())
            })
        })?;
        return Ok(TrialOutput::new(n).with(&LAT, per_op * 1e6));
    }
    let (per_op, n) = ctx.time_per_op(|n| {
        ctx.timed(|| {
            for _ in 0..n {
                // SAFETY: getppid has no arguments and cannot fail. Called via
                // libc::syscall so no library cache can answer it.
                std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
            }
            Ok(())
        })
    })?;
    Ok(TrialOutput::new(n).with(&LAT, per_op * 1e6))
}

pub(super) fn read(ctx: &TrialCtx) -> Result<TrialOutput> {
    let zero = File::open("/dev/zero").context("open /dev/zero")?;
    let fd = zero.as_raw_fd();
    let mut byte = 0u8;
    let (per_op, n) = ctx.time_per_op(|n| {
        ctx.timed(|| {
            for _ in 0..n {
                // SAFETY: fd stays open for the loop; the buffer is one writable byte.
                if unsafe { libc::read(fd, std::ptr::addr_of_mut!(byte).cast(), 1) } != 1 {
                    return Err(os_err("read /dev/zero"));
                }
            }
            Ok(())
        })
    })?;
    Ok(latency(per_op, n))
}

pub(super) fn write(ctx: &TrialCtx) -> Result<TrialOutput> {
    let null = File::options()
        .write(true)
        .open("/dev/null")
        .context("open /dev/null")?;
    let fd = null.as_raw_fd();
    let byte = 0u8;
    let (per_op, n) = ctx.time_per_op(|n| {
        ctx.timed(|| {
            for _ in 0..n {
                // SAFETY: fd stays open for the loop; the buffer is one readable byte.
                if unsafe { libc::write(fd, std::ptr::addr_of!(byte).cast(), 1) } != 1 {
                    return Err(os_err("write /dev/null"));
                }
            }
            Ok(())
        })
    })?;
    Ok(latency(per_op, n))
}

/// lmbench stats a header file; any small regular file does the same work.
const SMALL_FILE: usize = 1024;

/// The file the `file` param names: a scratch file made now (removed when
/// the first part drops), or a user's file, which must exist.
fn param_file(ctx: &TrialCtx, tag: &str) -> Result<(Option<ScratchFile>, PathBuf, CString)> {
    match ctx.param(&super::FILE_PARAMS[0])?.as_str() {
        "scratch" => {
            let f = ScratchFile::with_bytes(&ctx.dir, tag, &[0u8; SMALL_FILE])?;
            let (p, c) = (f.path.clone(), f.c_path.clone());
            Ok((Some(f), p, c))
        }
        given => {
            let p = PathBuf::from(given);
            ensure!(
                p.is_absolute() && p.is_file(),
                "file={given}: not an existing regular file by absolute path (accepted: scratch \
                 or an absolute path)"
            );
            let c = CString::new(given).context("file param contains a NUL byte")?;
            Ok((None, p, c))
        }
    }
}

pub(super) fn stat(ctx: &TrialCtx) -> Result<TrialOutput> {
    let (_scratch, file, c_path) = param_file(ctx, "stat")?;
    let path = c_path.as_ptr();
    // SAFETY: an all-zero `struct stat` is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let (per_op, n) = ctx.time_per_op(|n| {
        ctx.timed(|| {
            for _ in 0..n {
                // SAFETY: path is a NUL-terminated string alive for the loop; st is writable.
                if unsafe { libc::stat(path, &mut st) } != 0 {
                    return Err(os_err(format!("stat {}", file.display())));
                }
            }
            Ok(())
        })
    })?;
    Ok(latency(per_op, n))
}

pub(super) fn fstat(ctx: &TrialCtx) -> Result<TrialOutput> {
    let file = ScratchFile::with_bytes(&ctx.dir, "fstat", &[0u8; SMALL_FILE])?;
    let open = File::open(&file.path).with_context(|| format!("open {}", file.path.display()))?;
    let fd = open.as_raw_fd();
    // SAFETY: an all-zero `struct stat` is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let (per_op, n) = ctx.time_per_op(|n| {
        ctx.timed(|| {
            for _ in 0..n {
                // SAFETY: fd stays open for the loop; st is writable.
                if unsafe { libc::fstat(fd, &mut st) } != 0 {
                    return Err(os_err(format!("fstat {}", file.path.display())));
                }
            }
            Ok(())
        })
    })?;
    Ok(latency(per_op, n))
}

pub(super) fn open_close(ctx: &TrialCtx) -> Result<TrialOutput> {
    let (_scratch, file, c_path) = param_file(ctx, "open")?;
    let path = c_path.as_ptr();
    let (per_op, n) = ctx.time_per_op(|n| {
        ctx.timed(|| {
            for _ in 0..n {
                // SAFETY: path is a NUL-terminated string alive for the loop. Plain
                // O_RDONLY as lmbench does; the fd is closed right away.
                let fd = unsafe { libc::open(path, libc::O_RDONLY) };
                if fd < 0 {
                    return Err(os_err(format!("open {}", file.display())));
                }
                // SAFETY: fd was just opened here and is closed once.
                unsafe { libc::close(fd) };
            }
            Ok(())
        })
    })?;
    Ok(latency(per_op, n))
}
