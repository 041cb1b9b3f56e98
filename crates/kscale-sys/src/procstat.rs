//! Per-trial CPU accounting from /proc/stat (docs/method.md): where the CPUs of the
//! configuration spent a trial (user, system, idle, irq, softirq, steal),
//! plus context switches and interrupts, which the kernel counts system-wide;
//! and how much of those CPUs' time tasks other than the trial's ran
//! ([`others_pct`]).

use kscale_core::model::CpuAccounting;

/// Cumulative counters at one instant: per-CPU jiffies and the global counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// cpu id → [user, nice, system, idle, iowait, irq, softirq, steal]
    cpus: Vec<(usize, [u64; 8])>,
    ctxt: u64,
    intr: u64,
    at: Option<std::time::Instant>,
    /// cpu id → nanoseconds tasks ran on it, from the root cpuacct cgroup
    /// (cgroup v1) where it is mounted: exact where /proc/stat counts
    /// ticks of 10 ms, which a trial of 50 ms sees five of.
    ran_ns: Vec<(usize, u64)>,
}

const CPUACCT: &str = "/sys/fs/cgroup/cpuacct/cpuacct.usage_percpu";

pub fn parse(text: &str) -> Snapshot {
    let mut s = Snapshot::default();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        match f.next() {
            Some(name) if name.starts_with("cpu") && name.len() > 3 => {
                let Ok(id) = name[3..].parse::<usize>() else {
                    continue;
                };
                let mut v = [0u64; 8];
                for (slot, val) in v.iter_mut().zip(f.by_ref()) {
                    *slot = val.parse().unwrap_or(0);
                }
                s.cpus.push((id, v));
            }
            Some("ctxt") => s.ctxt = f.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            Some("intr") => s.intr = f.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            _ => {}
        }
    }
    s
}

pub fn read() -> Snapshot {
    let mut s = parse(&std::fs::read_to_string("/proc/stat").unwrap_or_default());
    s.ran_ns = parse_percpu(&std::fs::read_to_string(CPUACCT).unwrap_or_default());
    s.at = Some(std::time::Instant::now());
    s
}

/// `cpuacct.usage_percpu`: one count of nanoseconds per possible CPU, in
/// CPU order; empty where it does not parse.
fn parse_percpu(text: &str) -> Vec<(usize, u64)> {
    text.split_whitespace()
        .enumerate()
        .map(|(i, v)| v.parse().ok().map(|ns| (i, ns)))
        .collect::<Option<_>>()
        .unwrap_or_default()
}

/// The share (%) of `cpus`' time between two snapshots that tasks other
/// than the trial's ran, given the trial's own CPU seconds `ours_s` (its
/// processes' user + system time over the same window, all of it spent on
/// `cpus`). Busy time comes from the cpuacct cgroup's nanoseconds where
/// both snapshots have them, else from /proc/stat's ticks (user, nice,
/// system, irq, softirq). This is what a noisy neighbour or another
/// program takes from the trial, where steal time is what the hypervisor
/// takes (docs/host.md, "Others on the trial's CPUs"). `None` without a
/// window or with a CPU missing from either snapshot.
pub fn others_pct(before: &Snapshot, after: &Snapshot, cpus: &[usize], ours_s: f64) -> Option<f64> {
    let window = after.at?.checked_duration_since(before.at?)?.as_secs_f64();
    if window <= 0.0 || cpus.is_empty() || !ours_s.is_finite() {
        return None;
    }
    let ns = |snap: &Snapshot, id: usize| snap.ran_ns.iter().find(|(i, _)| *i == id).map(|x| x.1);
    let ticks = |snap: &Snapshot, id: usize| {
        snap.cpus
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, v)| v[0] + v[1] + v[2] + v[5] + v[6])
    };
    let mut busy_s = 0.0;
    for &c in cpus {
        busy_s += match (ns(before, c), ns(after, c)) {
            (Some(b), Some(a)) => a.saturating_sub(b) as f64 * 1e-9,
            _ => ticks(after, c)?.saturating_sub(ticks(before, c)?) as f64 / user_hz(),
        };
    }
    let others = (busy_s - ours_s).max(0.0) / (window * cpus.len() as f64);
    Some((100.0 * others).min(100.0))
}

fn user_hz() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// CPU seconds (user + system) of this process's threads and of the
/// children it has waited for: a trial's own share of the CPUs' busy time.
pub fn own_cpu_seconds() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    let secs = |who| {
        getrusage(who)
            .map(|u| {
                let t =
                    |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 * 1e-6;
                t(u.user_time()) + t(u.system_time())
            })
            .unwrap_or(0.0)
    };
    secs(UsageWho::RUSAGE_SELF) + secs(UsageWho::RUSAGE_CHILDREN)
}

/// Shares of the configuration's CPU time between two snapshots.
pub fn delta(before: &Snapshot, after: &Snapshot, cpus: &[usize]) -> Option<CpuAccounting> {
    let mut d = [0u64; 8];
    for (id, a) in &after.cpus {
        if !cpus.is_empty() && !cpus.contains(id) {
            continue;
        }
        let b = before.cpus.iter().find(|(i, _)| i == id).map(|(_, v)| *v)?;
        for k in 0..8 {
            d[k] += a[k].saturating_sub(b[k]);
        }
    }
    let total: u64 = d.iter().sum();
    let seconds = match (before.at, after.at) {
        (Some(b), Some(a)) => a.duration_since(b).as_secs_f64(),
        _ => 0.0,
    };
    let pct = |x: u64| {
        if total == 0 {
            0.0
        } else {
            100.0 * x as f64 / total as f64
        }
    };
    Some(CpuAccounting {
        user_pct: pct(d[0] + d[1]),
        system_pct: pct(d[2]),
        idle_pct: pct(d[3] + d[4]),
        irq_pct: pct(d[5]),
        softirq_pct: pct(d[6]),
        steal_pct: pct(d[7]),
        ctxt: after.ctxt.saturating_sub(before.ctxt),
        intr: after.intr.saturating_sub(before.intr),
        seconds,
        line_ns: None,
        others_pct: None,
        chain_pace_ns: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0 0 0\ncpu1 5 0 5 50 0 0 0 0 0 0\nintr 1000 1 2\nctxt 500\n";
    const B: &str = "cpu  40 0 30 130 0 0 0 0 0 0\ncpu0 35 0 25 50 0 0 0 0 0 0\ncpu1 5 0 5 80 0 2 4 4 0 0\nintr 1600 1 2\nctxt 900\n";

    #[test]
    fn shares_of_the_configuration() {
        let (a, b) = (parse(A), parse(B));
        let only0 = delta(&a, &b, &[0]).unwrap();
        assert!(
            (only0.user_pct - 60.0).abs() < 1e-9 && (only0.system_pct - 40.0).abs() < 1e-9,
            "{only0:?}"
        );
        assert_eq!(only0.idle_pct, 0.0);
        assert_eq!((only0.ctxt, only0.intr), (400, 600));
        let only1 = delta(&a, &b, &[1]).unwrap();
        assert!(
            (only1.idle_pct - 75.0).abs() < 1e-9 && (only1.steal_pct - 10.0).abs() < 1e-9,
            "{only1:?}"
        );
        let both = delta(&a, &b, &[0, 1]).unwrap();
        let sum = both.user_pct
            + both.system_pct
            + both.idle_pct
            + both.irq_pct
            + both.softirq_pct
            + both.steal_pct;
        assert!((sum - 100.0).abs() < 1e-9);
    }

    #[test]
    fn others_are_the_busy_time_the_trial_did_not_run() {
        let t0 = std::time::Instant::now();
        let mut a = parse(A);
        let mut b = parse(B);
        a.at = Some(t0);
        b.at = Some(t0 + std::time::Duration::from_secs(1));
        // /proc/stat's ticks: CPU 0 was busy 50 ticks of 1/USER_HZ.
        let busy0 = 50.0 / user_hz();
        let o = others_pct(&a, &b, &[0], busy0 - 0.1).unwrap();
        assert!((o - 10.0).abs() < 1e-6, "{o}");
        // Where cpuacct has them its nanoseconds count instead, and the
        // trial's own time is never more than the busy time.
        a.ran_ns = parse_percpu("1000000000 0\n");
        b.ran_ns = parse_percpu("1600000000 500000000\n");
        let both = others_pct(&a, &b, &[0, 1], 0.8).unwrap();
        assert!((both - 15.0).abs() < 1e-6, "{both}");
        assert_eq!(others_pct(&a, &b, &[0], 5.0), Some(0.0));
        assert_eq!(others_pct(&a, &b, &[7], 0.0), None);
        assert_eq!(parse_percpu("12 x 3"), vec![]);
    }

    #[test]
    fn reads_this_machine() {
        let s = read();
        assert!(!s.cpus.is_empty() && s.ctxt > 0);
    }
}
