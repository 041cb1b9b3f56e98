//! `fs`: small-file creation and removal rates (docs/families/fs.md, seed 003
//! "Filesystem", lmbench `lat_fs`).
//!
//! Each timed batch works on fresh files in a fresh directory tree under
//! `ctx.dir` (the filesystem the user chose), at most 100 entries per
//! directory as lat_fs lays them out, so directory size does not grow with
//! the iteration count. `create` times creat + write of `size` bytes + close
//! per file; `delete` times unlink of files created (untimed) just before.
//! Every batch's tree is removed when the batch ends, on errors too, except
//! where `create` keeps its files (the `keep` param): on ext4 without a
//! journal, where freeing inodes slows the next creations for a minute or more,
//! they stay
//! in the run's scratch directory, which the runner removes however the run
//! ends. The figure is the median of short batches, as lat_fs's benchmp
//! reports.

use crate::{ChartDef, Family, TrialCtx, TrialOutput, WorkloadDef};
use anyhow::{ensure, Context, Result};
use kscale_core::{MetricDef, ParamDef, ParamKind};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const CREATES: MetricDef = MetricDef::higher("creates", "files/s");
const DELETES: MetricDef = MetricDef::higher("deletes", "files/s");

/// Entries per directory (lat_fs's default `-n 100`).
const PER_DIR: u64 = 100;
/// lat_fs writes from a buffer of this size in chunks.
const CHUNK: usize = 128 * 1024;

const SIZE: ParamDef = ParamDef {
    name: "size",
    help: "Bytes written into each file.",
    kind: ParamKind::Size {
        min: 0,
        max: 1 << 30,
    },
    default: &["0", "1k", "4k", "10k"],
    quick: &[],
};

const KEEP: ParamDef = ParamDef {
    name: "keep",
    help: "What happens to the created files: `no` unlinks each batch right after timing it \
           (lat_fs); `yes` keeps them until the run ends; `auto` keeps them only on ext4 \
           without a journal, which skips inodes freed in the last minute when allocating, so \
           there creations right after deletions slow down with every deletion and never \
           settle (docs/families/fs.md).",
    kind: ParamKind::Choice(&["auto", "yes", "no"]),
    default: &["auto"],
    quick: &[],
};

pub static FAMILY: Family = Family {
    name: "fs",
    title: "Filesystem",
    help: "Creating and deleting small files, 100 per directory, in the run's directory \
           (lmbench lat_fs).",
    workloads: &[
        WorkloadDef {
            family: "fs",
            name: "create",
            title: "File creations",
            help: "Files created per second: creat, write `size` bytes, close (lmbench lat_fs). \
                   lat_fs unlinks each batch before the next; on ext4 without a journal that \
                   makes every later creation slower for a minute, so there kscale keeps the files \
                   until the run ends (`keep=no` measures as lat_fs does).",
            params: &[SIZE, KEEP],
            metrics: &[CREATES],
            caveat: create_caveat,
            geomean_over: Some("size"),
            charts: &[ChartDef::against("size")],
            timeout: Duration::from_secs(300),
            run: create,
            ..WorkloadDef::BASE
        },
        WorkloadDef {
            family: "fs",
            name: "delete",
            title: "File removals",
            help: "Files removed per second by unlink, of files of `size` bytes created just \
                   before (lmbench lat_fs).",
            params: &[SIZE],
            metrics: &[DELETES],
            geomean_over: Some("size"),
            charts: &[ChartDef::against("size")],
            timeout: Duration::from_secs(300),
            run: delete,
            ..WorkloadDef::BASE
        },
    ],
};

/// A batch's directory tree: leaves hold at most [`PER_DIR`] file names and
/// inner directories at most [`PER_DIR`] subdirectories. Dropping it removes
/// the whole tree, so no path out of a trial leaves files behind.
struct Tree {
    root: PathBuf,
    files: Vec<CString>,
}

impl Tree {
    fn new(parent: &Path, n: u64) -> Result<Tree> {
        let root = crate::shared::scratch::scratch_path(parent, "kscale-fs");
        std::fs::create_dir(&root).with_context(|| format!("creating {}", root.display()))?;
        let mut tree = Tree {
            root,
            files: Vec::with_capacity(usize::try_from(n).context("too many files")?),
        };
        // Depth: how many directory levels above the leaves n files need.
        let mut depth = 0;
        let mut span = PER_DIR;
        while span < n {
            span = span.saturating_mul(PER_DIR);
            depth += 1;
        }
        let root = tree.root.clone();
        tree.fill(&root, depth, n)?;
        Ok(tree)
    }

    /// Adds up to `left` file names under `dir`, making subdirectories when
    /// `depth` > 0.
    fn fill(&mut self, dir: &Path, depth: u32, left: u64) -> Result<()> {
        if depth == 0 {
            for i in 0..left.min(PER_DIR) {
                let name = dir.join(i.to_string());
                self.files.push(
                    CString::new(name.as_os_str().as_bytes())
                        .with_context(|| format!("path {} contains NUL", name.display()))?,
                );
            }
            return Ok(());
        }
        let per_child = PER_DIR.pow(depth);
        let mut left = left;
        let mut i = 0;
        while left > 0 {
            let sub = dir.join(i.to_string());
            std::fs::create_dir(&sub).with_context(|| format!("creating {}", sub.display()))?;
            let here = left.min(per_child);
            self.fill(&sub, depth - 1, here)?;
            left -= here;
            i += 1;
        }
        Ok(())
    }

    /// Creates every file with `size` bytes from `buf`; in reverse order as
    /// lat_fs does.
    fn create_all(&self, size: usize, buf: &[u8]) -> Result<()> {
        for name in self.files.iter().rev() {
            make_file(name, size, buf)?;
        }
        Ok(())
    }

    fn unlink_all(&self) -> Result<()> {
        for name in self.files.iter().rev() {
            // SAFETY: name is a valid NUL-terminated path.
            if unsafe { libc::unlink(name.as_ptr()) } != 0 {
                return Err(std::io::Error::last_os_error())
                    .with_context(|| format!("unlink {}", name.to_string_lossy()));
            }
        }
        Ok(())
    }

    /// Leaves the tree on disk: the run's scratch directory holding it is
    /// removed when the run ends.
    fn keep(mut self) {
        self.root = PathBuf::new();
    }

    /// Removes the tree, reporting failure (Drop can only try).
    fn remove(mut self) -> Result<()> {
        let root = std::mem::take(&mut self.root);
        std::fs::remove_dir_all(&root).with_context(|| format!("removing {}", root.display()))
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        if !self.root.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// creat + write `size` bytes + close, with raw calls so no path conversion
/// or buffering is timed.
fn make_file(name: &CString, size: usize, buf: &[u8]) -> Result<()> {
    // SAFETY: name is a valid NUL-terminated path; creat returns a new fd or -1.
    let fd = unsafe { libc::creat(name.as_ptr(), 0o666) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("creat {}", name.to_string_lossy()));
    }
    let mut left = size;
    let mut result = Ok(());
    while left > 0 {
        let chunk = left.min(buf.len());
        // SAFETY: buf holds at least `chunk` bytes; fd is open for writing.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), chunk) };
        if n <= 0 {
            result = Err(std::io::Error::last_os_error())
                .with_context(|| format!("write {}", name.to_string_lossy()));
            break;
        }
        left -= n as usize;
    }
    // SAFETY: fd was opened above and is closed exactly once.
    if unsafe { libc::close(fd) } != 0 && result.is_ok() {
        result = Err(std::io::Error::last_os_error())
            .with_context(|| format!("close {}", name.to_string_lossy()));
    }
    result
}

fn size_param(ctx: &TrialCtx) -> Result<usize> {
    let size = ctx.params.size("size")?;
    usize::try_from(size).context("size too large")
}

/// Files per batch: one directory's worth, as docs/families/fs.md (100 files a
/// directory). A trial is a whole number of batches.
const BATCH: u64 = 100;

/// Runs `timed_part` on a fresh tree of [`BATCH`] files per batch and
/// returns (median files per second over the batches, batches, files and
/// directories left kept in `keep_in`). The trial is
/// calibrated in batches on the *wall* time of whole batches — building the
/// tree, the untimed half of the work (creating the files to delete, or
/// deleting the created ones) and the timed half — so that a trial lasts
/// about the trial time even for deletions, which are several times faster
/// than the creations they need. The median over batches is what lat_fs's
/// benchmp reports over its repetitions.
fn rate(
    ctx: &TrialCtx,
    keep_in: Option<&Path>,
    mut timed_part: impl FnMut(&Tree) -> Result<Duration>,
) -> Result<(f64, u64, u64)> {
    ensure!(
        ctx.dir.is_dir(),
        "run directory {} does not exist",
        ctx.dir.display()
    );
    let mut per_file: Vec<f64> = Vec::new();
    let mut left = 0;
    let (_, batches) = ctx.time_per_op(|n| {
        per_file.clear();
        let start = Instant::now();
        for _ in 0..n {
            let tree = Tree::new(keep_in.unwrap_or(&ctx.dir), BATCH)?;
            let t = timed_part(&tree)?;
            if keep_in.is_some() {
                tree.keep();
                left += BATCH + 1;
            } else {
                tree.remove()?;
            }
            per_file.push(t.as_secs_f64() / BATCH as f64);
        }
        Ok(start.elapsed())
    })?;
    let median = kscale_core::stats::median(&per_file);
    ensure!(
        median > 0.0,
        "timer did not advance over {batches} batches of {BATCH} files"
    );
    Ok((1.0 / median, batches, left))
}

/// On ext4 without a journal every file deleted there by anyone in the last
/// minute makes each creation scan past its inode, so creation rates follow
/// the machine's other file activity: on the 2-vCPU test VM a concurrent
/// `cargo build` halved them and runs one after the other differed threefold.
fn create_caveat(_: &kscale_core::Params, dir: &Path) -> Option<String> {
    let dev = kscale_sys::fsinfo::ext4_without_journal(dir)?;
    Some(format!(
        "{} is on ext4 without a journal ({dev}): creating a file there costs more for every \
         file anyone deleted on it in the last minute, so creation rates follow the machine's \
         other file activity and may not converge; --dir on tmpfs or a journalled filesystem \
         measures creation alone (docs/families/fs.md)",
        dir.display()
    ))
}

/// Where `create` keeps its files this trial, and the note saying why; `None`
/// when each batch is unlinked as lat_fs does.
fn kept_files(ctx: &TrialCtx) -> Result<(Option<PathBuf>, Option<String>)> {
    /// Keeping stops while less than this much space or this many inodes is
    /// available, so a long run cannot fill the disk: a default run of all
    /// four sizes keeps up to a few GiB.
    const ROOM_BYTES: u64 = 8 << 30;
    const ROOM_INODES: u64 = 2_000_000;
    let keep = match ctx.params.get("keep").unwrap_or("auto") {
        "no" => return Ok((None, None)),
        "yes" => None,
        "auto" => match kscale_sys::fsinfo::ext4_without_journal(&ctx.dir) {
            Some(dev) => Some(dev),
            None => return Ok((None, None)),
        },
        other => anyhow::bail!("bad keep={other}: expected auto, yes or no"),
    };
    let why = match &keep {
        Some(dev) => format!(
            "{} is on ext4 without a journal ({dev}), which skips inodes freed in the last \
             minute when allocating",
            ctx.dir.display()
        ),
        None => "keep=yes".to_string(),
    };
    if !kscale_sys::fsinfo::has_room(&ctx.dir, ROOM_BYTES, ROOM_INODES) {
        return Ok((
            None,
            Some(format!(
                "files unlinked after each batch although {why}: less than {} GiB or {} inodes \
                 are free, so creations slow down with the recent deletions",
                ROOM_BYTES >> 30,
                ROOM_INODES
            )),
        ));
    }
    // Kept directories outlive their worker, and a run's forks can wrap
    // the pids around (pid_max is 32768 by default): a name an earlier
    // worker of the same pid took is skipped, not an error.
    let dir = loop {
        let dir = crate::shared::scratch::scratch_path(&ctx.dir, "kscale-fs-kept");
        match std::fs::create_dir(&dir) {
            Ok(()) => break dir,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    };
    Ok((
        Some(dir),
        Some(format!(
            "created files kept until the run ends, not unlinked after each batch: {why}"
        )),
    ))
}

fn create(ctx: &TrialCtx) -> Result<TrialOutput> {
    let size = size_param(ctx)?;
    let buf = vec![0u8; size.clamp(1, CHUNK)];
    let (keep_in, note) = kept_files(ctx)?;
    let (rate, n, left) = rate(ctx, keep_in.as_deref(), |tree| {
        let start = Instant::now();
        tree.create_all(size, &buf)?;
        let t = start.elapsed();
        if keep_in.is_none() {
            tree.unlink_all()?;
        }
        Ok(t)
    })?;
    let mut out = TrialOutput::new(n).with(&CREATES, rate);
    out.notes.extend(note);
    // The kept directory itself too.
    out.left_files = left + u64::from(keep_in.is_some());
    Ok(out)
}

fn delete(ctx: &TrialCtx) -> Result<TrialOutput> {
    let size = size_param(ctx)?;
    let buf = vec![0u8; size.clamp(1, CHUNK)];
    let (rate, n, _) = rate(ctx, None, |tree| {
        tree.create_all(size, &buf)?;
        let start = Instant::now();
        tree.unlink_all()?;
        Ok(start.elapsed())
    })?;
    Ok(TrialOutput::new(n).with(&DELETES, rate))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx_in(dir: &Path, size: &str, trial_ms: u64) -> TrialCtx {
        crate::test_ctx(&[("size", size), ("keep", "no")], trial_ms).in_dir(dir)
    }

    fn is_empty(dir: &Path) -> bool {
        std::fs::read_dir(dir).unwrap().next().is_none()
    }

    #[test]
    fn a_kept_directory_left_by_an_earlier_worker_of_the_same_pid_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        // What a worker that had this pid before the pids wrapped left.
        for seq in 0..3 {
            let taken = dir
                .path()
                .join(format!("kscale-fs-kept-{}-{seq}", std::process::id()));
            std::fs::create_dir(&taken).unwrap();
        }
        let ctx = crate::test_ctx(&[("size", "0"), ("keep", "yes")], 20).in_dir(dir.path());
        let (kept, _) = kept_files(&ctx).unwrap();
        let kept = kept.unwrap();
        assert!(kept.is_dir());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);
    }

    #[test]
    fn both_workloads_report_a_rate_and_clean_up() {
        let dir = tempfile::tempdir().unwrap();
        for w in FAMILY.workloads {
            for size in ["0", "4k"] {
                let out = (w.run)(&ctx_in(dir.path(), size, 20)).unwrap();
                let v = out.values[w.primary().name];
                assert!(v.is_finite() && v > 1.0, "{} {size}: {v}", w.id());
                assert!(is_empty(dir.path()), "{} left files behind", w.id());
            }
        }
    }

    #[test]
    fn kept_files_stay_in_one_directory_and_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = crate::test_ctx(&[("size", "1k"), ("keep", "yes")], 20).in_dir(dir.path());
        ctx.iterations = Some(3);
        let out = create(&ctx).unwrap();
        assert!(
            out.notes.iter().any(|n| n.contains("kept")),
            "{:?}",
            out.notes
        );
        let top: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(top.len(), 1, "one kept directory");
        let kept = top[0].path();
        assert!(kept
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("kscale-fs-kept-"));
        // Three batches of 100 files, each of 1 KiB, in their trees.
        let files = walk(&kept);
        assert_eq!(files.len(), 300);
        assert!(files.iter().all(|f| f.metadata().unwrap().len() == 1024));
        // What the run's end must remove is said, its trees' roots and the
        // kept directory counted with the files.
        assert_eq!(out.left_files, 300 + 3 + 1);
        ctx.params = kscale_core::Params(
            [("size", "0"), ("keep", "maybe")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        let err = create(&ctx).unwrap_err().to_string();
        assert!(err.contains("keep=maybe") && err.contains("auto"), "{err}");
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                out.extend(walk(&e.path()));
            } else {
                out.push(e.path());
            }
        }
        out
    }

    #[test]
    fn tree_keeps_100_entries_per_directory() {
        let dir = tempfile::tempdir().unwrap();
        let tree = Tree::new(dir.path(), 10_050).unwrap();
        assert_eq!(tree.files.len(), 10_050);
        let unique: std::collections::HashSet<_> = tree.files.iter().collect();
        assert_eq!(unique.len(), 10_050);
        // Root holds 2 subdirectories of up to 100 leaf directories each.
        let top: Vec<_> = std::fs::read_dir(&tree.root).unwrap().collect();
        assert_eq!(top.len(), 2);
        for d in std::fs::read_dir(&tree.root).unwrap() {
            let n = std::fs::read_dir(d.unwrap().path()).unwrap().count();
            assert!(n <= 100, "{n}");
        }
        drop(tree);
        assert!(is_empty(dir.path()));
    }

    #[test]
    fn failure_midway_removes_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = ctx_in(dir.path(), "1k", 20);
        ctx.iterations = Some(2);
        let err = rate(&ctx, None, |tree| {
            tree.create_all(1024, &[0u8; 1024])?;
            anyhow::bail!("injected failure")
        });
        assert!(err.is_err());
        assert!(is_empty(dir.path()));
    }

    #[test]
    fn fixed_iterations_are_honoured() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = ctx_in(dir.path(), "0", 20);
        ctx.iterations = Some(3);
        assert_eq!(delete(&ctx).unwrap().iterations, 3, "batches of 100 files");
    }

    /// Side-by-side figures for comparison with `lat_fs`:
    /// `KSCALE_FS_DIR=/some/dir cargo test -p kscale-workloads --release fs::tests::measure -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn measure() {
        let dir = std::env::var_os("KSCALE_FS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let sizes = std::env::var("KSCALE_FS_SIZES").unwrap_or_else(|_| "0 1k 4k 10k".into());
        for size in sizes.split_whitespace() {
            let ctx = ctx_in(&dir, size, 500);
            let c = create(&ctx).unwrap().values[CREATES.name];
            let d = delete(&ctx).unwrap().values[DELETES.name];
            println!("fs size={size:<4} create {c:>10.0} files/s  delete {d:>10.0} files/s");
        }
    }
}
