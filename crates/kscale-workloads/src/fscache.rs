//! `fscache`: reads of a file that sits in the page cache (docs/families/fscache.md, seed
//! 002 "FSCache").
//!
//! `threads` readers pread `bufsize`-byte blocks of one shared file of `file`
//! bytes, at uniformly random block-aligned offsets (`random`) or wrapping
//! sequential ones, for the trial time; the figure is the aggregate KB/s
//! (1024 bytes). The `memcpy` source does the same amounts with the same
//! offsets, copying from a private in-memory buffer per thread instead: the
//! seed's baseline, which tells whether memory bandwidth rather than the
//! cache code limits scaling. `source` is the last param so the two appear as
//! adjacent rows everywhere.
//!
//! Choices, and why:
//! - All readers read the *same* file, as the seed's readers of one buffer
//!   cache file did, so they contend on the same cached pages and mapping.
//!   Each opens its own descriptor, as fio's `numjobs` do: a shared `struct
//!   file` would add a contended reference count that is an artefact of the
//!   harness, not of the cache.
//! - The file is created in the run's directory, read once and then checked
//!   with mincore(2) before the timed part and again after it; a trial whose
//!   file is not fully resident fails rather than timing the disk.
//! - The run is time-based (like `fio --time_based`): the threads leave a
//!   start gate together and read until a stop flag set after the trial time,
//!   and the rate is total bytes over the span from the first start to the
//!   last stop. The warm-up's count (`ctx.iterations`) is therefore not used
//!   to fix the work: with several threads a fixed count would let the
//!   slowest straggler define the time. The reported iterations are the
//!   reads done.
//! - Reader `i` is pinned to `cpus[i % len]`, so one reader per CPU stays on
//!   its CPU and placement is the same in every trial (measured: pinned or
//!   not made no difference on a 2-CPU VM).
//! - Besides KB/s the trial reports ops/s (fio's IOPS), the readers' on-CPU
//!   share and KB per CPU-second. On a machine shared with other load the
//!   raw rate scales with the CPU share the readers get, not with the cache:
//!   the readers are threads of one process and so share one scheduler
//!   autogroup, whereas fio's jobs call setsid() and each get a share of
//!   their own. KB per CPU-second takes the share out.

use crate::shared::buf::{page_size, AlignedBuf, Mapping};
use crate::timing::thread_cpu_time;
use crate::{ChartDef, Family, TrialCtx, TrialOutput, WorkloadDef};
use anyhow::{bail, ensure, Context, Result};
use kscale_core::{MetricDef, ParamDef, ParamKind};
use std::fs::File;
use std::hint::black_box;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

const BW: MetricDef = MetricDef::higher("bandwidth", "KB/s");
/// Reads (or copies) per second, all threads together: comparable with
/// fio's IOPS.
const OPS: MetricDef = MetricDef::higher("ops", "ops/s");

/// The share of the readers' wall time they spent on a CPU (their thread
/// CPU time over their span): below 100 % means something else took the
/// CPUs — on a busy machine that, not the cache, explains poor scaling.
const ONCPU: MetricDef = MetricDef::higher("oncpu", "%");

/// Bytes per second of reader CPU time: the rate with the CPU share taken
/// out, which still shows cache scaling on a machine shared with other load.
const CPU_BW: MetricDef = MetricDef::higher("bw_per_cpu", "KB/CPU-s");

const SOURCES: &[&str] = &["read", "memcpy"];
const PATTERNS: &[&str] = &["random", "sequential"];

pub static FAMILY: Family = Family {
    name: "fscache",
    title: "File system cache reads",
    help: "Threads reading a file that is in the page cache with pread, beside a memcpy \
           baseline from memory (seed FSCache).",
    workloads: &[WorkloadDef {
        family: "fscache",
        name: "read",
        title: "FS cache read",
        help: "Aggregate KB/s (1024 bytes) of `threads` readers, each pread-ing `bufsize` \
               blocks at `pattern` offsets of one `file`-byte file verified resident in the \
               page cache (mincore); source=memcpy copies the same blocks from a private \
               buffer per thread instead.",
        params: &[
            ParamDef {
                name: "file",
                help: "Size of the cached file (and of each memcpy buffer).",
                kind: ParamKind::Size {
                    min: 1,
                    max: 1 << 40,
                },
                default: &["128k"],
                quick: &[],
            },
            ParamDef {
                name: "bufsize",
                help: "Bytes per read.",
                kind: ParamKind::Size {
                    min: 1,
                    max: 1 << 30,
                },
                default: &["512", "4096"],
                quick: &[],
            },
            ParamDef {
                name: "pattern",
                help: "Block-aligned offsets: uniformly random, or sequential wrapping at \
                       the end of the file.",
                kind: ParamKind::Choice(PATTERNS),
                default: &["random"],
                quick: &[],
            },
            ParamDef {
                name: "threads",
                help: "Reader threads; `ncpus` is one per CPU of the configuration.",
                kind: ParamKind::Count { max: 4096 },
                default: &["ncpus"],
                quick: &[],
            },
            ParamDef {
                name: "source",
                help: "`read`: pread from the cached file; `memcpy`: copy from a private \
                       in-memory buffer (the memory-bandwidth baseline).",
                kind: ParamKind::Choice(SOURCES),
                default: &["read", "memcpy"],
                quick: &[],
            },
        ],
        metrics: &[BW, OPS, ONCPU, CPU_BW],
        charts: &[ChartDef::against("bufsize")
            .log()
            .metrics(&["bandwidth", "bw_per_cpu"])],
        timeout: Duration::from_secs(60),
        run: read,
        ..WorkloadDef::BASE
    }],
};

/// A file's pages as a mapping, to ask mincore(2) which are resident.
struct Residency(Mapping);

impl Residency {
    /// Maps `len` bytes of `file` read-only. Mapping does not fault pages in,
    /// so residency reflects the page cache, not this check.
    fn of_file(file: &File, len: usize) -> Result<Residency> {
        ensure!(len > 0, "cannot map an empty file");
        Mapping::new(file.as_raw_fd(), len, libc::PROT_READ, libc::MAP_SHARED)
            .context("mapping the cached file")
            .map(Residency)
    }

    /// Private anonymous memory (for testing the residency check: untouched
    /// anonymous pages are not resident).
    #[cfg(test)]
    fn anonymous(len: usize) -> Result<Residency> {
        Mapping::new(
            -1,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        )
        .map(Residency)
    }

    /// (resident pages, pages) from mincore's per-page residency bit.
    fn residency(&self) -> Result<(usize, usize)> {
        let pages = self.0.len().div_ceil(page_size());
        let mut vec = vec![0u8; pages];
        // SAFETY: addr/len is our live mapping; vec holds one byte per page.
        let rc = unsafe { libc::mincore(self.0.addr(), self.0.len(), vec.as_mut_ptr()) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error()).context("mincore");
        }
        Ok((vec.iter().filter(|&&b| b & 1 != 0).count(), pages))
    }
}

/// Names the common file systems by their statfs magic, for the note.
fn fs_name(file: &File) -> String {
    // SAFETY: statfs is plain data; zeroed is a valid initial value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and a valid out-pointer.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
        return "an unknown file system".into();
    }
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between targets.
    match st.f_type as u64 {
        0xEF53 => "ext4".into(),
        0x0102_1994 => "tmpfs".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x794C_7630 => "overlayfs".into(),
        0x2FC1_2FC1 => "zfs".into(),
        t => format!("file system 0x{t:x}"),
    }
}

/// The file the readers share; removed on drop, whatever way the trial ends.
struct CachedFile {
    path: PathBuf,
    file: File,
    len: usize,
}

impl CachedFile {
    /// Creates the file, reads it once and checks that every page is resident.
    fn create(dir: &Path, len: usize) -> Result<CachedFile> {
        let path = crate::shared::scratch::scratch_path(dir, "kscale-fscache");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        // From here on drop removes the file.
        let cached = CachedFile { path, file, len };
        let mut data = AlignedBuf::new(len)?;
        data.fill();
        cached
            .file
            .write_all_at(&data.as_mut_slice()[..len], 0)
            .with_context(|| format!("writing {}", cached.path.display()))?;
        // Writing leaves the pages cached on most file systems; reading once
        // makes sure on the others and mirrors the seed's warm cache.
        cached
            .file
            .read_exact_at(&mut data.as_mut_slice()[..len], 0)
            .with_context(|| format!("reading {} once", cached.path.display()))?;
        cached.ensure_resident("after reading it once")?;
        Ok(cached)
    }

    fn ensure_resident(&self, when: &str) -> Result<()> {
        let (resident, pages) = Residency::of_file(&self.file, self.len)?.residency()?;
        if resident != pages {
            bail!(
                "{} is not fully in the page cache {when}: {resident} of {pages} pages \
                 resident (mincore); the trial would time the storage, not the cache",
                self.path.display()
            );
        }
        Ok(())
    }
}

impl Drop for CachedFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Block offsets: `slots` blocks of `bufsize` bytes.
enum Offsets {
    /// xorshift64 state; Lemire's multiply-shift maps it onto a slot without
    /// a division, so the generator costs a few cycles per read.
    Random(u64),
    Sequential(usize),
}

impl Offsets {
    #[inline(always)]
    fn next(&mut self, slots: usize, bufsize: usize) -> usize {
        match self {
            Offsets::Random(x) => {
                *x ^= *x << 13;
                *x ^= *x >> 7;
                *x ^= *x << 17;
                ((u128::from(*x) * slots as u128) >> 64) as usize * bufsize
            }
            Offsets::Sequential(slot) => {
                let off = *slot * bufsize;
                *slot += 1;
                if *slot == slots {
                    *slot = 0;
                }
                off
            }
        }
    }
}

/// What one thread reads from.
enum Source {
    File(File),
    /// A private copy of the file's bytes (filled by the thread after
    /// pinning, so the memory is local to its CPU on NUMA machines).
    Memory(AlignedBuf),
}

/// One thread's part of a trial.
struct Span {
    start: Instant,
    end: Instant,
    ops: u64,
    /// CPU time this thread used between start and end.
    cpu: Duration,
}

struct Job<'a> {
    cpu: usize,
    source: Source,
    offsets: Offsets,
    slots: usize,
    bufsize: usize,
    gate: &'a Gate,
    stop: &'a AtomicBool,
}

impl Job<'_> {
    /// Pins, prepares, waits at the gate and reads until told to stop. A
    /// failing thread still reaches the gate, and a gate that is shut (a
    /// thread could not be created) releases the ones already waiting.
    fn run(mut self) -> Result<Span> {
        let pinned = kscale_sys::affinity::pin_one(self.cpu);
        let dst = AlignedBuf::new(self.bufsize);
        if let Source::Memory(buf) = &mut self.source {
            buf.fill();
        }
        if !self.gate.wait() {
            bail!("the trial was abandoned before it started");
        }
        pinned.with_context(|| format!("pinning a reader to CPU {}", self.cpu))?;
        let mut dst = dst?;
        let (slots, bufsize) = (self.slots, self.bufsize);
        let mut ops = 0u64;
        let cpu0 = thread_cpu_time()?;
        let start = Instant::now();
        match &self.source {
            Source::File(f) => {
                let fd = f.as_raw_fd();
                while !self.stop.load(Ordering::Relaxed) {
                    let off = self.offsets.next(slots, bufsize);
                    // SAFETY: dst holds at least bufsize writable bytes.
                    let n =
                        unsafe { libc::pread(fd, dst.ptr().cast(), bufsize, off as libc::off_t) };
                    if n != bufsize as isize {
                        let e = std::io::Error::last_os_error();
                        bail!("pread of {bufsize} bytes at {off} returned {n} ({e})");
                    }
                    ops += 1;
                }
            }
            Source::Memory(src) => {
                while !self.stop.load(Ordering::Relaxed) {
                    let off = self.offsets.next(slots, bufsize);
                    // SAFETY: off + bufsize <= file size = src's size, and
                    // dst holds bufsize bytes; the buffers do not overlap.
                    unsafe {
                        std::ptr::copy_nonoverlapping(src.ptr().add(off), dst.ptr(), bufsize)
                    };
                    // The copy's destination escapes, so it cannot be elided.
                    black_box(dst.ptr());
                    ops += 1;
                }
            }
        }
        let end = Instant::now();
        let cpu = thread_cpu_time()?.saturating_sub(cpu0);
        black_box(dst.as_mut_slice());
        Ok(Span {
            start,
            end,
            ops,
            cpu,
        })
    }
}

/// Where readers wait to start together. Unlike `std::sync::Barrier` it can
/// be shut: when the system refuses a thread, the readers already started are
/// released instead of waiting for one that will never come.
struct Gate {
    state: Mutex<Option<bool>>,
    cv: Condvar,
}

impl Gate {
    fn new() -> Gate {
        Gate {
            state: Mutex::new(None),
            cv: Condvar::new(),
        }
    }

    /// Blocks until the gate opens (true) or is shut (false).
    fn wait(&self) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(open) = *st {
                return open;
            }
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn set(&self, open: bool) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = Some(open);
        self.cv.notify_all();
    }
}

#[cfg(test)]
thread_local! {
    /// Tests make the Nth thread creation fail, as a process at its thread
    /// limit would.
    static REFUSE_SPAWN: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

fn spawn_refused(_i: usize) -> bool {
    #[cfg(test)]
    if REFUSE_SPAWN.with(|r| r.get()) == Some(_i) {
        return true;
    }
    false
}

/// Runs `jobs` together for `time` and returns their spans. Waits for all of
/// them to be ready (each waits at the gate) before the clock starts.
fn run_jobs(
    jobs: Vec<Job<'_>>,
    gate: &Gate,
    stop: &AtomicBool,
    time: Duration,
) -> Result<Vec<Span>> {
    let n = jobs.len();
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(n);
        for (i, j) in jobs.into_iter().enumerate() {
            let spawned = if spawn_refused(i) {
                Err(std::io::Error::from_raw_os_error(libc::EAGAIN))
            } else {
                std::thread::Builder::new().spawn_scoped(s, move || j.run())
            };
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // Release the readers already started so the scope joins.
                    gate.set(false);
                    stop.store(true, Ordering::Relaxed);
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(anyhow::anyhow!(
                        "creating reader thread {} of {n}: {e}",
                        i + 1
                    ));
                }
            }
        }
        gate.set(true);
        std::thread::sleep(time);
        stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a reader thread panicked"))?
            })
            .collect()
    })
}

fn kib(bytes: usize) -> String {
    if bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}

fn read(ctx: &TrialCtx) -> Result<TrialOutput> {
    let file_bytes = usize::try_from(ctx.params.size("file")?).context("file too large")?;
    let bufsize = usize::try_from(ctx.params.size("bufsize")?).context("bufsize too large")?;
    ensure!(
        bufsize > 0 && bufsize <= file_bytes,
        "bufsize ({bufsize}) must be between 1 byte and the file size ({file_bytes})"
    );
    let threads = usize::try_from(ctx.params.count("threads", ctx.cpus.len())?)
        .context("threads too large")?;
    ensure!(threads > 0, "threads must be at least 1");
    let random = match ctx.params.get("pattern")? {
        "random" => true,
        "sequential" => false,
        p => bail!("unknown pattern {p}"),
    };
    let memcpy = match ctx.params.get("source")? {
        "read" => false,
        "memcpy" => true,
        s => bail!("unknown source {s}"),
    };
    let cpus = if ctx.cpus.is_empty() {
        kscale_sys::affinity::available_cpus()?
    } else {
        ctx.cpus.clone()
    };
    let slots = file_bytes / bufsize;

    let cached = if memcpy {
        None
    } else {
        Some(CachedFile::create(&ctx.dir, file_bytes)?)
    };
    let gate = Gate::new();
    let stop = AtomicBool::new(false);
    let mut jobs = Vec::with_capacity(threads);
    for i in 0..threads {
        let source = match &cached {
            Some(c) => Source::File(
                File::open(&c.path).with_context(|| format!("opening {}", c.path.display()))?,
            ),
            None => Source::Memory(AlignedBuf::new(file_bytes)?),
        };
        // Distinct non-zero seeds, so threads do not read in lockstep.
        let seed = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(i as u64 + 1) | 1;
        jobs.push(Job {
            cpu: cpus[i % cpus.len()],
            source,
            offsets: if random {
                Offsets::Random(seed)
            } else {
                Offsets::Sequential((i * slots / threads) % slots)
            },
            slots,
            bufsize,
            gate: &gate,
            stop: &stop,
        });
    }
    let spans = run_jobs(jobs, &gate, &stop, ctx.trial_time)?;
    let note = match &cached {
        Some(c) => {
            c.ensure_resident("after the timed reads")?;
            format!(
                "file {} on {} verified resident in the page cache (mincore) before and \
                 after timing",
                kib(file_bytes),
                fs_name(&c.file)
            )
        }
        None => format!(
            "memcpy baseline: each thread copies from a private {} buffer",
            kib(file_bytes)
        ),
    };

    let first = spans
        .iter()
        .map(|s| s.start)
        .min()
        .context("no reader ran")?;
    let last = spans.iter().map(|s| s.end).max().context("no reader ran")?;
    let secs = last.duration_since(first).as_secs_f64();
    let ops: u64 = spans.iter().map(|s| s.ops).sum();
    ensure!(secs > 0.0 && ops > 0, "no reads completed in {secs} s");
    let bytes = ops as f64 * bufsize as f64;
    let cpu: f64 = spans.iter().map(|s| s.cpu.as_secs_f64()).sum();
    let wall: f64 = spans
        .iter()
        .map(|s| s.end.duration_since(s.start).as_secs_f64())
        .sum();
    Ok(TrialOutput::new(ops)
        .with(&BW, bytes / 1024.0 / secs)
        .with(&OPS, ops as f64 / secs)
        .with(&ONCPU, 100.0 * cpu / wall.max(1e-9))
        .with(&CPU_BW, bytes / 1024.0 / cpu.max(1e-9))
        .note(note))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx_with(dir: &Path, params: &[(&str, &str)], cpus: Vec<usize>) -> TrialCtx {
        let mut ctx = crate::test_ctx(
            &[
                ("file", "128k"),
                ("bufsize", "4096"),
                ("pattern", "random"),
                ("threads", "ncpus"),
                ("source", "read"),
            ],
            20,
        )
        .in_dir(dir);
        for (k, v) in params {
            ctx.params.0.insert(k.to_string(), v.to_string());
        }
        ctx.cpus = cpus;
        ctx
    }

    fn cpus() -> Vec<usize> {
        kscale_sys::affinity::available_cpus().unwrap()
    }

    #[test]
    fn every_source_and_pattern_gives_a_plausible_rate() {
        let dir = tempfile::tempdir().unwrap();
        for source in SOURCES {
            for pattern in PATTERNS {
                for bufsize in ["512", "4096"] {
                    let ctx = ctx_with(
                        dir.path(),
                        &[
                            ("source", source),
                            ("pattern", pattern),
                            ("bufsize", bufsize),
                            ("file", "64k"),
                        ],
                        cpus(),
                    );
                    let out = read(&ctx).unwrap();
                    let bw = out.values[BW.name];
                    let ops = out.values[OPS.name];
                    assert!(bw.is_finite() && bw > 1000.0, "{source} {pattern}: {bw}");
                    let bs: f64 = bufsize.parse().unwrap();
                    assert!((bw * 1024.0 / bs - ops).abs() <= ops * 1e-9);
                    assert!(out.iterations > 0);
                    assert_eq!(out.notes.len(), 1);
                    let oncpu = out.values[ONCPU.name];
                    assert!(oncpu > 0.0 && oncpu <= 101.0, "{oncpu}");
                    // At most every thread on a CPU all the time.
                    assert!(out.values[CPU_BW.name] * cpus().len() as f64 >= bw * 0.95);
                }
            }
        }
        // Every cached file was removed.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn read_note_says_the_file_was_verified() {
        let dir = tempfile::tempdir().unwrap();
        let out = read(&ctx_with(dir.path(), &[], vec![cpus()[0]])).unwrap();
        assert!(
            out.notes[0].starts_with("file 128 KiB on ")
                && out.notes[0].contains("verified resident in the page cache (mincore)"),
            "{:?}",
            out.notes
        );
    }

    #[test]
    fn more_threads_than_cpus_and_odd_sizes_work() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_with(
            dir.path(),
            &[("threads", "3"), ("file", "10000"), ("bufsize", "3000")],
            vec![cpus()[0]],
        );
        assert!(read(&ctx).unwrap().values[BW.name] > 0.0);
    }

    #[test]
    fn a_refused_thread_fails_the_trial_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_with(dir.path(), &[("threads", "4")], cpus());
        // The third creation fails: the two readers already waiting at the
        // gate must be released, not left to the worker's time limit.
        REFUSE_SPAWN.with(|r| r.set(Some(2)));
        let t0 = std::time::Instant::now();
        let err = read(&ctx).unwrap_err();
        REFUSE_SPAWN.with(|r| r.set(None));
        assert!(
            format!("{err:#}").contains("creating reader thread 3 of 4"),
            "{err:#}"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "took {:?}",
            t0.elapsed()
        );
    }

    #[test]
    fn bufsize_larger_than_the_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_with(dir.path(), &[("file", "4k"), ("bufsize", "8k")], cpus());
        assert!(read(&ctx).is_err());
    }

    #[test]
    fn residency_of_a_cached_file_is_complete() {
        let dir = tempfile::tempdir().unwrap();
        let c = CachedFile::create(dir.path(), 128 * 1024).unwrap();
        let (resident, pages) = Residency::of_file(&c.file, c.len)
            .unwrap()
            .residency()
            .unwrap();
        assert_eq!(pages, (128 * 1024usize).div_ceil(page_size()));
        assert_eq!(resident, pages);
        c.ensure_resident("now").unwrap();
        let path = c.path.clone();
        drop(c);
        assert!(!path.exists());
    }

    #[test]
    fn residency_counts_only_touched_anonymous_pages() {
        let page = page_size();
        let m = Residency::anonymous(8 * page).unwrap();
        assert_eq!(m.residency().unwrap(), (0, 8));
        for i in (0..8).step_by(2) {
            // SAFETY: inside the 8-page read-write mapping.
            unsafe { m.0.addr().cast::<u8>().add(i * page).write_volatile(1) };
        }
        assert_eq!(m.residency().unwrap(), (4, 8));
    }

    #[test]
    fn offsets_stay_aligned_and_inside_the_file() {
        let (slots, bs) = (32, 512);
        let mut r = Offsets::Random(12345);
        let mut seen = vec![false; slots];
        for _ in 0..10_000 {
            let off = r.next(slots, bs);
            assert_eq!(off % bs, 0);
            assert!(off + bs <= slots * bs);
            seen[off / bs] = true;
        }
        assert!(seen.iter().all(|&s| s), "random offsets miss some blocks");
        let mut s = Offsets::Sequential(30);
        let got: Vec<usize> = (0..4).map(|_| s.next(slots, bs) / bs).collect();
        assert_eq!(got, [30, 31, 0, 1]);
    }

    /// Side-by-side figures for comparison with fio:
    /// `taskset -c 0 cargo test -p kscale-workloads --release fscache::tests::measure -- --ignored --nocapture`
    /// (env: KSCALE_FSC_THREADS, KSCALE_FSC_SECS, KSCALE_FSC_SOURCES, KSCALE_FSC_BS).
    #[test]
    #[ignore]
    fn measure() {
        let dir = tempfile::tempdir().unwrap();
        let threads = std::env::var("KSCALE_FSC_THREADS").unwrap_or_else(|_| "ncpus".into());
        let secs: f64 = std::env::var("KSCALE_FSC_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2.0);
        let sources = std::env::var("KSCALE_FSC_SOURCES").unwrap_or_else(|_| "read memcpy".into());
        let sizes = std::env::var("KSCALE_FSC_BS").unwrap_or_else(|_| "512 4096".into());
        for source in sources.split_whitespace() {
            for bs in sizes.split_whitespace() {
                let mut ctx = ctx_with(
                    dir.path(),
                    &[("source", source), ("bufsize", bs), ("threads", &threads)],
                    cpus(),
                );
                ctx.trial_time = Duration::from_secs_f64(secs);
                let out = read(&ctx).unwrap();
                println!(
                    "fscache {source:<6} bs={bs:<4} threads={threads}: {:>12.0} KB/s {:>10.0} ops/s \
                     on-CPU {:.0} % {:>12.0} KB/CPU-s",
                    out.values[BW.name],
                    out.values[OPS.name],
                    out.values[ONCPU.name],
                    out.values[CPU_BW.name]
                );
            }
        }
    }
}
