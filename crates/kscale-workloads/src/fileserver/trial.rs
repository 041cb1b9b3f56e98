//! One trial of a `fileserver` workload: the forked clients, the page
//! through which the worker keeps their time, the janitor that removes the
//! trees however the worker ends, and the trial's result. `fileserver.mix`
//! and `fileserver.trace` differ only in what a client does between two
//! looks at the clock ([`Load`]).

use super::client::{Client, Report, Rng, BLOCK, DIRS};
use super::mount::mount_of;
use super::{FSYNCS, MBPS, OPS};
use crate::shared::child::fork_child;
use crate::{roles, TrialCtx, TrialOutput};
use anyhow::{bail, Context, Result};
use kscale_core::hist;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::time::{Duration, Instant};

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

/// What one client process replays, built in the client after the fork.
/// The client looks at the clock between two steps, so a step is one call
/// of the load (or a few system calls that stand for one).
pub(super) trait Load {
    fn step(&mut self) -> Result<()>;
    /// Record the calls from now on (inside the measured window) or not.
    fn set_measuring(&mut self, on: bool);
    /// The window is over: clean up what the client leaves (the trace
    /// deletes its tree, as dbench's clients do) and say what was done.
    fn finish(&mut self) -> Result<Report>;
}

/// A client process: builds its load, waits for the ramp, replays it until
/// the window is over, and writes its report to `w`.
fn client_main<L: Load>(make: impl FnOnce() -> Result<L>, shared: &Shared, w: OwnedFd) -> i32 {
    kscale_sys::process::set_name("kscale-client");
    dev_null_stdio(&[0, 1]);
    let mut out = File::from(w);
    let report = match make().and_then(|load| client_loop(load, shared)) {
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

fn client_loop<L: Load>(mut load: L, shared: &Shared) -> Result<Report> {
    shared.ready.fetch_add(1, Ordering::SeqCst);
    while shared.phase.load(Ordering::Relaxed) == SETUP {
        std::thread::sleep(Duration::from_millis(1));
    }
    loop {
        let phase = shared.phase.load(Ordering::Relaxed);
        if phase >= DONE {
            break;
        }
        load.set_measuring(phase == MEASURE);
        load.step()?;
    }
    load.finish()
}

/// `KSCALE_FAULT=corrupt:fileserver.NAME`: kscale's own test that a read
/// which does not return what was written fails the trial. During the
/// window the worker flips one byte of every file of client 0, behind the
/// client's back, every few milliseconds.
fn corrupting(workload: &str) -> bool {
    std::env::var("KSCALE_FAULT").is_ok_and(|v| v == format!("corrupt:fileserver.{workload}"))
}

/// The mix's fault: a byte in a random block of every file of client 0
/// (`dir`'s `c0`).
pub(super) fn corrupt_mix_tree(dir: &Path, rng: &mut Rng) {
    let root = dir.join("c0");
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

/// What the clients did in the window, merged.
pub(super) struct Outcome {
    /// Calls of each kind completed in the window.
    pub(super) counts: BTreeMap<String, u64>,
    pub(super) histograms: BTreeMap<String, hdrhistogram::Histogram<u64>>,
    /// Counters that are not calls (the trace's mismatches).
    pub(super) tallies: BTreeMap<String, u64>,
    /// The clients' notes, each once.
    pub(super) notes: Vec<String>,
    pub(super) bytes_read: u64,
    pub(super) bytes_written: u64,
    /// Seconds the window lasted.
    pub(super) window: f64,
}

impl Outcome {
    pub(super) fn ops(&self) -> u64 {
        self.counts.values().sum()
    }
    pub(super) fn bytes(&self) -> u64 {
        self.bytes_read + self.bytes_written
    }
    /// The trial's output with MB/s and ops/s as dbench counts them, the
    /// note every fileserver result has, and the merged histograms.
    pub(super) fn output(&self, ctx: &TrialCtx, clients: usize, what: &str) -> TrialOutput {
        let bytes = self.bytes();
        let mut out = TrialOutput::new(self.ops())
            .with(&MBPS, bytes as f64 / self.window / 1e6)
            .with(&OPS, self.ops() as f64 / self.window)
            .note(format!(
                "{clients} client(s), each in its own tree; {:.1} s ramp-up uncounted; reads \
                 {:.0} % of the bytes; {what}",
                roles::ramp(ctx.params.seconds("duration").unwrap_or(0.0)).as_secs_f64(),
                self.bytes_read as f64 / bytes.max(1) as f64 * 100.0
            ));
        if let Some(m) = mount_of(&ctx.dir) {
            out = out.note(m);
        }
        out.histograms = self
            .histograms
            .iter()
            .map(|(k, h)| (k.clone(), hist::encode(h)))
            .collect();
        out
    }
}

pub(super) fn run_mix(ctx: &TrialCtx) -> Result<TrialOutput> {
    let clients = ctx.params.int("clients")? as usize;
    let o = run_clients(
        ctx,
        clients,
        |i, dir, seed| Client::new(&dir.join(format!("c{i}")), seed ^ (i as u64 + 1)),
        corrupt_mix_tree,
    )?;
    if o.ops() == 0 {
        bail!("no operation completed in the measured window");
    }
    let fsyncs = o.counts.get("fsync").copied().unwrap_or(0);
    Ok(o.output(ctx, clients, "every read verified")
        .with(&FSYNCS, fsyncs as f64 / o.window))
}

/// Runs one trial: forks `clients` clients, each running the load `make`
/// builds from its index, the trial's directory and a seed, times the ramp
/// and the window, and merges their reports. `fault` is the load's
/// corruption for `KSCALE_FAULT=corrupt:…`.
pub(super) fn run_clients<L: Load>(
    ctx: &TrialCtx,
    clients: usize,
    make: impl Fn(usize, &Path, u64) -> Result<L>,
    fault: fn(&Path, &mut Rng),
) -> Result<Outcome> {
    let duration = ctx.params.seconds("duration")?;
    let dir = ctx.dir.join(format!("fileserver-{}", std::process::id()));
    let mut trial = Trial::start(&dir, clients)?;
    let shared = SharedPage::new()?;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    for i in 0..clients {
        let (make, dir) = (&make, &dir);
        trial.fork_client(i, clients, shared.get(), move || make(i, dir, seed))?;
    }

    // Every tree built, then the uncounted ramp, then the window.
    trial.await_trees(shared.get(), clients)?;
    shared.get().phase.store(RAMP, Ordering::SeqCst);
    trial.watch(Instant::now() + roles::ramp(duration), None, fault)?;
    shared.get().phase.store(MEASURE, Ordering::SeqCst);
    let begin = Instant::now();
    let mut corrupt = corrupting(&ctx.workload).then(|| Rng::new(seed));
    trial.watch(
        begin + Duration::from_secs_f64(duration),
        corrupt.as_mut(),
        fault,
    )?;
    shared.get().phase.store(DONE, Ordering::SeqCst);
    let window = begin.elapsed().as_secs_f64();

    let o = trial.collect(window)?;
    drop(trial);
    Ok(o)
}

impl Trial {
    /// An empty trial directory (what an earlier worker of the same pid
    /// left is removed first) and the janitor that removes it however the
    /// worker ends.
    fn start(dir: &Path, clients: usize) -> Result<Trial> {
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        std::fs::create_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut trial = Trial {
            dir: dir.to_path_buf(),
            clients: Vec::with_capacity(clients),
            janitor: None,
        };
        trial.janitor = Some(start_janitor(dir)?);
        Ok(trial)
    }

    /// Forks client `i` of `of`, which builds its load with `make` after the
    /// fork and reports on a pipe of its own.
    fn fork_client<L: Load>(
        &mut self,
        i: usize,
        of: usize,
        shared: &Shared,
        make: impl FnOnce() -> Result<L>,
    ) -> Result<()> {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("pipe")?;
        let pid = fork_child(move || client_main(make, shared, w))
            .with_context(|| format!("forking client {i} of {of}"))?;
        // The child's end is the child's alone: the pipe ends with it.
        let pipe = File::from(r);
        nix::fcntl::fcntl(
            &pipe,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .context("O_NONBLOCK")?;
        self.clients.push(ClientProc {
            pid,
            pipe,
            out: Vec::new(),
            eof: false,
            reaped: false,
        });
        Ok(())
    }

    /// Waits until every client has built its tree; a client that ends
    /// first, or trees not built within a minute, fail the trial.
    fn await_trees(&mut self, shared: &Shared, clients: usize) -> Result<()> {
        let setup_limit = Instant::now() + Duration::from_secs(60);
        while shared.ready.load(Ordering::SeqCst) < clients as u32 {
            self.poll(Duration::from_millis(10))?;
            if let Some(e) = self.early_end() {
                return Err(e.context("building the client trees"));
            }
            if Instant::now() > setup_limit {
                bail!("the client trees were not built within 60 s");
            }
        }
        Ok(())
    }

    /// Watches the clients until `until`: one that ends before fails the
    /// trial. With `corrupt`, the load's `fault` is done between looks.
    fn watch(
        &mut self,
        until: Instant,
        mut corrupt: Option<&mut Rng>,
        fault: fn(&Path, &mut Rng),
    ) -> Result<()> {
        while Instant::now() < until {
            let left = until.saturating_duration_since(Instant::now());
            self.poll(left.min(Duration::from_millis(20)))?;
            if let Some(e) = self.early_end() {
                return Err(e);
            }
            if let Some(r) = corrupt.as_deref_mut() {
                fault(&self.dir, r);
            }
        }
        Ok(())
    }

    /// Once the window is over: every client's report, merged, and then its
    /// exit, which must be a clean one.
    fn collect(&mut self, window: f64) -> Result<Outcome> {
        let limit = Instant::now() + Duration::from_secs(30);
        while !self.poll(Duration::from_millis(50))? {
            if Instant::now() > limit {
                bail!("a client did not report within 30 s of the window's end");
            }
        }
        let mut o = Outcome {
            counts: BTreeMap::new(),
            histograms: BTreeMap::new(),
            tallies: BTreeMap::new(),
            notes: Vec::new(),
            bytes_read: 0,
            bytes_written: 0,
            window,
        };
        for i in 0..self.clients.len() {
            let r: Report = match serde_json::from_slice(&self.clients[i].out) {
                Ok(r) => r,
                Err(_) => return Err(self.failure(i)),
            };
            if let Some(e) = r.error {
                bail!("client {i}: {e}");
            }
            o.add(r)?;
            let c = &mut self.clients[i];
            let status = nix::sys::wait::waitpid(c.pid, None);
            c.reaped = true;
            if !matches!(status, Ok(nix::sys::wait::WaitStatus::Exited(_, 0))) {
                bail!("client {i} {} after its report", how_it_ended(status));
            }
        }
        Ok(o)
    }
}

impl Outcome {
    /// Adds one client's report: its histograms merged, its counts summed,
    /// its notes kept once.
    fn add(&mut self, r: Report) -> Result<()> {
        for (k, enc) in &r.histograms {
            let h = self.histograms.entry(k.clone()).or_insert_with(hist::new);
            hist::merge(h, &hist::decode(enc)?)?;
        }
        for (k, n) in r.counts {
            *self.counts.entry(k).or_default() += n;
        }
        for (k, n) in r.tallies {
            *self.tallies.entry(k).or_default() += n;
        }
        for n in r.notes {
            if !self.notes.contains(&n) {
                self.notes.push(n);
            }
        }
        self.bytes_read += r.bytes_read;
        self.bytes_written += r.bytes_written;
        Ok(())
    }
}
