//! Facts about the filesystem a directory is on that change what file
//! workloads measure (docs/families/fs.md).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The block device name (`vda`, `loop3`, `dm-0`) when `dir` is on ext4
/// mounted without a journal, else `None`.
///
/// Such a filesystem skips inodes freed in the last 60 s when it allocates a
/// new one, and in the last 6 minutes while their inode table block is not
/// yet written back (fs/ext4/ialloc.c, `recently_deleted`: RECENTCY_MIN 60,
/// RECENTCY_DIRTY 300, checked only without a journal), so creating files
/// right after deleting others slows down with every recent deletion;
/// file-creation rates then depend on what ran in the previous minutes.
pub fn ext4_without_journal(dir: &Path) -> Option<String> {
    let st = nix::sys::statfs::statfs(dir).ok()?;
    if st.filesystem_type() != nix::sys::statfs::EXT4_SUPER_MAGIC {
        return None;
    }
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let uevent = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent")).ok()?;
    let name = uevent.lines().find_map(|l| l.strip_prefix("DEVNAME="))?;
    // The kernel names the journal thread here; `<none>` when there is none.
    let task = std::fs::read_to_string(format!("/sys/fs/ext4/{name}/journal_task")).ok()?;
    (task.trim() == "<none>").then(|| name.to_string())
}

/// Whether the filesystem holding `dir` has `bytes` and `inodes` available
/// to this user, or half of its size and inodes when it is smaller than
/// twice that, so a workload may leave files there for the rest of a run.
pub fn has_room(dir: &Path, bytes: u64, inodes: u64) -> bool {
    let Ok(st) = nix::sys::statvfs::statvfs(dir) else {
        return false;
    };
    let size = st.blocks().saturating_mul(st.fragment_size());
    let avail = st.blocks_available().saturating_mul(st.fragment_size());
    avail >= bytes.min(size / 2) && st.files_available() >= inodes.min(st.files() / 2)
}

/// Writes back the filesystem `dir` is on (syncfs(2)). After a run has
/// removed many files on ext4 without a journal, a written-back inode
/// table shrinks the time the next run's file creations skip them from six
/// minutes to one.
pub fn sync_fs(dir: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let d = std::fs::File::open(dir)?;
    // SAFETY: syncfs only reads the descriptor, which `d` keeps open.
    if unsafe { libc::syncfs(d.as_raw_fd()) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tmpfs_is_not_unjournalled_ext4() {
        // /dev/shm is tmpfs on Debian and in CI.
        let shm = Path::new("/dev/shm");
        if shm.is_dir() {
            assert_eq!(ext4_without_journal(shm), None);
        }
        assert_eq!(ext4_without_journal(Path::new("/nonexistent/dir")), None);
    }

    #[test]
    fn room_is_what_is_available() {
        let dir = std::env::temp_dir();
        assert!(has_room(&dir, 0, 0));
        // Asking for more than there is asks for half of the filesystem.
        let st = nix::sys::statvfs::statvfs(&dir).unwrap();
        let half_free = st.blocks_available() >= st.blocks() / 2;
        assert_eq!(has_room(&dir, u64::MAX, 0), half_free);
        assert!(!has_room(Path::new("/nonexistent/dir"), 0, 0));
    }
}
