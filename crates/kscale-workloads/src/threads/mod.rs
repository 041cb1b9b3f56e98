//! `threads`: the thread library (docs/families/threads.md, seed 001 — the NPTL benchmarks).
//!
//! Four tests, each a loop run for a fixed time (the seed's 5 s alarm) and
//! counted: `lifecycle`, `context`, `wakeup`, `uncontested`. Each runs
//! against several implementations of the primitives (`impl`): glibc's
//! pthreads called directly, Rust's std, a minimal futex mutex/condvar of
//! our own, and a spin lock — today's counterpart of LinuxThreads vs NPTL.
//!
//! Metrics: operations per second (primary), wall-clock ns per operation,
//! and cycles per operation. **cycles/op is the CPU cycles spent by all the
//! test's threads together (user + kernel, idle time not included) divided
//! by the operations** — not wall-clock cycles (which would be ns/op times
//! the clock rate and add nothing). It comes from perf_event_open's
//! cpu-cycles counter inherited by every thread the test creates, or, where
//! the kernel refuses that, from the process's CPU time times the TSC rate
//! measured against CLOCK_MONOTONIC over the same window; a trial note says
//! which.

mod futex;
mod prims;

use crate::timing::process_cpu_time;
use crate::{Family, TrialCtx, TrialOutput, VariantsDef, WorkloadDef};
use anyhow::{bail, ensure, Context, Result};
use kscale_core::{MetricDef, ParamDef, ParamKind};
use kscale_sys::perf::CycleCounter;
use prims::{Futex, Monitor, Pthread, Spin, Std};
use std::collections::VecDeque;
use std::hint::black_box;
use std::time::{Duration, Instant};

const OPS: MetricDef = MetricDef::higher("ops", "ops/s");
const NS: MetricDef = MetricDef::lower("ns", "ns");
const CYCLES: MetricDef = MetricDef::lower("cycles", "cycles");
const METRICS: &[MetricDef] = &[OPS, NS, CYCLES];

/// Seed 001's table: each implementation's rate beside the others', against
/// NPTL (glibc's pthreads today).
const IMPLS: VariantsDef = VariantsDef {
    title: "Thread library implementations",
    param: "impl",
    heading: "Implementation",
    metrics: &[("ops", "ops/s"), ("ns", "ns/op"), ("cycles", "cycles/op")],
    baseline: "pthread",
    note: "cycles/op: CPU cycles of all the test's threads per operation.",
};

const SECONDS: ParamDef = ParamDef {
    name: "seconds",
    help: "Length of the timed loop (the seed's 5 s alarm); 0 uses the run's --trial-time. \
           The trial's time limit grows with it.",
    kind: ParamKind::Seconds {
        min: 0.0,
        max: 86400.0,
    },
    default: &["5"],
    quick: &["1"],
};

const TIMEOUT: Duration = Duration::from_secs(60);

/// The `impl` of the tests that every implementation runs: the ones that
/// use only the lock and the condition variable.
const EVERY_IMPL: ParamDef = ParamDef {
    name: "impl",
    help: "pthread, std, futex or spin.",
    kind: ParamKind::Choice(&["pthread", "std", "futex", "spin"]),
    default: &["pthread", "std", "futex", "spin"],
    quick: &[],
};

pub static FAMILY: Family = Family {
    name: "threads",
    title: "Thread library",
    help: "Thread create/join, mutex hand-over switches, condition-variable wake-ups and \
           uncontested locking, each a fixed-time loop against several implementations \
           (pthread, std, futex, spin), as the NPTL benchmarks of seed 001. Metrics: ops/s, \
           wall-clock ns/op, and cycles/op = CPU cycles of all the test's threads (user + \
           kernel) per operation, from perf_event_open cpu-cycles or, where refused, CPU time \
           × measured TSC rate (a note says which).",
    workloads: &[
        WorkloadDef {
            family: "threads",
            name: "lifecycle",
            title: "Thread create + join",
            help: "Create a thread that returns at once and join it, for `seconds`. pthread: \
                   pthread_create/pthread_join with pthread_attr_setstacksize(stack); std: \
                   thread::Builder::stack_size(stack).spawn().join(). No `futex` or `spin` \
                   variant: those replace the lock and condition variable, not the thread \
                   library. When perf counts cycles, each new thread inherits the counter, \
                   which adds the kernel's per-thread event set-up to the figure.",
            params: &[
                ParamDef {
                    name: "impl",
                    help: "Thread library: pthread (glibc, direct) or std (Rust).",
                    kind: ParamKind::Choice(&["pthread", "std"]),
                    default: &["pthread", "std"],
                    quick: &[],
                },
                ParamDef {
                    name: "stack",
                    help: "Stack size of each thread (the seed's page-size study, today).",
                    kind: ParamKind::Size {
                        min: 16 << 10,
                        max: 1 << 30,
                    },
                    default: &["64k", "8m"],
                    quick: &[],
                },
                SECONDS,
            ],
            metrics: METRICS,
            variants: Some(IMPLS),
            timeout: TIMEOUT,
            run: lifecycle,
            ..WorkloadDef::BASE
        },
        WorkloadDef {
            family: "threads",
            name: "context",
            title: "Mutex hand-over switches",
            help: "`threads` threads (2 as in the seed) fight over one mutex-guarded turn: \
                   each takes the mutex, hands the turn to the next, and waits on a condition \
                   variable for its turn again; counts hand-overs. spin: a spin lock, waiting \
                   by polling (yielding the CPU after 100 spins).",
            params: &[
                EVERY_IMPL,
                ParamDef {
                    name: "threads",
                    help: "Threads passing the turn around a ring (2 = the seed's fight).",
                    kind: ParamKind::Count { max: 4096 },
                    default: &["2"],
                    quick: &[],
                },
                SECONDS,
            ],
            metrics: METRICS,
            variants: Some(IMPLS),
            timeout: TIMEOUT,
            run: context,
            ..WorkloadDef::BASE
        },
        WorkloadDef {
            family: "threads",
            name: "wakeup",
            title: "Condition-variable wake-ups",
            help: "One master and `workers` workers (10 as in the seed). Workers wait on a \
                   condition variable over a bounded queue; the master fills the queue, \
                   signals one waiter, which drains it and signals back that the queue has \
                   room; counts wake-ups (drained batches).",
            params: &[
                ParamDef {
                    name: "impl",
                    help: "pthread, std or futex.",
                    kind: ParamKind::Choice(&["pthread", "std", "futex"]),
                    default: &["pthread", "std", "futex"],
                    quick: &[],
                },
                ParamDef {
                    name: "workers",
                    help: "Worker threads waiting on the queue.",
                    kind: ParamKind::Count { max: 4096 },
                    default: &["10"],
                    quick: &[],
                },
                SECONDS,
            ],
            metrics: METRICS,
            variants: Some(IMPLS),
            timeout: TIMEOUT,
            run: wakeup,
            ..WorkloadDef::BASE
        },
        WorkloadDef {
            family: "threads",
            name: "uncontested",
            title: "Uncontested lock + unlock",
            help: "Lock and unlock a mutex no other thread touches, in one thread; one \
                   operation is a lock + unlock pair (the seed halves its time for a single \
                   lock operation). A second thread sits parked meanwhile: glibc skips the \
                   atomic instructions of a private mutex in a single-threaded process, \
                   which no program that needs a mutex is.",
            params: &[EVERY_IMPL, SECONDS],
            metrics: METRICS,
            variants: Some(IMPLS),
            timeout: TIMEOUT,
            run: uncontested,
            ..WorkloadDef::BASE
        },
    ],
};

fn duration(ctx: &TrialCtx) -> Result<Duration> {
    let s = ctx.params.seconds("seconds")?;
    Ok(if s == 0.0 {
        ctx.trial_time
    } else {
        Duration::from_secs_f64(s)
    })
}

// ---------------------------------------------------------------- cycles

/// Where cycles come from for one trial.
enum Source {
    Perf(CycleCounter),
    /// perf refused (the reason is kept for the note).
    Tsc(String),
}

/// Measures one timed window: wall time, and cycles of all the process's
/// threads. Must be created before the test spawns its threads, so that the
/// perf counter is inherited by them.
struct Meter {
    source: Source,
    start: Option<Mark>,
}

#[derive(Clone, Copy)]
struct Mark {
    wall: Instant,
    cpu: Duration,
    tsc: u64,
}

/// The measured window.
struct Measured {
    secs: f64,
    cycles: f64,
    note: String,
}

/// The time-stamp counter; on other architectures the monotonic clock in ns,
/// which makes the "TSC rate" come out as 1 GHz, and the note says so.
fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc has no preconditions on x86_64.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static T0: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        T0.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// The monotonic clock and the TSC read together: a preemption between
/// the two reads (common on a loaded machine) would skew the measured TSC
/// rate, so retry until both fall within a few microseconds.
fn clock_pair() -> (Instant, u64) {
    let mut best = (Instant::now(), tsc(), u64::MAX);
    for _ in 0..20 {
        let a = tsc();
        let t = Instant::now();
        let b = tsc();
        let gap = b.wrapping_sub(a);
        if gap < best.2 {
            best = (t, a + gap / 2, gap);
        }
        if gap < 10_000 {
            break;
        }
    }
    (best.0, best.1)
}

impl Meter {
    /// `use_perf = false` forces the TSC path (for tests); perf is also
    /// skipped when `KSCALE_NO_PERF` is set.
    fn new(use_perf: bool) -> Meter {
        let source = if use_perf {
            match CycleCounter::new() {
                Ok(c) => Source::Perf(c),
                Err(r) => Source::Tsc(r.to_string()),
            }
        } else {
            Source::Tsc("not asked for".into())
        };
        Meter {
            source,
            start: None,
        }
    }

    fn start(&mut self) -> Result<()> {
        if let Source::Perf(c) = &self.source {
            c.reset().context("resetting the cycle counter")?;
            c.enable().context("enabling the cycle counter")?;
        }
        let cpu = process_cpu_time()?;
        let (wall, tsc) = clock_pair();
        self.start = Some(Mark { wall, cpu, tsc });
        Ok(())
    }

    /// The wall time of the window ends now; cycles are read after the
    /// caller's threads are joined (`finish`), so that their counts are in.
    fn stop_clock(&self) -> Result<f64> {
        let s = self.start.context("meter not started")?;
        Ok(s.wall.elapsed().as_secs_f64())
    }

    fn finish(&self, secs: f64) -> Result<Measured> {
        let s = self.start.context("meter not started")?;
        match &self.source {
            Source::Perf(c) => {
                c.disable().context("disabling the cycle counter")?;
                let r = c.read().context("reading the cycle counter")?;
                let mut note = "cycles/op: CPU cycles of all threads from perf_event_open \
                                cpu-cycles (user + kernel)"
                    .to_string();
                if r.scaled() {
                    note.push_str(", scaled for counter multiplexing");
                }
                Ok(Measured {
                    secs,
                    cycles: r.count as f64,
                    note,
                })
            }
            Source::Tsc(why) => {
                let cpu = process_cpu_time()?.saturating_sub(s.cpu).as_secs_f64();
                let (wall, t1) = clock_pair();
                let w = wall.duration_since(s.wall).as_secs_f64();
                ensure!(w > 0.0, "empty measurement window");
                let hz = t1.wrapping_sub(s.tsc) as f64 / w;
                let arch = if cfg!(target_arch = "x86_64") {
                    "TSC"
                } else {
                    "a nominal 1 GHz clock (no TSC on this architecture)"
                };
                Ok(Measured {
                    secs,
                    cycles: cpu * hz,
                    note: format!(
                        "cycles/op: CPU time of all threads × {arch} at {:.1} GHz (perf \
                         refused: {why})",
                        hz / 1e9
                    ),
                })
            }
        }
    }
}

fn output(ops: u64, m: Measured) -> Result<TrialOutput> {
    ensure!(
        ops > 0,
        "no operation completed in {:.3} s (the machine may be overloaded)",
        m.secs
    );
    let n = ops as f64;
    Ok(TrialOutput::new(ops)
        .with(&OPS, n / m.secs)
        .with(&NS, m.secs * 1e9 / n)
        .with(&CYCLES, m.cycles / n)
        .note(m.note))
}

// ---------------------------------------------------------------- lifecycle

extern "C" fn returns_at_once(_: *mut libc::c_void) -> *mut libc::c_void {
    std::ptr::null_mut()
}

/// A pthread attribute object, destroyed on every path.
struct Attr(libc::pthread_attr_t);

impl Attr {
    fn with_stack(bytes: usize) -> Result<Attr> {
        // SAFETY: pthread_attr_init fully initialises the zeroed storage.
        let mut a = Attr(unsafe { std::mem::zeroed() });
        // SAFETY: a.0 is valid storage for an attribute object.
        let rc = unsafe { libc::pthread_attr_init(&mut a.0) };
        ensure!(rc == 0, "pthread_attr_init: errno {rc}");
        // SAFETY: a.0 was initialised above.
        let rc = unsafe { libc::pthread_attr_setstacksize(&mut a.0, bytes) };
        ensure!(
            rc == 0,
            "pthread_attr_setstacksize({bytes}): {} (minimum is PTHREAD_STACK_MIN = {})",
            std::io::Error::from_raw_os_error(rc),
            libc::PTHREAD_STACK_MIN
        );
        Ok(a)
    }
}

impl Drop for Attr {
    fn drop(&mut self) {
        // SAFETY: initialised in with_stack (a failed init returns before
        // Attr escapes... but init cannot fail on glibc; destroy of an
        // initialised attr is always valid).
        unsafe { libc::pthread_attr_destroy(&mut self.0) };
    }
}

fn lifecycle(ctx: &TrialCtx) -> Result<TrialOutput> {
    let dur = duration(ctx)?;
    let stack = usize::try_from(ctx.params.size("stack")?).context("stack too large")?;
    let which = ctx.params.get("impl")?.to_string();
    let mut meter = Meter::new(true);
    let attr = Attr::with_stack(stack)?;
    let mut ops = 0u64;
    meter.start()?;
    let deadline = Instant::now() + dur;
    match which.as_str() {
        "pthread" => loop {
            let mut tid: libc::pthread_t = 0;
            // SAFETY: tid and attr are valid; the start routine ignores its
            // argument and returns null.
            let rc = unsafe {
                libc::pthread_create(&mut tid, &attr.0, returns_at_once, std::ptr::null_mut())
            };
            if rc != 0 {
                bail!("pthread_create: {}", std::io::Error::from_raw_os_error(rc));
            }
            // SAFETY: tid is a joinable thread created above, joined once.
            let rc = unsafe { libc::pthread_join(tid, std::ptr::null_mut()) };
            ensure!(
                rc == 0,
                "pthread_join: {}",
                std::io::Error::from_raw_os_error(rc)
            );
            ops += 1;
            if Instant::now() >= deadline {
                break;
            }
        },
        "std" => loop {
            std::thread::Builder::new()
                .stack_size(stack)
                .spawn(|| {})
                .context("spawning a thread")?
                .join()
                .map_err(|_| anyhow::anyhow!("the empty thread panicked"))?;
            ops += 1;
            if Instant::now() >= deadline {
                break;
            }
        },
        other => bail!("threads.lifecycle has no `{other}` implementation"),
    }
    let secs = meter.stop_clock()?;
    output(ops, meter.finish(secs)?)
}

// ---------------------------------------------------------------- context

struct Turn {
    /// Whose turn it is; `usize::MAX` until the clock starts.
    turn: usize,
    switches: u64,
    stop: bool,
}

fn context_with<M: Monitor<Turn>>(
    n: usize,
    dur: Duration,
    meter: &mut Meter,
) -> Result<(u64, f64)> {
    let m = M::new(Turn {
        turn: usize::MAX,
        switches: 0,
        stop: false,
    });
    // With two threads the only waiter is the next one; in a bigger ring a
    // single signal could wake the wrong thread, so wake them all.
    let wake = |m: &M| {
        if n == 2 {
            m.notify_one(0)
        } else {
            m.notify_all(0)
        }
    };
    std::thread::scope(|s| -> Result<(u64, f64)> {
        for me in 0..n {
            let m = &m;
            std::thread::Builder::new()
                .spawn_scoped(s, move || loop {
                    let go = m.wait_for(0, |t| {
                        if t.stop {
                            Some(false)
                        } else if t.turn == me {
                            t.turn = (me + 1) % n;
                            t.switches += 1;
                            Some(true)
                        } else {
                            None
                        }
                    });
                    if !go {
                        break;
                    }
                    wake(m);
                })
                .with_context(|| format!("spawning thread {me} of {n}"))
                .inspect_err(|_| {
                    // Release the threads already started so the scope can join.
                    m.with(|t| t.stop = true);
                    m.notify_all(0);
                })?;
        }
        let started = meter.start();
        m.with(|t| t.turn = 0);
        m.notify_all(0);
        if started.is_ok() {
            std::thread::sleep(dur);
        }
        let switches = m.with(|t| {
            t.stop = true;
            t.switches
        });
        let secs = meter.stop_clock();
        m.notify_all(0);
        started?;
        Ok((switches, secs?))
    })
}

fn context(ctx: &TrialCtx) -> Result<TrialOutput> {
    let dur = duration(ctx)?;
    let n = ctx.params.count("threads", ctx.cpus.len())? as usize;
    ensure!(n >= 2, "threads.context needs at least 2 threads, got {n}");
    let mut meter = Meter::new(true);
    let (ops, secs) = match ctx.params.get("impl")? {
        "pthread" => context_with::<Pthread<Turn>>(n, dur, &mut meter)?,
        "std" => context_with::<Std<Turn>>(n, dur, &mut meter)?,
        "futex" => context_with::<Futex<Turn>>(n, dur, &mut meter)?,
        "spin" => context_with::<Spin<Turn>>(n, dur, &mut meter)?,
        other => bail!("threads.context has no `{other}` implementation"),
    };
    output(ops, meter.finish(secs)?)
}

// ---------------------------------------------------------------- wakeup

/// Items per fill of the bounded queue.
const QUEUE: usize = 10;
const WORK: usize = 0;
/// How long the master waits for a drained queue before calling it a lost
/// wake-up: hundreds of times a loaded machine's scheduling delay.
const WATCHDOG: Duration = Duration::from_secs(2);
const SPACE: usize = 1;

struct Queue {
    items: VecDeque<u64>,
    wakeups: u64,
    stop: bool,
}

fn wakeup_with<M: Monitor<Queue>>(
    workers: usize,
    dur: Duration,
    meter: &mut Meter,
) -> Result<(u64, f64)> {
    let m = M::new(Queue {
        items: VecDeque::with_capacity(QUEUE),
        wakeups: 0,
        stop: false,
    });
    std::thread::scope(|s| -> Result<(u64, f64)> {
        for i in 0..workers {
            let m = &m;
            std::thread::Builder::new()
                .spawn_scoped(s, move || loop {
                    let got = m.wait_for(WORK, |q| {
                        if q.stop {
                            Some(None)
                        } else if q.items.is_empty() {
                            None
                        } else {
                            q.wakeups += 1;
                            Some(Some(q.items.drain(..).sum::<u64>()))
                        }
                    });
                    match got {
                        Some(sum) => {
                            black_box(sum);
                            m.notify_one(SPACE);
                        }
                        None => break,
                    }
                })
                .with_context(|| format!("spawning worker {i} of {workers}"))
                .inspect_err(|_| {
                    m.with(|q| q.stop = true);
                    m.notify_all(WORK);
                })?;
        }
        let mut result = meter.start();
        if result.is_ok() {
            let deadline = Instant::now() + dur;
            let mut next = 0u64;
            while Instant::now() < deadline {
                let filled = m.wait_for_timeout(SPACE, WATCHDOG, |q| {
                    q.items.is_empty().then(|| {
                        q.items.extend(next..next + QUEUE as u64);
                        next += QUEUE as u64;
                    })
                });
                if filled.is_none() {
                    result = Err(anyhow::anyhow!(
                        "lost wake-up: the queue stayed full for {} s with {workers} workers \
                         waiting on it (a signalled waiter never woke, or the master missed \
                         its signal) — a bug in the condition variable implementation \
                         (glibc before 2.41 has one: sourceware bug 25847)",
                        WATCHDOG.as_secs()
                    ));
                    break;
                }
                m.notify_one(WORK);
            }
        }
        let wakeups = m.with(|q| {
            q.stop = true;
            q.wakeups
        });
        let secs = meter.stop_clock();
        m.notify_all(WORK);
        result?;
        Ok((wakeups, secs?))
    })
}

fn wakeup(ctx: &TrialCtx) -> Result<TrialOutput> {
    let dur = duration(ctx)?;
    let workers = ctx.params.count("workers", ctx.cpus.len())? as usize;
    let mut meter = Meter::new(true);
    let (ops, secs) = match ctx.params.get("impl")? {
        "pthread" => wakeup_with::<Pthread<Queue>>(workers, dur, &mut meter)?,
        "std" => wakeup_with::<Std<Queue>>(workers, dur, &mut meter)?,
        "futex" => wakeup_with::<Futex<Queue>>(workers, dur, &mut meter)?,
        other => bail!("threads.wakeup has no `{other}` implementation"),
    };
    output(ops, meter.finish(secs)?)
}

// ---------------------------------------------------------------- uncontested

/// Lock/unlock pairs between two looks at the clock: enough to make the
/// clock read (~20 ns) negligible, few enough to stop within microseconds
/// of the deadline.
const BATCH: u64 = 1000;

fn uncontested_with<M: Monitor<u64>>(dur: Duration, meter: &mut Meter) -> Result<(u64, f64)> {
    // glibc takes a private mutex without atomic instructions while the
    // process has a single thread; a mutex exists for threaded programs, so
    // a second thread sits parked (blocked, using no CPU) for the whole loop.
    let (park, parked) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .spawn_scoped(s, move || {
                let _ = parked.recv();
            })
            .context("spawning the parked thread")?;
        let r = uncontested_loop::<M>(dur, meter);
        drop(park);
        r
    })
}

fn uncontested_loop<M: Monitor<u64>>(dur: Duration, meter: &mut Meter) -> Result<(u64, f64)> {
    let m = M::new(0);
    meter.start()?;
    let deadline = Instant::now() + dur;
    let mut ops = 0u64;
    loop {
        for _ in 0..BATCH {
            m.with(|x| *x = x.wrapping_add(1));
        }
        ops += BATCH;
        if Instant::now() >= deadline {
            break;
        }
    }
    let secs = meter.stop_clock()?;
    ensure!(m.with(|x| *x) == ops, "the lock lost updates");
    Ok((ops, secs))
}

fn uncontested(ctx: &TrialCtx) -> Result<TrialOutput> {
    let dur = duration(ctx)?;
    let mut meter = Meter::new(true);
    let (ops, secs) = match ctx.params.get("impl")? {
        "pthread" => uncontested_with::<Pthread<u64>>(dur, &mut meter)?,
        "std" => uncontested_with::<Std<u64>>(dur, &mut meter)?,
        "futex" => uncontested_with::<Futex<u64>>(dur, &mut meter)?,
        "spin" => uncontested_with::<Spin<u64>>(dur, &mut meter)?,
        other => bail!("threads.uncontested has no `{other}` implementation"),
    };
    output(ops, meter.finish(secs)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `seconds=0` makes the tests use the short trial time instead of 5 s.
    fn ctx(params: &[(&str, &str)]) -> TrialCtx {
        let mut p = params.to_vec();
        p.push(("seconds", "0"));
        crate::test_ctx(&p, 30)
    }

    fn check(out: &TrialOutput, what: &str) {
        for m in METRICS {
            let v = out.values[m.name];
            assert!(v.is_finite() && v > 0.0, "{what}: {} = {v}", m.name);
        }
        assert!(out.iterations > 0);
        assert!(out.notes.iter().any(|n| n.contains("cycles/op")), "{what}");
    }

    #[test]
    fn every_test_and_impl_runs() {
        for w in FAMILY.workloads {
            let imps = w.param("impl").map(|p| p.default).unwrap_or_default();
            for imp in imps {
                let mut p = vec![("impl", *imp)];
                if w.name == "lifecycle" {
                    p.push(("stack", "64k"));
                }
                if w.name == "context" {
                    p.push(("threads", "2"));
                }
                if w.name == "wakeup" {
                    p.push(("workers", "10"));
                }
                let out = (w.run)(&ctx(&p)).unwrap_or_else(|e| panic!("{} {imp}: {e:#}", w.id()));
                check(&out, &format!("{} {imp}", w.id()));
            }
        }
    }

    #[test]
    fn context_ring_of_three() {
        let out = context(&ctx(&[("impl", "futex"), ("threads", "3")])).unwrap();
        check(&out, "ring of 3");
    }

    /// The fallback path, forced: a busy second of work must come out near
    /// the TSC rate times the CPU time, i.e. a plausible clock rate.
    #[test]
    fn tsc_fallback() {
        // The work is bounded by CPU time, not wall time, and the rate is
        // cycles per CPU second: on a loaded machine the process may get a
        // small share of the wall clock, which says nothing about the TSC.
        let mut m = Meter::new(false);
        let cpu0 = process_cpu_time().unwrap();
        m.start().unwrap();
        let mut x = 0u64;
        while process_cpu_time().unwrap() - cpu0 < Duration::from_millis(50) {
            for _ in 0..1000 {
                x = black_box(x.wrapping_add(1));
            }
        }
        let secs = m.stop_clock().unwrap();
        let r = m.finish(secs).unwrap();
        let cpu = (process_cpu_time().unwrap() - cpu0).as_secs_f64();
        let ghz = r.cycles / cpu / 1e9;
        assert!((0.2..10.0).contains(&ghz), "{ghz} GHz");
        assert!(
            r.note.contains("TSC") || r.note.contains("nominal"),
            "{}",
            r.note
        );
        assert!(r.note.contains("perf refused"), "{}", r.note);
    }

    #[test]
    fn small_stack_is_refused_clearly() {
        let e = lifecycle(&ctx(&[("impl", "pthread"), ("stack", "1k")])).unwrap_err();
        assert!(e.to_string().contains("PTHREAD_STACK_MIN"), "{e}");
    }
}
