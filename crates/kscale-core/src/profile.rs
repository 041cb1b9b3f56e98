//! Kernel profiles (docs/method.md): the pure part — classifying samples, counting
//! them per routine and per process, shares, the spin-lock share and the
//! routine-by-routine difference of two profiles. The sampling itself lives
//! in `kscale-sys` (perf) and only hands over already-resolved samples.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The kernel routines whose samples make up the **spin-lock share** — the
/// seed's `stext_lock`, which in 2.4 kernels collected the out-of-line spin
/// loops of every contended spinlock. Today's equivalents are the queued
/// spinlock and rwlock slow paths (native and paravirtual), the debug
/// `do_raw_*` variants, and the optimistic spinning of mutex and rwsem
/// waiters on a running owner (they burn CPU exactly like a spinlock).
///
/// The `_raw_spin_lock*` / `_raw_read_lock*` / `_raw_write_lock*` entry
/// points are included by prefix ([`SPINLOCK_PREFIXES`]): with the queued
/// fast path inlined, a sample there is the uncontended acquire or the
/// spinning `pause` of a paravirt or debug kernel, both lock cost. Names
/// are matched after stripping compiler suffixes (`.cold`, `.isra.0`, …).
/// This list and the prefixes are the one place that defines the share.
pub const SPINLOCK_ROUTINES: &[&str] = &[
    "native_queued_spin_lock_slowpath",
    "queued_spin_lock_slowpath",
    "__pv_queued_spin_lock_slowpath",
    "pv_queued_spin_lock_slowpath",
    "resilient_queued_spin_lock_slowpath",
    "__pv_queued_spin_unlock_slowpath",
    "queued_read_lock_slowpath",
    "queued_write_lock_slowpath",
    "do_raw_spin_lock",
    "do_raw_read_lock",
    "do_raw_write_lock",
    "osq_lock",
    "mutex_spin_on_owner",
    "rwsem_spin_on_owner",
    "rwsem_optimistic_spin",
    "rt_mutex_spin_on_owner",
    "stext_lock",
];

/// Prefixes of spin-lock entry points; see [`SPINLOCK_ROUTINES`].
pub const SPINLOCK_PREFIXES: &[&str] = &["_raw_spin_lock", "_raw_read_lock", "_raw_write_lock"];

/// The routines of the idle loop: where a CPU's samples land when it has
/// nothing to run (halted, polling, or choosing an idle state). They make
/// up the idle share and are never ranked as routines, because "the CPU
/// waited" is not a place the workload spent time; interrupts served while
/// idle keep their own names. Matched like [`SPINLOCK_ROUTINES`], with
/// [`IDLE_PREFIXES`].
pub const IDLE_ROUTINES: &[&str] = &[
    "default_idle",
    "default_idle_call",
    "default_enter_idle",
    "arch_cpu_idle",
    "arch_cpu_idle_enter",
    "arch_cpu_idle_exit",
    "do_idle",
    "call_cpuidle",
    "cpu_startup_entry",
    "native_safe_halt",
    "pv_native_safe_halt",
    "xen_safe_halt",
    "acpi_safe_halt",
    "amd_e400_idle",
    "poll_idle",
    "schedule_idle",
    "menu_select",
    "teo_select",
    "ladder_select_state",
    "haltpoll_select",
    "hlt_play_dead",
];

/// Prefixes of idle-loop routines; see [`IDLE_ROUTINES`].
pub const IDLE_PREFIXES: &[&str] = &[
    "cpuidle_",
    "intel_idle",
    "acpi_idle",
    "acpi_processor_ffh_cstate",
    "mwait_idle",
    "cpu_idle_poll",
    "tick_nohz_idle",
];

/// True when kernel routine `sym` belongs to the idle loop.
pub fn is_idle_routine(sym: &str) -> bool {
    let s = base_name(sym);
    IDLE_ROUTINES.contains(&s) || IDLE_PREFIXES.iter().any(|p| s.starts_with(p))
}

/// Drops GCC/Clang clone suffixes so `foo.cold` and `foo.isra.0` count as
/// `foo`.
pub fn base_name(sym: &str) -> &str {
    match sym.find('.') {
        Some(0) | None => sym,
        Some(i) => &sym[..i],
    }
}

/// True when a sample in kernel routine `sym` is time spent spinning for a
/// lock (see [`SPINLOCK_ROUTINES`]).
pub fn is_spinlock(sym: &str) -> bool {
    let s = base_name(sym);
    SPINLOCK_ROUTINES.contains(&s) || SPINLOCK_PREFIXES.iter().any(|p| s.starts_with(p))
}

/// One resolved sample, as the sampler hands it over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hit<'a> {
    /// The idle task (pid 0) was running: the CPU had nothing to do.
    Idle { symbol: Option<&'a str> },
    /// Kernel mode on behalf of a process.
    Kernel {
        symbol: Option<&'a str>,
        comm: &'a str,
    },
    /// User mode, grouped by process name.
    User { comm: &'a str },
}

/// Name under which kernel samples without a symbol are counted.
pub const UNKNOWN_KERNEL: &str = "[kernel, unresolved]";

/// A profile of one event over the profiled trial of one case.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// `cpu-clock`, `instructions` or `cache-misses`.
    pub event: String,
    /// How samples were taken, e.g. `997 Hz` or `every 1000003`.
    pub sample_on: String,
    pub total: u64,
    /// Kernel-mode samples outside the idle task.
    pub kernel: u64,
    pub user: u64,
    pub idle: u64,
    /// Kernel samples in [`is_spinlock`] routines.
    pub spinlock: u64,
    /// Samples the kernel dropped (ring buffer full); reported, not counted.
    pub lost: u64,
    /// Kernel routines (idle routines included), most samples first.
    pub by_symbol: Vec<(String, u64)>,
    /// User-mode samples per process name, most first.
    pub by_comm: Vec<(String, u64)>,
    /// Operations (iterations) of the profiled trial, for samples per op.
    pub ops: Option<u64>,
    /// The case's primary metric as measured during the profiled trial, so
    /// the disturbance of profiling can be checked against counted trials.
    pub value: Option<f64>,
    pub wall_s: Option<f64>,
}

fn pct(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        100.0 * n as f64 / d as f64
    }
}

impl Profile {
    /// Share of all samples, in %.
    pub fn share(&self, n: u64) -> f64 {
        pct(n, self.total)
    }
    pub fn kernel_share(&self) -> f64 {
        self.share(self.kernel)
    }
    pub fn user_share(&self) -> f64 {
        self.share(self.user)
    }
    pub fn idle_share(&self) -> f64 {
        self.share(self.idle)
    }
    /// Spin-lock samples as % of all samples.
    pub fn spinlock_share(&self) -> f64 {
        self.share(self.spinlock)
    }
    /// Spin-lock samples as % of (non-idle) kernel samples — the seed's
    /// "50 % of the CPU time consumed by the kernel was spent in stext_lock".
    pub fn spinlock_kernel_share(&self) -> f64 {
        pct(self.spinlock, self.kernel)
    }
    /// Samples of routine `name` (0 when it was never sampled).
    pub fn count(&self, name: &str) -> u64 {
        self.by_symbol
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, c)| *c)
    }
    /// Samples per operation of the profiled trial.
    pub fn per_op(&self, n: u64) -> Option<f64> {
        self.ops.filter(|o| *o > 0).map(|o| n as f64 / o as f64)
    }
    /// The `n` routines with most samples.
    pub fn top(&self, n: usize) -> &[(String, u64)] {
        &self.by_symbol[..n.min(self.by_symbol.len())]
    }
    /// Kernel routines outside the idle loop, most samples first: the
    /// ranking a reader wants ("where did the time go"), with idle left to
    /// [`Profile::idle_share`].
    pub fn busy_routines(&self) -> impl Iterator<Item = &(String, u64)> {
        self.by_symbol.iter().filter(|(n, _)| !is_idle_routine(n))
    }
    /// Samples in which the CPU had work: everything but the idle task.
    pub fn busy(&self) -> u64 {
        self.total.saturating_sub(self.idle)
    }
}

/// Accumulates [`Hit`]s into a [`Profile`].
#[derive(Debug, Default)]
pub struct ProfileBuilder {
    p: Profile,
    syms: HashMap<String, u64>,
    comms: HashMap<String, u64>,
}

impl ProfileBuilder {
    pub fn new(event: &str, sample_on: &str) -> ProfileBuilder {
        ProfileBuilder {
            p: Profile {
                event: event.into(),
                sample_on: sample_on.into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    pub fn add(&mut self, hit: Hit<'_>) {
        self.add_n(hit, 1);
    }

    pub fn add_n(&mut self, hit: Hit<'_>, n: u64) {
        self.p.total += n;
        match hit {
            Hit::Idle { symbol } => {
                self.p.idle += n;
                *self
                    .syms
                    .entry(symbol.unwrap_or(UNKNOWN_KERNEL).to_string())
                    .or_default() += n;
            }
            Hit::Kernel { symbol, .. } => {
                self.p.kernel += n;
                let s = symbol.unwrap_or(UNKNOWN_KERNEL);
                if is_spinlock(s) {
                    self.p.spinlock += n;
                }
                *self.syms.entry(s.to_string()).or_default() += n;
            }
            Hit::User { comm } => {
                self.p.user += n;
                *self.comms.entry(comm.to_string()).or_default() += n;
            }
        }
    }

    pub fn lost(&mut self, n: u64) {
        self.p.lost += n;
    }

    pub fn finish(mut self) -> Profile {
        self.p.by_symbol = sorted(self.syms);
        self.p.by_comm = sorted(self.comms);
        self.p
    }
}

fn sorted(m: HashMap<String, u64>) -> Vec<(String, u64)> {
    let mut v: Vec<_> = m.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// One routine in two profiles of the same event.
#[derive(Clone, Debug, PartialEq)]
pub struct RoutineDelta {
    pub name: String,
    pub samples_a: u64,
    pub samples_b: u64,
    pub share_a: f64,
    pub share_b: f64,
    pub per_op_a: Option<f64>,
    pub per_op_b: Option<f64>,
}

impl RoutineDelta {
    /// Change of share in percentage points (B − A).
    pub fn share_delta(&self) -> f64 {
        self.share_b - self.share_a
    }
    /// B/A of samples per operation — which routine costs more per op.
    pub fn per_op_ratio(&self) -> Option<f64> {
        match (self.per_op_a, self.per_op_b) {
            (Some(a), Some(b)) if a > 0.0 => Some(b / a),
            _ => None,
        }
    }
}

/// Every routine sampled in either profile, the biggest change of share
/// first (grown and shrunk alike; the sign tells which).
pub fn diff(a: &Profile, b: &Profile) -> Vec<RoutineDelta> {
    let mut names: Vec<&str> = a.by_symbol.iter().map(|(n, _)| n.as_str()).collect();
    for (n, _) in &b.by_symbol {
        if a.count(n) == 0 {
            names.push(n);
        }
    }
    let mut out: Vec<RoutineDelta> = names
        .into_iter()
        .map(|n| {
            let (ca, cb) = (a.count(n), b.count(n));
            RoutineDelta {
                name: n.to_string(),
                samples_a: ca,
                samples_b: cb,
                share_a: a.share(ca),
                share_b: b.share(cb),
                per_op_a: a.per_op(ca),
                per_op_b: b.per_op(cb),
            }
        })
        .collect();
    out.sort_by(|x, y| {
        y.share_delta()
            .abs()
            .total_cmp(&x.share_delta().abs())
            .then_with(|| x.name.cmp(&y.name))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinlock_classification() {
        for s in [
            "native_queued_spin_lock_slowpath",
            "__pv_queued_spin_lock_slowpath",
            "queued_write_lock_slowpath",
            "_raw_spin_lock",
            "_raw_spin_lock_irqsave",
            "_raw_read_lock_bh",
            "osq_lock",
            "mutex_spin_on_owner.isra.0",
            "rwsem_optimistic_spin",
        ] {
            assert!(is_spinlock(s), "{s}");
        }
        for s in [
            "_raw_spin_unlock_irqrestore",
            "do_syscall_64",
            "mutex_lock",
            "schedule",
            "spin_lock_helper",
            ".cold",
        ] {
            assert!(!is_spinlock(s), "{s}");
        }
    }

    fn sample() -> Profile {
        let mut b = ProfileBuilder::new("cpu-clock", "997 Hz");
        b.add_n(
            Hit::Kernel {
                symbol: Some("do_syscall_64"),
                comm: "kscale",
            },
            50,
        );
        b.add_n(
            Hit::Kernel {
                symbol: Some("native_queued_spin_lock_slowpath"),
                comm: "kscale",
            },
            10,
        );
        b.add_n(
            Hit::Kernel {
                symbol: None,
                comm: "kscale",
            },
            5,
        );
        b.add_n(Hit::User { comm: "kscale" }, 20);
        b.add_n(Hit::User { comm: "sshd" }, 5);
        b.add_n(
            Hit::Idle {
                symbol: Some("default_idle"),
            },
            10,
        );
        b.lost(3);
        let mut p = b.finish();
        p.ops = Some(1000);
        p
    }

    #[test]
    fn idle_routines_are_not_ranked() {
        for s in [
            "pv_native_safe_halt",
            "default_idle",
            "cpuidle_enter_state",
            "intel_idle_irq",
            "acpi_idle_do_entry",
            "poll_idle.cold",
        ] {
            assert!(is_idle_routine(s), "{s}");
        }
        for s in ["schedule", "do_syscall_64", "handle_softirqs", "idle_cpu"] {
            assert!(!is_idle_routine(s), "{s}");
        }
        let p = sample();
        let busy: Vec<&str> = p.busy_routines().map(|(n, _)| n.as_str()).collect();
        assert!(!busy.contains(&"default_idle"), "{busy:?}");
        assert_eq!(busy[0], "do_syscall_64");
        assert_eq!(p.busy(), 90);
    }

    #[test]
    fn aggregation_and_shares() {
        let p = sample();
        assert_eq!((p.total, p.kernel, p.user, p.idle), (100, 65, 25, 10));
        assert_eq!((p.spinlock, p.lost), (10, 3));
        assert_eq!(p.top(2)[0], ("do_syscall_64".to_string(), 50));
        assert_eq!(p.top(2)[1].1, 10);
        assert_eq!(p.top(99).len(), 4);
        assert_eq!(p.count(UNKNOWN_KERNEL), 5);
        assert_eq!(p.by_comm[0], ("kscale".to_string(), 20));
        assert!((p.kernel_share() - 65.0).abs() < 1e-9);
        assert!((p.spinlock_share() - 10.0).abs() < 1e-9);
        assert!((p.spinlock_kernel_share() - 100.0 * 10.0 / 65.0).abs() < 1e-9);
        assert_eq!(p.per_op(50), Some(0.05));
        assert_eq!(Profile::default().share(3), 0.0);
    }

    #[test]
    fn diff_orders_by_change() {
        let a = sample();
        let mut b = sample();
        // In B the lock slow path doubled and a new routine appeared.
        b.by_symbol = vec![
            ("do_syscall_64".into(), 40),
            ("native_queued_spin_lock_slowpath".into(), 25),
            ("schedule".into(), 5),
        ];
        b.ops = Some(500);
        let d = diff(&a, &b);
        assert_eq!(d[0].name, "native_queued_spin_lock_slowpath");
        assert!((d[0].share_delta() - 15.0).abs() < 1e-9);
        assert_eq!(d[0].per_op_ratio(), Some(5.0));
        let sched = d.iter().find(|r| r.name == "schedule").unwrap();
        assert_eq!((sched.samples_a, sched.samples_b), (0, 5));
        assert_eq!(sched.per_op_ratio(), None);
        let idle = d.iter().find(|r| r.name == "default_idle").unwrap();
        assert_eq!(idle.samples_b, 0);
    }
}
