//! `syscall`: latency of simple functions (docs/families/syscall.md, seed 003, lmbench
//! `lat_syscall`/`lat_sig`/`lat_pipe`/`lat_unix`/`lat_proc`).
//!
//! Every loop calls the C library or the kernel directly through `libc`, the
//! way lmbench's C loops do, so that the figures can be compared with
//! lmbench's on the same machine: std's wrappers add flags (`O_CLOEXEC`) and
//! checks that lmbench does not pay for.

use crate::shared::buf::Mapping;
use crate::shared::child::ChildGuard;
use crate::shared::exec::{fork_wait, install_hello, HELLO, HELLO_DYN, HELLO_LINKAGE};
use crate::shared::fd::{os_err, read_exact, write_exact};
use crate::shared::place::{place_help, Placement, PLACE_PARAM};
use crate::shared::scratch::ScratchFile;
use crate::{timed, Family, TrialCtx, TrialOutput, WorkloadDef};
use anyhow::{ensure, Context, Result};
use kscale_core::stats::median;
use kscale_core::{MetricDef, ParamDef, ParamKind};
use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{compiler_fence, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

const LAT: MetricDef = MetricDef::lower("latency", "µs");
const LAT_METRICS: &[MetricDef] = &[LAT];
/// What `prot_fault` subtracts from, and what it subtracts: kept so that a
/// reference which takes its two terms at different moments (lat_sig prot
/// measures its catch cost in an earlier phase) can be compared on the sum,
/// which the machine's drift does not amplify (docs/families/syscall.md).
const FAULT_SIGNAL: MetricDef = MetricDef::lower("fault_signal", "µs");
const HANDLER: MetricDef = MetricDef::lower("handler", "µs");

/// What every syscall workload shares: latency, and no params unless it says.
const SYSCALL: WorkloadDef = WorkloadDef {
    metrics: LAT_METRICS,
    timeout: Duration::from_secs(60),
    ..WorkloadDef::family("syscall")
};

pub static FAMILY: Family = Family {
    name: "syscall",
    title: "Latency of simple functions",
    help:
        "Time per operation of simple system calls, signals, pipes and process creation (lmbench).",
    workloads: &[
        SYSCALL.named(
            "null",
            "Simple syscall",
            "getppid(), a system call that does no work (lmbench lat_syscall null).",
            null,
        ),
        SYSCALL.named(
            "read",
            "Simple read",
            "read() of 1 byte from /dev/zero (lmbench lat_syscall read).",
            read,
        ),
        SYSCALL.named(
            "write",
            "Simple write",
            "write() of 1 byte to /dev/null (lmbench lat_syscall write).",
            write,
        ),
        WorkloadDef {
            params: FILE_PARAMS,
            ..SYSCALL.named(
                "stat",
                "Simple stat",
                "stat() of a small file in the run's scratch directory (lmbench lat_syscall stat). The \
                 path walk is part of the cost, so `file=PATH` stats a given file instead, e.g. \
                 the one lat_syscall is given.",
                stat,
            )
        },
        SYSCALL.named(
            "fstat",
            "Simple fstat",
            "fstat() of an open small file (lmbench lat_syscall fstat).",
            fstat,
        ),
        WorkloadDef {
            params: FILE_PARAMS,
            ..SYSCALL.named(
                "open_close",
                "Simple open/close",
                "open() + close() of a small file in the scratch directory (lmbench lat_syscall open); \
                 `file=PATH` opens a given file read-only instead.",
                open_close,
            )
        },
        SYSCALL.named(
            "sig_install",
            "Signal handler installation",
            "sigaction(SIGUSR1) installing a handler (lmbench lat_sig install).",
            sig_install,
        ),
        SYSCALL.named(
            "sig_catch",
            "Signal handler overhead",
            "kill(self, SIGUSR1) caught by an empty handler, minus the cost of kill(self, 0) \
             measured in the same trial (lmbench lat_sig catch).",
            sig_catch,
        ),
        WorkloadDef {
            metrics: &[LAT, FAULT_SIGNAL, HANDLER],
            ..SYSCALL.named(
                "prot_fault",
                "Protection fault",
                "A write to a read-only MAP_SHARED file page, caught by a SIGSEGV handler, minus the \
                 signal handler overhead measured in the same trial (lmbench lat_sig prot). \
                 `fault_signal` is the fault with its signal, nothing subtracted; `handler` is what \
                 is subtracted (kill(self, SIGUSR1) less kill(self, 0)).",
                prot_fault,
            )
        },
        WorkloadDef {
            params: PLACE_PARAMS,
            ..SYSCALL.named(
                "pipe",
                "Pipe latency",
                concat!(
                    "1-byte round trip between two processes over two pipes (lmbench \
                     lat_pipe; perf bench sched pipe).",
                    place_help!()
                ),
                pipe,
            )
        },
        WorkloadDef {
            params: PLACE_PARAMS,
            ..SYSCALL.named(
                "unix",
                "AF_UNIX sock stream latency",
                concat!(
                    "1-byte round trip between two processes over an AF_UNIX stream \
                     socketpair (lmbench lat_unix).",
                    place_help!()
                ),
                unix,
            )
        },
        SYSCALL.named(
            "fork_exit",
            "Process fork+exit",
            "fork(); the child exits at once; the parent waits for it (lmbench lat_proc fork; \
             perf bench syscall fork).",
            fork_exit,
        ),
        WorkloadDef {
            params: HELPER_PARAMS,
            ..SYSCALL.named(
                "fork_exec",
                "Process fork+execve",
                "fork() + execve() of a tiny program, then wait (lmbench lat_proc exec). \
                 The program is statically linked by default, so the figure is the kernel's \
                 fork and exec; lat_proc execs a dynamically linked /tmp/hello, whose \
                 loader work (mapping libc, relocations) `helper=dynamic` adds.",
                fork_exec,
            )
        },
        WorkloadDef {
            params: HELPER_PARAMS,
            ..SYSCALL.named(
                "fork_sh",
                "Process fork+/bin/sh -c",
                "fork() + /bin/sh -c running the tiny program, then wait (lmbench lat_proc \
                 shell; `helper=dynamic` as lat_proc).",
                fork_sh,
            )
        },
    ],
};

/// Which build of the tiny program fork_exec and fork_sh run (docs/families/syscall.md).
const HELPER_PARAMS: &[ParamDef] = &[ParamDef {
    name: "helper",
    help: "static: the program linked statically (kernel work only); dynamic: linked \
           against the C library as lmbench's /tmp/hello, adding the dynamic loader.",
    kind: ParamKind::Choice(&["static", "dynamic"]),
    default: &["static"],
    quick: &[],
}];

/// Where pipe's and unix's two processes run (docs/families/syscall.md).
const PLACE_PARAMS: &[ParamDef] = &[PLACE_PARAM];

/// The file stat and open_close work on (docs/families/syscall.md).
const FILE_PARAMS: &[ParamDef] = &[ParamDef {
    name: "file",
    help: "scratch: a 1 KiB file made in the run's scratch directory; or the absolute path \
           of an existing file, only read (as lat_syscall's file argument).",
    kind: ParamKind::Str,
    default: &["scratch"],
    quick: &[],
}];

/// The result of a loop whose `per_op` is in seconds.
fn latency(per_op: f64, n: u64) -> TrialOutput {
    TrialOutput::new(n).with(&LAT, per_op * 1e6)
}

/// Test-only: `KSCALE_TEST_DELAY_NS=N` makes every `syscall.null`
/// operation N ns slower, the synthetic regression `kscale check`'s tests
/// look for (docs/fleet.md). Read once, outside the measured loop; unset,
/// the loop below is the one measured.
fn test_delay() -> Option<Duration> {
    let ns: u64 = std::env::var("KSCALE_TEST_DELAY_NS").ok()?.parse().ok()?;
    (ns > 0).then(|| Duration::from_nanos(ns))
}

fn null(ctx: &TrialCtx) -> Result<TrialOutput> {
    if let Some(delay) = test_delay() {
        let (per_op, n) = ctx.time_per_op(|n| {
            timed(|| {
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
        timed(|| {
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

fn read(ctx: &TrialCtx) -> Result<TrialOutput> {
    let zero = File::open("/dev/zero").context("open /dev/zero")?;
    let fd = zero.as_raw_fd();
    let mut byte = 0u8;
    let (per_op, n) = ctx.time_per_op(|n| {
        timed(|| {
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

fn write(ctx: &TrialCtx) -> Result<TrialOutput> {
    let null = File::options()
        .write(true)
        .open("/dev/null")
        .context("open /dev/null")?;
    let fd = null.as_raw_fd();
    let byte = 0u8;
    let (per_op, n) = ctx.time_per_op(|n| {
        timed(|| {
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
    match ctx.params.get("file").unwrap_or("scratch") {
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

fn stat(ctx: &TrialCtx) -> Result<TrialOutput> {
    let (_scratch, file, c_path) = param_file(ctx, "stat")?;
    let path = c_path.as_ptr();
    // SAFETY: an all-zero `struct stat` is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let (per_op, n) = ctx.time_per_op(|n| {
        timed(|| {
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

fn fstat(ctx: &TrialCtx) -> Result<TrialOutput> {
    let file = ScratchFile::with_bytes(&ctx.dir, "fstat", &[0u8; SMALL_FILE])?;
    let open = File::open(&file.path).with_context(|| format!("open {}", file.path.display()))?;
    let fd = open.as_raw_fd();
    // SAFETY: an all-zero `struct stat` is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let (per_op, n) = ctx.time_per_op(|n| {
        timed(|| {
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

fn open_close(ctx: &TrialCtx) -> Result<TrialOutput> {
    let (_scratch, file, c_path) = param_file(ctx, "open")?;
    let path = c_path.as_ptr();
    let (per_op, n) = ctx.time_per_op(|n| {
        timed(|| {
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

extern "C" fn empty_handler(_: libc::c_int) {}

/// A `sigaction` for `handler` with an empty mask, as lmbench installs it.
fn action(handler: libc::sighandler_t, flags: libc::c_int) -> libc::sigaction {
    // SAFETY: an all-zero sigaction is valid (SIG_DFL, no flags); sa_mask is
    // then initialised by sigemptyset.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler;
    sa.sa_flags = flags;
    // SAFETY: sa_mask is a valid sigset_t owned by sa.
    unsafe { libc::sigemptyset(&mut sa.sa_mask) };
    sa
}

/// Puts a signal's previous disposition back when dropped, so a workload's
/// handler never outlives the workload.
struct SigRestore {
    sig: libc::c_int,
    old: libc::sigaction,
}

impl SigRestore {
    fn install(sig: libc::c_int, sa: &libc::sigaction) -> Result<Self> {
        // SAFETY: an all-zero sigaction is a valid buffer for the old action.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are valid; the handlers installed by this
        // module only touch atomics and call async-signal-safe functions.
        if unsafe { libc::sigaction(sig, sa, &mut old) } != 0 {
            return Err(os_err(format!("sigaction({sig})")));
        }
        unblock(sig)?;
        Ok(SigRestore { sig, old })
    }
}

impl Drop for SigRestore {
    fn drop(&mut self) {
        // SAFETY: restores a disposition obtained from sigaction itself.
        unsafe { libc::sigaction(self.sig, &self.old, std::ptr::null_mut()) };
    }
}

/// A blocked signal would never reach the handler being measured.
fn unblock(sig: libc::c_int) -> Result<()> {
    // SAFETY: set is a local sigset_t initialised by sigemptyset before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        let r = libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        ensure!(
            r == 0,
            "pthread_sigmask: {}",
            io::Error::from_raw_os_error(r)
        );
    }
    Ok(())
}

fn sig_install(ctx: &TrialCtx) -> Result<TrialOutput> {
    let handler = empty_handler as extern "C" fn(libc::c_int) as libc::sighandler_t;
    let _restore = SigRestore::install(libc::SIGUSR1, &action(handler, 0))?;
    // SAFETY: an all-zero sigaction is a valid buffer for the old action.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    let (per_op, n) = ctx.time_per_op(|n| {
        timed(|| {
            for _ in 0..n {
                // Built inside the loop like lmbench, so the figure includes
                // what a program does to install a handler.
                let sa = action(handler, 0);
                // SAFETY: both pointers are valid; the handler does nothing.
                if unsafe { libc::sigaction(libc::SIGUSR1, &sa, &mut old) } != 0 {
                    return Err(os_err("sigaction(SIGUSR1)"));
                }
            }
            Ok(())
        })
    })?;
    Ok(latency(per_op, n))
}

/// Operations per timed chunk where loops are subtracted from each other.
const CHUNK: u64 = 1000;

/// Per-op times of chunks of the loops that `sig_catch` and `prot_fault`
/// subtract, taken in alternation. The difference is a fraction of each
/// term, so a burst of interference from another process landing on one
/// loop could swamp it (even below zero); the median chunk of each loop
/// ignores such bursts, which a sum over the whole trial would absorb.
#[derive(Default)]
struct Interleaved {
    send: Vec<f64>,
    catch: Vec<f64>,
    fault: Vec<f64>,
    /// All timed seconds, for calibration.
    total: f64,
}

impl Interleaved {
    /// `k` kill(self, 0) then `k` kill(self, SIGUSR1) to the installed empty
    /// handler.
    fn kill_chunk(&mut self, k: u64) -> Result<()> {
        // SAFETY: getpid cannot fail.
        let me = unsafe { libc::getpid() };
        for (sig, out) in [(0, &mut self.send), (libc::SIGUSR1, &mut self.catch)] {
            let t = timed(|| {
                for _ in 0..k {
                    // SAFETY: signals only this process; SIGUSR1 has an empty handler.
                    if unsafe { libc::kill(me, sig) } != 0 {
                        return Err(os_err(format!("kill(self, {sig})")));
                    }
                }
                Ok(())
            })?
            .as_secs_f64();
            out.push(t / k as f64);
            self.total += t;
        }
        Ok(())
    }

    /// Catching a signal less sending it, per op, in seconds.
    fn signal_overhead(&self) -> f64 {
        median(&self.catch) - median(&self.send)
    }
}

fn install_empty_usr1() -> Result<SigRestore> {
    let handler = empty_handler as extern "C" fn(libc::c_int) as libc::sighandler_t;
    SigRestore::install(libc::SIGUSR1, &action(handler, 0))
}

fn sig_catch(ctx: &TrialCtx) -> Result<TrialOutput> {
    let _restore = install_empty_usr1()?;
    let mut iv = Interleaved::default();
    let (_, n) = ctx.time_per_op(|n| {
        iv = Interleaved::default();
        let mut left = n;
        while left > 0 {
            let k = left.min(CHUNK);
            iv.kill_chunk(k)?;
            left -= k;
        }
        Ok(Duration::from_secs_f64(iv.total))
    })?;
    // As lmbench: what remains after the cost of the kill system call itself
    // is delivering and returning from the signal; never below zero.
    let per_op = iv.signal_overhead().max(0.0);
    Ok(latency(per_op, n).note(format!(
        "median per chunk: kill(self, SIGUSR1) {:.4} µs, kill(self, 0) {:.4} µs",
        median(&iv.catch) * 1e6,
        median(&iv.send) * 1e6
    )))
}

/// State shared with the SIGSEGV handler of `prot_fault`: the page, its
/// length, faults so far and after how many the handler lets the write pass.
static PROT_PAGE: AtomicUsize = AtomicUsize::new(0);
static PROT_LEN: AtomicUsize = AtomicUsize::new(0);
static PROT_FAULTS: AtomicU64 = AtomicU64::new(0);
static PROT_TARGET: AtomicU64 = AtomicU64::new(0);

/// Returning from the handler re-executes the faulting write, which faults
/// again: that is the loop. After the target count the page is made writable
/// so the write completes. A fault elsewhere, or an mprotect that fails,
/// restores the default action so the process dies of SIGSEGV as it should
/// instead of looping for ever.
extern "C" fn prot_handler(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let page = PROT_PAGE.load(Ordering::SeqCst);
    let len = PROT_LEN.load(Ordering::SeqCst);
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    if page == 0 || addr < page || addr >= page + len {
        // SAFETY: signal() is async-signal-safe.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
        return;
    }
    let faults = PROT_FAULTS.fetch_add(1, Ordering::SeqCst) + 1;
    if faults >= PROT_TARGET.load(Ordering::SeqCst) {
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: page..page+len is the mapping prot_fault owns; mprotect is a
        // plain system call.
        if unsafe { libc::mprotect(page as *mut libc::c_void, len, rw) } != 0 {
            // SAFETY: signal() is async-signal-safe.
            unsafe { libc::signal(sig, libc::SIG_DFL) };
        }
    }
}

/// A shared read-only mapping of a file page, unmapped when dropped (which
/// also tells the handler it no longer has a page).
struct ProtPage(Mapping);

impl ProtPage {
    fn map(fd: RawFd, len: usize) -> Result<Self> {
        let m = Mapping::new(fd, len, libc::PROT_READ, libc::MAP_SHARED)?;
        PROT_LEN.store(len, Ordering::SeqCst);
        PROT_PAGE.store(m.addr() as usize, Ordering::SeqCst);
        Ok(ProtPage(m))
    }

    /// One write that faults `n` times, each fault caught by the handler,
    /// until the n-th lets it through. Returns with the page read-only again.
    fn fault(&self, n: u64) -> Result<Duration> {
        PROT_FAULTS.store(0, Ordering::SeqCst);
        PROT_TARGET.store(n, Ordering::SeqCst);
        compiler_fence(Ordering::SeqCst);
        let t = timed(|| {
            // SAFETY: the page is mapped for self's lifetime; the write faults
            // until the handler makes it writable.
            unsafe { std::ptr::write_volatile(self.0.addr().cast::<u8>(), 1) };
            Ok(())
        })?;
        compiler_fence(Ordering::SeqCst);
        // SAFETY: our own mapping, back to read-only for the next call.
        if unsafe { libc::mprotect(self.0.addr(), self.0.len(), libc::PROT_READ) } != 0 {
            return Err(os_err("mprotect read-only"));
        }
        let faults = PROT_FAULTS.load(Ordering::SeqCst);
        ensure!(
            faults == n,
            "expected {n} protection faults, caught {faults}"
        );
        Ok(t)
    }
}

impl Drop for ProtPage {
    fn drop(&mut self) {
        // The mapping itself goes with the field, after this.
        PROT_PAGE.store(0, Ordering::SeqCst);
    }
}

fn prot_fault(ctx: &TrialCtx) -> Result<TrialOutput> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let page_len = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .context("sysconf(_SC_PAGESIZE)")?;
    let file = ScratchFile::with_bytes(&ctx.dir, "prot", &vec![0u8; page_len])?;
    // Opened read-write although it is mapped read-only: the handler's
    // mprotect to PROT_WRITE needs a writable descriptor behind the mapping.
    let fd = File::options()
        .read(true)
        .write(true)
        .open(&file.path)
        .with_context(|| format!("open {}", file.path.display()))?;
    let page = ProtPage::map(fd.as_raw_fd(), page_len)?;
    let _usr1 = install_empty_usr1()?;
    let handler = prot_handler
        as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
        as libc::sighandler_t;
    let sa = action(handler, libc::SA_SIGINFO);
    let _segv = SigRestore::install(libc::SIGSEGV, &sa)?;
    // Some systems report a fault on a shared file mapping as SIGBUS.
    let _bus = SigRestore::install(libc::SIGBUS, &sa)?;

    let mut iv = Interleaved::default();
    let (_, n) = ctx.time_per_op(|n| {
        iv = Interleaved::default();
        let mut left = n;
        while left > 0 {
            let k = left.min(CHUNK);
            let t = page.fault(k)?.as_secs_f64();
            iv.fault.push(t / k as f64);
            iv.total += t;
            iv.kill_chunk(k)?;
            left -= k;
        }
        Ok(Duration::from_secs_f64(iv.total))
    })?;
    drop(page);
    // As lmbench: each fault also delivers a signal, so the signal handler
    // overhead measured alongside is taken off; never below zero.
    let fault = median(&iv.fault);
    let sig = iv.signal_overhead();
    let per_op = (fault - sig).max(0.0);
    Ok(latency(per_op, n)
        .with(&FAULT_SIGNAL, fault * 1e6)
        .with(&HANDLER, sig * 1e6))
}

/// Reads one byte and sends it back until the other side goes away.
fn echo(r: RawFd, w: RawFd) -> i32 {
    let mut byte = [0u8];
    loop {
        if read_exact(r, &mut byte).is_err() {
            return 0;
        }
        if write_exact(w, &byte).is_err() {
            return 1;
        }
    }
}

/// Sends one byte on `w` and waits for it to come back on `r`.
fn round_trip(w: RawFd, r: RawFd) -> Result<()> {
    let mut byte = [0u8];
    write_exact(w, &byte).context("write to peer")?;
    match read_exact(r, &mut byte) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            anyhow::bail!("peer process went away")
        }
        Err(e) => Err(e).context("read from peer"),
    }
}

/// Forks a peer that echoes what the parent sends on `parent_w` from
/// `child_r` to `child_w`, and times one-byte round trips. The child's ends
/// are closed in the parent so a dead peer shows as end-of-file, not a hang.
fn ping_pong(
    ctx: &TrialCtx,
    (parent_w, parent_r): (OwnedFd, OwnedFd),
    (child_r, child_w): (OwnedFd, OwnedFd),
) -> Result<TrialOutput> {
    let place = Placement::from_ctx(ctx)?;
    place.pin(0)?;
    let (cr, cw) = (child_r.as_raw_fd(), child_w.as_raw_fd());
    let _peer = ChildGuard(place.fork(1, move || echo(cr, cw))?);
    drop((child_r, child_w));
    let (w, r) = (parent_w.as_raw_fd(), parent_r.as_raw_fd());
    // One exchange before timing so both processes are running (as lmbench).
    round_trip(w, r).context("first round trip")?;
    let (per_op, n) = ctx.time_per_op(|n| {
        timed(|| {
            for _ in 0..n {
                round_trip(w, r)?;
            }
            Ok(())
        })
    })?;
    Ok(latency(per_op, n).note(place.note(2, "partner")))
}

fn pipe(ctx: &TrialCtx) -> Result<TrialOutput> {
    let (to_child_r, to_child_w) = nix::unistd::pipe().context("pipe")?;
    let (to_parent_r, to_parent_w) = nix::unistd::pipe().context("pipe")?;
    ping_pong(ctx, (to_child_w, to_parent_r), (to_child_r, to_parent_w))
}

fn unix(ctx: &TrialCtx) -> Result<TrialOutput> {
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
    let (parent, child) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::empty(),
    )
    .context("socketpair(AF_UNIX, SOCK_STREAM)")?;
    let parent2 = parent.try_clone().context("dup socket")?;
    let child2 = child.try_clone().context("dup socket")?;
    ping_pong(ctx, (parent, parent2), (child, child2))
}

fn fork_exit(ctx: &TrialCtx) -> Result<TrialOutput> {
    let (per_op, n) = ctx.time_per_op(|n| {
        timed(|| {
            for _ in 0..n {
                fork_wait(|| 0)?;
            }
            Ok(())
        })
    })?;
    Ok(latency(per_op, n))
}

/// The helper the `helper` param names, and a note when it is not what the
/// param asked for.
fn helper_program(ctx: &TrialCtx) -> Result<(&'static [u8], Option<&'static str>)> {
    match ctx.params.get("helper").unwrap_or("static") {
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

fn fork_exec(ctx: &TrialCtx) -> Result<TrialOutput> {
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

fn fork_sh(ctx: &TrialCtx) -> Result<TrialOutput> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::child::fork_child;
    use nix::sys::wait::{waitpid, WaitStatus};
    use std::path::Path;

    fn ctx(dir: &Path, trial: Duration, params: &[(&str, &str)]) -> TrialCtx {
        let mut c = crate::test_ctx(params, 0).in_dir(dir);
        c.trial_time = trial;
        c
    }

    /// Runs one workload the way production does: in a single-threaded
    /// child process. The test harness has several threads, and a signal sent
    /// to the process may be handled by another one (or arrive after the
    /// handler is gone), which would measure and break the wrong thing.
    /// Returns (latency, iterations, notes).
    fn run_in_child(name: &str, trial: Duration, params: &[(&str, &str)]) -> (f64, u64, String) {
        run_in_child_on(name, trial, params, &[0])
    }

    /// [`run_in_child`] on the CPU configuration `cpus`.
    fn run_in_child_on(
        name: &str,
        trial: Duration,
        params: &[(&str, &str)],
        cpus: &[usize],
    ) -> (f64, u64, String) {
        let w = FAMILY
            .workloads
            .iter()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("no workload {name}"));
        let root = tempfile::tempdir().unwrap();
        let work = root.path().join("work");
        std::fs::create_dir(&work).unwrap();
        let result = root.path().join("result");
        let mut c = ctx(&work, trial, params);
        c.cpus = cpus.to_vec();
        let pid = fork_child(|| match (w.run)(&c) {
            Ok(out) => {
                // The other metrics' values go with the notes, as `name=value`.
                let others = out
                    .values
                    .iter()
                    .filter(|(k, _)| k.as_str() != "latency")
                    .map(|(k, v)| format!("{k}={v}"));
                let notes: Vec<String> = out.notes.iter().cloned().chain(others).collect();
                let line = format!(
                    "{} {} {}",
                    out.values["latency"],
                    out.iterations,
                    notes.join("; ")
                );
                i32::from(std::fs::write(&result, line).is_err())
            }
            Err(e) => {
                let _ = std::fs::write(&result, format!("{e:#}"));
                2
            }
        })
        .unwrap();
        let status = waitpid(pid, None).unwrap();
        let text = std::fs::read_to_string(&result).unwrap_or_default();
        assert_eq!(status, WaitStatus::Exited(pid, 0), "{name}: {text}");
        // Every file the workload made is gone.
        assert_eq!(
            std::fs::read_dir(&work).unwrap().count(),
            0,
            "{name} left files"
        );
        let mut parts = text.splitn(3, ' ');
        let v: f64 = parts.next().unwrap().parse().unwrap();
        let n: u64 = parts.next().unwrap().parse().unwrap();
        (v, n, parts.next().unwrap_or("").to_string())
    }

    fn run_one(name: &str) {
        let (v, n, _) = run_in_child(name, Duration::from_millis(20), &[]);
        assert!(v.is_finite() && v > 0.0, "{name}: {v}");
        assert!(n > 0);
    }

    #[test]
    fn all_fourteen_workloads() {
        let names: Vec<_> = FAMILY.workloads.iter().map(|w| w.name).collect();
        assert_eq!(
            names,
            [
                "null",
                "read",
                "write",
                "stat",
                "fstat",
                "open_close",
                "sig_install",
                "sig_catch",
                "prot_fault",
                "pipe",
                "unix",
                "fork_exit",
                "fork_exec",
                "fork_sh"
            ]
        );
    }

    #[test]
    fn null() {
        run_one("null");
    }
    #[test]
    fn read() {
        run_one("read");
    }
    #[test]
    fn write() {
        run_one("write");
    }
    #[test]
    fn stat() {
        run_one("stat");
    }
    #[test]
    fn fstat() {
        run_one("fstat");
    }
    #[test]
    fn open_close() {
        run_one("open_close");
    }
    #[test]
    fn sig_install() {
        run_one("sig_install");
    }
    #[test]
    fn sig_catch() {
        run_one("sig_catch");
    }
    /// helper=dynamic runs a program with an ELF interpreter (the dynamic
    /// loader), helper=static one without, and both run.
    #[test]
    fn fork_exec_helpers_differ_in_linkage() {
        // An ELF64 program header of type PT_INTERP (3) names a loader.
        let interp = |b: &[u8]| {
            let u = |at: usize, len: usize| {
                b[at..at + len]
                    .iter()
                    .rev()
                    .fold(0usize, |a, &x| a << 8 | usize::from(x))
            };
            let (off, size, num) = (u(32, 8), u(54, 2), u(56, 2));
            (0..num).any(|i| u(off + i * size, 4) == 3)
        };
        assert!(interp(HELLO_DYN), "the dynamic helper names no loader");
        if HELLO_LINKAGE == "static" {
            assert!(!interp(HELLO), "the static helper names a loader");
        }
        for helper in ["static", "dynamic"] {
            let (v, n, _) = run_in_child(
                "fork_exec",
                Duration::from_millis(20),
                &[("helper", helper)],
            );
            assert!(v.is_finite() && v > 0.0 && n > 0, "{helper}: {v}");
        }
    }

    #[test]
    fn stat_and_open_take_a_given_file_and_refuse_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let given = dir.path().join("given");
        std::fs::write(&given, b"x").unwrap();
        let given = given.to_str().unwrap();
        for name in ["stat", "open_close"] {
            let (v, _, _) = run_in_child(name, Duration::from_millis(20), &[("file", given)]);
            assert!(v > 0.0, "{name}: {v}");
            let w = FAMILY.workloads.iter().find(|w| w.name == name).unwrap();
            let missing = dir.path().join("missing");
            let c = ctx(
                dir.path(),
                Duration::from_millis(5),
                &[("file", missing.to_str().unwrap())],
            );
            let e = (w.run)(&c).unwrap_err().to_string();
            assert!(e.contains("not an existing regular file"), "{e}");
        }
        assert!(
            std::path::Path::new(given).exists(),
            "a given file is only read"
        );
    }

    #[test]
    fn prot_fault() {
        // The figure is the fault's median less the signal overhead's; on a
        // loaded machine the difference can reach the floor at 0, so the
        // test checks the measured fault itself and that the figure is the
        // difference, not only that it is positive.
        let (v, n, notes) = run_in_child("prot_fault", Duration::from_millis(100), &[]);
        let num = |label: &str| -> f64 {
            let rest =
                &notes[notes.find(label).unwrap_or_else(|| panic!("{notes}")) + label.len()..];
            let end = rest.find(';').unwrap_or(rest.len());
            rest[..end].trim().parse().unwrap()
        };
        let (fault, sig) = (num("fault_signal="), num("handler="));
        assert!(fault > 0.0 && sig.is_finite() && n > 0, "{notes}");
        assert!((v - (fault - sig).max(0.0)).abs() < 1e-3, "{v} vs {notes}");
    }
    #[test]
    fn pipe() {
        run_one("pipe");
    }
    #[test]
    fn unix() {
        run_one("unix");
    }
    #[test]
    fn fork_exit() {
        run_one("fork_exit");
    }

    /// On two CPUs each `place` puts the pair where its note says; the
    /// partner's mask is checked by `Placement::fork` before the note is
    /// written, so a note is only there if the kernel holds the placement.
    #[test]
    fn pipe_and_unix_place_their_pair() {
        let Some(cpus) = crate::shared::place::tests::two_cpus() else {
            return;
        };
        for name in ["pipe", "unix"] {
            for place in ["spread", "same", "os"] {
                let (v, _, notes) =
                    run_in_child_on(name, Duration::from_millis(20), &[("place", place)], &cpus);
                assert!(v > 0.0, "{name} {place}: {v}");
                let want = Placement::new(place, &cpus).unwrap().note(2, "partner");
                assert_eq!(notes, want, "{name} {place}");
            }
        }
        let (.., notes) = run_in_child_on("pipe", Duration::from_millis(20), &[], &cpus);
        assert_eq!(
            notes,
            format!(
                "placement: spread (worker on CPU {}, partner on CPU {})",
                cpus[0], cpus[1]
            ),
            "spread is the default"
        );
    }
    #[test]
    fn fork_exec() {
        run_one("fork_exec");
    }
    #[test]
    fn fork_sh() {
        run_one("fork_sh");
    }

    #[test]
    fn fixed_iterations_are_honoured() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = ctx(dir.path(), Duration::from_millis(20), &[]);
        c.iterations = Some(7);
        let out = super::fork_exit(&c).unwrap();
        assert_eq!(out.iterations, 7);
    }

    /// Figures to set beside the reference tools', 0.5 s trials:
    /// `taskset -c 0 cargo test -p kscale-workloads --release syscall::tests::measure -- --ignored --nocapture`
    /// (`KSCALE_ONLY=pipe,unix` picks workloads).
    #[test]
    #[ignore]
    fn measure() {
        let only = std::env::var("KSCALE_ONLY").ok();
        for w in FAMILY.workloads {
            if only
                .as_deref()
                .is_some_and(|o| !o.split(',').any(|x| x == w.name))
            {
                continue;
            }
            let (v, n, notes) = run_in_child(w.name, Duration::from_millis(500), &[]);
            println!("{:<12} {:>12.4} µs  n={:<10} {}", w.name, v, n, notes);
        }
    }
}
