//! The machine's topology from sysfs (docs/placement.md, "CPU placement"):
//! packages, dies, cores and their SMT siblings, last-level cache domains
//! (the highest `cache/index*` level's `shared_cpu_list`), NUMA nodes and
//! online CPUs.
//!
//! Parsing works on any directory that mirrors /sys, so tests read fixture
//! trees of machines nobody here has, and `KSCALE_SYSFS=DIR` plans a run
//! for a machine described by a copied tree.

use anyhow::{bail, Result};
use kscale_core::cpus::parse_cpulist;
use kscale_core::topo::{CpuPlace, Topology};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The environment variable naming a directory to read instead of /sys.
pub const ENV: &str = "KSCALE_SYSFS";

/// `$KSCALE_SYSFS` when set and not empty, else `/sys`.
pub fn root() -> PathBuf {
    std::env::var_os(ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/sys"))
}

/// Whether `KSCALE_SYSFS` describes some other machine than this one.
pub fn foreign() -> bool {
    std::env::var_os(ENV).is_some_and(|v| !v.is_empty())
}

fn text(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn number(p: &Path) -> Option<usize> {
    // Some arm64 firmware says -1 for an unknown package.
    text(p)?.parse::<i64>().ok().map(|v| v.max(0) as usize)
}

/// The lowest CPU sharing this CPU's highest-level data or unified cache.
fn llc_of(cpu_dir: &Path) -> Option<usize> {
    let mut best: Option<(u32, usize)> = None;
    for e in fs::read_dir(cpu_dir.join("cache")).ok()?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("index") {
            continue;
        }
        let dir = e.path();
        if text(&dir.join("type")).as_deref() == Some("Instruction") {
            continue;
        }
        let (Some(level), Some(shared)) = (
            text(&dir.join("level")).and_then(|l| l.parse::<u32>().ok()),
            text(&dir.join("shared_cpu_list")).and_then(|s| parse_cpulist(&s)),
        ) else {
            continue;
        };
        if let Some(&first) = shared.first() {
            if !matches!(best, Some((l, _)) if l >= level) {
                best = Some((level, first));
            }
        }
    }
    best.map(|(_, first)| first)
}

/// Reads the topology under `root` (a directory mirroring /sys).
pub fn read(root: &Path) -> Result<Topology> {
    let cpu_dir = root.join("devices/system/cpu");
    let online = match text(&cpu_dir.join("online")).and_then(|s| parse_cpulist(&s)) {
        Some(v) => v,
        None => {
            let mut v: Vec<usize> = fs::read_dir(&cpu_dir)
                .map(|d| {
                    d.flatten()
                        .filter_map(|e| {
                            let n = e.file_name().to_string_lossy().into_owned();
                            n.strip_prefix("cpu")?.parse::<usize>().ok()
                        })
                        .collect()
                })
                .unwrap_or_default();
            v.sort_unstable();
            v
        }
    };
    if online.is_empty() {
        bail!(
            "no online CPU under {} (expected `online` or cpuN directories)",
            cpu_dir.display()
        );
    }
    let mut nodes: BTreeMap<usize, usize> = BTreeMap::new();
    if let Ok(d) = fs::read_dir(root.join("devices/system/node")) {
        for e in d.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(id) = name.strip_prefix("node").and_then(|n| n.parse().ok()) else {
                continue;
            };
            for c in text(&e.path().join("cpulist"))
                .and_then(|s| parse_cpulist(&s))
                .unwrap_or_default()
            {
                nodes.insert(c, id);
            }
        }
    }
    let mut places = Vec::with_capacity(online.len());
    let mut no_llc = Vec::new();
    for &cpu in &online {
        let dir = cpu_dir.join(format!("cpu{cpu}"));
        let topo = dir.join("topology");
        let siblings = text(&topo.join("core_cpus_list"))
            .or_else(|| text(&topo.join("thread_siblings_list")))
            .and_then(|s| parse_cpulist(&s))
            .unwrap_or_default();
        let llc = llc_of(&dir);
        if llc.is_none() {
            no_llc.push(cpu);
        }
        places.push(CpuPlace {
            cpu,
            package: number(&topo.join("physical_package_id")).unwrap_or(0),
            die: number(&topo.join("die_id")).unwrap_or(0),
            core: siblings.first().copied().unwrap_or(cpu).min(cpu),
            llc: llc.unwrap_or(usize::MAX),
            node: nodes.get(&cpu).copied().unwrap_or(0),
        });
    }
    // Without cache information a package is the nearest thing to an LLC.
    let first_of_package: BTreeMap<usize, usize> =
        places.iter().fold(BTreeMap::new(), |mut m, p| {
            m.entry(p.package).or_insert(p.cpu);
            m
        });
    for p in places.iter_mut().filter(|p| p.llc == usize::MAX) {
        p.llc = first_of_package[&p.package];
    }
    Ok(Topology::new(places))
}

/// This machine's topology (or `KSCALE_SYSFS`'s), read once: a run takes
/// CPUs offline under `--cpu-mode hotplug`, and its later placements must
/// still see the machine as it was.
pub fn machine() -> Result<&'static Topology> {
    static CELL: OnceLock<Result<Topology, String>> = OnceLock::new();
    let got = CELL.get_or_init(|| {
        let root = root();
        match read(&root) {
            Ok(t) => Ok(t),
            // A system without a readable /sys (some containers) is planned
            // in id order; a KSCALE_SYSFS that is not a tree is a mistake.
            Err(_) if !foreign() => Ok(Topology::default()),
            Err(e) => Err(format!("{ENV}={}: {e:#}", root.display())),
        }
    });
    got.as_ref().map_err(|e| anyhow::anyhow!("{e}"))
}

/// The part of the machine kscale may use: the topology bounded by this
/// process's affinity mask.
pub fn usable() -> Result<Topology> {
    Ok(machine()?.within(&crate::affinity::available_cpus()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/sysfs")
            .join(name)
    }

    #[test]
    fn reads_this_vm_and_the_xeon() {
        let t = read(&fixture("vm-2vcpu")).unwrap();
        assert_eq!(t.ids(), [0, 1]);
        assert_eq!(
            (t.cores(), t.llcs(), t.nodes(), t.threads_per_core()),
            (2, 1, vec![0], 1)
        );
        let x = read(&fixture("xeon-2s-smt2")).unwrap();
        assert_eq!(x.cpus.len(), 48);
        assert_eq!(
            (x.cores(), x.llcs(), x.nodes(), x.packages()),
            (24, 2, vec![0, 1], 2)
        );
        let p = x.place(27).unwrap();
        assert_eq!((p.core, p.llc, p.node, p.package), (3, 1, 1, 1));
    }

    #[test]
    fn missing_files_fall_back() {
        let d = tempfile::tempdir().unwrap();
        assert!(read(d.path()).is_err());
        let cpu = d.path().join("devices/system/cpu");
        fs::create_dir_all(cpu.join("cpu0")).unwrap();
        fs::create_dir_all(cpu.join("cpu1/topology")).unwrap();
        fs::write(cpu.join("cpu1/topology/physical_package_id"), "-1\n").unwrap();
        // L2 is the highest level; the L1 instruction cache is not data.
        for (i, level, ty, shared) in [(0, 1, "Instruction", "0-1"), (1, 2, "Unified", "1")] {
            let idx = cpu.join(format!("cpu1/cache/index{i}"));
            fs::create_dir_all(&idx).unwrap();
            fs::write(idx.join("level"), format!("{level}\n")).unwrap();
            fs::write(idx.join("type"), ty).unwrap();
            fs::write(idx.join("shared_cpu_list"), shared).unwrap();
        }
        let t = read(d.path()).unwrap();
        assert_eq!(t.ids(), [0, 1]);
        assert_eq!(t.place(0).unwrap().llc, 0);
        assert_eq!(t.place(1).unwrap().llc, 1);
        assert_eq!(t.place(1).unwrap().package, 0);
    }
}
