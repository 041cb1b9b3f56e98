//! The run arguments: as typed ([`RunArgs`], one set flattened into every
//! command that measures — run, study, check, tune — and validated for
//! fleet; [`Targets`], what `run` and `check` select) and as stored with the
//! run ([`RunOptions`], what `--resume` repeats).

use super::hotplug::CpuMode;
use super::plan::{self, PlanEntry};
use crate::error::user;
use crate::idle::CpuIdle;
use anyhow::Result;
use kscale_core::StopRule;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// How a run measures, whatever it measures.
#[derive(clap::Args, Clone, Debug)]
pub struct RunArgs {
    /// Label of the system being measured (default: the kernel release; `tune`: the
    /// plan's name, each step's run labelled LABEL.N-STEP).
    #[arg(long)]
    pub label: Option<String>,
    /// A first look: CI 10@95, 0.05 s trials until converged or 5 s per case, shorter param sweeps.
    #[arg(long)]
    pub quick: bool,
    /// Convergence target W@C: full CI width ≤ W % of the mean at C % confidence (default 5@95).
    #[arg(long, value_name = "W@C")]
    pub ci: Option<String>,
    /// The estimator of each case's result and interval: `trimmed` (default),
    /// the 20% trimmed mean with its Yuen interval, which a trial wrecked by
    /// a host spell does not move; `mean`, the seeds' mean with Student-t
    /// (docs/method.md, "Host spells and the estimator").
    #[arg(long, value_name = "mean|trimmed", value_parser = ["mean", "trimmed"])]
    pub estimator: Option<String>,
    /// Counted trials at least (default 3).
    #[arg(long, value_name = "N")]
    pub min_trials: Option<usize>,
    /// Counted trials at most (default 30, --quick 100).
    #[arg(long, value_name = "N")]
    pub max_trials: Option<usize>,
    /// Seconds one micro-benchmark trial lasts (default 0.5, --quick 0.05).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub trial_time: Option<f64>,
    /// Seconds of trials (warm-up included) after which a case stops
    /// unconverged (default none, --quick 5).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub case_budget: Option<f64>,
    /// Wall-clock budget of the whole run (`90s`, `5m`, `1h`), profiles
    /// included: after each case's first trials the rest goes where
    /// intervals narrow most, cases that cannot converge in it stop early,
    /// and every NOT CONVERGED case says the trials it needed (docs/method.md).
    #[arg(long, value_name = "DURATION")]
    pub budget: Option<String>,
    /// Spread each case's counted trials over at least this wall time
    /// (`20s`, `1m`): they start at least 1 s apart, so its mean samples
    /// the machine's moments instead of one host spell (docs/noise.md,
    /// "Paced trials"); --min-trials rises to fill it. Not with --budget.
    #[arg(long, value_name = "DURATION", conflicts_with = "budget")]
    pub span: Option<String>,
    /// Directory for the run's scratch files and the fs workloads (default: current directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Which CPUs a count takes: `compact` one thread per core, filling a
    /// last-level cache, then its node, then the next, SMT siblings last;
    /// `spread` across nodes and caches first; `smt` a core's siblings
    /// together. `kscale cpus` shows the plan.
    #[arg(long, value_name = "ORDER", default_value = "compact", value_parser = parse_cpu_order)]
    pub cpu_order: kscale_core::CpuOrder,
    /// Do not draw the progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// How a configuration of N CPUs is made: `affinity` confines the
    /// workload; `hotplug` takes the other CPUs offline like `maxcpus=N`
    /// (root; journalled and brought back online however the run ends).
    #[arg(long, value_enum, default_value = "affinity")]
    pub cpu_mode: CpuMode,
    /// How idle CPUs wait while the run lasts: `poll` holds a 0 µs CPU
    /// latency request so they never halt (root); `as-is` leaves them;
    /// `auto` polls in a virtual machine, where waking a halted vCPU is the
    /// host's decision, and leaves bare metal as it is (docs/method.md).
    #[arg(long, value_enum, default_value = "auto")]
    pub cpu_idle: CpuIdle,
}

impl RunArgs {
    /// Whether to draw the progress bar: asked for and on a terminal.
    pub fn progress(&self) -> bool {
        use std::io::IsTerminal;
        if self.no_progress {
            super::progress::silence();
        }
        !self.no_progress && std::io::stderr().is_terminal()
    }
}

/// The shortest gap between a paced case's trials: on the 2-vCPU VM two
/// trials of `syscall.null` 0.1 s apart correlate at 0.78, 0.5 s apart at
/// 0.38, and 1 to 3 s apart at about 0.1 (docs/noise.md, "Paced trials").
pub const PACE_S: f64 = 1.0;

/// The longest `--span`.
const MAX_SPAN_S: f64 = 3600.0;

/// The run flags `run --resume` accepts: neither is part of the stored
/// run (`--no-progress` only draws, and the peers' token is never stored,
/// so a resumed run that uses peers needs it again). Every other run flag
/// is restored from the stored run's options, so `--resume` refuses it
/// rather than drop it silently; a flag added to [`RunArgs`] or
/// [`Targets`] is refused until it is named here.
pub const GIVEN_WITH_RESUME: &[&str] = &["no_progress", "token"];

/// The ids of the run flags `--resume` refuses: every argument of
/// [`Targets`] and [`RunArgs`] as clap defines them, less
/// [`GIVEN_WITH_RESUME`]. Read from the definition, so a new run flag
/// cannot be left out of `--resume`'s conflicts by hand.
pub fn refused_with_resume() -> Vec<clap::Id> {
    use clap::Args;
    let cmd = RunArgs::augment_args(Targets::augment_args(clap::Command::new("run")));
    cmd.get_arguments()
        .map(|a| a.get_id().clone())
        .filter(|id| !GIVEN_WITH_RESUME.contains(&id.as_str()))
        .collect()
}

/// What a run measures: workloads or families, suites, CPU configurations,
/// params, and where macro workloads' load runs.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Targets {
    /// Workloads (`syscall.null`) or families (`ctx`) to run.
    #[arg(value_name = "TARGET")]
    pub targets: Vec<String>,
    /// Named suites, comma-separated (`micro`, `macro`, `quick`; see `kscale list`).
    #[arg(long, value_name = "NAME")]
    pub suite: Option<String>,
    /// CPU configurations: counts `1,2,4`, `all`, `sweep` (1, 2, 4 … all), or a
    /// set like `0-1` or `0-3,8`. Repeatable. Default `all`.
    #[arg(long, value_name = "LIST")]
    pub cpus: Vec<String>,
    /// CPUs for macro workloads' local load, e.g. `8-15` (default: free
    /// CPUs sharing no core with the measured ones, on their node when it
    /// has enough).
    #[arg(long, value_name = "LIST", conflicts_with = "peers")]
    pub load_cpus: Option<String>,
    /// Drive the web server at this `http://HOST[:PORT]/` URL (it serves a file set from
    /// `kscale web fileset`): runs the selected families' workloads that drive an external
    /// server (`kscale run web --target URL`).
    #[arg(long, value_name = "URL", conflicts_with = "suite")]
    pub target: Option<String>,
    /// Search each workload's capacity (SPECweb99's number: the most connections that all
    /// conform) by bracketing and bisecting its capacity param, a full trial set per step,
    /// instead of sweeping it; the param's largest value is where the search starts. Under
    /// --budget a step is one window, bisection stops at the run's interval width (`--ci`,
    /// 10 %; on to 2 % with what the other cases leave) and the search stops where the budget
    /// does, with the bracket it reached.
    /// Workloads without a capacity are measured as usual, after the searches.
    #[arg(long)]
    pub capacity: bool,
    /// Override a param's values for every selected workload that has it. Repeatable.
    #[arg(long = "param", value_name = "NAME=VALUE[,VALUE…]")]
    pub params: Vec<String>,
    /// Add one uncounted trial per case sampled with perf (CPU clock at 997 Hz,
    /// instructions, cache misses) on the case's CPUs: top routines, kernel /
    /// user / idle and spin-lock shares (`kscale show`, `kscale profile diff`).
    #[arg(long)]
    pub profile: bool,
    /// Run macro workloads' load on `kscale peer`s (HOST[:PORT], comma-separated
    /// or repeated) instead of this host's free CPUs; the spread param (e.g.
    /// `conns`) is split evenly among them.
    #[arg(long = "peer", value_name = "HOST[:PORT],…", value_delimiter = ',')]
    pub peers: Vec<String>,
    /// The peers' shared secret (default: $KSCALE_PEER_TOKEN).
    #[arg(long, value_name = "T")]
    pub token: Option<String>,
    /// Not a flag: `study --quick`'s narrower sweep, (workload, param,
    /// values) whose cases alone are kept of that workload's quick sweep.
    #[arg(skip)]
    pub only: Vec<(String, String, Vec<String>)>,
}

/// The most counted trials a case may take (`--max-trials`, and the
/// default under `--budget`).
const MAX_TRIALS: usize = 1000;

/// Everything needed to carry out (or resume) a run; stored as the run's
/// `options`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunOptions {
    pub targets: Vec<String>,
    pub suite: Option<String>,
    pub rule: StopRule,
    pub trial_time_s: f64,
    pub quick: bool,
    /// Where the run's scratch directory is created.
    pub dir: PathBuf,
    pub cpus: Vec<String>,
    pub plan: Vec<PlanEntry>,
    /// `--profile`: one extra, uncounted, sampled trial per case (docs/method.md).
    #[serde(default)]
    pub profile: bool,
    /// `--budget`: seconds of wall clock for the whole run, profiles
    /// included, planned over all its cases (docs/method.md).
    #[serde(default)]
    pub budget_s: Option<f64>,
    /// The budget as the command started it, when the command's own setup
    /// and output count against it (`study`: its report); else the run
    /// starts it ([`RunOptions::budget_from`]). Not stored: a resumed run
    /// starts a new clock.
    #[serde(skip)]
    pub budget: Option<super::budget::Budget>,
    /// `--span`: seconds over which each case's `rule.min_trials` counted
    /// trials are paced ([`pace_s`](RunOptions::pace_s)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_s: Option<f64>,
    /// The cases (workload, params) whose profiled trial is taken, on
    /// every CPU configuration; `None`: every case's, as `--profile` asks.
    /// `study --quick` profiles each family's representative: its profiles
    /// took 43–69 s of its 300 on 72 and more cases, while macro cells
    /// stayed undecided for want of 10–60 s (docs/budget.md, "Profiles").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_only: Option<Vec<(String, BTreeMap<String, String>)>>,
    /// `--peer`: where macro workloads' load runs instead of this host's free
    /// CPUs (the token is never stored).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<String>,
    /// `--cpu-mode`: CPU configurations by affinity or by CPU hotplug.
    #[serde(default)]
    pub cpu_mode: CpuMode,
    /// `--cpu-idle`: whether idle CPUs polled (docs/host.md, "Idle CPUs").
    #[serde(default)]
    pub cpu_idle: CpuIdle,
    /// `--cpu-order`: which CPUs the plan's counts took (docs/method.md).
    #[serde(default)]
    pub cpu_order: kscale_core::CpuOrder,
    /// `--load-cpus`: where macro workloads' local load runs instead of the
    /// CPUs chosen for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_cpus: Option<Vec<usize>>,
    /// The plan's workloads that have a capacity param are searched
    /// (`run --capacity`, `study`; engine::capacity), the others measured
    /// as planned.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub capacity: bool,
    /// Where a study measured instead of its working directory, and why
    /// (engine::plan::settling_dir): the line it printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir_moved: Option<String>,
    /// Cases a noise-planned study left out, one line per workload
    /// (engine::gauge::fit_to_noise); empty when it measured its whole plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
    /// The cases behind the gauge's lines in `left_out`, which the run may
    /// take back after its pilot (runner, docs/planning.md, "Taking cases
    /// back"); those it takes back move to `plan`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<plan::HeldCase>,
    /// Seconds that taking cases back leaves for what comes after the
    /// run: the windows that may settle a capacity search's answer still
    /// too spread for the run's interval (engine::capacity). The cases the
    /// plan kept are not held to it: kept from them, it stopped a study's
    /// `net.tcp_rr` and `chat.relay` on one CPU under the neighbour short
    /// of their need. Not stored.
    #[serde(skip)]
    pub kept_back_s: f64,
    /// Seconds a budgeted run keeps from every case for what comes after
    /// it: the windows that confirm a capacity search's answer, which has
    /// no interval without them (engine::capacity). Not stored.
    #[serde(skip)]
    pub confirm_s: f64,
    /// Under a budget, cases whose first trials show a spread the budget
    /// cannot fund after the cases ranked before them are left out
    /// (kscale_core::budget::Allotment::Leave): a study planning to the noise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub leave_out: bool,
    /// Without a budget, the other cases' seconds the capacity searches'
    /// shares are of, as the run's first sitting guessed them at its
    /// gauge's noise; stored then, so that a resumed run keeps its
    /// searches' shares (a full study resumed at a noisier hour guessed
    /// the rest at 8 trials a case, not 3, and its searches measured on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_rest_s: Option<f64>,
    /// How a capacity search under a budget measures one step
    /// (engine::capacity). Set only on the options of one step, never
    /// stored.
    #[serde(skip)]
    pub step: Step,
    /// Seconds the run is expected to take after this part of it: what a
    /// capacity search's step adds to its own time left in the progress
    /// line for the searches after it and the cases after them
    /// (engine::capacity). Set only on the options of one step, never
    /// stored.
    #[serde(skip)]
    pub after_s: f64,
}

impl RunOptions {
    /// The share of the budget its profiles are planned at:
    /// [`PROFILE_SHARE`](super::budget::PROFILE_SHARE), or the part of it
    /// its profiled cases are of its plan where it profiles only some
    /// (`study --quick`), none without `--profile`.
    pub fn profile_share(&self) -> f64 {
        if !self.profile {
            return 0.0;
        }
        let all = super::budget::PROFILE_SHARE;
        match &self.profile_only {
            None => all,
            Some(only) => {
                let profiled = self
                    .plan
                    .iter()
                    .filter(|e| only.iter().any(|(w, p)| *w == e.workload && *p == e.params))
                    .count();
                all * profiled as f64 / self.plan.len().max(1) as f64
            }
        }
    }

    /// The run's budget: the command's where it started one, else one of
    /// `budget_s` started at `started` (the runner's or the searches'
    /// start), nothing kept; `None` without `--budget`.
    pub fn budget_from(&self, started: std::time::Instant) -> Option<super::budget::Budget> {
        self.budget.or_else(|| {
            self.budget_s
                .map(|t| super::budget::Budget::since(started, t, 0.0))
        })
    }

    /// Under `--span`, the least time from one counted trial's start to
    /// the next one's: a case's `rule.min_trials` then span the span, and
    /// one that needs more takes them at the same pace.
    pub fn pace_s(&self) -> Option<f64> {
        self.span_s
            .map(|s| s / (self.rule.min_trials.saturating_sub(1).max(1)) as f64)
    }
}

/// How a case is measured: by its run rule, or as a budgeted capacity
/// search's step — one counted window, after a warm-up only for the
/// search's first step (the first server on a freshly written file set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Step {
    #[default]
    Whole,
    Window,
    WarmWindow,
}

/// Builds validated options from the command line.
pub fn options(sel: &Targets, args: &RunArgs) -> Result<RunOptions> {
    if let Some(l) = &args.label {
        check_label(l)?;
    }
    let mut rule = stop_rule(args)?;
    let budget_s = budget(args, &mut rule)?;
    let span_s = span(args, budget_s.is_some(), &mut rule)?;
    let trial_time_s = args
        .trial_time
        .unwrap_or(if args.quick { 0.05 } else { 0.5 });
    if !(trial_time_s.is_finite() && (0.001..=3600.0).contains(&trial_time_s)) {
        return Err(user(format!(
            "bad --trial-time {trial_time_s}: expected seconds between 0.001 and 3600"
        )));
    }
    let dir = run_dir(args)?;
    let (plan, load_cpus) = cases(sel, args)?;
    Ok(RunOptions {
        targets: sel.targets.clone(),
        suite: sel.suite.clone(),
        rule,
        trial_time_s,
        quick: args.quick,
        dir,
        cpus: if sel.cpus.is_empty() {
            vec!["all".into()]
        } else {
            sel.cpus.clone()
        },
        plan,
        profile: sel.profile,
        profile_only: None,
        budget_s,
        budget: None,
        span_s,
        peers: sel.peers.clone(),
        cpu_mode: args.cpu_mode,
        cpu_idle: args.cpu_idle,
        cpu_order: args.cpu_order,
        load_cpus,
        capacity: sel.capacity,
        dir_moved: None,
        left_out: Vec::new(),
        held: Vec::new(),
        kept_back_s: 0.0,
        confirm_s: 0.0,
        leave_out: false,
        search_rest_s: None,
        step: Step::Whole,
        after_s: 0.0,
    })
}

/// When a case stops: `--quick`'s or the default rule with the flags that
/// change it, refused when no interval could come of it.
fn stop_rule(args: &RunArgs) -> Result<StopRule> {
    let mut rule = if args.quick {
        StopRule::QUICK
    } else {
        StopRule::DEFAULT
    };
    if let Some(ci) = &args.ci {
        let (w, c) = StopRule::parse_ci(ci).ok_or_else(|| {
            user(format!(
                "bad --ci `{ci}`: expected W@C with W > 0 and 0 < C < 100, e.g. 5@95"
            ))
        })?;
        rule.width_pct = w;
        rule.confidence_pct = c;
    }
    if let Some(e) = &args.estimator {
        rule.estimator = kscale_core::Estimator::parse(e).ok_or_else(|| {
            user(format!(
                "bad --estimator `{e}`: expected `mean` or `trimmed`"
            ))
        })?;
    }
    if let Some(n) = args.min_trials {
        rule.min_trials = n;
    }
    if let Some(n) = args.max_trials {
        rule.max_trials = n;
    }
    if rule.min_trials < 2 {
        return Err(user(format!(
            "bad --min-trials {}: a confidence interval needs at least 2 trials",
            rule.min_trials
        )));
    }
    if rule.max_trials < rule.min_trials || rule.max_trials > MAX_TRIALS {
        return Err(user(format!(
            "bad --max-trials {}: must be between --min-trials ({}) and {MAX_TRIALS}",
            rule.max_trials, rule.min_trials
        )));
    }
    if let Some(b) = args.case_budget {
        if !(b.is_finite() && b > 0.0) {
            return Err(user(format!(
                "bad --case-budget {b}: expected seconds greater than 0"
            )));
        }
        rule.case_budget_s = Some(b);
    }
    Ok(rule)
}

/// `--budget` in seconds; a budgeted run lets the budget, not the rule's
/// per-case limits, bound its cases.
fn budget(args: &RunArgs, rule: &mut StopRule) -> Result<Option<f64>> {
    let Some(b) = &args.budget else {
        return Ok(None);
    };
    let budget_s = kscale_core::budget::parse_duration(b).ok_or_else(|| {
        user(format!(
            "bad --budget `{b}`: expected a duration like 90s, 5m or 1h"
        ))
    })?;
    // The run's budget replaces the per-case one, and bounds the time
    // better than a trial count: a case may take as many trials as its
    // spread needs and the budget buys.
    rule.case_budget_s = args.case_budget;
    // The budget spreads every case's trials over the whole run itself.
    rule.min_span_s = None;
    if args.max_trials.is_none() {
        rule.max_trials = MAX_TRIALS;
    }
    Ok(Some(budget_s))
}

/// `--span` in seconds, with the rule's trial counts raised so that its
/// trials fill it at the pace.
fn span(args: &RunArgs, budgeted: bool, rule: &mut StopRule) -> Result<Option<f64>> {
    let Some(d) = &args.span else {
        return Ok(None);
    };
    if budgeted {
        return Err(user(format!(
            "--span {d} cannot pace a run under a budget (--budget, study --quick): the budget plans its trials itself"
        )));
    }
    let s = kscale_core::budget::parse_duration(d)
        .filter(|s| *s > 0.0 && *s <= MAX_SPAN_S)
        .ok_or_else(|| {
            user(format!(
                "bad --span `{d}`: expected a duration like 20s, 1m or 5m, at most 1h"
            ))
        })?;
    // Trials closer than PACE_S follow the same host spell: the
    // span is filled with trials that far apart, at least.
    let n = (s / PACE_S).floor() as usize + 1;
    rule.min_trials = rule.min_trials.max(n);
    rule.max_trials = rule.max_trials.max(rule.min_trials);
    Ok(Some(s))
}

/// `--dir`, or the current directory, once it is known to hold the run's
/// scratch files.
fn run_dir(args: &RunArgs) -> Result<PathBuf> {
    match &args.dir {
        Some(d) => {
            usable_dir(d, "--dir")?;
            Ok(d.clone())
        }
        None => {
            let d = std::env::current_dir()
                .map_err(|e| user(format!("cannot use the current directory: {e}")))?;
            usable_dir(&d, "the current directory")?;
            Ok(d)
        }
    }
}

/// The run's plan and `--load-cpus`: the selected workloads' cases on the
/// CPU configurations, refused here when this machine cannot make them.
fn cases(sel: &Targets, args: &RunArgs) -> Result<(Vec<PlanEntry>, Option<Vec<usize>>)> {
    let mut overrides = sel
        .params
        .iter()
        .map(|p| plan::parse_param(p))
        .collect::<Result<Vec<_>>>()?;
    let workloads = match &sel.target {
        Some(url) => {
            let (ws, o) = plan::resolve_external(&sel.targets, url)?;
            probe_target(url)?;
            overrides.push(o);
            ws
        }
        None => plan::resolve_targets(&sel.targets, sel.suite.as_deref(), args.quick)?,
    };
    let topo = usable()?;
    let available = topo.ids();
    let configs = kscale_core::cpus::resolve(&sel.cpus, &topo, args.cpu_order)?;
    let load_cpus = sel
        .load_cpus
        .as_deref()
        .map(|l| parse_load_cpus(l, &available))
        .transpose()?;
    if args.cpu_mode == CpuMode::Hotplug {
        if load_cpus.is_some() {
            return Err(user(
                "--load-cpus with --cpu-mode hotplug: the CPUs outside a configuration are offline",
            ));
        }
        super::hotplug::check(&configs, &available)?;
    }
    let mut plan = plan::expand(&workloads, &overrides, args.quick, &configs)?;
    plan.retain(|e| {
        sel.only
            .iter()
            .all(|(w, p, vs)| &e.workload != w || e.params.get(p).is_none_or(|v| vs.contains(v)))
    });
    if sel.capacity {
        plan = searches_first(&workloads, plan)?;
    }
    Ok((plan, load_cpus))
}

/// `--capacity`'s plan: the searches' seeds, and the other workloads'
/// cases as planned, measured after the searches as a study measures them.
fn searches_first(
    workloads: &[&'static kscale_workloads::WorkloadDef],
    plan: Vec<PlanEntry>,
) -> Result<Vec<PlanEntry>> {
    if workloads.iter().all(|w| plan::param_of(w).is_none()) {
        let names: Vec<String> = workloads.iter().map(|w| w.id()).collect();
        return Err(user(format!(
            "--capacity: {} has no capacity to search (web's workloads have: conns)",
            names.join(", ")
        )));
    }
    let (searched, rest): (Vec<PlanEntry>, Vec<PlanEntry>) =
        plan.into_iter().partition(plan::searched);
    let mut plan = plan::seeds(&searched);
    plan.extend(rest);
    Ok(plan)
}

/// The CPUs kscale may use, with their topology: this machine bounded by
/// the process's affinity mask. A bad `KSCALE_SYSFS` is the user's to fix.
pub fn usable() -> Result<kscale_core::Topology> {
    let machine = kscale_sys::topology::machine().map_err(|e| user(e.to_string()))?;
    Ok(machine.within(&kscale_sys::affinity::available_cpus()?))
}

/// `--cpu-order`'s value.
pub fn parse_cpu_order(s: &str) -> Result<kscale_core::CpuOrder, String> {
    kscale_core::CpuOrder::parse(s).ok_or_else(|| {
        format!(
            "`{s}` is not a CPU order (accepted: {})",
            kscale_core::CpuOrder::NAMES
        )
    })
}

/// `--load-cpus`: a CPU list inside what kscale may use.
fn parse_load_cpus(list: &str, available: &[usize]) -> Result<Vec<usize>> {
    let cpus = kscale_core::cpus::parse_cpulist(list).ok_or_else(|| {
        user(format!(
            "bad --load-cpus `{list}`: expected a CPU list like 2-3 or 4,6"
        ))
    })?;
    if let Some(c) = cpus.iter().find(|c| !available.contains(c)) {
        return Err(user(format!(
            "bad --load-cpus `{list}`: CPU {c} is not one kscale may use (available: {})",
            kscale_core::cpus::format_cpulist(available)
        )));
    }
    Ok(cpus)
}

/// The rule every command that stores a run applies to its label
/// ([`kscale_core::label::refusal`]): one line, exit status 2.
pub fn check_label(label: &str) -> Result<()> {
    match kscale_core::label::refusal(label) {
        Some(why) => Err(user(why)),
        None => Ok(()),
    }
}

/// A `--target` that refuses connections is a bad argument, said before
/// the run starts rather than as every trial's failure.
fn probe_target(url: &str) -> Result<()> {
    use std::net::ToSocketAddrs;
    let u = kscale_core::params::parse_http_url(url)
        .ok_or_else(|| user(format!("--target {url}: not an http://HOST[:PORT]/ URL")))?;
    let addrs: Vec<_> = (u.host.as_str(), u.port)
        .to_socket_addrs()
        .map_err(|e| user(format!("--target {url}: cannot resolve {}: {e}", u.host)))?
        .collect();
    let mut last = None;
    for a in &addrs {
        match std::net::TcpStream::connect_timeout(a, std::time::Duration::from_secs(3)) {
            Ok(_) => return Ok(()),
            Err(e) => last = Some(format!("{a}: {e}")),
        }
    }
    Err(user(format!(
        "--target {url}: cannot connect to {}",
        last.unwrap_or_else(|| format!("{}: no address", u.host))
    )))
}

/// A directory a run can use: it exists and kscale can create a directory
/// and a file in it (the run's scratch directory, the `fs` workloads'
/// files). Checked before the run is created, so `--dir /proc` costs one
/// line, not a failed run.
fn usable_dir(d: &std::path::Path, what: &str) -> Result<()> {
    if !d.is_dir() {
        return Err(user(format!(
            "{what} {} is not an existing directory",
            d.display()
        )));
    }
    tempfile::Builder::new()
        .prefix(".kscale-probe-")
        .tempdir_in(d)
        .and_then(|probe| tempfile::NamedTempFile::new_in(probe.path()).map(drop))
        .map_err(|e| {
            user(format!(
                "{what} {} cannot hold kscale's scratch files ({e}); choose a writable \
                 directory with --dir",
                d.display()
            ))
        })
}
