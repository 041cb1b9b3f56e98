//! Idle CPUs and how they wake (docs/host.md, "Idle CPUs").
//!
//! A case that passes work between CPUs (a pipe round trip, a token ring)
//! wakes a CPU that went idle in between. In a virtual machine an idle vCPU
//! halts, the host takes its physical CPU away, and waking it is the host
//! scheduler's decision: on the 2-vCPU guest kscale is developed on, that
//! made a cross-CPU context switch 30–1,000 µs instead of 4 µs, following
//! the host's load. A CPU latency request of 0 µs through the kernel's PM QoS
//! interface keeps idle CPUs polling instead, so the wake-up is the guest
//! kernel's own path. The request lives exactly as long as the open file:
//! the kernel drops it when the file is closed, which it does for a process
//! that exits or is killed, so nothing is left to restore.

use serde_json::{json, Value};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

/// The kernel's CPU latency QoS device (`Documentation/power/pm_qos_interface.rst`).
pub const PM_QOS: &str = "/dev/cpu_dma_latency";

/// A held 0 µs CPU latency request: idle CPUs poll until it is dropped.
#[derive(Debug)]
pub struct PollHold {
    /// Never read: the request is the open file itself. Rust opens files
    /// close-on-exec, so re-executed workers never inherit it and a killed
    /// parent's request dies with it.
    _file: File,
}

/// Asks the kernel to keep idle CPUs out of every idle state with a wake-up
/// latency above 0 µs (on x86 that leaves only polling) until the hold is
/// dropped. Needs write access to [`PM_QOS`] (root, normally).
pub fn hold_poll() -> std::io::Result<PollHold> {
    let mut file = OpenOptions::new().write(true).open(PM_QOS)?;
    file.write_all(&0i32.to_ne_bytes())?;
    Ok(PollHold { _file: file })
}

/// The CPU latency limit in force now (µs; 2,000,000,000 means none), the
/// smallest of every process's request. Reading needs root, like holding.
pub fn current_limit_us() -> Option<i64> {
    let mut buf = [0u8; 4];
    File::open(PM_QOS).ok()?.read_exact(&mut buf).ok()?;
    Some(i32::from_ne_bytes(buf) as i64)
}

/// Whether this kernel runs under a hypervisor: the CPU says so (x86's
/// `hypervisor` flag) or the kernel found one (`/sys/hypervisor/type`).
pub fn virtual_machine() -> bool {
    let info = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    crate::snapshot::cpu_flag(&info, "hypervisor") == Some(true)
        || Path::new("/sys/hypervisor/type").exists()
}

fn read(path: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// The idle machinery as the snapshot records it: the cpuidle driver and
/// governor, CPU 0's idle states with their exit latencies, and the guest
/// halt-polling window where the haltpoll driver has one (0 means a vCPU
/// halts at once).
pub fn snapshot() -> Value {
    let base = Path::new("/sys/devices/system/cpu");
    let mut states = Vec::new();
    for i in 0.. {
        let d = base.join(format!("cpu0/cpuidle/state{i}"));
        if !d.is_dir() {
            break;
        }
        states.push(json!({
            "name": read(d.join("name")),
            "latency_us": read(d.join("latency")).and_then(|v| v.parse::<u64>().ok()),
            "disabled": read(d.join("disable")).map(|v| v != "0"),
        }));
    }
    json!({
        "driver": read(base.join("cpuidle/current_driver")),
        "governor": read(base.join("cpuidle/current_governor"))
            .or_else(|| read(base.join("cpuidle/current_governor_ro"))),
        "states": states,
        "guest_halt_poll_ns": read("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
            .and_then(|v| v.parse::<u64>().ok()),
        "virtual_machine": virtual_machine(),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn snapshot_names_its_fields() {
        let s = super::snapshot();
        assert!(s["states"].is_array());
        assert!(s["virtual_machine"].is_boolean());
        for st in s["states"].as_array().into_iter().flatten() {
            assert!(st["name"].is_string(), "{st}");
        }
    }

    /// Holding lowers the limit to 0 and dropping the hold puts back what
    /// was there before; where the device cannot be opened (not root) there
    /// is nothing to check, and the integration test `cpu_idle` says so.
    #[test]
    fn a_hold_lasts_as_long_as_its_file() {
        let Some(before) = super::current_limit_us() else {
            eprintln!("skipped: cannot read {}", super::PM_QOS);
            return;
        };
        let hold = super::hold_poll().expect("root can read the device, so it can write it");
        assert_eq!(super::current_limit_us(), Some(0));
        drop(hold);
        assert_eq!(super::current_limit_us(), Some(before));
    }
}
