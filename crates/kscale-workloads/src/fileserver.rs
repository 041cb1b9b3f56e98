//! `fileserver`: the file-serving side of NetBench (seed 004's first case
//! study), measured on the local kernel the way dbench replays NetBench's
//! trace (docs/families/fileserver.md).
//!
//! `clients` forked processes each own a directory tree under the run's
//! scratch directory and replay the operation mix of [`MIX`] — a Windows
//! client's calls turned into the system calls a file server makes for them
//! — as fast as they can, for a fixed `duration` after an uncounted ramp-up.
//! The worker keeps time through a shared page (one relaxed load per
//! operation), as the macro mechanism's parent does through its control
//! lines; each client sends its counts and per-kind latency histograms back
//! through a pipe.
//!
//! Every byte read is checked against what was written: each 4 KiB block
//! carries a stamp (the file's incarnation and the block's number) and a
//! known pattern, and `stat` and `readdir` are checked against the client's
//! model of its tree. A file server that loses data must not report a
//! throughput, so any mismatch fails the trial.

use crate::shared::child::fork_child;
use crate::{roles, ChartDef, Family, TrialCtx, TrialOutput, WorkloadDef};
use anyhow::{bail, Context, Result};
use kscale_core::{hist, MetricDef, ParamDef, ParamKind};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// The kinds of operation a client performs; each has its own histogram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Read,
    Stat,
    Open,
    Create,
    Close,
    Write,
    Readdir,
    Unlink,
    Fsync,
    Rename,
    Lock,
}

/// The operation mix, per mille, modelled on the op counts of the NetBench
/// client trace that dbench replays (its `client.txt`: ≈458,000 SMB calls
/// per client pass). SMB calls are folded into the POSIX calls a server makes
/// for them; the shares are rounded, and the rare ones are raised so that
/// every kind completes often enough in a short window to have a p99.
///
/// | kind      | system calls                          | NetBench calls (share)                              | here |
/// |-----------|---------------------------------------|-----------------------------------------------------|------|
/// | read      | pread 4–60 KiB, verified              | ReadX (27.1 %)                                      | 29.0 % |
/// | stat      | stat of a path, size checked          | QUERY_PATH/FILE/FS_INFORMATION (21.3 %)             | 22.5 % |
/// | open      | open O_RDWR of an existing file       | NTCreateX of an existing file (≈12.7 %)             |  9.5 % |
/// | create    | open O_CREAT\|O_TRUNC (new incarnation)| NTCreateX creating or overwriting (≈4.6 %)          |  3.7 % |
/// | close     | close                                 | Close (12.7 %)                                      | 13.2 % |
/// | write     | pwrite 4–64 KiB, appending or over    | WriteX (8.6 %)                                      |  9.2 % |
/// | readdir   | opendir + readdir, count checked      | FIND_FIRST (6.1 %)                                  |  6.5 % |
/// | unlink    | unlink                                | Unlink (3.5 %)                                      |  3.7 % |
/// | fsync     | fsync                                 | Flush (1.2 %)                                       |  1.3 % |
/// | rename    | rename, within or across directories  | Rename (0.7 %)                                      |  0.8 % |
/// | lock      | fcntl F_SETLK write lock, then unlock | LockX + UnlockX (0.1 %)                             |  0.6 % |
///
/// SET_FILE_INFORMATION (1.4 %) has no counterpart here. `open` + `create`
/// equal `close`, so the number of open files stays between
/// [`MIN_HANDLES`] and [`MAX_HANDLES`]; `create` equals `unlink`, so the
/// tree neither fills nor empties.
pub const MIX: &[(Kind, u32)] = &[
    (Kind::Read, 290),
    (Kind::Stat, 225),
    (Kind::Open, 95),
    (Kind::Create, 37),
    (Kind::Close, 132),
    (Kind::Write, 92),
    (Kind::Readdir, 65),
    (Kind::Unlink, 37),
    (Kind::Fsync, 13),
    (Kind::Rename, 8),
    (Kind::Lock, 6),
];

impl Kind {
    pub const ALL: [Kind; 11] = [
        Kind::Read,
        Kind::Stat,
        Kind::Open,
        Kind::Create,
        Kind::Close,
        Kind::Write,
        Kind::Readdir,
        Kind::Unlink,
        Kind::Fsync,
        Kind::Rename,
        Kind::Lock,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Stat => "stat",
            Kind::Open => "open",
            Kind::Create => "create",
            Kind::Close => "close",
            Kind::Write => "write",
            Kind::Readdir => "readdir",
            Kind::Unlink => "unlink",
            Kind::Fsync => "fsync",
            Kind::Rename => "rename",
            Kind::Lock => "lock",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

const BLOCK: usize = 4096;
/// Directories per client tree and file names per directory.
const DIRS: usize = 4;
const PER_DIR: usize = 32;
const SLOTS: usize = DIRS * PER_DIR;
/// No file grows past this (64 blocks): a client's tree stays under
/// 128 × 256 KiB, so 16 clients fit in any scratch directory.
const MAX_BLOCKS: u64 = 64;
/// Open files a client holds, like the handles an SMB client keeps open.
const MIN_HANDLES: usize = 2;
const MAX_HANDLES: usize = 8;
/// Pattern blocks; block `b` of every file carries pattern block `b % 16`.
const PATTERN_BLOCKS: usize = 16;
/// Longest a write or read is, in blocks (64 KiB).
const MAX_IO_BLOCKS: usize = 16;

/// Write sizes in blocks with their weights: mean 26 KiB, as NetBench's
/// WriteX (mostly 64 KiB and 4 KiB, mean 25.7 KB).
const WRITE_SIZES: &[(usize, u32)] = &[(1, 40), (2, 10), (4, 10), (8, 10), (16, 30)];
/// Read sizes in blocks (a shorter file is read whole): about 10.7 KB on
/// average, as ReadX (mostly 4 KiB, then 60 KiB; mean 11.9 KB); reads move
/// 56 % of the bytes, 59 % in the trace.
const READ_SIZES: &[(usize, u32)] = &[(1, 65), (2, 15), (4, 5), (15, 15)];

const MBPS: MetricDef = MetricDef::higher("mbps", "MB/s");
const OPS: MetricDef = MetricDef::higher("ops", "ops/s");
const FSYNCS: MetricDef = MetricDef::higher("fsyncs", "fsyncs/s");
const fn p99(name: &'static str, hist: &'static str) -> MetricDef {
    MetricDef::quantile(name, "µs", hist, 0.99, 1e-3)
}

const CLIENTS: ParamDef = ParamDef {
    name: "clients",
    help: "Client processes, each replaying the mix in its own directory tree (dbench's \
           NPROCS; NetBench's client machines).",
    kind: ParamKind::Int { min: 1, max: 512 },
    default: &["1", "2", "4", "8", "16"],
    quick: &["1", "4"],
};

pub static FAMILY: Family = Family {
    name: "fileserver",
    title: "File serving",
    help: "NetBench's file-server load replayed on the local file system the way dbench does: \
           client processes each opening, reading, writing, listing, renaming, locking and \
           deleting files in their own tree under --dir, every read verified (seed 004).",
    workloads: &[WorkloadDef {
        family: "fileserver",
        name: "mix",
        title: "NetBench file-server mix",
        help: "MB/s read plus written by `clients` processes replaying a NetBench-like operation \
               mix (read, stat, open, create, close, write, readdir, unlink, fsync, rename, \
               fcntl lock) for `duration` seconds, with operations/s, fsyncs/s and the p99 of \
               each kind of operation. A read that does not return what was written fails the \
               trial. The note names --dir's file system and mount options.",
        params: &[CLIENTS, roles::DURATION],
        metrics: &[
            MBPS,
            OPS,
            FSYNCS,
            p99("p99_read", "read"),
            p99("p99_write", "write"),
            p99("p99_open", "open"),
            p99("p99_create", "create"),
            p99("p99_close", "close"),
            p99("p99_stat", "stat"),
            p99("p99_readdir", "readdir"),
            p99("p99_unlink", "unlink"),
            p99("p99_rename", "rename"),
            p99("p99_lock", "lock"),
            p99("p99_fsync", "fsync"),
        ],
        charts: &[ChartDef::against("clients")
            .log()
            .metrics(&["mbps", "ops", "p99_read"])],
        timeout: Duration::from_secs(60),
        run: run_mix,
        caveat: mix_caveat,
        ..WorkloadDef::BASE
    }],
};

/// The mix creates as many files as it deletes, and on ext4 without a
/// journal the inode allocator skips every inode freed in the last 30 s
/// (`recently_deleted()`), so the cost of a create rises and falls with the
/// deletions of the last half-minute: throughput swings on a scale of tens of
/// seconds that short windows follow instead of averaging
/// (docs/families/fileserver.md).
fn mix_caveat(params: &kscale_core::Params, dir: &Path) -> Option<String> {
    let dev = kscale_sys::fsinfo::ext4_without_journal(dir)?;
    let window = params
        .get(roles::DURATION.name)
        .unwrap_or(roles::DURATION.default[0]);
    Some(format!(
        "{} is on ext4 without a journal ({dev}): each create there scans past the inodes \
         deleted in the last 30 s, and the mix deletes as often as it creates, so throughput \
         swings over tens of seconds and {window} s windows may not converge; --dir on tmpfs \
         or a journalled filesystem measures without it (docs/families/fileserver.md)",
        dir.display()
    ))
}

/// A small, fast generator (xorshift64*): the mix needs no better.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    fn weighted<T: Copy>(&mut self, table: &[(T, u32)]) -> T {
        let total: u32 = table.iter().map(|(_, w)| w).sum();
        let mut r = self.below(u64::from(total)) as u32;
        for (t, w) in table {
            if r < *w {
                return *t;
            }
            r -= w;
        }
        table[table.len() - 1].0
    }
}

/// What the client believes one file name holds.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    exists: bool,
    /// Changes at every create: a stale block from an earlier incarnation
    /// does not pass for current data.
    incarnation: u64,
    blocks: u64,
    open: bool,
}

struct Handle {
    slot: usize,
    file: File,
}

/// Counts, bytes and latencies of the measured window.
struct Stats {
    counts: [u64; Kind::ALL.len()],
    hists: Vec<hdrhistogram::Histogram<u64>>,
    bytes_read: u64,
    bytes_written: u64,
}

impl Stats {
    fn new() -> Stats {
        Stats {
            counts: [0; Kind::ALL.len()],
            hists: Kind::ALL.iter().map(|_| hist::new()).collect(),
            bytes_read: 0,
            bytes_written: 0,
        }
    }
}

/// One client's tree, its model of it, and its open files.
pub struct Client {
    root: PathBuf,
    slots: Vec<Slot>,
    handles: VecDeque<Handle>,
    rng: Rng,
    pattern: Vec<u8>,
    buf: Vec<u8>,
    stats: Stats,
    /// Record the operations (inside the measured window)?
    measuring: bool,
}

/// One file's data does not match what the client wrote, or the tree does
/// not match its model: the trial must fail.
fn mismatch(msg: String) -> anyhow::Error {
    anyhow::anyhow!("data mismatch: {msg}")
}

impl Client {
    /// Builds the tree under `root`: `DIRS` directories, half the file names
    /// in use with 1–16 blocks each, `MIN_HANDLES + 2` files open.
    pub fn new(root: &Path, seed: u64) -> Result<Client> {
        std::fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
        for d in 0..DIRS {
            let p = root.join(format!("d{d}"));
            std::fs::create_dir(&p).with_context(|| format!("creating {}", p.display()))?;
        }
        let mut pat = Rng::new(0x6b73_6361_6c65);
        let pattern: Vec<u8> = (0..PATTERN_BLOCKS * BLOCK / 8)
            .flat_map(|_| pat.next().to_le_bytes())
            .collect();
        let mut c = Client {
            root: root.to_path_buf(),
            slots: vec![Slot::default(); SLOTS],
            handles: VecDeque::new(),
            rng: Rng::new(seed),
            pattern,
            buf: vec![0; MAX_IO_BLOCKS * BLOCK],
            stats: Stats::new(),
            measuring: false,
        };
        for s in (0..SLOTS).step_by(2) {
            let f = c.create_file(s)?;
            let n = 1 + c.rng.below(MAX_IO_BLOCKS as u64) as usize;
            c.fill(s, 0, n);
            f.write_all_at(&c.buf[..n * BLOCK], 0)
                .with_context(|| format!("write {}", c.relative(s)))?;
            c.grow(s, 0, n);
        }
        while c.handles.len() < MIN_HANDLES + 2 {
            c.open()?;
        }
        Ok(c)
    }

    fn path(&self, slot: usize) -> PathBuf {
        self.root
            .join(format!("d{}", slot / PER_DIR))
            .join(format!("f{:02}", slot % PER_DIR))
    }

    fn relative(&self, slot: usize) -> String {
        format!("d{}/f{:02}", slot / PER_DIR, slot % PER_DIR)
    }

    fn record(&mut self, kind: Kind, start: Instant) {
        if self.measuring {
            self.stats.counts[kind.index()] += 1;
            hist::record(
                &mut self.stats.hists[kind.index()],
                start.elapsed().as_nanos() as u64,
            );
        }
    }

    /// A random slot matching `want`, if any: a few random probes, then a
    /// scan from a random start so the answer is never biased to low slots.
    fn pick(&mut self, want: impl Fn(&Slot) -> bool) -> Option<usize> {
        for _ in 0..8 {
            let s = self.rng.below(SLOTS as u64) as usize;
            if want(&self.slots[s]) {
                return Some(s);
            }
        }
        let start = self.rng.below(SLOTS as u64) as usize;
        (0..SLOTS)
            .map(|i| (start + i) % SLOTS)
            .find(|&s| want(&self.slots[s]))
    }

    fn population(&self) -> usize {
        self.slots.iter().filter(|s| s.exists).count()
    }

    /// Runs one operation drawn from the mix. Where the tree's state forbids
    /// the drawn kind (no file open to close, no free name to create), its
    /// counterpart runs instead; the pairs have equal weights, so the
    /// realised mix stays the table's.
    pub fn step(&mut self) -> Result<()> {
        match self.rng.weighted(MIX) {
            Kind::Read => self.read(),
            Kind::Stat => self.stat(),
            Kind::Open | Kind::Create if self.handles.len() >= MAX_HANDLES => self.close(),
            Kind::Open => self.open(),
            Kind::Create if self.population() >= SLOTS * 3 / 4 => self.unlink(),
            Kind::Create => self.create(),
            Kind::Close if self.handles.len() <= MIN_HANDLES => self.open(),
            Kind::Close => self.close(),
            Kind::Write => self.write(),
            Kind::Readdir => self.readdir(),
            Kind::Unlink if self.population() <= SLOTS / 4 => self.create(),
            Kind::Unlink => self.unlink(),
            Kind::Fsync => self.fsync(),
            Kind::Rename => self.rename(),
            Kind::Lock => self.lock(),
        }
    }

    fn create_file(&mut self, slot: usize) -> Result<File> {
        let path = self.path(slot);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&path)
            .with_context(|| format!("create {}", self.relative(slot)))?;
        self.slots[slot] = Slot {
            exists: true,
            incarnation: self.rng.next(),
            blocks: 0,
            open: false,
        };
        Ok(f)
    }

    fn open(&mut self) -> Result<()> {
        let Some(slot) = self.pick(|s| s.exists && !s.open) else {
            return self.create();
        };
        let path = self.path(slot);
        let t = Instant::now();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .with_context(|| format!("open {}", self.relative(slot)))?;
        self.record(Kind::Open, t);
        self.slots[slot].open = true;
        self.handles.push_back(Handle { slot, file });
        Ok(())
    }

    /// Creates a file under a new name, or truncates one in use when every
    /// name is taken (a new incarnation either way). New names first, so
    /// that creates and unlinks balance and the tree keeps its size.
    fn create(&mut self) -> Result<()> {
        let Some(slot) = self
            .pick(|s| !s.exists && !s.open)
            .or_else(|| self.pick(|s| !s.open))
        else {
            return self.close();
        };
        let t = Instant::now();
        let file = self.create_file(slot)?;
        self.record(Kind::Create, t);
        self.slots[slot].open = true;
        self.handles.push_back(Handle { slot, file });
        Ok(())
    }

    /// Closes the longest-open file, as a client done with a document does.
    fn close(&mut self) -> Result<()> {
        let Some(h) = self.handles.pop_front() else {
            return self.open();
        };
        self.slots[h.slot].open = false;
        let t = Instant::now();
        let fd = OwnedFd::from(h.file);
        // SAFETY: into_raw_fd hands us the descriptor; close consumes it once.
        let r = unsafe { libc::close(std::os::fd::IntoRawFd::into_raw_fd(fd)) };
        if r != 0 {
            return Err(io::Error::last_os_error()).context("close");
        }
        self.record(Kind::Close, t);
        Ok(())
    }

    /// Fills the buffer with `n` blocks from block `first` of `slot`, as
    /// the slot's current incarnation holds them.
    fn fill(&mut self, slot: usize, first: u64, n: usize) {
        let inc = self.slots[slot].incarnation;
        for i in 0..n {
            let b = first + i as u64;
            let out = &mut self.buf[i * BLOCK..(i + 1) * BLOCK];
            let p = (b as usize % PATTERN_BLOCKS) * BLOCK;
            out.copy_from_slice(&self.pattern[p..p + BLOCK]);
            out[..8].copy_from_slice(&inc.to_le_bytes());
            out[8..16].copy_from_slice(&b.to_le_bytes());
        }
    }

    /// The model's size after `n` blocks were written from block `first`.
    fn grow(&mut self, slot: usize, first: u64, n: usize) {
        let s = &mut self.slots[slot];
        s.blocks = s.blocks.max(first + n as u64);
    }

    fn write(&mut self) -> Result<()> {
        let i = self.rng.below(self.handles.len() as u64) as usize;
        let slot = self.handles[i].slot;
        let n = self.rng.weighted(WRITE_SIZES);
        let size = self.slots[slot].blocks;
        let room = MAX_BLOCKS - n as u64;
        // Half the writes append (a document growing), half overwrite.
        let first = if self.rng.below(2) == 0 && size <= room {
            size
        } else {
            self.rng.below(size.min(room) + 1)
        };
        self.fill(slot, first, n);
        let t = Instant::now();
        self.handles[i]
            .file
            .write_all_at(&self.buf[..n * BLOCK], first * BLOCK as u64)
            .with_context(|| format!("write {}", self.relative(slot)))?;
        self.record(Kind::Write, t);
        self.grow(slot, first, n);
        if self.measuring {
            self.stats.bytes_written += (n * BLOCK) as u64;
        }
        Ok(())
    }

    fn read(&mut self) -> Result<()> {
        // A random open file that holds data (a fresh one may not yet).
        let h = self.handles.len();
        let start = self.rng.below(h as u64) as usize;
        let Some(i) = (0..h)
            .map(|k| (start + k) % h)
            .find(|&i| self.slots[self.handles[i].slot].blocks > 0)
        else {
            return self.write();
        };
        let slot = self.handles[i].slot;
        let size = self.slots[slot].blocks;
        // The whole read inside the file (a shorter file is read whole), so
        // the sizes read are the table's, not cut short at the end.
        let n = (self.rng.weighted(READ_SIZES) as u64).min(size);
        let first = self.rng.below(size - n + 1);
        let n = n as usize;
        let want = n * BLOCK;
        let t = Instant::now();
        let mut got = 0;
        while got < want {
            let r = self.handles[i]
                .file
                .read_at(&mut self.buf[got..want], first * BLOCK as u64 + got as u64)
                .with_context(|| format!("read {}", self.relative(slot)))?;
            if r == 0 {
                break;
            }
            got += r;
        }
        self.record(Kind::Read, t);
        if got != want {
            return Err(mismatch(format!(
                "{}: read {got} bytes at block {first}, expected {want} (the file has {size} \
                 blocks)",
                self.relative(slot)
            )));
        }
        if self.measuring {
            self.stats.bytes_read += want as u64;
        }
        self.verify(slot, first, n)
    }

    /// Checks `n` blocks read into the buffer from block `first` of `slot`.
    fn verify(&self, slot: usize, first: u64, n: usize) -> Result<()> {
        let inc = self.slots[slot].incarnation;
        for i in 0..n {
            let b = first + i as u64;
            let got = &self.buf[i * BLOCK..(i + 1) * BLOCK];
            let p = (b as usize % PATTERN_BLOCKS) * BLOCK;
            let stamp_ok = got[..8] == inc.to_le_bytes() && got[8..16] == b.to_le_bytes();
            if !stamp_ok || got[16..] != self.pattern[p + 16..p + BLOCK] {
                let at = (16..BLOCK)
                    .find(|&k| got[k] != self.pattern[p + k])
                    .map_or_else(|| "its stamp".to_string(), |k| format!("byte {k}"));
                return Err(mismatch(format!(
                    "{} block {b} differs from what was written at {at}",
                    self.relative(slot)
                )));
            }
        }
        Ok(())
    }

    fn stat(&mut self) -> Result<()> {
        let slot = self.rng.below(SLOTS as u64) as usize;
        let path = self.path(slot);
        let t = Instant::now();
        let r = std::fs::symlink_metadata(&path);
        self.record(Kind::Stat, t);
        let s = self.slots[slot];
        match r {
            Ok(m) if s.exists && m.len() == s.blocks * BLOCK as u64 => Ok(()),
            Ok(m) if s.exists => Err(mismatch(format!(
                "{} has {} bytes, {} were written",
                self.relative(slot),
                m.len(),
                s.blocks * BLOCK as u64
            ))),
            Ok(_) => Err(mismatch(format!(
                "{} exists after it was removed",
                self.relative(slot)
            ))),
            Err(e) if e.kind() == io::ErrorKind::NotFound && !s.exists => Ok(()),
            Err(e) => Err(e).with_context(|| format!("stat {}", self.relative(slot))),
        }
    }

    fn readdir(&mut self) -> Result<()> {
        let d = self.rng.below(DIRS as u64) as usize;
        let dir = self.root.join(format!("d{d}"));
        let t = Instant::now();
        let mut n = 0;
        for e in std::fs::read_dir(&dir).with_context(|| format!("opendir d{d}"))? {
            e.with_context(|| format!("readdir d{d}"))?;
            n += 1;
        }
        self.record(Kind::Readdir, t);
        let want = self.slots[d * PER_DIR..(d + 1) * PER_DIR]
            .iter()
            .filter(|s| s.exists)
            .count();
        if n != want {
            return Err(mismatch(format!("d{d} lists {n} files, {want} were made")));
        }
        Ok(())
    }

    fn unlink(&mut self) -> Result<()> {
        let Some(slot) = self.pick(|s| s.exists && !s.open) else {
            return self.create();
        };
        let path = self.path(slot);
        let t = Instant::now();
        std::fs::remove_file(&path).with_context(|| format!("unlink {}", self.relative(slot)))?;
        self.record(Kind::Unlink, t);
        self.slots[slot].exists = false;
        Ok(())
    }

    fn rename(&mut self) -> Result<()> {
        let Some(from) = self.pick(|s| s.exists && !s.open) else {
            return self.create();
        };
        // A new name, as a save-as-then-rename does; a replaced one only
        // when every name is taken (so renames keep the population).
        let Some(to) = self
            .pick(|s| !s.exists && !s.open)
            .or_else(|| self.pick(|s| !s.open).filter(|&s| s != from))
        else {
            return self.stat();
        };
        let (a, b) = (self.path(from), self.path(to));
        let t = Instant::now();
        std::fs::rename(&a, &b)
            .with_context(|| format!("rename {} to {}", self.relative(from), self.relative(to)))?;
        self.record(Kind::Rename, t);
        self.slots[to] = self.slots[from];
        self.slots[from].exists = false;
        Ok(())
    }

    fn fsync(&mut self) -> Result<()> {
        let i = self.rng.below(self.handles.len() as u64) as usize;
        let t = Instant::now();
        self.handles[i].file.sync_all().context("fsync")?;
        self.record(Kind::Fsync, t);
        Ok(())
    }

    /// A byte-range write lock on one block and its release, as an SMB
    /// client's LockX/UnlockX pair (Samba maps them to fcntl locks).
    fn lock(&mut self) -> Result<()> {
        let i = self.rng.below(self.handles.len() as u64) as usize;
        let start = (self.rng.below(MAX_BLOCKS) * BLOCK as u64) as libc::off_t;
        let fd = self.handles[i].file.as_raw_fd();
        let t = Instant::now();
        for kind in [libc::F_WRLCK, libc::F_UNLCK] {
            // SAFETY: flock is plain data; zeroed is a valid initial value.
            let mut fl: libc::flock = unsafe { std::mem::zeroed() };
            fl.l_type = kind as libc::c_short;
            fl.l_whence = libc::SEEK_SET as libc::c_short;
            fl.l_start = start;
            fl.l_len = BLOCK as libc::off_t;
            // SAFETY: a valid descriptor and a pointer to a live flock.
            if unsafe { libc::fcntl(fd, libc::F_SETLK, &fl) } != 0 {
                return Err(io::Error::last_os_error()).context("fcntl F_SETLK");
            }
        }
        self.record(Kind::Lock, t);
        Ok(())
    }

    fn report(&self) -> Report {
        Report {
            counts: Kind::ALL
                .iter()
                .map(|k| (k.name().to_string(), self.stats.counts[k.index()]))
                .collect(),
            histograms: Kind::ALL
                .iter()
                .map(|k| {
                    (
                        k.name().to_string(),
                        hist::encode(&self.stats.hists[k.index()]),
                    )
                })
                .collect(),
            bytes_read: self.stats.bytes_read,
            bytes_written: self.stats.bytes_written,
            error: None,
        }
    }
}

/// What a client sends back through its pipe.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Report {
    counts: BTreeMap<String, u64>,
    histograms: BTreeMap<String, String>,
    bytes_read: u64,
    bytes_written: u64,
    error: Option<String>,
}

/// Where the trial stands, as the worker announces it on the shared page.
const SETUP: u8 = 0;
const RAMP: u8 = 1;
const MEASURE: u8 = 2;
const DONE: u8 = 3;

/// The page shared by the worker and its clients.
struct Shared {
    phase: AtomicU8,
    ready: AtomicU32,
}

struct SharedPage(*mut Shared);

impl SharedPage {
    fn new() -> Result<SharedPage> {
        // SAFETY: an anonymous shared mapping; no file, no aliasing Rust
        // reference until it is initialised below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                std::mem::size_of::<Shared>(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error()).context("mmap of the shared page");
        }
        let p = p.cast::<Shared>();
        // SAFETY: p is a fresh, page-aligned, writable mapping of the size.
        unsafe {
            p.write(Shared {
                phase: AtomicU8::new(SETUP),
                ready: AtomicU32::new(0),
            })
        };
        Ok(SharedPage(p))
    }
    fn get(&self) -> &Shared {
        // SAFETY: initialised in new() and mapped until drop; only atomics
        // inside, so sharing across processes is sound.
        unsafe { &*self.0 }
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new(), unmapped once.
        unsafe { libc::munmap(self.0.cast(), std::mem::size_of::<Shared>()) };
    }
}

/// One forked client as the worker sees it.
struct ClientProc {
    pid: nix::unistd::Pid,
    pipe: File,
    out: Vec<u8>,
    eof: bool,
    reaped: bool,
}

/// The trial's processes and tree. Dropping it — however the trial ends —
/// kills and reaps every client, removes the tree and lets the janitor go.
struct Trial {
    dir: PathBuf,
    clients: Vec<ClientProc>,
    /// The janitor removes the tree if the worker is killed (it cannot clean
    /// up after SIGKILL itself): it waits for the end of this pipe, which the
    /// worker and every client hold, and so runs once all of them are gone.
    janitor: Option<(nix::unistd::Pid, OwnedFd)>,
}

impl Drop for Trial {
    fn drop(&mut self) {
        for c in &mut self.clients {
            if !c.reaped {
                crate::shared::child::reap(c.pid);
                c.reaped = true;
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some((pid, fd)) = self.janitor.take() {
            drop(fd);
            let _ = nix::sys::wait::waitpid(pid, None);
        }
    }
}

fn dev_null_stdio(fds: &[i32]) {
    if let Ok(null) = OpenOptions::new().read(true).write(true).open("/dev/null") {
        for &fd in fds {
            // SAFETY: dup2 onto a standard descriptor of this process.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
}

/// Forks the janitor: not tied to the worker's life (a fresh fork has no
/// parent-death signal), it blocks until every holder of the pipe's write
/// end has exited, then removes `dir`.
fn start_janitor(dir: &Path) -> Result<(nix::unistd::Pid, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("pipe")?;
    // SAFETY: the worker is single-threaded when it forks; the child only
    // reads a pipe, removes a tree and leaves with _exit.
    match unsafe { nix::unistd::fork() }.context("fork")? {
        nix::unistd::ForkResult::Parent { child } => {
            drop(r);
            Ok((child, w))
        }
        nix::unistd::ForkResult::Child => {
            drop(w);
            kscale_sys::process::set_name("kscale-janitor");
            // Hold none of the runner's pipes: it waits for their end.
            dev_null_stdio(&[0, 1, 2]);
            let mut f = File::from(r);
            let mut b = [0u8; 16];
            loop {
                match f.read(&mut b) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = std::fs::remove_dir_all(dir);
            // SAFETY: leave without running the worker's destructors.
            unsafe { libc::_exit(0) }
        }
    }
}

/// A client process: builds its tree, waits for the ramp, replays the mix
/// until the window is over, and writes its report to `w`.
fn client_main(root: &Path, seed: u64, shared: &Shared, w: OwnedFd) -> i32 {
    kscale_sys::process::set_name("kscale-client");
    dev_null_stdio(&[0, 1]);
    let mut out = File::from(w);
    let report = match client_loop(root, seed, shared) {
        Ok(r) => r,
        Err(e) => Report {
            error: Some(format!("{e:#}")),
            ..Default::default()
        },
    };
    let code = i32::from(report.error.is_some());
    let line = serde_json::to_vec(&report).unwrap_or_default();
    match std::io::Write::write_all(&mut out, &line) {
        Ok(()) => code,
        Err(_) => 1,
    }
}

fn client_loop(root: &Path, seed: u64, shared: &Shared) -> Result<Report> {
    let mut c = Client::new(root, seed)?;
    shared.ready.fetch_add(1, Ordering::SeqCst);
    while shared.phase.load(Ordering::Relaxed) == SETUP {
        std::thread::sleep(Duration::from_millis(1));
    }
    loop {
        let phase = shared.phase.load(Ordering::Relaxed);
        if phase >= DONE {
            break;
        }
        c.measuring = phase == MEASURE;
        c.step()?;
    }
    Ok(c.report())
}

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

/// `KSCALE_FAULT=corrupt:fileserver.mix`: kscale's own test that a read
/// which does not return what was written fails the trial. During the
/// window the worker flips one byte in a random block of every file of
/// client 0, behind the client's back, every few milliseconds.
fn corrupting() -> bool {
    std::env::var("KSCALE_FAULT").is_ok_and(|v| v == "corrupt:fileserver.mix")
}

fn corrupt_tree(root: &Path, rng: &mut Rng) {
    for d in 0..DIRS {
        let Ok(rd) = std::fs::read_dir(root.join(format!("d{d}"))) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(f) = OpenOptions::new().read(true).write(true).open(e.path()) else {
                continue;
            };
            let blocks = f.metadata().map_or(0, |m| m.len()) / BLOCK as u64;
            if blocks == 0 {
                continue;
            }
            let at = rng.below(blocks) * BLOCK as u64 + 100 + rng.below(3000);
            let mut b = [0u8; 1];
            if f.read_exact_at(&mut b, at).is_ok() {
                b[0] ^= 0xff;
                let _ = f.write_all_at(&b, at);
            }
        }
    }
}

impl Trial {
    /// Reads whatever the clients have sent; true when every client's pipe
    /// is at its end. Waits at most `wait` for something to arrive.
    fn poll(&mut self, wait: Duration) -> Result<bool> {
        let mut fds: Vec<libc::pollfd> = self
            .clients
            .iter()
            .filter(|c| !c.eof)
            .map(|c| libc::pollfd {
                fd: c.pipe.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if fds.is_empty() {
            return Ok(true);
        }
        let ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: a valid array of pollfds that lives across the call.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(e).context("poll");
        }
        let mut buf = [0u8; 16 << 10];
        for c in self.clients.iter_mut().filter(|c| !c.eof) {
            loop {
                match c.pipe.read(&mut buf) {
                    Ok(0) => {
                        c.eof = true;
                        break;
                    }
                    Ok(n) => c.out.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e).context("reading a client's report"),
                }
            }
        }
        Ok(self.clients.iter().all(|c| c.eof))
    }

    /// A client whose pipe ended before the window did has failed (or died):
    /// its error, or how it ended.
    fn early_end(&mut self) -> Option<anyhow::Error> {
        let i = self.clients.iter().position(|c| c.eof)?;
        Some(self.failure(i))
    }

    fn failure(&mut self, i: usize) -> anyhow::Error {
        let c = &mut self.clients[i];
        if let Ok(r) = serde_json::from_slice::<Report>(&c.out) {
            if let Some(e) = r.error {
                return anyhow::anyhow!("client {i}: {e}");
            }
        }
        let status = nix::sys::wait::waitpid(c.pid, None);
        c.reaped = true;
        anyhow::anyhow!(
            "client {i} {} before the window ended",
            how_it_ended(status)
        )
    }
}

/// "was killed by SIGKILL", "exited with status 1", for a failed case's
/// error.
fn how_it_ended(status: nix::Result<nix::sys::wait::WaitStatus>) -> String {
    use nix::sys::wait::WaitStatus;
    match status {
        Ok(WaitStatus::Exited(_, code)) => format!("exited with status {code}"),
        Ok(WaitStatus::Signaled(_, sig, _)) => format!("was killed by {sig}"),
        Ok(other) => format!("ended ({other:?})"),
        Err(e) => format!("could not be waited for ({e})"),
    }
}

fn run_mix(ctx: &TrialCtx) -> Result<TrialOutput> {
    let clients = ctx.params.int("clients")? as usize;
    let duration = ctx.params.seconds("duration")?;
    let dir = ctx.dir.join(format!("fileserver-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut trial = Trial {
        dir: dir.clone(),
        clients: Vec::with_capacity(clients),
        janitor: None,
    };
    trial.janitor = Some(start_janitor(&dir)?);
    let shared = SharedPage::new()?;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    for i in 0..clients {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("pipe")?;
        let root = dir.join(format!("c{i}"));
        let sh = shared.get();
        let pid = fork_child(move || client_main(&root, seed ^ (i as u64 + 1), sh, w))
            .with_context(|| format!("forking client {i} of {clients}"))?;
        // The child's end is the child's alone: the pipe ends with it.
        let pipe = File::from(r);
        nix::fcntl::fcntl(
            &pipe,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .context("O_NONBLOCK")?;
        trial.clients.push(ClientProc {
            pid,
            pipe,
            out: Vec::new(),
            eof: false,
            reaped: false,
        });
    }

    // Every tree built, then the uncounted ramp, then the window.
    let setup_limit = Instant::now() + Duration::from_secs(60);
    while shared.get().ready.load(Ordering::SeqCst) < clients as u32 {
        trial.poll(Duration::from_millis(10))?;
        if let Some(e) = trial.early_end() {
            return Err(e.context("building the client trees"));
        }
        if Instant::now() > setup_limit {
            bail!("the client trees were not built within 60 s");
        }
    }
    let wait = |trial: &mut Trial, until: Instant, rng: Option<&mut Rng>| -> Result<()> {
        let mut rng = rng;
        while Instant::now() < until {
            let left = until.saturating_duration_since(Instant::now());
            trial.poll(left.min(Duration::from_millis(20)))?;
            if let Some(e) = trial.early_end() {
                return Err(e);
            }
            if let Some(r) = rng.as_deref_mut() {
                corrupt_tree(&trial.dir.join("c0"), r);
            }
        }
        Ok(())
    };
    shared.get().phase.store(RAMP, Ordering::SeqCst);
    wait(&mut trial, Instant::now() + roles::ramp(duration), None)?;
    shared.get().phase.store(MEASURE, Ordering::SeqCst);
    let begin = Instant::now();
    let mut fault = corrupting().then(|| Rng::new(seed));
    wait(
        &mut trial,
        begin + Duration::from_secs_f64(duration),
        fault.as_mut(),
    )?;
    shared.get().phase.store(DONE, Ordering::SeqCst);
    let window = begin.elapsed().as_secs_f64();

    // Reports, then the clients' exits.
    let limit = Instant::now() + Duration::from_secs(30);
    while !trial.poll(Duration::from_millis(50))? {
        if Instant::now() > limit {
            bail!("a client did not report within 30 s of the window's end");
        }
    }
    let mut total = Report::default();
    let mut merged: Vec<hdrhistogram::Histogram<u64>> =
        Kind::ALL.iter().map(|_| hist::new()).collect();
    for i in 0..trial.clients.len() {
        let r: Report = match serde_json::from_slice(&trial.clients[i].out) {
            Ok(r) => r,
            Err(_) => return Err(trial.failure(i)),
        };
        if let Some(e) = r.error {
            bail!("client {i}: {e}");
        }
        for (k, h) in Kind::ALL.iter().zip(merged.iter_mut()) {
            if let Some(enc) = r.histograms.get(k.name()) {
                hist::merge(h, &hist::decode(enc)?)?;
            }
            *total.counts.entry(k.name().to_string()).or_default() +=
                r.counts.get(k.name()).copied().unwrap_or(0);
        }
        total.bytes_read += r.bytes_read;
        total.bytes_written += r.bytes_written;
        let c = &mut trial.clients[i];
        let status = nix::sys::wait::waitpid(c.pid, None);
        c.reaped = true;
        if !matches!(status, Ok(nix::sys::wait::WaitStatus::Exited(_, 0))) {
            bail!("client {i} {} after its report", how_it_ended(status));
        }
    }
    drop(trial);

    let ops: u64 = total.counts.values().sum();
    if ops == 0 {
        bail!("no operation completed in the measured window");
    }
    let fsyncs = total.counts.get("fsync").copied().unwrap_or(0);
    let bytes = total.bytes_read + total.bytes_written;
    let mut out = TrialOutput::new(ops)
        .with(&MBPS, bytes as f64 / window / 1e6)
        .with(&OPS, ops as f64 / window)
        .with(&FSYNCS, fsyncs as f64 / window)
        .note(format!(
            "{clients} client(s), each in its own tree; {:.1} s ramp-up uncounted; reads \
             {:.0} % of the bytes; every read verified",
            roles::ramp(duration).as_secs_f64(),
            total.bytes_read as f64 / bytes.max(1) as f64 * 100.0
        ));
    if let Some(m) = mount_of(&ctx.dir) {
        out = out.note(m);
    }
    out.histograms = Kind::ALL
        .iter()
        .zip(&merged)
        .map(|(k, h)| (k.name().to_string(), hist::encode(h)))
        .collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_is_a_whole_and_balanced() {
        let w = |k: Kind| MIX.iter().find(|(x, _)| *x == k).map_or(0, |(_, w)| *w);
        assert_eq!(MIX.iter().map(|(_, w)| w).sum::<u32>(), 1000);
        for k in Kind::ALL {
            assert!(w(k) > 0, "{k:?} missing from the mix");
            assert_eq!(Kind::ALL[k.index()], k);
        }
        // Handles opened = handles closed; files made = files removed.
        assert_eq!(w(Kind::Open) + w(Kind::Create), w(Kind::Close));
        assert_eq!(w(Kind::Create), w(Kind::Unlink));
    }

    /// A client's realised proportions are the table's: its redirections
    /// (open at the handle limit closes instead, …) cancel out.
    #[test]
    fn a_client_performs_the_mix() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Client::new(&dir.path().join("c0"), 7).unwrap();
        c.measuring = true;
        let n = 40_000;
        for _ in 0..n {
            c.step().unwrap();
        }
        let done: u64 = c.stats.counts.iter().sum();

        // A rename with no name free for it stats instead; nothing else is
        // lost or added.
        assert!(done >= n as u64 - 10 && done <= n as u64, "{done}");
        for (k, w) in MIX {
            let want = f64::from(*w) / 1000.0;
            let got = c.stats.counts[k.index()] as f64 / done as f64;
            // Three standard deviations of a binomial share, plus slack for
            // the redirections at the bounds.
            let sd = (want * (1.0 - want) / done as f64).sqrt();
            assert!(
                (got - want).abs() <= 3.0 * sd + 0.05 * want,
                "{k:?}: {got:.4} of the operations, the table says {want:.4}"
            );
        }
        let written = c.stats.bytes_written as f64 / c.stats.counts[Kind::Write.index()] as f64;
        assert!((20e3..32e3).contains(&written), "mean write {written}");
        let read = c.stats.bytes_read as f64 / c.stats.counts[Kind::Read.index()] as f64;
        assert!((9e3..14e3).contains(&read), "mean read {read}");
        // NetBench's trace moves 59 % of its bytes by reads.
        let share = c.stats.bytes_read as f64 / (c.stats.bytes_read + c.stats.bytes_written) as f64;
        assert!(
            (0.54..0.66).contains(&share),
            "reads move {share:.3} of the bytes"
        );
    }

    #[test]
    fn a_corrupted_block_fails_the_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("c0");
        let mut c = Client::new(&root, 11).unwrap();
        for _ in 0..500 {
            c.step().unwrap();
        }
        // Flip a byte in every block of every file the client holds open.
        for h in &c.handles {
            let blocks = c.slots[h.slot].blocks;
            for b in 0..blocks {
                let at = b * BLOCK as u64 + 1234;
                let mut x = [0u8; 1];
                h.file.read_exact_at(&mut x, at).unwrap();
                x[0] ^= 1;
                h.file.write_all_at(&x, at).unwrap();
            }
        }
        let err = (0..10_000)
            .find_map(|_| c.step().err())
            .expect("a corrupted block was read back without complaint");
        let msg = format!("{err:#}");
        assert!(
            msg.contains("data mismatch") && msg.contains("byte 1234"),
            "{msg}"
        );
    }

    #[test]
    fn a_file_removed_behind_the_clients_back_is_noticed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("c0");
        let mut c = Client::new(&root, 3).unwrap();
        for s in 0..SLOTS {
            if c.slots[s].exists && !c.slots[s].open {
                std::fs::remove_file(c.path(s)).unwrap();
            }
        }
        let err = (0..10_000)
            .find_map(|_| c.step().err())
            .expect("missing files went unnoticed");
        let msg = format!("{err:#}");
        assert!(
            msg.contains("data mismatch") || msg.contains("No such file"),
            "{msg}"
        );
    }

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

    #[test]
    fn rng_weighted_covers_the_table() {
        let mut r = Rng::new(1);
        let mut seen = [0u32; 5];
        for _ in 0..10_000 {
            let n = r.weighted(WRITE_SIZES);
            let i = WRITE_SIZES.iter().position(|(x, _)| *x == n).unwrap();
            seen[i] += 1;
        }
        assert!(seen.iter().all(|&s| s > 500), "{seen:?}");
    }
}
