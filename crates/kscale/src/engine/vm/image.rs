//! The scratch directory of a `kscale vm` (the initramfs and each boot's
//! results file) and the initramfs itself: this kscale binary as `/init`,
//! the libraries it loads at the paths its loader looks in, a shell for
//! the workloads that start one, and the guest's [`Config`].

use super::guest::{Config, CONFIG_PATH};
use anyhow::{Context, Result};
use kscale_sys::initramfs::{needed_libs, Cpio};
use kscale_sys::process::Guardian;
use std::path::{Path, PathBuf};

const PREFIX: &str = "kscale-vm-";

/// The scratch directory, removed when dropped, or by its guardian
/// should kscale be killed; one a killed kscale's guardian could not
/// remove goes at the next `kscale vm`.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Result<Scratch> {
        let base = std::env::temp_dir();
        remove_stale(&base);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{}-", std::process::id()))
            .tempdir_in(&base)
            .with_context(|| format!("cannot make a scratch directory in {}", base.display()))?;
        Ok(Scratch { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn guardian(&self) -> Result<Guardian> {
        Guardian::start(self.path())
            .context("cannot start the scratch directory's guardian (/bin/sh)")
    }

    /// Writes the initramfs for `config` and returns its path.
    pub fn initramfs(&self, config: &Config) -> Result<PathBuf> {
        let path = self.path().join("initramfs.cpio");
        let file = std::fs::File::create(&path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let mut c = Cpio::new(std::io::BufWriter::new(file));
        write_root(&mut c, config)
            .with_context(|| format!("cannot write the initramfs {}", path.display()))?;
        c.finish()
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }
}

fn write_root<W: std::io::Write>(c: &mut Cpio<W>, config: &Config) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the kscale binary")?;
    c.copy_loadable("bin/kscale", &exe)?;
    c.symlink("init", "bin/kscale")?;
    let mut libs = needed_libs(&exe).map_err(anyhow::Error::msg)?;
    // The shell `syscall.fork_sh` and `system()` start.
    if let Ok(sh) = std::fs::canonicalize("/bin/sh") {
        c.copy("bin/sh", &sh)?;
        libs.extend(needed_libs(&sh).map_err(anyhow::Error::msg)?);
    }
    libs.sort();
    libs.dedup();
    for lib in &libs {
        let real = std::fs::canonicalize(lib).unwrap_or_else(|_| lib.clone());
        c.copy(&lib.display().to_string(), &real)?;
    }
    c.char_dev("dev/console", 5, 1)?;
    c.char_dev("dev/null", 1, 3)?;
    for d in ["proc", "sys", "tmp", "run", "root", "etc"] {
        c.dir(d)?;
    }
    c.file("etc/hostname", 0o644, config.hostname.as_bytes())?;
    c.file(
        "etc/passwd",
        0o644,
        b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n",
    )?;
    c.file("etc/group", 0o644, b"root:x:0:\nnogroup:x:65534:\n")?;
    let json = serde_json::to_vec(config)?;
    c.file(CONFIG_PATH, 0o644, &json)?;
    Ok(())
}

/// Guest memory for an initramfs: the kernel holds the archive and its
/// unpacked copy at once, and a run needs room besides.
pub fn memory_for(initrd: &Path) -> u32 {
    let mb = std::fs::metadata(initrd).map_or(0, |m| m.len() / (1 << 20)) as u32;
    (512 + 2 * mb).div_ceil(64) * 64
}

/// A bzImage (or a distribution's vmlinuz) carries the x86 boot
/// protocol's header: "HdrS" at 0x202.
pub fn looks_like_bzimage(p: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let mut magic = [0u8; 4];
    std::fs::File::open(p)
        .and_then(|mut f| {
            f.seek(SeekFrom::Start(0x202))?;
            f.read_exact(&mut magic)
        })
        .is_ok()
        && &magic == b"HdrS"
}

/// Scratch directories of `kscale vm`s whose process is gone.
fn remove_stale(base: &Path) {
    let Ok(rd) = std::fs::read_dir(base) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if !kscale_sys::process::alive(pid) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_grows_with_the_image() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("i");
        std::fs::write(&p, vec![0u8; 3 << 20]).unwrap();
        assert_eq!(memory_for(&p), 576);
        assert_eq!(memory_for(&dir.path().join("none")), 512);
    }

    #[test]
    fn only_boot_images_are_kernels() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        let mut b = vec![0u8; 0x300];
        b[0x202..0x206].copy_from_slice(b"HdrS");
        std::fs::write(&p, &b).unwrap();
        assert!(looks_like_bzimage(&p));
        std::fs::write(&p, b"\x7fELF").unwrap();
        assert!(!looks_like_bzimage(&p));
    }
}
