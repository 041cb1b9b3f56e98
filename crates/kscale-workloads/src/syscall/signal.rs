//! Signals: installing a handler, catching one, and a protection fault
//! turned into a signal.

use super::{latency, FAULT_SIGNAL, HANDLER};
use crate::shared::buf::Mapping;
use crate::shared::fd::os_err;
use crate::shared::scratch::ScratchFile;
use crate::{timed, TrialCtx, TrialOutput};
use anyhow::{ensure, Context, Result};
use kscale_core::stats::median;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{compiler_fence, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

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

pub(super) fn sig_install(ctx: &TrialCtx) -> Result<TrialOutput> {
    let handler = empty_handler as extern "C" fn(libc::c_int) as libc::sighandler_t;
    let _restore = SigRestore::install(libc::SIGUSR1, &action(handler, 0))?;
    // SAFETY: an all-zero sigaction is a valid buffer for the old action.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    let mut sa = action(handler, 0);
    let (per_op, n) = ctx.time_per_op(|n| {
        ctx.timed(|| {
            for _ in 0..n {
                // Filled inside the loop as lmbench's loop does (handler,
                // empty mask, flags), so the figure includes what a program
                // does to install a handler; the struct is not zeroed anew
                // each time, which lmbench does not do either.
                sa.sa_sigaction = handler;
                // SAFETY: sa_mask is a valid sigset_t owned by sa.
                unsafe { libc::sigemptyset(&mut sa.sa_mask) };
                sa.sa_flags = 0;
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
    /// One timing of `n` operations from a fresh record, `chunk` doing them
    /// at most [`CHUNK`] at a time; the seconds its chunks timed.
    fn run(
        &mut self,
        n: u64,
        mut chunk: impl FnMut(&mut Interleaved, u64) -> Result<()>,
    ) -> Result<Duration> {
        *self = Interleaved::default();
        let mut left = n;
        while left > 0 {
            let k = left.min(CHUNK);
            chunk(self, k)?;
            left -= k;
        }
        Ok(Duration::from_secs_f64(self.total))
    }

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

pub(super) fn sig_catch(ctx: &TrialCtx) -> Result<TrialOutput> {
    let _restore = install_empty_usr1()?;
    let mut iv = Interleaved::default();
    let (_, n) = ctx.time_per_op(|n| iv.run(n, |iv, k| iv.kill_chunk(k)))?;
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
        die_of(sig);
        return;
    }
    count_fault(sig, page, len, PROT_TARGET.load(Ordering::SeqCst));
}

/// `handler=plain`, lat_sig prot's handler: one argument, no siginfo, so
/// it cannot see where the fault was. It counts only while a timed write
/// is under way (`PROT_PAGE` set and a target armed by
/// [`ProtPage::fault`]); any other fault restores the default action so
/// the process dies of it as it should.
extern "C" fn prot_handler_plain(sig: libc::c_int) {
    let page = PROT_PAGE.load(Ordering::SeqCst);
    let target = PROT_TARGET.load(Ordering::SeqCst);
    if page == 0 || target == 0 {
        die_of(sig);
        return;
    }
    count_fault(sig, page, PROT_LEN.load(Ordering::SeqCst), target);
}

/// What both handlers do with one of their faults: count it, and at the
/// `target`-th make the page writable so the write completes (or die of
/// `sig` when that fails, instead of looping for ever).
fn count_fault(sig: libc::c_int, page: usize, len: usize, target: u64) {
    let faults = PROT_FAULTS.fetch_add(1, Ordering::SeqCst) + 1;
    if faults >= target {
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: page..page+len is the mapping prot_fault owns; mprotect is a
        // plain system call.
        if unsafe { libc::mprotect(page as *mut libc::c_void, len, rw) } != 0 {
            die_of(sig);
        }
    }
}

/// The default action back for `sig`, so that the fault it repeats kills
/// the process.
fn die_of(sig: libc::c_int) {
    // SAFETY: signal() is async-signal-safe.
    unsafe { libc::signal(sig, libc::SIG_DFL) };
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
        // Disarmed: a fault from here on is not one of ours.
        PROT_TARGET.store(0, Ordering::SeqCst);
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

pub(super) fn prot_fault(ctx: &TrialCtx) -> Result<TrialOutput> {
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
    let sa = match ctx.param(&super::PROT_PARAMS[0])?.as_str() {
        "plain" => action(
            prot_handler_plain as extern "C" fn(libc::c_int) as libc::sighandler_t,
            0,
        ),
        _ => action(
            prot_handler as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as libc::sighandler_t,
            libc::SA_SIGINFO,
        ),
    };
    let _segv = SigRestore::install(libc::SIGSEGV, &sa)?;
    // Some systems report a fault on a shared file mapping as SIGBUS.
    let _bus = SigRestore::install(libc::SIGBUS, &sa)?;

    let mut iv = Interleaved::default();
    let (_, n) = ctx.time_per_op(|n| {
        iv.run(n, |iv, k| {
            let t = page.fault(k)?.as_secs_f64();
            iv.fault.push(t / k as f64);
            iv.total += t;
            iv.kill_chunk(k)
        })
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
