//! kscale's one wrapper around `perf_event_open` (the `perf-event-open`
//! crate). Workloads and the profiler go through here so that the crate's
//! API, the permission rules and the "why was it refused" message live in one
//! place.
//!
//! Counting: [`CycleCounter`] counts CPU cycles of the calling thread and of
//! every thread (or process) it creates *afterwards* — the kernel's
//! `inherit` flag — in user and kernel mode, so a benchmark that spawns its
//! threads after creating the counter sees the cycles of all of them.

use perf_event_open::config::{Cpu, Inherit, Opts, Proc, StatFormat};
use perf_event_open::count::Counter;
use perf_event_open::event::hw::Hardware;
use std::fmt;
use std::io;

mod sampling;
pub use sampling::{
    start_sampling, EventSamples, RawSample, SampleEvent, SampleSpec, Sampled, Sampling,
};

/// Setting this environment variable (to anything but `0`) makes every
/// counter refuse to open, as if the kernel had said no: tests use it to
/// exercise fallbacks on machines where perf works.
pub const DISABLE_ENV: &str = "KSCALE_NO_PERF";

/// Why a counter could not be opened, with what a user can do about it.
#[derive(Debug)]
pub struct Refused {
    /// The raw errno, when the kernel refused (None when disabled by
    /// [`DISABLE_ENV`] or the error carried no errno).
    pub errno: Option<i32>,
    /// `/proc/sys/kernel/perf_event_paranoid` at the time of the refusal.
    pub paranoid: Option<i32>,
    reason: String,
}

impl Refused {
    fn from_io(what: &str, e: &io::Error) -> Refused {
        let paranoid = paranoid();
        let errno = e.raw_os_error();
        Refused {
            errno,
            paranoid,
            reason: explain(what, errno, paranoid, e),
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for Refused {}

/// The current `kernel.perf_event_paranoid`, if readable.
pub fn paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

fn has_cap_perfmon() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// One line saying why `perf_event_open` of `what` failed and what would
/// change that. Public so that other callers of the syscall (or of a tool
/// built on it) can word their refusals the same way.
pub fn explain(what: &str, errno: Option<i32>, paranoid: Option<i32>, e: &io::Error) -> String {
    let p = paranoid.map_or_else(|| "unreadable".to_string(), |p| p.to_string());
    let name = errno.map_or_else(|| "no errno".to_string(), errno_name);
    let fix = match errno {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            if has_cap_perfmon() {
                format!(
                    "refused although running as root; kernel.perf_event_paranoid={p} — a \
                     security module (e.g. lockdown or SELinux) may forbid perf events"
                )
            } else {
                format!(
                    "kernel.perf_event_paranoid={p} forbids it for unprivileged users; run as \
                     root, grant CAP_PERFMON, or `sysctl kernel.perf_event_paranoid=1` (or 0 \
                     for CPU-wide events)"
                )
            }
        }
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => format!(
            "the CPU exposes no such hardware event (a virtual machine without a virtual PMU?); \
             kernel.perf_event_paranoid={p} is not the cause — enable the PMU for the guest \
             (e.g. KVM `-cpu host,pmu=on`)"
        ),
        Some(libc::ENOSYS) => format!(
            "the kernel has no perf_event_open (CONFIG_PERF_EVENTS off, or blocked by seccomp); \
             kernel.perf_event_paranoid={p}"
        ),
        Some(libc::EMFILE) => {
            format!("too many open files (raise `ulimit -n`); kernel.perf_event_paranoid={p}")
        }
        Some(libc::EBUSY) => {
            format!("the PMU is in exclusive use by another tool; kernel.perf_event_paranoid={p}")
        }
        _ => format!("kernel.perf_event_paranoid={p}"),
    };
    format!("perf_event_open({what}) failed: {name} ({e}): {fix}")
}

fn errno_name(errno: i32) -> String {
    let n = match errno {
        libc::EACCES => "EACCES",
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENODEV => "ENODEV",
        libc::ENOSYS => "ENOSYS",
        libc::EINVAL => "EINVAL",
        libc::EMFILE => "EMFILE",
        libc::EBUSY => "EBUSY",
        _ => return format!("errno {errno}"),
    };
    n.to_string()
}

fn disabled_by_env() -> bool {
    std::env::var_os(DISABLE_ENV).is_some_and(|v| v != "0")
}

/// A reading of a counter, scaled up when the kernel had to multiplex it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reading {
    /// The event count, estimated for the whole enabled time.
    pub count: u64,
    /// Nanoseconds the counter was enabled, summed over counted tasks.
    pub enabled_ns: u64,
    /// Nanoseconds it was actually on the PMU; below `enabled_ns` when
    /// multiplexed.
    pub running_ns: u64,
}

impl Reading {
    /// True when part of the count is an estimate.
    pub fn scaled(&self) -> bool {
        self.running_ns < self.enabled_ns
    }
}

/// CPU cycles (`PERF_COUNT_HW_CPU_CYCLES`, user + kernel) of this thread and
/// every task it creates after the counter is opened. Created disabled.
pub struct CycleCounter {
    counter: Counter,
}

impl CycleCounter {
    /// Opens the counter, or says in one line why the kernel refused.
    pub fn new() -> Result<CycleCounter, Refused> {
        let what = "cpu-cycles, this process and its new threads";
        if disabled_by_env() {
            return Err(Refused {
                errno: None,
                paranoid: paranoid(),
                reason: format!("perf_event_open({what}) not tried: {DISABLE_ENV} is set"),
            });
        }
        let opts = Opts {
            inherit: Some(Inherit::NewChild),
            stat_format: StatFormat {
                time_enabled: true,
                time_running: true,
                ..Default::default()
            },
            ..Default::default()
        };
        let counter = Counter::new(Hardware::CpuCycle, (Proc::CURRENT, Cpu::ALL), &opts)
            .map_err(|e| Refused::from_io(what, &e))?;
        Ok(CycleCounter { counter })
    }

    /// Zeroes the count (and, through `inherit`, that of live child tasks).
    pub fn reset(&self) -> io::Result<()> {
        self.counter.clear_count()
    }

    pub fn enable(&self) -> io::Result<()> {
        self.counter.enable()
    }

    pub fn disable(&self) -> io::Result<()> {
        self.counter.disable()
    }

    /// The cycles counted so far: this thread's plus those of its children,
    /// live or exited.
    pub fn read(&self) -> io::Result<Reading> {
        let s = self.counter.stat()?;
        let enabled = s.time_enabled.unwrap_or(0);
        let running = s.time_running.unwrap_or(enabled);
        let count = if running > 0 && running < enabled {
            (s.count as f64 * enabled as f64 / running as f64).round() as u64
        } else {
            s.count
        };
        Ok(Reading {
            count,
            enabled_ns: enabled,
            running_ns: running,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explanations_name_errno_paranoid_and_fix() {
        let e = io::Error::from_raw_os_error(libc::EACCES);
        let s = explain("cpu-cycles", Some(libc::EACCES), Some(2), &e);
        assert!(
            s.contains("EACCES") && s.contains("perf_event_paranoid=2"),
            "{s}"
        );
        assert!(!s.contains('\n'));
        let e = io::Error::from_raw_os_error(libc::ENOENT);
        let s = explain("cpu-cycles", Some(libc::ENOENT), None, &e);
        assert!(
            s.contains("ENOENT") && s.contains("PMU") && s.contains("unreadable"),
            "{s}"
        );
    }

    /// Counts where the kernel allows it; otherwise prints why not (the
    /// explanation is the thing under test then).
    #[test]
    fn counts_cycles_of_new_threads_or_explains() {
        let c = match CycleCounter::new() {
            Ok(c) => c,
            Err(r) => {
                eprintln!("skipping the counting check: {r}");
                assert!(!r.to_string().is_empty());
                return;
            }
        };
        c.enable().unwrap();
        let h = std::thread::spawn(|| {
            let mut x = 0u64;
            for i in 0..10_000_000u64 {
                x = std::hint::black_box(x.wrapping_add(i));
            }
            x
        });
        h.join().unwrap();
        c.disable().unwrap();
        let r = c.read().unwrap();
        // Ten million dependent adds take at least ten million cycles.
        assert!(r.count >= 10_000_000, "{r:?}");
    }
}
