//! kscale's workload catalogue. Each family is one file exporting a
//! [`Family`]; [`REGISTRY`] lists them. `kscale list`, param validation, help
//! text, metric units and directions are all generated from these entries, so
//! adding a workload is one entry in its family file (and a new family is one
//! file plus one line here).

use anyhow::Result;
use kscale_core::{MetricDef, ParamDef, Params, RoleCpu, RunRule, TrialValues};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub mod chat;
pub mod cmd;
pub mod ctx;
pub mod fileserver;
pub mod fs;
pub mod fscache;
pub mod ipc;
pub mod machine_probe;
pub mod mem;
pub mod net;
pub mod roles;
pub mod shared;
pub mod suites;
pub mod syscall;
pub mod threads;
pub mod timing;
pub mod web;

/// Every family, in the order of the seed's tables.
pub static REGISTRY: &[&Family] = &[
    &syscall::FAMILY,
    &ipc::FAMILY,
    &ctx::FAMILY,
    &mem::FAMILY,
    &fs::FAMILY,
    &threads::FAMILY,
    &fscache::FAMILY,
    &net::FAMILY,
    &chat::FAMILY,
    &web::FAMILY,
    &fileserver::FAMILY,
    &cmd::FAMILY,
];

pub struct Family {
    pub name: &'static str,
    /// The heading of the family's table, as in seed 003.
    pub title: &'static str,
    pub help: &'static str,
    pub workloads: &'static [WorkloadDef],
}

pub struct WorkloadDef {
    pub family: &'static str,
    pub name: &'static str,
    /// The row label in tables, as in seed 003 ("Simple syscall").
    pub title: &'static str,
    pub help: &'static str,
    pub params: &'static [ParamDef],
    /// The first is the primary metric.
    pub metrics: &'static [MetricDef],
    /// The seed reports some workloads as a geometric mean across one param
    /// (ctx across `procs`, mem across `size`); tables add those rows.
    pub geomean_over: Option<&'static str>,
    /// Charts of this workload's results against one of its params (the
    /// report draws them; see docs/report.md). Empty: no such chart.
    pub charts: &'static [ChartDef],
    /// A table comparing the values of one param side by side (seed 001's
    /// thread-library implementations), shown by `show` and the report.
    pub variants: Option<VariantsDef>,
    /// Longest a single trial may take before the worker is killed.
    pub timeout: Duration,
    /// A micro-benchmark's trial, run in one worker process. Macro workloads
    /// leave it at the default and declare `roles` instead.
    pub run: fn(&TrialCtx) -> Result<TrialOutput>,
    /// A macro workload's server and load roles (docs/macro.md).
    pub roles: Option<&'static roles::Roles>,
    /// How trials become the result: converge (the default) or median of N.
    pub rule: RunRule,
    /// Whether naming the family with `--quick` runs this workload. A family
    /// of many similar cases (cmd's command lines) keeps its quick run short
    /// with a representative few; naming the workload itself always runs it.
    pub quick: bool,
    /// Why this case cannot run on this machine (a program or a data file
    /// a package installs, and its params ask for, is missing), or `None`.
    /// The runner asks before any trial and records the case as skipped
    /// with this reason: a missing program is a fact about the machine, not
    /// a failure of the kernel being measured.
    pub unavailable: fn(&WorkloadDef, &Params) -> Option<String>,
    /// Why this case's figures may not settle in `dir`, the run's directory
    /// (a filesystem whose costs depend on what else ran there), or `None`.
    /// The runner says it before the first trial, so a user learns it before
    /// waiting for a case that cannot converge.
    pub caveat: fn(&Params, &std::path::Path) -> Option<String>,
    /// `run --capacity` searches this Int param for the largest value at
    /// which the primary metric still equals it (SPECweb99's capacity: the
    /// most connections that all conform). `None`: no capacity search.
    pub capacity: Option<&'static str>,
    /// The clock its timed loops read ([`Clock`]).
    pub clock: Clock,
}

/// The clock a micro workload's timed loops read (docs/host.md, "The
/// thread's own clock").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Clock {
    /// Wall time: what the operation took, everything that ran meanwhile
    /// on its CPU included. Every workload whose operation waits for
    /// another thread, process, device or the network.
    #[default]
    Wall,
    /// The calling thread's CPU time: for an operation that never leaves
    /// the thread that times it (a system call answered on the spot, a
    /// fault and its signal, a pass over memory), the time the CPU spent
    /// on it. A neighbour or the host that takes the CPU away between two
    /// of its instructions then stops the clock instead of adding its
    /// burst to the operation, which on a shared machine is most of a
    /// trial's spread; on an idle machine the two clocks agree.
    Thread,
}

impl WorkloadDef {
    /// A family's template: its name and [`WorkloadDef::BASE`] for the rest.
    /// A family whose workloads share params, metrics or a timeout sets them
    /// on this once, as a const, and makes each workload with
    /// [`WorkloadDef::named`], so the constructor's shape is written here only.
    pub const fn family(family: &'static str) -> WorkloadDef {
        WorkloadDef {
            family,
            ..WorkloadDef::BASE
        }
    }

    /// The workload `name` made from this template: its own title, help and
    /// run function, everything else as the template has it.
    pub const fn named(
        self,
        name: &'static str,
        title: &'static str,
        help: &'static str,
        run: fn(&TrialCtx) -> Result<TrialOutput>,
    ) -> WorkloadDef {
        WorkloadDef {
            name,
            title,
            help,
            run,
            ..self
        }
    }
}

/// [`WorkloadDef::unavailable`] for workloads that need nothing beyond kscale.
fn always_available(_: &WorkloadDef, _: &Params) -> Option<String> {
    None
}

/// [`WorkloadDef::caveat`] for workloads whose figures do not depend on
/// where the run's directory is.
fn no_caveat(_: &Params, _: &std::path::Path) -> Option<String> {
    None
}

/// One chart of a workload's metrics against a param, e.g. transactions/s
/// against connections. The report draws one chart per metric, one line per
/// system × CPU configuration × each other param that varies in the run, and
/// labels the axes with the param's name and the metric's unit — so a new
/// family gets its figures from its definition, without report code.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChartDef {
    /// The param on the x axis; its values must be numbers, sizes, seconds
    /// or counts (`ncpus` counts the configuration's CPUs).
    pub x: &'static str,
    /// Logarithmic x axis (values sweep powers of two, say). Values at or
    /// below zero cannot sit on such an axis, so a chart holding them is
    /// drawn linear instead.
    pub log_x: bool,
    /// Metrics charted, one chart each; empty = the primary metric.
    pub metrics: &'static [&'static str],
    /// Params whose values get a line each (besides system and CPU
    /// configuration). Empty: every param that varies gets lines; otherwise
    /// a varying param not listed here gets a chart per value.
    pub series: &'static [&'static str],
}

impl ChartDef {
    /// The primary metric against `x` on a linear axis.
    pub const fn against(x: &'static str) -> ChartDef {
        ChartDef {
            x,
            log_x: false,
            metrics: &[],
            series: &[],
        }
    }
    pub const fn log(mut self) -> ChartDef {
        self.log_x = true;
        self
    }
    pub const fn metrics(mut self, metrics: &'static [&'static str]) -> ChartDef {
        self.metrics = metrics;
        self
    }
    pub const fn series(mut self, series: &'static [&'static str]) -> ChartDef {
        self.series = series;
        self
    }
}

/// A table with a row per value of `param` (an implementation, a server
/// mode) inside each test, its `metrics` side by side per CPU
/// configuration, and the first metric's difference from a baseline value
/// with Welch's test.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VariantsDef {
    /// The table's title ("Thread library implementations").
    pub title: &'static str,
    pub param: &'static str,
    /// Heading of the column naming the variants ("Implementation").
    pub heading: &'static str,
    /// Metrics shown with their column heading (empty: the unit), the
    /// compared one first; empty = every metric under its unit.
    pub metrics: &'static [(&'static str, &'static str)],
    /// The value compared against unless the user names another.
    pub baseline: &'static str,
    /// What the table's figures mean, printed under it.
    pub note: &'static str,
}

/// Stands in for `run` in [`WorkloadDef::BASE`]; a registry entry that
/// forgets its own `run` fails its trials with this message.
fn no_run(_: &TrialCtx) -> Result<TrialOutput> {
    anyhow::bail!("this workload has no run function")
}

impl WorkloadDef {
    /// The defaults of every field a family may leave out: family files write
    /// `WorkloadDef { family, name, title, help, …, ..WorkloadDef::BASE }`,
    /// so a field added here does not touch every family.
    pub const BASE: WorkloadDef = WorkloadDef {
        family: "",
        name: "",
        title: "",
        help: "",
        params: &[],
        metrics: &[],
        geomean_over: None,
        charts: &[],
        variants: None,
        timeout: Duration::from_secs(120),
        run: no_run,
        roles: None,
        rule: RunRule::Converge,
        quick: true,
        unavailable: always_available,
        caveat: no_caveat,
        capacity: None,
        clock: Clock::Wall,
    };

    /// How long one trial of these params may take before its worker is
    /// killed: the workload's own limit, plus room for long `--trial-time`s,
    /// plus twice every [`kscale_core::ParamKind::Seconds`] param (a timed loop or a
    /// fixed-duration trial), so `seconds=61` or `duration=120` never hit it.
    pub fn time_limit(&self, params: &Params, trial_time_s: f64) -> Duration {
        let timed: f64 = self
            .params
            .iter()
            .filter(|p| matches!(p.kind, kscale_core::ParamKind::Seconds { .. }))
            .filter_map(|p| params.seconds(p.name).ok())
            .sum();
        self.timeout + Duration::from_secs_f64(trial_time_s * 4.0 + timed * 2.0)
    }

    pub fn id(&self) -> String {
        format!("{}.{}", self.family, self.name)
    }
    pub fn primary(&self) -> &MetricDef {
        &self.metrics[0]
    }
    pub fn param(&self, name: &str) -> Option<&ParamDef> {
        self.params.iter().find(|p| p.name == name)
    }
    pub fn param_order(&self) -> Vec<&'static str> {
        self.params.iter().map(|p| p.name).collect()
    }
}

pub fn workloads() -> impl Iterator<Item = &'static WorkloadDef> {
    REGISTRY.iter().flat_map(|f| f.workloads.iter())
}

pub fn find(id: &str) -> Option<&'static WorkloadDef> {
    workloads().find(|w| w.id() == id)
}

pub fn family(name: &str) -> Option<&'static Family> {
    REGISTRY.iter().copied().find(|f| f.name == name)
}

/// What a worker is asked to do for one trial. Serialised by the parent and
/// handed to the re-executed binary.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrialRequest {
    pub workload: String,
    pub params: std::collections::BTreeMap<String, String>,
    pub cpus: Vec<usize>,
    pub trial_time_s: f64,
    /// Fixed by the warm-up trial so that every counted trial does the same
    /// amount of work; `None` lets the workload calibrate.
    pub iterations: Option<u64>,
    pub dir: PathBuf,
    /// Set for one role process of a macro workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<roles::RoleRequest>,
}

/// Everything a workload's `run` may look at.
pub struct TrialCtx {
    /// The workload's name within its family, so that one `run` function can
    /// serve a family declared as a table (cmd's command lines).
    pub workload: String,
    pub params: Params,
    pub trial_time: Duration,
    pub iterations: Option<u64>,
    /// A scratch directory that exists for the whole run and is removed after.
    pub dir: PathBuf,
    /// The CPU configuration; the worker is already confined to it.
    pub cpus: Vec<usize>,
    /// The clock [`TrialCtx::timed`] reads: the workload's.
    pub clock: Clock,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TrialOutput {
    /// Metric name → value, for the workload's declared metrics.
    pub values: TrialValues,
    /// Iterations the trial ran; the parent reuses the warm-up's count.
    pub iterations: u64,
    /// Facts worth showing with the result (e.g. "file verified in page cache").
    pub notes: Vec<String>,
    /// Filled in by the worker around the workload's run, not by workloads.
    #[serde(default)]
    pub accounting: Option<kscale_core::model::CpuAccounting>,
    /// Macro workloads: the trial's merged latency histograms (encoded).
    #[serde(default)]
    pub histograms: std::collections::BTreeMap<String, String>,
    /// Macro workloads: CPU time of each role process in the window.
    #[serde(default)]
    pub roles: Vec<RoleCpu>,
    /// Files and directories the trial left in the run's scratch directory
    /// for the run's end to remove (`fs.create`'s kept files): removing
    /// them is time the run's budget must keep.
    #[serde(default)]
    pub left_files: u64,
}

impl TrialOutput {
    pub fn new(iterations: u64) -> Self {
        TrialOutput {
            iterations,
            ..Default::default()
        }
    }
    pub fn with(mut self, metric: &MetricDef, value: f64) -> Self {
        self.values.insert(metric.name.to_string(), value);
        self
    }
    pub fn note(mut self, n: impl Into<String>) -> Self {
        self.notes.push(n.into());
        self
    }
}

impl TrialCtx {
    /// The value of param `p`, its default when the case has none, checked
    /// and made canonical as the command line does: a worker started by
    /// hand or by a stored run reads what a user may give, with the same
    /// message for a bad value.
    pub fn param(&self, p: &ParamDef) -> Result<String, kscale_core::ParamError> {
        let v = self.params.get(p.name).unwrap_or(p.default[0]);
        p.validate(&self.workload, v)
    }

    /// [`TrialCtx::param`] of an integer param.
    pub fn param_int(&self, p: &ParamDef) -> Result<u64, kscale_core::ParamError> {
        let v = self.param(p)?;
        v.parse().map_err(|_| kscale_core::ParamError::BadValue {
            workload: self.workload.clone(),
            param: p.name.into(),
            value: v,
            accepted: "an integer".into(),
        })
    }

    pub fn from_request(r: &TrialRequest) -> Self {
        TrialCtx {
            workload: r
                .workload
                .split_once('.')
                .map_or(r.workload.as_str(), |(_, n)| n)
                .to_string(),
            params: Params(r.params.clone()),
            trial_time: Duration::from_secs_f64(r.trial_time_s.max(0.001)),
            iterations: r.iterations,
            dir: r.dir.clone(),
            cpus: r.cpus.clone(),
            clock: find(&r.workload).map_or(Clock::Wall, |w| w.clock),
        }
    }

    /// Times a closure with the workload's [`Clock`]: the monotonic clock,
    /// or the calling thread's CPU clock.
    pub fn timed(&self, f: impl FnOnce() -> Result<()>) -> Result<Duration> {
        TIMED_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match self.clock {
            Clock::Wall => timed(f),
            Clock::Thread => {
                let start = timing::thread_cpu_time()?;
                f()?;
                Ok(timing::thread_cpu_time()?.saturating_sub(start))
            }
        }
    }

    /// Runs a timed loop the way lmbench's `benchmp` does: `f(n)` performs `n`
    /// operations and returns how long they took (measured by `f` itself, so
    /// set-up stays outside the timed region). Without a fixed iteration count
    /// it grows `n` until one call lasts about a tenth of the trial time, then
    /// runs once for the whole trial time. Returns (seconds per op, n).
    pub fn time_per_op(&self, mut f: impl FnMut(u64) -> Result<Duration>) -> Result<(f64, u64)> {
        let target = self.trial_time.as_secs_f64();
        let n = match self.iterations {
            Some(n) => n.max(1),
            None => {
                let mut n: u64 = 1;
                loop {
                    let t = f(n)?.as_secs_f64();
                    if t >= target / 10.0 || n >= 1 << 40 {
                        break ((n as f64 * target / t.max(1e-9)).round() as u64).max(1);
                    }
                    let grow = if t <= 0.0 {
                        100.0
                    } else {
                        (target / 10.0 / t * 1.5).clamp(2.0, 100.0)
                    };
                    n = ((n as f64) * grow).ceil() as u64;
                }
            }
        };
        let t = f(n)?.as_secs_f64();
        Ok((t / n as f64, n))
    }
}

/// A context for workload unit tests: these params, a short trial, CPU 0,
/// the system temp directory.
#[cfg(test)]
pub(crate) fn test_ctx(params: &[(&str, &str)], trial_ms: u64) -> TrialCtx {
    TrialCtx {
        workload: String::new(),
        params: Params(
            params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        trial_time: Duration::from_millis(trial_ms),
        iterations: None,
        dir: std::env::temp_dir(),
        cpus: vec![0],
        clock: Clock::Wall,
    }
}

#[cfg(test)]
impl TrialCtx {
    /// [`test_ctx`] with its scratch directory elsewhere.
    pub(crate) fn in_dir(mut self, dir: &std::path::Path) -> Self {
        self.dir = dir.to_path_buf();
        self
    }
}

/// Times a closure with the monotonic clock.
pub fn timed(f: impl FnOnce() -> Result<()>) -> Result<Duration> {
    let start = Instant::now();
    f()?;
    Ok(start.elapsed())
}

/// Sets each percentile metric the workload did not set itself from the
/// trial's histogram of that name (docs/macro.md), so a single-process
/// workload records histograms and gets its p99s like a macro one.
pub fn fill_quantiles(metrics: &[MetricDef], out: &mut TrialOutput) -> Result<()> {
    for m in metrics {
        if let kscale_core::MetricKind::Quantile { hist, q, per_ns } = m.kind {
            if out.values.contains_key(m.name) {
                continue;
            }
            let enc = out
                .histograms
                .get(hist)
                .ok_or_else(|| anyhow::anyhow!("no `{hist}` histogram for metric {}", m.name))?;
            let h = kscale_core::hist::decode(enc)?;
            let v = kscale_core::hist::quantile_ns(&h, q).ok_or_else(|| {
                anyhow::anyhow!("the `{hist}` histogram is empty: nothing completed")
            })?;
            out.values.insert(m.name.to_string(), v * per_ns);
        }
    }
    Ok(())
}

/// Calls of [`TrialCtx::timed`] in this process, on any thread: a trial of
/// a workload on the thread's clock that made none timed itself some
/// other way (the free [`timed`] reads the wall), and its figure would be
/// the wall's under the thread clock's name.
static TIMED_CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Refuses a trial of `w` that took no reading of [`TrialCtx::timed`]
/// while its definition says its figure is on the thread's clock; `before`
/// is [`TIMED_CALLS`] before the trial. Only ever too lenient: calls from
/// another trial in the same process can only add.
fn ensure_timed_on_its_clock(w: &WorkloadDef, before: u64) -> Result<()> {
    let after = TIMED_CALLS.load(std::sync::atomic::Ordering::Relaxed);
    anyhow::ensure!(
        w.clock != Clock::Thread || after > before,
        "{} is defined on the thread's CPU clock but timed nothing through TrialCtx::timed: its figure would be the wall's",
        w.id()
    );
    Ok(())
}

/// Runs one trial in this process. Called by the hidden worker sub-command
/// after it has pinned itself.
pub fn run_trial(req: &TrialRequest) -> Result<TrialOutput> {
    let w =
        find(&req.workload).ok_or_else(|| anyhow::anyhow!("unknown workload {}", req.workload))?;
    let ctx = TrialCtx::from_request(req);
    let before = TIMED_CALLS.load(std::sync::atomic::Ordering::Relaxed);
    let mut out = (w.run)(&ctx)?;
    ensure_timed_on_its_clock(w, before)?;
    fill_quantiles(w.metrics, &mut out)?;
    for m in w.metrics {
        anyhow::ensure!(
            out.values.get(m.name).is_some_and(|v| v.is_finite()),
            "{} produced no finite value for metric {}",
            w.id(),
            m.name
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn a_thread_clock_workload_must_time_through_its_context() {
        let w = find("syscall.null").expect("syscall.null is registered");
        assert_eq!(w.clock, Clock::Thread);
        let before = TIMED_CALLS.load(std::sync::atomic::Ordering::Relaxed);
        let e = ensure_timed_on_its_clock(w, before)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("syscall.null") && e.contains("thread's CPU clock"),
            "{e}"
        );
        let ctx = TrialCtx::from_request(&TrialRequest {
            workload: "syscall.null".into(),
            params: Default::default(),
            cpus: vec![0],
            trial_time_s: 0.01,
            iterations: None,
            dir: std::env::temp_dir(),
            role: None,
        });
        ctx.timed(|| Ok(())).expect("the thread's clock reads");
        assert!(ensure_timed_on_its_clock(w, before).is_ok());
        // A wall-clock workload times itself as it likes.
        let wall = find("syscall.pipe").expect("syscall.pipe is registered");
        assert_eq!(wall.clock, Clock::Wall);
        let now = TIMED_CALLS.load(std::sync::atomic::Ordering::Relaxed);
        assert!(ensure_timed_on_its_clock(wall, now).is_ok());
    }

    /// The thread's clock stops while the thread does not run (here: it
    /// sleeps, as it would while a neighbour holds its CPU); the wall's
    /// does not.
    #[test]
    fn the_thread_clock_leaves_out_time_off_the_cpu() {
        let nap = || {
            std::thread::sleep(Duration::from_millis(60));
            Ok(())
        };
        let mut ctx = test_ctx(&[], 10);
        let wall = ctx.timed(nap).unwrap();
        ctx.clock = Clock::Thread;
        let thread = ctx.timed(nap).unwrap();
        assert!(
            wall >= Duration::from_millis(60),
            "wall clock read {wall:?}"
        );
        assert!(
            thread < Duration::from_millis(20),
            "thread clock read {thread:?}"
        );
        // And it counts the thread's own work.
        let spin = ctx
            .timed(|| {
                let start = Instant::now();
                while start.elapsed() < Duration::from_millis(30) {
                    std::hint::spin_loop();
                }
                Ok(())
            })
            .unwrap();
        assert!(
            spin >= Duration::from_millis(5),
            "thread clock read {spin:?} of a 30 ms spin"
        );
    }

    #[test]
    fn registry_is_consistent() {
        let mut ids = HashSet::new();
        for f in REGISTRY {
            assert!(!f.workloads.is_empty(), "family {} is empty", f.name);
            for w in f.workloads {
                assert_eq!(w.family, f.name, "{} is filed under {}", w.id(), f.name);
                assert!(ids.insert(w.id()), "duplicate workload {}", w.id());
                assert!(!w.metrics.is_empty(), "{} has no metric", w.id());
                assert!(!w.help.is_empty() && !w.title.is_empty());
                assert!(
                    w.clock == Clock::Wall || w.roles.is_none(),
                    "{}: a macro workload's roles wait on one another; only a run function \
                     whose operation stays on its thread may read the thread's clock",
                    w.id()
                );
                assert_eq!(
                    w.roles.is_some(),
                    std::ptr::fn_addr_eq(w.run, WorkloadDef::BASE.run),
                    "{} must have either a run function or roles",
                    w.id()
                );
                if let Some(g) = w.geomean_over {
                    assert!(
                        w.param(g).is_some(),
                        "{} geomean_over names unknown param {g}",
                        w.id()
                    );
                }
                let metric = |m: &str| w.metrics.iter().any(|d| d.name == m);
                for c in w.charts {
                    let x = w.param(c.x).unwrap_or_else(|| {
                        panic!("{} charts against unknown param {}", w.id(), c.x)
                    });
                    assert!(
                        !matches!(
                            x.kind,
                            kscale_core::ParamKind::Choice(_)
                                | kscale_core::ParamKind::Str
                                | kscale_core::ParamKind::Addr
                                | kscale_core::ParamKind::Url
                        ),
                        "{} charts against {}, which is not a number",
                        w.id(),
                        c.x
                    );
                    for m in c.metrics {
                        assert!(metric(m), "{} charts unknown metric {m}", w.id());
                    }
                    for p in c.series {
                        assert!(
                            w.param(p).is_some(),
                            "{} series by unknown param {p}",
                            w.id()
                        );
                    }
                }
                if let Some(v) = &w.variants {
                    let p = w.param(v.param).unwrap_or_else(|| {
                        panic!("{} variants of unknown param {}", w.id(), v.param)
                    });
                    p.validate(&w.id(), v.baseline)
                        .unwrap_or_else(|e| panic!("{} variants baseline: {e}", w.id()));
                    for (m, _) in v.metrics {
                        assert!(metric(m), "{} variants show unknown metric {m}", w.id());
                    }
                }
                for p in w.params {
                    assert!(
                        !p.default.is_empty(),
                        "{} param {} has no default",
                        w.id(),
                        p.name
                    );
                    for v in p.default.iter().chain(p.quick) {
                        p.validate(&w.id(), v)
                            .unwrap_or_else(|e| panic!("{}: {e}", w.id()));
                    }
                }
            }
        }
    }

    #[test]
    fn time_limit_grows_with_seconds_params() {
        let w = find("threads.uncontested").unwrap();
        let p = |s: &str| {
            Params(
                [("seconds".to_string(), s.to_string())]
                    .into_iter()
                    .collect(),
            )
        };
        let short = w.time_limit(&p("1"), 0.2);
        let long = w.time_limit(&p("61"), 0.2);
        assert!(
            long >= short + Duration::from_secs(120),
            "{short:?} {long:?}"
        );
        assert!(long > Duration::from_secs(61 + 30));
    }

    #[test]
    fn calibration_reaches_trial_time() {
        let ctx = test_ctx(&[], 50);
        let (per_op, n) = ctx
            .time_per_op(|n| {
                timed(|| {
                    for i in 0..n {
                        std::hint::black_box(i);
                        std::thread::sleep(Duration::from_micros(100));
                    }
                    Ok(())
                })
            })
            .unwrap();
        assert!(per_op >= 100e-6, "{per_op}");
        assert!((50..=600).contains(&n), "{n}");
    }
}
