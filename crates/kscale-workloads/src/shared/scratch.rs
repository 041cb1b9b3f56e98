//! Names in the run's scratch directory that concurrent trials never share.

use anyhow::{Context, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// `dir/PREFIX-PID-N`, a name no other worker process, nor another call in
/// this one, uses: scratch files and directories of concurrent trials in one
/// run directory never collide.
pub fn scratch_path(dir: &Path, prefix: &str) -> PathBuf {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    dir.join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A file of the trial in the scratch directory, removed when dropped so an
/// early error return leaves nothing behind.
pub(crate) struct ScratchFile {
    pub(crate) path: PathBuf,
    pub(crate) c_path: CString,
}

impl ScratchFile {
    /// Reserves a name unique to this process; the caller creates the file.
    pub(crate) fn name(dir: &Path, tag: &str) -> Result<Self> {
        let path = dir.join(format!("kscale-syscall-{tag}-{}", std::process::id()));
        let c_path = CString::new(path.as_os_str().as_bytes())
            .with_context(|| format!("path {} contains a NUL byte", path.display()))?;
        Ok(ScratchFile { path, c_path })
    }

    pub(crate) fn with_bytes(dir: &Path, tag: &str, bytes: &[u8]) -> Result<Self> {
        let f = Self::name(dir, tag)?;
        std::fs::write(&f.path, bytes).with_context(|| format!("write {}", f.path.display()))?;
        Ok(f)
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
