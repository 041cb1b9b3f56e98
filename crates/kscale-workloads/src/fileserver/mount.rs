//! Which file system a directory is on, for the trial's note.

use std::path::Path;

/// The file system holding `dir`, from /proc/self/mountinfo: the longest
/// mount point that is a prefix of the path, on the same device.
pub fn mount_of(dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dir = std::fs::canonicalize(dir).ok()?;
    let dev = std::fs::metadata(&dir).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    describe_mount(&info, &dir, major, minor)
}

/// Picks `dir`'s line of a mountinfo text and describes it.
fn describe_mount(info: &str, dir: &Path, major: u32, minor: u32) -> Option<String> {
    let devno = format!("{major}:{minor}");
    let mut best: Option<(usize, String)> = None;
    for line in info.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(sep) = f.iter().position(|x| *x == "-") else {
            continue;
        };
        if f.len() < 6 || f.len() < sep + 4 || f[2] != devno {
            continue;
        }
        let mp = f[4].replace("\\040", " ");
        if !dir.starts_with(&mp) {
            continue;
        }
        let text = format!(
            "--dir is on {} ({}) mounted at {mp}, options {}, {}",
            f[sep + 1],
            f[sep + 2],
            f[5],
            f[sep + 3]
        );
        if best.as_ref().is_none_or(|(len, _)| mp.len() >= *len) {
            best = Some((mp.len(), text));
        }
    }
    best.map(|(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_names_the_longest_mount() {
        let info = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
30 22 7:0 / /mnt/loop rw,noatime - ext4 /dev/loop0 rw,data=writeback
31 22 0:40 / /mnt/loop/tmp rw - tmpfs tmpfs rw,size=10m
";
        let d = describe_mount(info, Path::new("/mnt/loop/x"), 7, 0).unwrap();
        assert!(d.contains("ext4 (/dev/loop0)"), "{d}");
        assert!(d.contains("data=writeback") && d.contains("noatime"), "{d}");
        let root = describe_mount(info, Path::new("/home"), 8, 1).unwrap();
        assert!(
            root.contains("/dev/sda1") && root.contains("at /,"),
            "{root}"
        );
        assert!(describe_mount(info, Path::new("/home"), 9, 9).is_none());
        // The real one, for the scratch directory of these tests.
        assert!(mount_of(&std::env::temp_dir()).is_some());
    }
}
