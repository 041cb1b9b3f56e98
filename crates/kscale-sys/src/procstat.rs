//! Per-trial CPU accounting from /proc/stat (docs/method.md): where the CPUs of the
//! configuration spent a trial (user, system, idle, irq, softirq, steal),
//! plus context switches and interrupts, which the kernel counts system-wide.

use kscale_core::model::CpuAccounting;

/// Cumulative counters at one instant: per-CPU jiffies and the global counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// cpu id → [user, nice, system, idle, iowait, irq, softirq, steal]
    cpus: Vec<(usize, [u64; 8])>,
    ctxt: u64,
    intr: u64,
    at: Option<std::time::Instant>,
}

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
    s.at = Some(std::time::Instant::now());
    s
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
    fn reads_this_machine() {
        let s = read();
        assert!(!s.cpus.is_empty() && s.ctxt > 0);
    }
}
