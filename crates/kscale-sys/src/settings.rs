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

/// Checks an interface name.
pub fn check_dev(dev: &str) -> Result<(), String> {
    let ok = !dev.is_empty()
        && dev.len() < libc::IFNAMSIZ
        && dev
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.@".contains(c));
    if !ok {
        return Err(format!("bad interface name `{dev}`"));
    }
    Ok(())
}

/// An interface's MTU through SIOCGIFMTU / SIOCSIFMTU on a socket: the
/// ioctl acts in the caller's network namespace, where /sys/class/net may
/// still show the namespace that mounted /sys.
pub fn nic_mtu(dev: &str, set: Option<u32>) -> Result<u32, String> {
    check_dev(dev)?;
    // SAFETY: a plain datagram socket, closed by OwnedFd.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!("socket: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fd was just returned by socket() and is owned only here.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    use std::os::fd::AsRawFd;
    // SAFETY: ifreq is plain old data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(dev.bytes()) {
        *d = s as libc::c_char;
    }
    let (op, what) = match set {
        Some(m) => {
            req.ifr_ifru.ifru_mtu = m as libc::c_int;
            (libc::SIOCSIFMTU, "set")
        }
        None => (libc::SIOCGIFMTU, "read"),
    };
    // SAFETY: req is a valid ifreq for these two ioctls and outlives the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), op as _, &mut req) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        let reason = match e.raw_os_error() {
            Some(libc::ENODEV) => "no such interface here".to_string(),
            Some(libc::EPERM) => "permission denied (not root?)".to_string(),
            Some(libc::EINVAL) => "the interface refuses that value".to_string(),
            _ => e.to_string(),
        };
        return Err(format!("cannot {what} the MTU of {dev}: {reason}"));
    }
    // SAFETY: SIOCGIFMTU filled the mtu member (and SIOCSIFMTU left ours).
    Ok(unsafe { req.ifr_ifru.ifru_mtu } as u32)
}

/// This process's network namespace, as /proc names it (`net:[4026531840]`).
pub fn netns_id() -> String {
    std::fs::read_link("/proc/self/ns/net")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Does any process or /run/netns name still hold namespace `id`?
fn netns_exists(id: &str) -> bool {
    let held = |p: &Path| std::fs::read_link(p).is_ok_and(|l| l.to_string_lossy() == id);
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().parse::<u32>().is_ok()
                && held(&e.path().join("ns/net"))
            {
                return true;
            }
        }
    }
    // A named namespace is a bind mount: its inode is the namespace's.
    let ino = id
        .trim_start_matches("net:[")
        .trim_end_matches(']')
        .parse::<u64>()
        .ok();
    if let (Some(ino), Ok(rd)) = (ino, std::fs::read_dir("/run/netns")) {
        use std::os::unix::fs::MetadataExt;
        for e in rd.flatten() {
            if std::fs::metadata(e.path()).is_ok_and(|m| m.ino() == ino) {
                return true;
            }
        }
    }
    false
}

/// Moves this process into a new network namespace of its own, with
/// loopback up; it vanishes when the last process in it ends, and every
/// namespaced setting with it. Must be called before any thread starts.
pub fn private_netns() -> Result<(), String> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("cannot make a network namespace: {e} (needs root)"))?;
    run(Command::new("ip").args(["link", "set", "lo", "up"]))
}

/// Settings that live in a network namespace are journalled with it:
/// `TARGET in net:[N]`.
pub fn in_netns(target: &str) -> String {
    format!("{target} in {}", netns_id())
}

fn split_netns(target: &str) -> (&str, Option<&str>) {
    match target.rsplit_once(" in net:[") {
        Some((t, _)) => (t, Some(&target[t.len() + 4..])),
        None => (target, None),
    }
}

/// Is a file setting namespaced by the network namespace?
pub fn is_net_path(path: &Path) -> bool {
    path.starts_with("/proc/sys/net") || path.starts_with("/sys/class/net")
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
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "permission denied (not root, or read-only in this namespace)".to_string()
        }
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
    text.lines().rev().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 4 && unescape_mount(f[1]) == want).then(|| f[3].to_string())
    })
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
pub fn restore(kind: &str, target: &str, old: &str) -> Result<(), Restore> {
    let (target, ns) = split_netns(target);
    if let Some(ns) = ns {
        if ns != netns_id() {
            if netns_exists(ns) {
                return Err(Restore::Elsewhere(format!(
                    "{target} was changed in network namespace {ns}: run the restore inside it (ip netns exec NAME kscale tune --restore)"
                )));
            }
            return Ok(());
        }
    }
    restore_here(kind, target, old).map_err(Restore::Failed)
}

/// Why a journal entry was not restored.
#[derive(Debug, PartialEq)]
pub enum Restore {
    /// It lives in another, still existing, network namespace.
    Elsewhere(String),
    Failed(String),
}

impl std::fmt::Display for Restore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Restore::Elsewhere(s) | Restore::Failed(s) => f.write_str(s),
        }
    }
}

fn restore_here(kind: &str, target: &str, old: &str) -> Result<(), String> {
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
        "nic" => {
            let mtu: u32 = old
                .parse()
                .map_err(|_| format!("bad journalled MTU `{old}`"))?;
            if nic_mtu(target, None)? != mtu {
                nic_mtu(target, Some(mtu))?;
            }
            Ok(())
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
    fn netns_tags_split_off() {
        assert_eq!(
            split_netns("/proc/sys/net/x in net:[4026531840]"),
            ("/proc/sys/net/x", Some("net:[4026531840]"))
        );
        assert_eq!(
            split_netns("/proc/sys/kernel/x"),
            ("/proc/sys/kernel/x", None)
        );
        // A namespace nobody holds is gone, and with it the setting.
        assert_eq!(restore("sysctl", "/nonexistent in net:[1]", "0"), Ok(()));
        assert!(netns_id().starts_with("net:["));
        assert!(netns_exists(&netns_id()));
    }

    #[test]
    fn names_are_checked() {
        assert!(thp_path("enabled").is_ok());
        assert!(thp_path("../x").is_err());
        assert!(sched_path("sched_rr_timeslice_ms").is_ok());
        assert!(sched_path("../../x").is_err());
        assert!(check_dev("lo").is_ok());
        assert!(check_dev("../lo").is_err());
        assert!(nic_mtu("no-such-dev0", None).is_err());
        assert!(restore("bogus", "x", "y").is_err());
    }
}
