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
//! reports: batches of 100 files filling the trial time, or with
//! `batch=lat_fs` lat_fs's own — about 5 ms each, 11 counted — so that a
//! trial frees as many inodes as one lat_fs run (which on ext4 without a
//! journal decides how fast the next creations are).

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

const BATCH_PARAM: ParamDef = ParamDef {
    name: "batch",
    help: "How a trial is cut into timed batches: `100` (the default) times one full \
           directory of 100 files at a time, as many as the trial time holds; `lat_fs` is \
           lmbench's benchmp as lat_fs runs it: batches of the files that take about 5 ms \
           (from 1 file, grown ×8 and then rescaled to 5.5 ms), the median of 11 such \
           batches, so a trial creates and removes as many files as one lat_fs run, whatever \
           the trial time (docs/families/fs.md).",
    kind: ParamKind::Choice(&["100", "lat_fs"]),
    default: &["100"],
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
            params: &[SIZE, KEEP, BATCH_PARAM],
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
            params: &[SIZE, BATCH_PARAM],
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
    /// Directories made, the root among them.
    dirs: u64,
}

impl Tree {
    fn new(parent: &Path, n: u64) -> Result<Tree> {
        let root = crate::shared::scratch::scratch_path(parent, "kscale-fs");
        std::fs::create_dir(&root).with_context(|| format!("creating {}", root.display()))?;
        let mut tree = Tree {
            root,
            files: Vec::with_capacity(usize::try_from(n).context("too many files")?),
            dirs: 1,
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
            self.dirs += 1;
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
    /// removed when the run ends. Returns the entries left, files and
    /// directories.
    fn keep(mut self) -> u64 {
        self.root = PathBuf::new();
        self.files.len() as u64 + self.dirs
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

/// lat_fs's batches (`batch=lat_fs`): lmbench's `benchmp` for one process
/// (lib_timing.c), with `ENOUGH=5000` as scripts/validate-micro runs it —
/// 5 ms is also the shortest interval lmbench picks by itself.
mod lat_fs {
    /// The interval a batch is sized to, µs (`enough`).
    pub const ENOUGH_US: f64 = 5000.0;
    /// Batches counted (`TRIES`): those lasting over 0.95 × ENOUGH.
    pub const TRIES: usize = 11;
    /// Below this a batch is too short to scale from and grows ×8.
    pub const SCALE_FROM_US: f64 = 150.0;
    /// More files than this a batch never holds (benchmp gives up at 2^27
    /// iterations; a directory tree of this many names is already 50 MB).
    pub const MAX_FILES: u64 = 1 << 20;
    /// Batches a trial may take before it gives up: benchmp would loop on.
    pub const MAX_BATCHES: usize = 1000;

    /// The next batch's file count after a batch of `n` files took `us`
    /// µs, as `benchmp_interval`: unchanged within 0.99–1.2 × ENOUGH;
    /// ×8 while a batch lasts under 150 µs; else scaled to 1.1 × ENOUGH.
    pub fn next(n: u64, us: f64) -> u64 {
        if (0.99 * ENOUGH_US..=1.2 * ENOUGH_US).contains(&us) {
            n
        } else if us > SCALE_FROM_US {
            ((n as f64 / us * 1.1 * ENOUGH_US) + 1.0) as u64
        } else {
            n.saturating_mul(8)
        }
    }

    /// Whether a batch of `us` µs counts towards the median.
    pub fn counts(us: f64) -> bool {
        us > 0.95 * ENOUGH_US
    }
}

/// How a trial is cut into batches (the `batch` param).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Batches {
    /// [`BATCH`] files a batch, as many batches as the trial time holds.
    Dir,
    /// lat_fs's: see [`lat_fs`].
    LatFs,
}

fn batches_param(ctx: &TrialCtx) -> Result<Batches> {
    match ctx.param(&BATCH_PARAM)?.as_str() {
        "100" => Ok(Batches::Dir),
        "lat_fs" => Ok(Batches::LatFs),
        other => anyhow::bail!("bad batch={other}: expected 100 or lat_fs"),
    }
}

/// What [`rate`] measured: files per second (the median batch's), the
/// trial's iteration count (batches of 100, or lat_fs's files per batch)
/// and the entries left kept.
struct Rate {
    per_s: f64,
    iterations: u64,
    left: u64,
}

/// Runs `timed_part` on a fresh tree per batch, cut as `mode` says, and
/// returns the median batch's rate. With [`Batches::Dir`] the trial is
/// calibrated in batches on the *wall* time of whole batches — building the
/// tree, the untimed half of the work (creating the files to delete, or
/// deleting the created ones) and the timed half — so that a trial lasts
/// about the trial time even for deletions, which are several times faster
/// than the creations they need. The median over batches is what lat_fs's
/// benchmp reports over its repetitions.
fn rate(
    ctx: &TrialCtx,
    mode: Batches,
    keep_in: Option<&Path>,
    mut timed_part: impl FnMut(&Tree) -> Result<Duration>,
) -> Result<Rate> {
    ensure!(
        ctx.dir.is_dir(),
        "run directory {} does not exist",
        ctx.dir.display()
    );
    let mut left = 0;
    // One batch of `n` files: its timed part, the tree kept or removed.
    let mut batch = |n: u64| -> Result<Duration> {
        let tree = Tree::new(keep_in.unwrap_or(&ctx.dir), n)?;
        let t = timed_part(&tree)?;
        if keep_in.is_some() {
            left += tree.keep();
        } else {
            tree.remove()?;
        }
        Ok(t)
    };
    let (per_file, iterations) = match mode {
        Batches::Dir => {
            let mut per_file: Vec<f64> = Vec::new();
            let (_, batches) = ctx.time_per_op(|n| {
                per_file.clear();
                let start = Instant::now();
                for _ in 0..n {
                    per_file.push(batch(BATCH)?.as_secs_f64() / BATCH as f64);
                }
                Ok(start.elapsed())
            })?;
            (per_file, batches)
        }
        Batches::LatFs => lat_fs_batches(ctx.iterations, &mut batch)?,
    };
    let median = kscale_core::stats::median(&per_file);
    ensure!(
        median > 0.0,
        "timer did not advance over {} batches",
        per_file.len()
    );
    Ok(Rate {
        per_s: 1.0 / median,
        iterations,
        left,
    })
}

/// lmbench's benchmp as lat_fs runs it, on `batch(n)` (which makes a batch
/// of `n` files and returns its timed part): one 1-file batch uncounted
/// (benchmp's warm-up state), then batches from 1 file — or from `start`
/// files, a fixed iteration count — resized by [`lat_fs::next`] until
/// [`lat_fs::TRIES`] of them lasted over 0.95 × 5 ms. Returns the counted
/// batches' seconds per file and the last batch's file count.
fn lat_fs_batches(
    start: Option<u64>,
    mut batch: impl FnMut(u64) -> Result<Duration>,
) -> Result<(Vec<f64>, u64)> {
    let mut n = match start {
        Some(n) => n.clamp(1, lat_fs::MAX_FILES),
        None => {
            batch(1)?;
            1
        }
    };
    let mut per_file = Vec::with_capacity(lat_fs::TRIES);
    let mut batches = 0;
    while per_file.len() < lat_fs::TRIES {
        ensure!(
            batches < lat_fs::MAX_BATCHES,
            "{} of {batches} batches lasted the 5 ms lat_fs counts",
            per_file.len()
        );
        let t = batch(n)?;
        batches += 1;
        let us = t.as_secs_f64() * 1e6;
        if lat_fs::counts(us) {
            per_file.push(t.as_secs_f64() / n as f64);
        }
        let last = n;
        n = lat_fs::next(n, us);
        ensure!(
            n <= lat_fs::MAX_FILES,
            "a batch of {last} files lasted {us:.0} µs: more than {} files would be needed \
             to fill lat_fs's 5 ms",
            lat_fs::MAX_FILES
        );
    }
    Ok((per_file, n))
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
    let keep = match ctx.param(&KEEP)?.as_str() {
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
    let mode = batches_param(ctx)?;
    let (keep_in, note) = kept_files(ctx)?;
    let r = rate(ctx, mode, keep_in.as_deref(), |tree| {
        let start = Instant::now();
        tree.create_all(size, &buf)?;
        let t = start.elapsed();
        if keep_in.is_none() {
            tree.unlink_all()?;
        }
        Ok(t)
    })?;
    let mut out = TrialOutput::new(r.iterations).with(&CREATES, r.per_s);
    out.notes.extend(note);
    // The kept directory itself too.
    out.left_files = r.left + u64::from(keep_in.is_some());
    Ok(out)
}

fn delete(ctx: &TrialCtx) -> Result<TrialOutput> {
    let size = size_param(ctx)?;
    let buf = vec![0u8; size.clamp(1, CHUNK)];
    let r = rate(ctx, batches_param(ctx)?, None, |tree| {
        tree.create_all(size, &buf)?;
        let start = Instant::now();
        tree.unlink_all()?;
        Ok(start.elapsed())
    })?;
    Ok(TrialOutput::new(r.iterations).with(&DELETES, r.per_s))
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
        assert!(
            err.contains("`maybe`") && err.contains("`keep`") && err.contains("auto"),
            "{err}"
        );
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
        let err = rate(&ctx, Batches::Dir, None, |tree| {
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

    #[test]
    fn lat_fs_batches_resize_as_benchmp() {
        use lat_fs::next;
        // Under 150 µs: ×8.
        assert_eq!(next(1, 20.0), 8);
        // Over it: scaled to 1.1 × 5 ms, truncated after adding 1.
        assert_eq!(next(8, 1600.0), 28);
        assert_eq!(next(100, 11_000.0), 51);
        // Within 0.99–1.2 × 5 ms: unchanged.
        assert_eq!(next(28, 4950.0), 28);
        assert_eq!(next(28, 6000.0), 28);
        assert_eq!(next(28, 6001.0), 26);
        assert!(lat_fs::counts(4751.0) && !lat_fs::counts(4750.0));
    }

    #[test]
    fn lat_fs_batches_warm_up_calibrate_and_count_eleven() {
        // A filesystem where every file takes 200 µs.
        let mut sizes = Vec::new();
        let (per_file, n) = lat_fs_batches(None, |n| {
            sizes.push(n);
            Ok(Duration::from_micros(200 * n))
        })
        .unwrap();
        // benchmp's warm-up file, its first timed file, then 28 files
        // (5.6 ms) every batch: eleven counted.
        assert_eq!(sizes[..3], [1, 1, 28]);
        assert_eq!(sizes.len(), 2 + lat_fs::TRIES);
        assert!(sizes[2..].iter().all(|&s| s == 28));
        assert_eq!(n, 28);
        assert_eq!(per_file.len(), lat_fs::TRIES);
        assert!(per_file.iter().all(|&t| (t - 200e-6).abs() < 1e-12));
        // A fixed count starts there, with no warm-up file.
        let mut sizes = Vec::new();
        lat_fs_batches(Some(28), |n| {
            sizes.push(n);
            Ok(Duration::from_micros(200 * n))
        })
        .unwrap();
        assert_eq!(sizes, vec![28; lat_fs::TRIES]);
        // A clock that never advances ends in an error, not a loop.
        assert!(lat_fs_batches(None, |_| Ok(Duration::ZERO)).is_err());
    }

    #[test]
    fn lat_fs_batches_create_and_delete_and_clean_up() {
        let dir = tempfile::tempdir().unwrap();
        for w in FAMILY.workloads {
            let ctx = crate::test_ctx(&[("size", "1k"), ("keep", "no"), ("batch", "lat_fs")], 20)
                .in_dir(dir.path());
            let out = (w.run)(&ctx).unwrap();
            let v = out.values[w.primary().name];
            assert!(v.is_finite() && v > 1.0, "{}: {v}", w.id());
            assert!(out.iterations >= 1, "files in the last batch");
            assert!(is_empty(dir.path()), "{} left files behind", w.id());
        }
        let ctx = crate::test_ctx(&[("size", "0"), ("batch", "5ms")], 20).in_dir(dir.path());
        let err = delete(&ctx).unwrap_err().to_string();
        assert!(
            err.contains("`5ms`") && err.contains("`batch`") && err.contains("lat_fs"),
            "{err}"
        );
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
