//! Machine settings a tuning study changes (docs/tune.md): each one can be
//! read, applied and restored, and is described by plain strings (a kind, a
//! target, an old and a new value) so that a journal entry written before
//! the change is all a later process needs to put it back.
//!
//! Two shapes cover every kind: a value written to one file under /proc or
//! /sys (sysctl, thp, sched, irq affinity, NIC MTU, CPU hotplug), and a
//! loop-mounted scratch filesystem that kscale creates, re-mounts with other
//! options, and removes.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What kind of file setting this is: only the name shown to the user and
/// stored in the journal; every one is restored by writing its old value back.
pub const FILE_KINDS: &[&str] = &["sysctl", "thp", "sched", "irq_affinity", "nic", "hotplug"];

/// The journal kind of a loop-mounted filesystem kscale created.
pub const MOUNT: &str = "mount";
/// The journal kind of a change of that filesystem's mount options.
pub const MOUNT_OPTS: &str = "mount_opts";

/// `net.ipv4.tcp_rmem` → `/proc/sys/net/ipv4/tcp_rmem`. Keys are dotted
/// names of letters, digits, `_` and `-`; anything else (`..`, `/`) is
/// refused so a plan can only name files under /proc/sys.
pub fn sysctl_path(key: &str) -> Result<PathBuf, String> {
    let ok = !key.is_empty()
        && key.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        });
    if !ok {
        return Err(format!(
            "bad sysctl key `{key}`: expected a dotted name like net.core.rmem_max"
        ));
    }
    Ok(Path::new("/proc/sys").join(key.replace('.', "/")))
}

/// The files a THP setting may name.
pub fn thp_path(name: &str) -> Result<PathBuf, String> {
    match name {
        "enabled" | "defrag" => Ok(Path::new("/sys/kernel/mm/transparent_hugepage").join(name)),
        _ => Err(format!(
            "bad thp setting `{name}`: expected `enabled` or `defrag`"
        )),
    }
}

/// A scheduler knob: `kernel.sched_*` under /proc/sys/kernel, else a file
/// of /sys/kernel/debug/sched (debugfs) where the kernel has it.
pub fn sched_path(name: &str) -> Result<PathBuf, String> {
    let plain = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if name.is_empty() || !plain {
        return Err(format!(
            "bad sched knob `{name}`: expected a name like sched_rr_timeslice_ms or base_slice_ns"
        ));
    }
    let proc = Path::new("/proc/sys/kernel").join(name);
    if proc.exists() || name.starts_with("sched_") {
        return Ok(proc);
    }
    Ok(Path::new("/sys/kernel/debug/sched").join(name))
}

/// The MTU file of a network interface.
pub fn nic_mtu_path(dev: &str) -> Result<PathBuf, String> {
    let ok = !dev.is_empty()
        && dev.len() < 16
        && dev
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.@".contains(c));
    if !ok {
        return Err(format!("bad interface name `{dev}`"));
    }
    Ok(Path::new("/sys/class/net").join(dev).join("mtu"))
}

/// IRQs named by number, or every IRQ whose /proc/interrupts line ends in
/// a name containing `pattern`.
pub fn irqs_matching(spec: &str) -> Result<Vec<u32>, String> {
    if let Ok(n) = spec.parse::<u32>() {
        return Ok(vec![n]);
    }
    let text = std::fs::read_to_string("/proc/interrupts")
        .map_err(|e| format!("cannot read /proc/interrupts: {e}"))?;
    Ok(parse_interrupts(&text, spec))
}

fn parse_interrupts(text: &str, pattern: &str) -> Vec<u32> {
    text.lines()
        .filter_map(|l| {
            let (irq, rest) = l.trim_start().split_once(':')?;
            let n = irq.trim().parse::<u32>().ok()?;
            rest.contains(pattern).then_some(n)
        })
        .collect()
}

pub fn irq_path(irq: u32) -> PathBuf {
    PathBuf::from(format!("/proc/irq/{irq}/smp_affinity_list"))
}

/// A file setting's current value as it would be written back: surrounding
/// whitespace trimmed, runs of blanks (tcp_rmem's tabs) as one space, and
/// for a choice file like THP's `always [madvise] never` the chosen word.
pub fn read_value(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| why(path, "read", &e))?;
    Ok(normalise(&text))
}

fn normalise(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    if let Some(chosen) = words
        .iter()
        .find(|w| w.len() > 2 && w.starts_with('[') && w.ends_with(']'))
    {
        return chosen[1..chosen.len() - 1].to_string();
    }
    words.join(" ")
}

/// Two values the kernel would treat as the same (blanks normalised).
pub fn same_value(a: &str, b: &str) -> bool {
    normalise(a) == normalise(b)
}

fn why(path: &Path, what: &str, e: &std::io::Error) -> String {
    let reason = match e.raw_os_error() {
        Some(libc::ENOENT) => "absent on this kernel".to_string(),
        Some(libc::EACCES) | Some(libc::EPERM) => "permission denied (not root?)".to_string(),
        Some(libc::EROFS) => "read-only".to_string(),
        _ => e.to_string(),
    };
    format!("cannot {what} {}: {reason}", path.display())
}

/// Writes a file setting and checks that the kernel took it.
pub fn write_value(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| why(path, "write", &e))?;
    Ok(())
}

/// A loop-mounted ext4 filesystem kscale made for a workload's `--dir`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopFs {
    pub image: PathBuf,
    pub mountpoint: PathBuf,
}

impl LoopFs {
    /// The journal's description of it: image and mount point, one per line.
    pub fn encode(&self) -> String {
        format!("{}\n{}", self.image.display(), self.mountpoint.display())
    }
    pub fn decode(s: &str) -> Option<LoopFs> {
        let (image, mp) = s.split_once('\n')?;
        Some(LoopFs {
            image: image.into(),
            mountpoint: mp.into(),
        })
    }

    /// The paths a filesystem in `dir` will use (nothing is created).
    pub fn in_dir(dir: &Path, tag: &str) -> LoopFs {
        LoopFs {
            image: dir.join(format!(".kscale-tune-{tag}.img")),
            mountpoint: dir.join(format!(".kscale-tune-{tag}.mnt")),
        }
    }

    /// Makes the image (sparse, `size` bytes), an ext4 filesystem on it, and
    /// mounts it with `options` through a loop device that detaches itself
    /// when unmounted.
    pub fn create(&self, size: u64, options: &str) -> Result<(), String> {
        let f = std::fs::File::create(&self.image)
            .map_err(|e| format!("cannot create {}: {e}", self.image.display()))?;
        f.set_len(size)
            .map_err(|e| format!("cannot size {}: {e}", self.image.display()))?;
        drop(f);
        run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-E", "lazy_itable_init=1,lazy_journal_init=1"])
            .arg(&self.image))?;
        std::fs::create_dir_all(&self.mountpoint)
            .map_err(|e| format!("cannot create {}: {e}", self.mountpoint.display()))?;
        self.mount(options)
    }

    fn mount(&self, options: &str) -> Result<(), String> {
        let opts = if options.is_empty() {
            "loop".to_string()
        } else {
            format!("loop,{options}")
        };
        run(Command::new("mount")
            .args(["-t", "ext4", "-o", &opts])
            .arg(&self.image)
            .arg(&self.mountpoint))
    }

    /// Is it mounted now (per /proc/mounts)?
    pub fn mounted(&self) -> bool {
        mount_options(&self.mountpoint).is_some()
    }

    /// Mounts it again with other options. Some (ext4's `data=`) cannot
    /// change on a remount, so it is unmounted and mounted afresh.
    pub fn remount(&self, options: &str) -> Result<(), String> {
        if self.mounted() {
            self.umount()?;
        }
        self.mount(options)
    }

    fn umount(&self) -> Result<(), String> {
        run(Command::new("umount").arg(&self.mountpoint))
    }

    /// Unmounts (if mounted) and deletes the image and mount point.
    pub fn remove(&self) -> Result<(), String> {
        if self.mounted() {
            self.umount()?;
        }
        for r in [
            std::fs::remove_file(&self.image),
            std::fs::remove_dir(&self.mountpoint),
        ] {
            if let Err(e) = r {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(format!("cannot remove the tune filesystem: {e}"));
                }
            }
        }
        Ok(())
    }
}

/// The options a mount point is mounted with, from /proc/mounts (the last
/// mount on it wins), or `None` when nothing is mounted there.
pub fn mount_options(mountpoint: &Path) -> Option<String> {
    let text = std::fs::read_to_string("/proc/mounts").ok()?;
    let want = std::fs::canonicalize(mountpoint).unwrap_or_else(|_| mountpoint.to_path_buf());
    let want = want.to_string_lossy();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && unescape_mount(f[1]) == want).then(|| f[3].to_string())
        })
        .last()
}

/// /proc/mounts writes blanks in paths as octal escapes.
fn unescape_mount(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let name = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {name}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    Err(format!("{name} failed: {}", last.trim()))
}

/// Puts one journalled setting back: a file its old value, a mount its
/// old options, a created filesystem removed. Restoring something already
/// as it was is not an error, so a replay after a crash is safe to repeat.
pub fn restore(kind: &str, target: &str, old: &str) -> Result<(), String> {
    match kind {
        MOUNT => {
            let fs = LoopFs::decode(target)
                .ok_or_else(|| format!("bad journal entry for a mount: {target:?}"))?;
            fs.remove()
        }
        MOUNT_OPTS => {
            let fs = LoopFs::decode(target)
                .ok_or_else(|| format!("bad journal entry for mount options: {target:?}"))?;
            // The filesystem is gone (or never came up): nothing to put back.
            if !fs.image.exists() {
                return Ok(());
            }
            fs.remount(old)
        }
        k if FILE_KINDS.contains(&k) => {
            let path = Path::new(target);
            if let Ok(now) = read_value(path) {
                if same_value(&now, old) {
                    return Ok(());
                }
            }
            write_value(path, old)
        }
        other => Err(format!("unknown journal kind `{other}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysctl_keys_map_under_proc_sys_only() {
        assert_eq!(
            sysctl_path("net.ipv4.tcp_rmem").unwrap(),
            Path::new("/proc/sys/net/ipv4/tcp_rmem")
        );
        for bad in ["", "net..x", "../etc", "net/ipv4", "a.b c", "."] {
            assert!(sysctl_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn values_normalise_like_the_kernel_prints_them() {
        assert_eq!(normalise("4096\t131072\t6291456\n"), "4096 131072 6291456");
        assert_eq!(normalise("always [madvise] never\n"), "madvise");
        assert!(same_value("4096 87380  6291456", "4096\t87380\t6291456\n"));
        assert!(!same_value("1", "2"));
    }

    #[test]
    fn interrupts_match_by_name() {
        let text = "           CPU0       CPU1\n  1:          9          0   IO-APIC   1-edge      i8042\n 24:        100          5   PCI-MSI 49152-edge      virtio0-input.0\n 25:          0          0   PCI-MSI 49153-edge      virtio0-output.0\nNMI:          0          0   Non-maskable interrupts\n";
        assert_eq!(parse_interrupts(text, "virtio0"), vec![24, 25]);
        assert_eq!(parse_interrupts(text, "i8042"), vec![1]);
        assert!(parse_interrupts(text, "eth9").is_empty());
    }

    #[test]
    fn loop_fs_round_trips_through_the_journal() {
        let fs = LoopFs::in_dir(Path::new("/tmp/x"), "7");
        assert_eq!(LoopFs::decode(&fs.encode()), Some(fs));
        assert!(LoopFs::decode("no newline").is_none());
    }

    #[test]
    fn names_are_checked() {
        assert!(thp_path("enabled").is_ok());
        assert!(thp_path("../x").is_err());
        assert!(sched_path("sched_rr_timeslice_ms").is_ok());
        assert!(sched_path("../../x").is_err());
        assert!(nic_mtu_path("lo").is_ok());
        assert!(nic_mtu_path("../lo").is_err());
        assert!(restore("bogus", "x", "y").is_err());
    }
}
