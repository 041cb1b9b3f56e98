//! The system snapshot stored with every run (docs/store.md): everything a reader
//! of a comparison needs to know about the two systems being compared. Each
//! field is best-effort; a missing file yields `null`, never an error.

use serde_json::{json, Map, Value};
use std::fs;
use std::path::Path;

/// Sysctls that most often explain a difference between two runs.
const SYSCTLS: &[&str] = &[
    "kernel/sched_autogroup_enabled",
    "kernel/numa_balancing",
    "kernel/perf_event_paranoid",
    "kernel/randomize_va_space",
    "kernel/timer_migration",
    "vm/swappiness",
    "vm/dirty_ratio",
    "vm/dirty_background_ratio",
    "vm/overcommit_memory",
    "vm/zone_reclaim_mode",
    "net/core/somaxconn",
    "net/core/rmem_max",
    "net/core/wmem_max",
    "net/core/busy_poll",
    "net/ipv4/tcp_congestion_control",
    "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_wmem",
    "net/ipv4/ip_local_port_range",
    "net/ipv4/tcp_tw_reuse",
    "fs/file-max",
];

fn read(path: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn opt(v: Option<String>) -> Value {
    v.map(Value::String).unwrap_or(Value::Null)
}

pub fn take(kscale_version: &str, git_rev: &str) -> Value {
    let uts = nix::sys::utsname::uname().ok();
    let s = |f: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| {
        uts.as_ref().map(|u| f(u).to_string_lossy().into_owned())
    };
    json!({
        "hostname": opt(s(|u| u.nodename())),
        "kernel": {
            "release": opt(s(|u| u.release())),
            "version": opt(s(|u| u.version())),
            "machine": opt(s(|u| u.machine())),
            "cmdline": opt(read("/proc/cmdline")),
        },
        "cpu": cpu(),
        "memory": memory(),
        "numa": numa(),
        "libc": libc_version(),
        "thp": {
            "enabled": opt(read("/sys/kernel/mm/transparent_hugepage/enabled")),
            "defrag": opt(read("/sys/kernel/mm/transparent_hugepage/defrag")),
        },
        "vulnerabilities": dir_values("/sys/devices/system/cpu/vulnerabilities"),
        "sysctls": sysctls(),
        "clocksource": opt(read("/sys/devices/system/clocksource/clocksource0/current_clocksource")),
        "virtualization": virtualization(),
        "kscale": { "version": kscale_version, "git_rev": git_rev },
    })
}

/// The kernel release, the default run label.
pub fn kernel_release() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into())
}

fn cpu() -> Value {
    let info = read("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find(|l| l.split(':').next().map(str::trim) == Some(name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let model = field("model name")
        .or_else(|| field("Hardware"))
        .or_else(|| field("cpu model"));
    let base = "/sys/devices/system/cpu";
    let khz = |f: &str| {
        read(format!("{base}/cpu0/cpufreq/{f}"))
            .and_then(|v| v.parse::<f64>().ok())
            .map(|k| k / 1000.0)
    };
    let mhz_cpuinfo = field("cpu MHz").and_then(|v| v.parse::<f64>().ok());
    json!({
        "model": opt(model),
        "online": opt(read(format!("{base}/online"))),
        "possible": opt(read(format!("{base}/possible"))),
        "online_count": crate::affinity::online_cpus(),
        "affinity": crate::affinity::available_cpus().ok(),
        "sockets": count_unique(base, "topology/physical_package_id"),
        "cores": count_unique(base, "topology/core_cpus_list").or_else(|| count_unique(base, "topology/thread_siblings_list")),
        "mhz": {
            "cur": khz("scaling_cur_freq").or(mhz_cpuinfo),
            "min": khz("cpuinfo_min_freq"),
            "max": khz("cpuinfo_max_freq"),
        },
        "governor": opt(read(format!("{base}/cpu0/cpufreq/scaling_governor"))),
        "driver": opt(read(format!("{base}/cpu0/cpufreq/scaling_driver"))),
        "smt": opt(read(format!("{base}/smt/control"))),
        "flags_hypervisor": cpu_flag(&info, "hypervisor"),
    })
}

/// Whether the first `flags` line of `/proc/cpuinfo` text `info` lists
/// `flag`; `None` where it has no such line (not x86).
pub(crate) fn cpu_flag(info: &str, flag: &str) -> Option<bool> {
    info.lines()
        .find(|l| l.split(':').next().map(str::trim) == Some("flags"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.split_whitespace().any(|f| f == flag))
}

fn count_unique(base: &str, rel: &str) -> Option<usize> {
    let mut seen = std::collections::BTreeSet::new();
    for e in fs::read_dir(base).ok()?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("cpu")
            && name[3..].chars().all(|c| c.is_ascii_digit())
            && name.len() > 3
        {
            if let Some(v) = read(e.path().join(rel)) {
                seen.insert(v);
            }
        }
    }
    (!seen.is_empty()).then_some(seen.len())
}

fn memory() -> Value {
    let info = read("/proc/meminfo").unwrap_or_default();
    let kb = |name: &str| {
        info.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with(':'))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    json!({
        "total_kb": kb("MemTotal"),
        "available_kb": kb("MemAvailable"),
        "hugepages_total": kb("HugePages_Total"),
        "hugepage_size_kb": kb("Hugepagesize"),
        "swap_total_kb": kb("SwapTotal"),
    })
}

fn numa() -> Value {
    let mut nodes = Map::new();
    if let Ok(rd) = fs::read_dir("/sys/devices/system/node") {
        let mut names: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| {
                n.starts_with("node") && n[4..].chars().all(|c| c.is_ascii_digit()) && n.len() > 4
            })
            .collect();
        names.sort();
        for n in names {
            nodes.insert(
                n.clone(),
                opt(read(format!("/sys/devices/system/node/{n}/cpulist"))),
            );
        }
    }
    json!({ "nodes": nodes.len(), "cpulists": nodes })
}

fn libc_version() -> Value {
    // SAFETY: gnu_get_libc_version returns a pointer to a static NUL-terminated string.
    let v = unsafe {
        extern "C" {
            fn gnu_get_libc_version() -> *const libc::c_char;
        }
        std::ffi::CStr::from_ptr(gnu_get_libc_version())
            .to_string_lossy()
            .into_owned()
    };
    json!({ "name": "glibc", "version": v })
}

fn dir_values(dir: &str) -> Value {
    let mut m = Map::new();
    if let Ok(rd) = fs::read_dir(dir) {
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            m.insert(
                e.file_name().to_string_lossy().into_owned(),
                opt(read(e.path())),
            );
        }
    }
    Value::Object(m)
}

fn sysctls() -> Value {
    let mut m = Map::new();
    for s in SYSCTLS {
        if let Some(v) = read(format!("/proc/sys/{s}")) {
            m.insert(
                s.replace('/', "."),
                Value::String(v.split_whitespace().collect::<Vec<_>>().join(" ")),
            );
        }
    }
    Value::Object(m)
}

fn virtualization() -> Value {
    let product = read("/sys/class/dmi/id/product_name");
    let vendor = read("/sys/class/dmi/id/sys_vendor");
    let hypervisor = read("/sys/hypervisor/type");
    let container = if Path::new("/.dockerenv").exists() {
        Some("docker".to_string())
    } else {
        read("/run/systemd/container")
    };
    // Steal time since boot: the 8th value of the aggregate cpu line.
    let steal = read("/proc/stat").and_then(|s| {
        s.lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(8))
            .and_then(|v| v.parse::<u64>().ok())
    });
    json!({
        "dmi_product": opt(product),
        "dmi_vendor": opt(vendor),
        "hypervisor": opt(hypervisor),
        "container": opt(container),
        "steal_ticks_since_boot": steal,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn snapshot_has_the_basics() {
        let s = super::take("0.1.0", "deadbeef");
        assert!(s["kernel"]["release"].is_string());
        assert!(s["cpu"]["online_count"].as_u64().unwrap() >= 1);
        assert!(s["memory"]["total_kb"].as_u64().unwrap() > 0);
        assert!(s["libc"]["version"].as_str().unwrap().contains('.'));
        assert_eq!(s["kscale"]["git_rev"], "deadbeef");
        assert!(!super::kernel_release().is_empty());
    }

    #[test]
    fn cpu_flags_are_read_from_the_flags_line_only() {
        let info = "model name\t: hypervisor-ish CPU\nflags\t\t: fpu hypervisor sse\n";
        assert_eq!(super::cpu_flag(info, "hypervisor"), Some(true));
        assert_eq!(super::cpu_flag(info, "hyper"), Some(false));
        assert_eq!(
            super::cpu_flag("Features\t: fp asimd\n", "hypervisor"),
            None
        );
    }
}
