//! The SPECweb99 file set: its directory rule, its cap and its writer.

use super::mix::Rng;
use crate::roles::{RoleCtx, RoleOutput};
use anyhow::{Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// SPECweb99's four file classes: file k (1…9) of class c is `BASE[c]·k`
/// bytes; a directory holds all 36.
pub(super) const CLASS_BASE: [u64; 4] = [102, 1024, 10_240, 102_400];
pub(super) const FILES_PER_CLASS: u64 = 9;
/// The bytes of one directory: 45 = 1 + … + 9 multiples of each class base.
pub const DIR_BYTES: u64 = 45 * (102 + 1024 + 10_240 + 102_400);

// ---------------------------------------------------------------- file set

/// SPECweb99's directory count for a connection count:
/// ⌊(25 + 400000/122000 · conns)/5⌋.
pub fn spec_dirs(conns: u64) -> u64 {
    ((25.0 + 400_000.0 / 122_000.0 * conns as f64) / 5.0).floor() as u64
}

/// The directories served: SPECweb99's count, capped by `cap` bytes (at
/// least one directory). Returns (dirs, capped).
pub fn fileset_dirs(conns: u64, cap: u64) -> (u64, bool) {
    let spec = spec_dirs(conns).max(1);
    let fit = (cap / DIR_BYTES).max(1);
    if fit < spec {
        (fit, true)
    } else {
        (spec, false)
    }
}

/// The default cap: a quarter of the available memory and of the free
/// space of `dir`, whichever is smaller, so the set is served from the page
/// cache and never fills the disk.
pub fn auto_cap(dir: &Path) -> u64 {
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(u64::MAX, |kb| kb * 1024);
    let disk = nix::sys::statvfs::statvfs(dir)
        .map(|s| s.blocks_available() * s.fragment_size())
        .unwrap_or(u64::MAX);
    (mem.min(disk) / 4).max(DIR_BYTES)
}

/// The URL path of a static file (SPECweb99's `dirNNNNN/classC_K`).
pub fn file_path(dir: u64, class: usize, k: u64) -> String {
    format!("/dir{dir:05}/class{class}_{k}")
}

pub fn file_size(class: usize, k: u64) -> u64 {
    CLASS_BASE[class] * k
}

/// The manifest served beside the file set: its directory count and seed,
/// read by `web.target`'s load from the server it drives.
pub const MANIFEST: &str = "kscale-fileset.json";

/// Writes the file set for `dirs` directories under `root` once: a marker
/// file names a complete set, so later trials of the run reuse it.
pub fn write_fileset(root: &Path, dirs: u64, seed: u64) -> Result<()> {
    let marker = root.join(".complete");
    if marker.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(root).with_context(|| format!("cannot create {}", root.display()))?;
    // One pseudo-random block per file, repeated: contents differ between
    // files (no dedup or compression shortcut) at little generation cost.
    let mut block = vec![0u8; 64 << 10];
    for d in 0..dirs {
        let dp = root.join(format!("dir{d:05}"));
        std::fs::create_dir_all(&dp).with_context(|| format!("cannot create {}", dp.display()))?;
        for (class, _) in CLASS_BASE.iter().enumerate() {
            for k in 1..=FILES_PER_CLASS {
                let mut rng = Rng::new(seed ^ (d << 16) ^ ((class as u64) << 8) ^ k);
                for chunk in block.chunks_mut(8) {
                    let v = rng.next_u64().to_le_bytes();
                    chunk.copy_from_slice(&v[..chunk.len()]);
                }
                let p = root.join(file_path(d, class, k).trim_start_matches('/'));
                let mut f = std::fs::File::create(&p)
                    .with_context(|| format!("cannot write {}", p.display()))?;
                let mut left = file_size(class, k) as usize;
                while left > 0 {
                    let n = left.min(block.len());
                    f.write_all(&block[..n])
                        .with_context(|| format!("cannot write {}", p.display()))?;
                    left -= n;
                }
            }
        }
    }
    let manifest = root.join(MANIFEST);
    let m = serde_json::json!({ "dirs": dirs, "seed": seed, "bytes": dirs * DIR_BYTES });
    std::fs::write(&manifest, format!("{m}\n"))
        .with_context(|| format!("cannot write {}", manifest.display()))?;
    std::fs::write(&marker, b"").with_context(|| format!("cannot write {}", marker.display()))?;
    Ok(())
}

/// A server role's file set: SPECweb99's directories for `conns`, capped
/// by the `fileset` param, written into the run's scratch directory once.
/// Returns its root, its directory count, and an output noting the cap.
pub(super) fn for_server(ctx: &RoleCtx) -> Result<(PathBuf, u64, RoleOutput)> {
    let p = &ctx.params;
    let conns = p.int("conns")?;
    let seed = p.int("seed")?;
    let cap = match p.size("fileset")? {
        0 => auto_cap(&ctx.dir),
        c => c,
    };
    let (dirs, capped) = fileset_dirs(conns, cap);
    let mut out = RoleOutput::default();
    if capped {
        out = out.note(cap_note(conns, dirs));
    }
    let docroot = ctx.dir.join(format!("web-files-s{seed}-d{dirs}"));
    write_fileset(&docroot, dirs, seed)?;
    Ok((docroot, dirs, out))
}

/// What a capped file set serves, and what SPECweb99 would have used.
pub fn cap_note(conns: u64, dirs: u64) -> String {
    let spec = spec_dirs(conns);
    format!(
        "file set capped by fileset: {dirs} directories ({} MB) served; SPECweb99 would \
         use {spec} ({} MB)",
        (dirs * DIR_BYTES) >> 20,
        (spec * DIR_BYTES) >> 20
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_directory_rule_and_cap() {
        // SPECweb99: (25 + 3.2787·conns)/5.
        assert_eq!(spec_dirs(0), 5);
        assert_eq!(spec_dirs(50), 37);
        assert_eq!(spec_dirs(800), 529);
        assert_eq!(spec_dirs(10_000), 6562);
        assert_eq!(DIR_BYTES, 5_119_470);
        assert_eq!(fileset_dirs(50, 1 << 40), (37, false));
        assert_eq!(fileset_dirs(800, 64 << 20), (13, true));
        assert_eq!(fileset_dirs(800, 1), (1, true));
    }

    #[test]
    fn fileset_is_written_once_with_spec_sizes() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("fs");
        write_fileset(&root, 2, 1).unwrap();
        let meta = std::fs::metadata(root.join("dir00001/class3_9")).unwrap();
        assert_eq!(meta.len(), 921_600);
        let total: u64 = (0..2)
            .flat_map(|dd| {
                let root = &root;
                (0..4).flat_map(move |c| {
                    (1..=9).map(move |k| {
                        std::fs::metadata(root.join(file_path(dd, c, k).trim_start_matches('/')))
                            .unwrap()
                            .len()
                    })
                })
            })
            .sum();
        assert_eq!(total, 2 * DIR_BYTES);
        let a = std::fs::read(root.join("dir00000/class0_1")).unwrap();
        let b = std::fs::read(root.join("dir00001/class0_1")).unwrap();
        assert_ne!(a, b);
    }
}
