//! A fileserver client: its directory tree, its model of that tree, and
//! the operations of the mix, every byte read checked against the model.

use super::{Kind, MIX};
use anyhow::{Context, Result};
use kscale_core::hist;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

pub(super) const BLOCK: usize = 4096;
/// Directories per client tree and file names per directory.
pub(super) const DIRS: usize = 4;
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

/// A small, fast generator (xorshift64*): the mix needs no better.
#[derive(Clone)]
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
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
    pub(super) fn below(&mut self, n: u64) -> u64 {
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
    pub(super) counts: [u64; Kind::ALL.len()],
    hists: Vec<hdrhistogram::Histogram<u64>>,
    pub(super) bytes_read: u64,
    pub(super) bytes_written: u64,
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
    pub(super) measuring: bool,
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

    pub(super) fn report(&self) -> Report {
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
            ..Default::default()
        }
    }
}

/// What a client sends back through its pipe.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Report {
    pub(super) counts: BTreeMap<String, u64>,
    pub(super) histograms: BTreeMap<String, String>,
    pub(super) bytes_read: u64,
    pub(super) bytes_written: u64,
    /// Counters that are not calls, by name (the trace's mismatches).
    #[serde(default)]
    pub(super) tallies: BTreeMap<String, u64>,
    /// Lines for the result's note (the trace's first mismatches).
    #[serde(default)]
    pub(super) notes: Vec<String>,
    pub(super) error: Option<String>,
}

impl super::trial::Load for Client {
    fn step(&mut self) -> Result<()> {
        Client::step(self)
    }
    fn set_measuring(&mut self, on: bool) {
        self.measuring = on;
    }
    fn finish(&mut self) -> Result<Report> {
        Ok(self.report())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
