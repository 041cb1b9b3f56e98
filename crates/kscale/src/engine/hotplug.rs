//! `--cpu-mode hotplug` (docs/tune.md): a configuration of N CPUs is made by
//! taking the other CPUs offline through /sys/devices/system/cpu/cpuK/online,
//! the way the seeds booted with `maxcpus=N`, instead of confining the
//! workload with affinity. Each change goes through the settings journal
//! first, and every CPU is brought back online however the run ends.

use super::guard::Journal;
use crate::error::user;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How a CPU configuration is made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum CpuMode {
    /// Confine the workload with sched_setaffinity; the other CPUs stay online.
    #[default]
    Affinity,
    /// Take the other CPUs offline (root; journalled and restored).
    Hotplug,
}

fn online_file(cpu: usize) -> PathBuf {
    PathBuf::from(format!("/sys/devices/system/cpu/cpu{cpu}/online"))
}

/// Checks, before anything is measured, that every CPU some configuration
/// leaves out can be taken offline.
pub fn check(configs: &[kscale_core::CpuConfig], available: &[usize]) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        return Err(user(
            "--cpu-mode hotplug takes CPUs offline and needs root; use --cpu-mode affinity",
        ));
    }
    for c in configs {
        for cpu in available.iter().filter(|k| !c.cpus.contains(k)) {
            let f = online_file(*cpu);
            let ok = std::fs::OpenOptions::new().write(true).open(&f).is_ok();
            if !ok {
                return Err(user(format!(
                    "--cpu-mode hotplug: CPU {cpu} cannot be taken offline ({} is absent or \
                     read-only on this kernel), which --cpus {} needs; use --cpu-mode affinity",
                    f.display(),
                    c.name
                )));
            }
        }
    }
    Ok(())
}

/// The CPUs a run has taken offline, journalled in its store.
pub struct Hotplug<'a> {
    journal: Journal<'a>,
}

impl<'a> Hotplug<'a> {
    pub fn new(store: &'a kscale_store::Store) -> Hotplug<'a> {
        Hotplug {
            journal: Journal {
                store,
                tune_id: None,
            },
        }
    }

    /// Makes exactly `wanted` of `available` online.
    pub fn apply(&self, wanted: &[usize], available: &[usize]) -> Result<(), String> {
        // Online first, so the machine never has fewer CPUs than both states.
        let mut order: Vec<usize> = available.to_vec();
        order.sort_by_key(|k| !wanted.contains(k));
        for cpu in order {
            let f = online_file(cpu);
            let want = if wanted.contains(&cpu) { "1" } else { "0" };
            match kscale_sys::settings::read_value(&f) {
                Ok(now) if now == want => {}
                // CPU 0 often has no online file: it is always online.
                Err(_) if want == "1" => {}
                _ => self.journal.set_file("hotplug", &f, want)?,
            }
        }
        Ok(())
    }

    /// Brings every CPU this process took offline back, newest first.
    pub fn restore(&self) -> Vec<String> {
        self.journal.restore_all()
    }
}
