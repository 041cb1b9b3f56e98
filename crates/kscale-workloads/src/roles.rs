//! Macro workloads (docs/macro.md): a *server* role — the system under
//! test, confined to the case's CPU configuration — and a *load* role that
//! drives it from the CPUs the configuration leaves free, or from a
//! `kscale peer` on another host. Each role runs in its own re-executed
//! worker process; the parent keeps time and tells every role when the
//! measured window begins and ends, so all roles count the same window and
//! the server's CPU time is read over exactly that window.
//!
//! A role worker speaks lines on its stdin and stdout:
//! - parent → role: the [`TrialRequest`] (one JSON line), then `begin`,
//!   `end` and `stop`; end of input means stop.
//! - role → parent: `{"ready": ENDPOINT}` once it can serve or is driving
//!   load, then `{"output": ROLE_OUTPUT}` as its last line.
//!
//! A family declares [`Roles`] on its [`crate::WorkloadDef`]; the role
//! functions see a [`RoleCtx`] and return a [`RoleOutput`] of raw counts and
//! histograms; `combine` turns those into the trial's metrics in the parent.

use crate::{TrialOutput, TrialRequest};
use anyhow::{bail, Context, Result};
use kscale_core::{hist, MetricDef, ParamDef, ParamKind, Params, RoleCpu};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The length of a fixed-duration trial's measured window, like netperf's
/// `-l`. A ramp-up ([`ramp`]) precedes it and is not counted. `--quick`
/// takes 0.5 s windows, and more of them, for the reason micro trials are
/// short (docs/method.md, "Trials and budgets"): this host's speed moves in
/// spells, and a case converges by sampling many spells, not by averaging
/// inside one; five 2 s windows sat in one or two.
pub const DURATION: ParamDef = ParamDef {
    name: "duration",
    help: "Seconds the measured window lasts (netperf's -l), after an uncounted ramp-up of a \
           fifth of it (0.1–2 s). The trial's time limit grows with it.",
    kind: ParamKind::Seconds {
        min: 0.1,
        max: 86_400.0,
    },
    default: &["10"],
    quick: &["0.5"],
};

/// The median and 99th percentile, in µs, of the `latency` histogram (in
/// nanoseconds) that a load records per transaction or message (net, chat).
pub const LATENCY_P50: MetricDef = MetricDef::quantile("p50", "µs", "latency", 0.50, 1e-3);
pub const LATENCY_P99: MetricDef = MetricDef::quantile("p99", "µs", "latency", 0.99, 1e-3);

/// The uncounted ramp-up before a fixed-duration window: a fifth of the
/// window, at least 0.1 s and at most 2 s — long enough for connections to
/// be open and caches, TCP windows and the scheduler to settle.
pub fn ramp(duration_s: f64) -> Duration {
    Duration::from_secs_f64((duration_s * 0.2).clamp(0.1, 2.0))
}

pub type RoleFn = fn(&RoleCtx) -> Result<RoleOutput>;

/// How a macro workload is split into processes.
pub struct Roles {
    /// The system under test; `None` for a workload that is all load (or
    /// that drives an external server).
    pub server: Option<RoleFn>,
    pub load: RoleFn,
    pub timing: Timing,
    /// A param split evenly across load processes (e.g. `conns` over several
    /// peers); the others are given whole to each.
    pub spread: Option<&'static str>,
    /// Turns the roles' outputs into the trial's values of the workload's
    /// `Value` metrics; percentile metrics are filled in from the merged
    /// histograms afterwards ([`finish`]).
    pub combine: fn(&Params, &Combined) -> Result<TrialOutput>,
}

/// Who decides when a trial's window ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    /// The parent: ramp-up, then the `duration` param's window, then `end`.
    Duration,
    /// The load: it does a fixed amount of work from `begin` and returns
    /// when done (its own clock gives the window).
    Work,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Server,
    Load,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Load => "load",
        }
    }
}

/// Where a server can be reached. The server fills in `port` (and anything
/// else its load needs in `extra`); the parent fills in `host` as each load
/// process sees it (loopback locally, this host's address for a peer).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Endpoint {
    #[serde(default)]
    pub host: String,
    pub port: u16,
    #[serde(default)]
    pub extra: serde_json::Value,
}

impl Endpoint {
    /// A server's endpoint on `port`, with what its load needs in `extra`
    /// (`Value::Null`: nothing); the parent fills in `host`.
    pub fn on_port(port: u16, extra: serde_json::Value) -> Endpoint {
        Endpoint {
            host: String::new(),
            port,
            extra,
        }
    }

    /// `host:port`, with IPv6 literals bracketed.
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// This load process's part of the whole load: `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    pub index: usize,
    pub count: usize,
}

impl Default for Share {
    fn default() -> Self {
        Share { index: 0, count: 1 }
    }
}

impl Share {
    /// This share of `total` when it is split as evenly as possible (the
    /// first `total % count` shares get one more).
    pub fn of(&self, total: u64) -> u64 {
        let count = self.count.max(1) as u64;
        let index = self.index as u64;
        total / count + u64::from(index < total % count)
    }
}

/// What a role worker is asked to do, on top of the trial request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoleRequest {
    pub role: Role,
    /// The case's CPU configuration (the server's CPUs), for workloads that
    /// size themselves by it (e.g. one event loop per measured CPU).
    pub config_cpus: Vec<usize>,
    /// Load only: the server to drive.
    #[serde(default)]
    pub endpoint: Option<Endpoint>,
    /// Server only: the address to listen on (`127.0.0.1`, or `0.0.0.0`
    /// when peers drive the load).
    #[serde(default = "loopback")]
    pub bind: String,
    #[serde(default)]
    pub share: Share,
}

fn loopback() -> String {
    "127.0.0.1".into()
}

/// Where a trial stands, as the parent announced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Phase {
    /// Connected and running, not yet counted.
    Ramp = 0,
    /// Inside the measured window: count and record.
    Measure = 1,
    /// The window is over: stop generating, report.
    Done = 2,
    /// The server may stop (the parent has every load's output, or is gone).
    Stop = 3,
}

/// The shared state a role's threads consult. The phase is one relaxed
/// atomic load per check, cheap enough to test once per transaction.
struct Control {
    phase: AtomicU8,
    /// Readable once the phase has reached `Done`, for roles that wait in
    /// poll/epoll instead of checking the phase.
    done_fd: OwnedFd,
    stop_fd: OwnedFd,
    cpu: Mutex<CpuMarks>,
}

#[derive(Default)]
struct CpuMarks {
    begin: Option<(Instant, f64)>,
    end: Option<(Instant, f64)>,
}

/// Everything a role function may look at.
pub struct RoleCtx {
    pub params: Params,
    /// The CPUs this role process runs on (it is already confined to them).
    pub cpus: Vec<usize>,
    /// The case's CPU configuration: the server's CPUs.
    pub config_cpus: Vec<usize>,
    /// The run's scratch directory.
    pub dir: PathBuf,
    pub endpoint: Option<Endpoint>,
    pub bind: String,
    pub share: Share,
    control: Arc<Control>,
}

impl RoleCtx {
    /// Tells the parent this role is ready: a server that it listens at
    /// `endpoint`, a load that it is connected and generating (ramp-up).
    pub fn ready(&self, endpoint: Endpoint) -> Result<()> {
        let line = serde_json::json!({ "ready": endpoint });
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").context("telling the parent the role is ready")?;
        out.flush()
            .context("telling the parent the role is ready")?;
        Ok(())
    }

    #[inline]
    pub fn phase(&self) -> Phase {
        match self.control.phase.load(Ordering::Relaxed) {
            0 => Phase::Ramp,
            1 => Phase::Measure,
            2 => Phase::Done,
            _ => Phase::Stop,
        }
    }

    /// Blocks until the phase is at least `p`, or `limit` passes (false).
    pub fn wait_for(&self, p: Phase, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        while self.phase() < p {
            if Instant::now() >= end {
                return false;
            }
            let fd = if p <= Phase::Done {
                &self.control.done_fd
            } else {
                &self.control.stop_fd
            };
            let left = end.saturating_duration_since(Instant::now());
            let _ = crate::shared::fd::wait_readable_fd(
                fd.as_fd(),
                left.min(Duration::from_millis(50)),
            );
        }
        true
    }

    /// Readable (an eventfd) once the measured window is over.
    pub fn done_fd(&self) -> BorrowedFd<'_> {
        self.control.done_fd.as_fd()
    }

    /// Readable (an eventfd) once the server may stop.
    pub fn stop_fd(&self) -> BorrowedFd<'_> {
        self.control.stop_fd.as_fd()
    }

    /// This load's part of the spread param's value (all of it without peers).
    pub fn share_of(&self, total: u64) -> u64 {
        self.share.of(total)
    }
}

/// What a role reports: raw counts over the measured window, its latency
/// histograms, notes. The CPU time is filled in by the mechanism.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RoleOutput {
    /// Counters over the measured window (transactions, bytes, errors …).
    #[serde(default)]
    pub counts: BTreeMap<String, f64>,
    /// Encoded nanosecond histograms ([`kscale_core::hist`]).
    #[serde(default)]
    pub histograms: BTreeMap<String, String>,
    #[serde(default)]
    pub notes: Vec<String>,
    /// CPU time of the role process over the window (set by the mechanism).
    #[serde(default)]
    pub cpu: RoleCpu,
}

impl RoleOutput {
    pub fn count(mut self, name: &str, v: f64) -> Self {
        self.counts.insert(name.to_string(), v);
        self
    }
    pub fn histogram(mut self, name: &str, h: &hdrhistogram::Histogram<u64>) -> Self {
        self.histograms.insert(name.to_string(), hist::encode(h));
        self
    }
    pub fn note(mut self, n: impl Into<String>) -> Self {
        self.notes.push(n.into());
        self
    }
}

/// Every role's output of one trial, as `combine` sees it.
#[derive(Clone, Debug, Default)]
pub struct Combined {
    pub server: Option<RoleOutput>,
    pub loads: Vec<RoleOutput>,
}

impl Combined {
    /// The sum over load processes of a counter.
    pub fn load_sum(&self, name: &str) -> f64 {
        self.loads.iter().filter_map(|l| l.counts.get(name)).sum()
    }

    /// The load-side rate of a counter: each load's count over its own
    /// window, summed (loads on other hosts keep their own clocks).
    pub fn load_rate(&self, name: &str) -> f64 {
        self.loads
            .iter()
            .filter(|l| l.cpu.window_s > 0.0)
            .filter_map(|l| l.counts.get(name).map(|c| c / l.cpu.window_s))
            .sum()
    }

    /// The longest load window, in seconds.
    pub fn window_s(&self) -> f64 {
        self.loads
            .iter()
            .map(|l| l.cpu.window_s)
            .fold(0.0, f64::max)
    }

    pub fn server_cpu_s(&self) -> Option<f64> {
        self.server.as_ref().map(|s| s.cpu.cpu_s)
    }

    pub fn load_cpu_s(&self) -> f64 {
        self.loads.iter().map(|l| l.cpu.cpu_s).sum()
    }
}

/// Builds the trial's output from its roles: `combine`'s values, then each
/// percentile metric from the merged histogram of every role, the merged
/// histograms themselves, every role's CPU time and notes.
pub fn finish(
    roles: &Roles,
    metrics: &[MetricDef],
    params: &Params,
    combined: &Combined,
) -> Result<TrialOutput> {
    let mut out = (roles.combine)(params, combined)?;
    let mut merged: BTreeMap<String, hdrhistogram::Histogram<u64>> = BTreeMap::new();
    for r in combined.server.iter().chain(&combined.loads) {
        for (name, enc) in &r.histograms {
            let h = hist::decode(enc).with_context(|| format!("histogram {name}"))?;
            match merged.get_mut(name) {
                Some(m) => hist::merge(m, &h)?,
                None => {
                    merged.insert(name.clone(), h);
                }
            }
        }
    }
    out.histograms = merged
        .iter()
        .map(|(k, h)| (k.clone(), hist::encode(h)))
        .collect();
    crate::fill_quantiles(metrics, &mut out)?;
    for r in combined.server.iter().chain(&combined.loads) {
        out.roles.push(r.cpu.clone());
        for n in &r.notes {
            if !out.notes.contains(n) {
                out.notes.push(n.clone());
            }
        }
    }
    Ok(out)
}

fn eventfd() -> Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: eventfd takes plain integers; a non-negative result is a new
    // descriptor that we own.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("eventfd");
    }
    // SAFETY: fd is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn signal(fd: &OwnedFd) {
    use std::os::fd::AsRawFd;
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an eventfd we own.
    unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

impl Control {
    fn new() -> Result<Control> {
        Ok(Control {
            phase: AtomicU8::new(Phase::Ramp as u8),
            done_fd: eventfd()?,
            stop_fd: eventfd()?,
            cpu: Mutex::new(CpuMarks::default()),
        })
    }

    fn set(&self, p: Phase) {
        let prev = self.phase.fetch_max(p as u8, Ordering::SeqCst);
        if prev >= p as u8 {
            return;
        }
        if let Ok(mut m) = self.cpu.lock() {
            let now = (Instant::now(), kscale_sys::procstat::own_cpu_seconds());
            if p >= Phase::Measure && m.begin.is_none() {
                m.begin = Some(now);
            }
            if p >= Phase::Done && m.end.is_none() {
                m.end = Some(now);
            }
        }
        if p >= Phase::Done {
            signal(&self.done_fd);
        }
        if p >= Phase::Stop {
            signal(&self.stop_fd);
        }
    }

    /// The role's CPU seconds and window from `begin` to `end` (or to now).
    fn window(&self) -> (f64, f64) {
        let m = match self.cpu.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        let now = (Instant::now(), kscale_sys::procstat::own_cpu_seconds());
        let (b, e) = (m.begin.unwrap_or(now), m.end.unwrap_or(now));
        (
            (e.1 - b.1).max(0.0),
            e.0.saturating_duration_since(b.0).as_secs_f64(),
        )
    }
}

/// Runs one role in this (worker) process: a control thread follows the
/// parent's lines on `input`, the role function runs, and its output (with
/// CPU time) goes to stdout as the last line.
pub fn run_role(
    req: &TrialRequest,
    role: &RoleRequest,
    input: impl BufRead + Send + 'static,
) -> Result<RoleOutput> {
    let w =
        crate::find(&req.workload).with_context(|| format!("unknown workload {}", req.workload))?;
    let roles = w
        .roles
        .with_context(|| format!("{} has no server or load role", w.id()))?;
    let f = match role.role {
        Role::Server => roles
            .server
            .with_context(|| format!("{} has no server role", w.id()))?,
        Role::Load => roles.load,
    };
    let control = Arc::new(Control::new()?);
    let c = control.clone();
    std::thread::Builder::new()
        .name("kscale-control".into())
        .spawn(move || follow(input, &c))
        .context("starting the control thread")?;
    let ctx = RoleCtx {
        params: Params(req.params.clone()),
        cpus: req.cpus.clone(),
        config_cpus: role.config_cpus.clone(),
        dir: req.dir.clone(),
        endpoint: role.endpoint.clone(),
        bind: role.bind.clone(),
        share: role.share,
        control: control.clone(),
    };
    let mut out = f(&ctx)?;
    // A load that finished its work (Timing::Work) ends its own window.
    if role.role == Role::Load {
        control.set(Phase::Done);
    }
    let (cpu_s, window_s) = control.window();
    out.cpu = RoleCpu {
        role: role.role.as_str().into(),
        host: "local".into(),
        cpu_s,
        window_s,
        cpus: req.cpus.len(),
    };
    Ok(out)
}

/// The control thread: applies `begin`, `end` and `stop`; end of input (the
/// parent is gone or done) stops everything.
fn follow(input: impl BufRead, c: &Control) {
    for line in input.lines() {
        let Ok(line) = line else { break };
        match line.trim() {
            "begin" => c.set(Phase::Measure),
            "end" => c.set(Phase::Done),
            "stop" => c.set(Phase::Stop),
            _ => {}
        }
    }
    c.set(Phase::Stop);
}

/// A role's output line.
pub fn output_line(out: &RoleOutput) -> Result<String> {
    Ok(serde_json::json!({ "output": out }).to_string())
}

/// One line from a role worker, as the parent reads it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoleLine {
    Ready(Endpoint),
    Output(RoleOutput),
}

impl RoleLine {
    pub fn parse(line: &str) -> Result<RoleLine> {
        match serde_json::from_str(line) {
            Ok(l) => Ok(l),
            Err(e) => bail!("role worker sent a bad line ({e}): {line:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_split_evenly() {
        let s = |index, count| Share { index, count };
        let split: Vec<u64> = (0..3).map(|i| s(i, 3).of(40)).collect();
        assert_eq!(split, [14, 13, 13]);
        assert_eq!(split.iter().sum::<u64>(), 40);
        assert_eq!(s(0, 1).of(7), 7);
        assert_eq!(s(3, 4).of(2), 0);
    }

    #[test]
    fn ramp_is_a_fifth_within_bounds() {
        assert_eq!(ramp(2.0), Duration::from_millis(400));
        assert_eq!(ramp(100.0), Duration::from_secs(2));
        assert_eq!(ramp(0.1), Duration::from_millis(100));
    }

    #[test]
    fn control_phases_and_cpu_window() {
        let c = Control::new().unwrap();
        c.set(Phase::Measure);
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_millis(30) {
            std::hint::black_box(0);
        }
        c.set(Phase::Done);
        c.set(Phase::Measure); // never goes back
        assert_eq!(c.phase.load(Ordering::SeqCst), Phase::Done as u8);
        let (cpu, wall) = c.window();
        assert!((0.03..5.0).contains(&wall), "{wall}");
        assert!(cpu > 0.0, "{cpu}");
        // The eventfd of the end of the window is readable.
        assert!(crate::shared::fd::wait_readable_fd(c.done_fd.as_fd(), Duration::ZERO).unwrap());
    }

    #[test]
    fn follow_stops_at_end_of_input() {
        let c = Control::new().unwrap();
        follow("begin\nend\n".as_bytes(), &c);
        assert_eq!(c.phase.load(Ordering::SeqCst), Phase::Stop as u8);
    }

    #[test]
    fn role_lines_parse() {
        let r = RoleLine::parse(r#"{"ready":{"port":80}}"#).unwrap();
        assert!(matches!(r, RoleLine::Ready(e) if e.port == 80));
        let o = output_line(&RoleOutput::default().count("tx", 3.0)).unwrap();
        assert!(
            matches!(RoleLine::parse(&o).unwrap(), RoleLine::Output(o) if o.counts["tx"] == 3.0)
        );
        assert!(RoleLine::parse("garbage").is_err());
        let e = Endpoint {
            host: "::1".into(),
            port: 9,
            extra: serde_json::Value::Null,
        };
        assert_eq!(e.addr(), "[::1]:9");
    }
}
