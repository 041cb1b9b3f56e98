//! CPU affinity: which CPUs this process may use, and pinning to a set.

use anyhow::{Context, Result};
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// CPUs this process is allowed to run on (its affinity mask), which is what
/// `all` means: a run inside a container or a cpuset sees only its share.
pub fn available_cpus() -> Result<Vec<usize>> {
    let set = sched_getaffinity(Pid::from_raw(0)).context("sched_getaffinity")?;
    let cpus: Vec<usize> = (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect();
    anyhow::ensure!(
        !cpus.is_empty(),
        "the affinity mask of this process is empty"
    );
    Ok(cpus)
}

/// Confines the calling thread (and whatever it creates afterwards: threads
/// and children inherit the mask) to `cpus`.
pub fn pin(cpus: &[usize]) -> Result<()> {
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c)
            .with_context(|| format!("CPU {c} is out of range"))?;
    }
    sched_setaffinity(Pid::from_raw(0), &set)
        .with_context(|| format!("sched_setaffinity to {cpus:?}"))
}

/// Pins the calling thread to a single CPU (used by workloads that place their
/// processes one per CPU).
pub fn pin_one(cpu: usize) -> Result<()> {
    pin(&[cpu])
}

/// Number of CPUs online on the machine, regardless of this process's mask.
pub fn online_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| kscale_core::cpus::parse_cpulist(&s))
        .map(|v| v.len())
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_and_restore() {
        let before = available_cpus().unwrap();
        // Pin in a scratch thread so the test thread keeps its mask.
        let first = before[0];
        std::thread::spawn(move || {
            pin(&[first]).unwrap();
            assert_eq!(available_cpus().unwrap(), vec![first]);
        })
        .join()
        .unwrap();
        assert_eq!(available_cpus().unwrap(), before);
        assert!(online_cpus() >= 1);
    }
}
