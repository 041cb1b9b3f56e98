//! Orchestrates a run: for each workload, its cases on every CPU
//! configuration are measured in interleaved rounds (A B A B …, docs/method.md),
//! each trial in a fresh worker process, each trial committed to the store
//! as it ends. The parent never runs measured code.

use super::args::{RunOptions, Step};
use super::costs::{earlier_costs, guess_secs, timed_params};
use super::hotplug::{CpuMode, Hotplug};
use super::peers::PeerSet;
use super::plan::PlanEntry;
use super::profiling::Profiler;
use super::roles::LoadPlace;
use super::worker::run_worker;
use crate::error::Interrupted;
use crate::signals;
use anyhow::{Context, Result};
use indicatif::ProgressBar;
use kscale_core::hostfit::Measures;
use kscale_core::{CaseKey, Decision, RunRule};
use kscale_store::{CaseData, CaseStatus, MetricRow, NewTrial, Store};
use kscale_workloads::{TrialOutput, TrialRequest, WorkloadDef};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

mod budgeted;
mod cells;
pub mod interleave;
mod judging;
mod profiled;
mod scratch;
mod unit;

use judging::{decide, host_link, judged};
use profiled::{profile_request, profile_scale, profile_target_s, Tally, PROFILE_START_S};
use scratch::scratch_dir;
use unit::Unit;

/// The family a workload id belongs to (`ctx` of `ctx.lat`), as
/// [`CaseKey::family`] reads it.
fn family(w: &str) -> &str {
    w.split('.').next().unwrap_or(w)
}

/// Where a case stands when the planner stops one that cannot converge
/// ([`unmeasurable`]).
struct Standing<'a> {
    workload: &'a str,
    params: &'a BTreeMap<String, String>,
    cpus: &'a str,
    /// Still measuring or converged, and not left out: it gives its
    /// family a figure with an interval on its configuration.
    usable: bool,
}

/// The line that names case `u` set aside (`how`: "left out", "waits")
/// after its trials: their spread, what it needed, `why`, and what of the
/// host its trials followed.
fn set_aside_line(u: &Unit, how: &str, need: kscale_core::budget::Need, why: &str) -> String {
    let values = &u.counted;
    let spread = cv(values)
        .map(|c| format!(", CV {:.0} %", 100.0 * c))
        .unwrap_or_default();
    format!(
        "{} [cpus {}]: {how} after {} trials{spread}: {}; {why}{}",
        u.label(),
        kscale_core::cpus::base_name(&u.entry.cpus_name),
        values.len(),
        need.message(),
        host_link(values, &u.host)
    )
}

/// Whether a study that leaves cases out may leave out case `i`, which
/// cannot converge within the rule's maximum trials or needs more than an
/// even share of the run (a case the machine makes unmeasurable in a quick
/// budget: studies under the neighbour stopped `ctx.lat place=spread`
/// cases after 5–8 trials at needs of ~1,500 and ~5,600 more): it may
/// where its family keeps another usable case on its configuration and on
/// each of its twins'. It goes with its twins, but for one that converged,
/// which stays (`leave_pair`, runner/budgeted.rs). Its NOT CONVERGED row would
/// leave the family's decision there without an interval, and its rank
/// does not matter then: the family is decided on the cases it keeps.
/// False where the family would keep none on some configuration: the case
/// stays, NOT CONVERGED, and no family goes unmeasured.
fn unmeasurable(cases: &[Standing<'_>], i: usize) -> bool {
    let me = &cases[i];
    let same = |c: &Standing<'_>| c.workload == me.workload && c.params == me.params;
    let mut out =
        (0..cases.len()).filter(|&k| same(&cases[k]) && (k == i || cases[k].cpus != me.cpus));
    out.all(|k| {
        cases.iter().any(|c| {
            c.usable
                && !same(c)
                && c.cpus == cases[k].cpus
                && family(c.workload) == family(me.workload)
        })
    })
}

/// How long the plan's unfinished cases take as a resumed run's first
/// progress line will say ([`Runner::seconds_left`]): what its finished
/// cases took teaches the estimate for those ahead of their workload, or
/// family, or of the run; a case started and left unfinished is expected
/// at the trials its own spread asks, its cases being built as the
/// runner's are ([`Unit::taken_up`]). `None` before any case has finished:
/// a new run's outlook is the gauge's guess. A resumed full study's outlook said
/// "its 102 cases take about 76 min", from the gauge alone, while its
/// first progress line said 2.9 h from what its `net` cases had taken;
/// the rest took 3.3 h.
pub fn resumed_left_s(
    store: &Store,
    run_id: i64,
    opts: &RunOptions,
    earlier: &kscale_store::costs::EarlierCosts,
) -> Option<f64> {
    let stored: HashMap<CaseKey, CaseData> = store
        .load_run(run_id)
        .ok()?
        .cases
        .into_iter()
        .map(|c| (c.key.clone(), c))
        .collect();
    let units: Vec<Unit> = opts
        .plan
        .iter()
        .filter_map(|e| {
            let w = kscale_workloads::find(&e.workload)?;
            let key = e.key();
            let old = stored.get(&key);
            let before = earlier.cases.get(&key).copied();
            Some(Unit::taken_up(
                e,
                w,
                old.map_or(0, |c| c.id),
                old,
                before,
                opts,
            ))
        })
        .collect();
    let cases: Vec<kscale_core::ahead::Case<'_>> = units.iter().map(|u| u.ahead(opts)).collect();
    cases
        .iter()
        .any(|c| c.finished && c.turns > 0)
        .then(|| kscale_core::ahead::seconds_left(&cases, 1.0, opts.rule.max_trials))
}

/// Runs every unfinished case of the plan; macro workloads' load goes to
/// `peers` when given, else to this host's free CPUs.
pub fn execute(
    store: &Store,
    run_id: i64,
    opts: &RunOptions,
    show_progress: bool,
    peers: Option<&mut PeerSet>,
) -> Result<()> {
    with_hotplug(store, opts, |hotplug| {
        execute_with(store, run_id, opts, show_progress, peers, hotplug)
    })
}

/// Runs `f` with the run's CPU hotplug when `--cpu-mode hotplug` asks for
/// it, and brings every CPU back online however `f` ended (docs/tune.md).
fn with_hotplug(
    store: &Store,
    opts: &RunOptions,
    f: impl FnOnce(Option<&Hotplug<'_>>) -> Result<()>,
) -> Result<()> {
    let hotplug = (opts.cpu_mode == CpuMode::Hotplug).then(|| Hotplug::new(store));
    let result = f(hotplug.as_ref());
    let failed = hotplug.map(|h| h.restore()).unwrap_or_default();
    for e in &failed {
        eprintln!("kscale: could not restore: {e}");
    }
    if !failed.is_empty() && result.is_ok() {
        anyhow::bail!("CPUs left offline; `kscale tune --restore` retries");
    }
    result
}

fn execute_with(
    store: &Store,
    run_id: i64,
    opts: &RunOptions,
    show_progress: bool,
    peers: Option<&mut PeerSet>,
    hotplug: Option<&Hotplug<'_>>,
) -> Result<()> {
    let mut units = units(store, run_id, opts)?;
    let (scratch, available) = open(&opts.dir, &units)?;
    let pending = units.iter().filter(|u| !u.finished).count();
    let per_case = 1 + opts.rule.min_trials as u64;
    let bar = super::progress::bar(
        show_progress,
        pending as u64 * per_case,
        opts.budget_s.is_some(),
    );
    let mut profiler = Profiler::new(opts.profile);

    // However the trials end (an interrupt included), the scratch is
    // closed the same way: said, removed, written back.
    let result = {
        let env = Env::new(scratch.path(), &bar, &available, opts, hotplug);
        let mut runner = Runner::new(store, run_id, opts, &env, &mut profiler).with_peers(peers);
        runner.profile_scale = opts
            .budget_s
            .map_or(1.0, |b| profile_scale(&units, opts, b));
        match opts.budget_s {
            Some(budget_s) => budgeted::run_budgeted(&mut runner, &mut units, budget_s),
            None => run_groups(&mut runner, &mut units),
        }
    };
    bar.finish_and_clear();
    close(scratch, &opts.dir, &units);
    result
}

/// Without a budget: workload after workload, each one's cases on all
/// configurations one group measured round-robin.
fn run_groups(runner: &mut Runner<'_, '_>, units: &mut [Unit]) -> Result<()> {
    let mut start = 0;
    while start < units.len() {
        let end = units[start..]
            .iter()
            .position(|u| u.entry.workload != units[start].entry.workload)
            .map_or(units.len(), |p| start + p);
        run_group(runner, units, start..end)?;
        start = end;
    }
    Ok(())
}

/// What every execution does before its first trial, whether one run's or
/// several runs' interleaved (`runner::interleave`): its scratch directory
/// (after removing those of killed runs), each workload's caveat said
/// once, and the CPUs kscale may use.
fn open<'u>(
    dir: &std::path::Path,
    units: impl IntoIterator<Item = &'u Unit>,
) -> Result<(tempfile::TempDir, Vec<usize>)> {
    let scratch = scratch_dir(dir)?;
    say_caveats(units, dir);
    Ok((scratch, kscale_sys::affinity::available_cpus()?))
}

/// What every execution does after its last trial: the scratch directory
/// removed, and, where trials left files behind (fs.create's kept files)
/// on ext4 without a journal, the filesystem written back, since the next
/// run's creations skip their freed inodes for six minutes unless the
/// inode tables are written back, one minute if they are
/// (docs/families/fs.md).
fn close<'u>(
    scratch: tempfile::TempDir,
    dir: &std::path::Path,
    units: impl IntoIterator<Item = &'u Unit>,
) {
    let cleanup_s: f64 = units.into_iter().map(|u| u.cleanup_s).sum();
    // Thousands of kept files take minutes to remove on a slow disk (an
    // interrupted full study's took 22 on an unjournalled root): a run
    // that seems to hang after its last trial says why.
    let files = (cleanup_s / UNLINK_S).round();
    if files >= 10_000.0 {
        eprintln!(
            "kscale: removing the {files:.0} files the run's trials kept in {}",
            dir.display()
        );
    }
    drop(scratch);
    if cleanup_s > 0.0 && kscale_sys::fsinfo::ext4_without_journal(dir).is_some() {
        if let Err(e) = kscale_sys::fsinfo::sync_fs(dir) {
            eprintln!("kscale: could not write back {}: {e}", dir.display());
        }
    }
}

/// The run's cases, each taken up where the store left it (a resumed
/// run's finished cases stay finished), those the machine cannot run
/// recorded as skipped.
fn units(store: &Store, run_id: i64, opts: &RunOptions) -> Result<Vec<Unit>> {
    // Only a run without a budget says its time left from them.
    let mut earlier = if opts.budget_s.is_none() {
        earlier_costs(store, run_id).cases
    } else {
        Default::default()
    };
    let existing: HashMap<CaseKey, CaseData> = store
        .load_run(run_id)?
        .cases
        .into_iter()
        .map(|c| (c.key.clone(), c))
        .collect();
    let mut units = Vec::new();
    let mut said = std::collections::HashSet::new();
    for (seq, entry) in opts.plan.iter().enumerate() {
        let workload = kscale_workloads::find(&entry.workload)
            .with_context(|| format!("workload {} is no longer in this kscale", entry.workload))?;
        let key = entry.key();
        let metrics = MetricRow::rows_of(workload.metrics);
        let case_id = store.ensure_case(
            run_id,
            entry.seq.unwrap_or(seq as i64),
            &key,
            &entry.cpus,
            &metrics,
            workload.rule,
        )?;
        let mut unit = Unit::taken_up(
            entry,
            workload,
            case_id,
            existing.get(&key),
            earlier.remove(&key),
            opts,
        );
        if !unit.finished {
            if let Some(reason) =
                (workload.unavailable)(workload, &kscale_core::Params(unit.entry.params.clone()))
            {
                skip(store, &unit, &reason, &mut said)?;
                unit.finished = true;
            }
        }
        units.push(unit);
    }
    Ok(units)
}

/// Each workload's caveat for its params, said once before its first
/// trial, not after a wait.
fn say_caveats<'u>(units: impl IntoIterator<Item = &'u Unit>, dir: &std::path::Path) {
    let mut said = std::collections::HashSet::new();
    for u in units.into_iter().filter(|u| !u.finished) {
        let params = kscale_core::Params(u.entry.params.clone());
        if let Some(c) = (u.workload.caveat)(&params, dir) {
            if said.insert((u.entry.workload.clone(), c.clone())) {
                eprintln!("  {}: {c}", u.entry.workload);
            }
        }
    }
}

/// Records a case the machine cannot run (its workload's `unavailable`
/// reason) and says so on stderr once for its workload, whatever the
/// number of its cases: one missing program is one line.
fn skip(
    store: &Store,
    u: &Unit,
    reason: &str,
    said: &mut std::collections::HashSet<String>,
) -> Result<()> {
    if said.insert(u.entry.workload.clone()) {
        eprintln!(
            "  {} [cpus {}] skipped: {reason}",
            u.entry.workload,
            kscale_core::cpus::base_name(&u.entry.cpus_name)
        );
    }
    store.finish_case(
        u.case_id,
        CaseStatus::Skipped,
        None,
        Some(reason),
        None,
        &[],
    )?;
    Ok(())
}

/// What every trial of a run shares.
struct Env<'a> {
    scratch: &'a std::path::Path,
    bar: &'a ProgressBar,
    /// The CPUs kscale may use: a local load takes those a configuration
    /// leaves free.
    available: &'a [usize],
    /// `--load-cpus`: the local load's CPUs, as given.
    load_cpus: Option<&'a [usize]>,
    /// `--cpu-mode hotplug`: the CPUs outside a case's configuration go
    /// offline before its trial.
    hotplug: Option<&'a Hotplug<'a>>,
}

impl<'a> Env<'a> {
    fn new(
        scratch: &'a std::path::Path,
        bar: &'a ProgressBar,
        available: &'a [usize],
        opts: &'a RunOptions,
        hotplug: Option<&'a Hotplug<'a>>,
    ) -> Self {
        Env {
            scratch,
            bar,
            available,
            load_cpus: opts.load_cpus.as_deref(),
            hotplug,
        }
    }
}

/// Runs one trial: a micro-benchmark in one worker, a macro workload as its
/// server and load roles.
fn run_trial(
    w: &'static WorkloadDef,
    req: &TrialRequest,
    timeout: Duration,
    available: &[usize],
    load_cpus: Option<&[usize]>,
    peers: Option<&mut PeerSet>,
) -> Result<TrialOutput, String> {
    if w.roles.is_none() {
        return run_worker(req, timeout);
    }
    let place = match peers {
        Some(p) => LoadPlace::Peers(p),
        None => LoadPlace::Local {
            available: available.to_vec(),
            fixed: load_cpus.map(<[usize]>::to_vec),
        },
    };
    super::roles::run_trial(w, req, timeout, place)
}

/// The round trip of a cache line between two CPUs a trial spans, probed
/// just before and just after it while nothing of the trial runs, and
/// outside its wall time: on a virtual machine the host moves the vCPUs,
/// and cross-CPU figures follow (docs/host.md, "vCPU placement").
fn line_probe(
    w: &WorkloadDef,
    req: &TrialRequest,
    available: &[usize],
    peers: bool,
) -> Option<f64> {
    let local_load = w.roles.is_some() && !peers;
    // One CPU's partner is where its load runs.
    let load = super::roles::load_cpus(available, &req.cpus, None).cpus;
    let (a, b) = kscale_sys::linetrip::pair(&req.cpus, &load, local_load)?;
    kscale_sys::linetrip::round_trip_ns(a, b)
}

/// What every turn of a run shares: the store, the options, the trials'
/// environment, the profiler and the peers.
struct Runner<'a, 'p> {
    store: &'a Store,
    run_id: i64,
    opts: &'a RunOptions,
    env: &'a Env<'a>,
    profiler: &'a mut Profiler,
    peers: Option<&'p mut PeerSet>,
    /// What every profiled trial's target length is multiplied by
    /// ([`profile_scale`]).
    profile_scale: f64,
    /// Wall seconds the profiled trials took beyond their length (perf's
    /// setup, the symbols, the store), summed, and how many: what the
    /// budget keeps for the profiles still to come follows what this
    /// machine charged, not a guess.
    profile_extra: Tally,
    /// Wall seconds that storing a case's end has taken, summed, and how
    /// many: the budget keeps as much for every case still open, which the
    /// run ends by storing.
    finish_cost: Tally,
    /// When its first trial was asked for.
    started: Instant,
    /// Without a budget: how long the run still has to go, as the progress
    /// says it ([`kscale_core::ahead`]).
    left_s: Option<f64>,
    /// Whose time its trials are on the budget's ledger: a capacity
    /// search's windows, tune's arms, or the cases'.
    spender: super::budget::Spender,
}

/// A workload's cases round-robin (A B A B …) until each has finished.
/// Under `--span` a case whose next trial is not yet due gives up its
/// turn, and when none is due the runner waits for the first that will be.
fn run_group(
    r: &mut Runner<'_, '_>,
    all: &mut [Unit],
    group: std::ops::Range<usize>,
) -> Result<()> {
    while all[group.clone()].iter().any(|u| !u.finished) {
        let mut ran = false;
        for i in group.clone() {
            let u = &all[i];
            if u.finished || u.due.is_some_and(|d| d > Instant::now()) {
                continue;
            }
            if !r.env.bar.is_hidden() {
                r.left_s = Some(r.seconds_left(all));
            }
            r.turn(&mut all[i])?;
            ran = true;
        }
        let units = &all[group.clone()];
        if !ran {
            let next = units
                .iter()
                .filter(|u| !u.finished)
                .filter_map(|u| u.due)
                .min();
            if let Some(next) = next {
                // The wait is the control's time: a reading next to the
                // trials, where it delays none (docs/noise.md, "The
                // gauge and the control").
                if next > Instant::now() + super::gauge::PACED_EVERY / 2 {
                    super::gauge::tick_paced(r.store);
                }
                signals::sleep_until(next).map_err(|sig| Interrupted(sig, r.run_id))?;
            }
        }
    }
    Ok(())
}

/// The relative standard deviation of `values` (`None` below two).
fn cv(values: &[f64]) -> Option<f64> {
    let n = values.len() as f64;
    (n >= 2.0).then(|| {
        let m = values.iter().sum::<f64>() / n;
        let sd = (values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        sd / m
    })
}

/// What storing a case's end is taken to cost before one has been timed.
const FINISH_S: f64 = 0.02;
/// Seconds to remove one file a trial left in the scratch directory: `rm
/// -rf` of 200,000 4 KiB files in 2,000 directories took 19.7 s on the
/// 2-vCPU VM's ext4 without a journal, where `fs.create` keeps its files.
const UNLINK_S: f64 = 100e-6;

impl<'a, 'p> Runner<'a, 'p> {
    /// A runner with nothing measured yet, its load on this host and its
    /// profiled trials at their own length until told otherwise.
    fn new(
        store: &'a Store,
        run_id: i64,
        opts: &'a RunOptions,
        env: &'a Env<'a>,
        profiler: &'a mut Profiler,
    ) -> Self {
        Runner {
            store,
            run_id,
            opts,
            env,
            profiler,
            peers: None,
            profile_scale: 1.0,
            profile_extra: Tally::default(),
            finish_cost: Tally::default(),
            started: Instant::now(),
            left_s: None,
            spender: if opts.step == Step::Whole {
                super::budget::Spender::Cases
            } else {
                super::budget::Spender::CapacitySteps
            },
        }
    }

    /// The runner with macro workloads' load on `peers`, when the run has them.
    fn with_peers(self, peers: Option<&'p mut PeerSet>) -> Self {
        Runner { peers, ..self }
    }

    /// How long the unfinished cases of `units` still take: each finished
    /// case teaches the estimate for those of its workload (or family)
    /// ahead, and the run's elapsed time over its trials' wall time so far
    /// scales every trial by what the runner spends around it (worker
    /// processes, profiles, the store): docs/budget.md, "The run's budget",
    /// "How long".
    fn seconds_left(&self, units: &[Unit]) -> f64 {
        let rule = &self.opts.rule;
        let cases: Vec<kscale_core::ahead::Case<'_>> =
            units.iter().map(|u| u.ahead(self.opts)).collect();
        let spent: f64 = units.iter().map(|u| u.spent_s).sum();
        let overhead = if spent > 0.0 {
            self.started.elapsed().as_secs_f64() / spent
        } else {
            1.0
        };
        kscale_core::ahead::seconds_left(&cases, overhead, rule.max_trials) + self.opts.after_s
    }

    /// How long `u`'s profiled trial runs, by [`profile_request`]'s rule:
    /// a timed workload's window, lengthened to the profile's target; an
    /// iteration count scaled to the target; a workload that ends after
    /// fixed work (chat) as long as its counted trials.
    fn profile_length(&self, u: &Unit) -> f64 {
        let secs = profile_target_s(u.entry.cpus.len()) * self.profile_scale;
        let timed = u.timed_params();
        if !timed.is_empty() {
            timed.iter().map(|s| s.max(secs)).sum()
        } else if u.workload.roles.is_none() {
            secs
        } else {
            u.secs_per_trial(self.opts)
        }
    }

    /// What the budget keeps for `u`'s profiled trial: its length and the
    /// extra seconds profiled trials have cost here so far
    /// ([`PROFILE_START_S`] before the first).
    fn profile_cost(&self, u: &Unit) -> f64 {
        self.profile_length(u) + self.profile_extra.mean_or(PROFILE_START_S)
    }

    /// One trial of `u`: its warm-up or its next counted trial, stored;
    /// the case finishes when its rule says so.
    fn turn(&mut self, u: &mut Unit) -> Result<()> {
        let (opts, env, bar) = (self.opts, self.env, self.env.bar);
        if let Some(sig) = signals::interrupted() {
            return Err(Interrupted(sig, self.run_id).into());
        }
        super::gauge::tick(self.store);
        if self.profiler.wanted() && !u.profiled && u.warmup_iterations.is_some() {
            return self.profile(u);
        }
        let warmup = opts.step != Step::Window && u.warmup_iterations.is_none() && u.next_idx == 0;
        let counted_n = u.counted.len();
        let left = self
            .left_s
            .map(|s| format!("about {} left · ", super::progress::duration(s)))
            .unwrap_or_default();
        bar.set_message(format!(
            "{left}{} [cpus {}] {}",
            u.label(),
            kscale_core::cpus::base_name(&u.entry.cpus_name),
            if warmup {
                "warm-up".to_string()
            } else if let Some(b) = opts.rule.case_budget_s {
                format!("trial {} ({:.1}/{b} s)", counted_n + 1, u.spent_s)
            } else if opts.budget_s.is_some() {
                format!("trial {}", counted_n + 1)
            } else {
                format!("trial {}/≤{}", counted_n + 1, opts.rule.max_trials)
            }
        ));
        let req = u.request(opts, env.scratch);
        let timeout = trial_timeout(u.workload, &u.entry.params, opts.trial_time_s);
        if let Some(h) = env.hotplug {
            h.apply(&u.entry.cpus, env.available)
                .map_err(|e| anyhow::anyhow!("--cpu-mode hotplug: {e}"))?;
        }
        // Under hotplug only the configuration's CPUs are online: a
        // local load shares them, as it would under maxcpus=N.
        let online = if env.hotplug.is_some() {
            &u.entry.cpus[..]
        } else {
            env.available
        };
        let remote = self.peers.is_some();
        let probe = || line_probe(u.workload, &req, online, remote);
        let line_before = probe();
        let started = Instant::now();
        let mut outcome = run_trial(
            u.workload,
            &req,
            timeout,
            online,
            env.load_cpus,
            self.peers.as_deref_mut(),
        );
        let wall = started.elapsed().as_secs_f64();
        super::budget::draw(self.spender, wall);
        if let (Ok(out), Some(before)) = (outcome.as_mut(), line_before) {
            if let (Some(acc), Some(after)) = (out.accounting.as_mut(), probe()) {
                acc.line_ns = Some((before + after) / 2.0);
            }
        }
        if let Some(sig) = signals::interrupted() {
            return Err(Interrupted(sig, self.run_id).into());
        }
        let out = match outcome {
            Ok(out) => out,
            Err(e) => return self.failed(u, &e),
        };
        self.store.add_trial(
            u.case_id,
            &NewTrial {
                idx: u.next_idx,
                warmup,
                wall_s: wall,
                iterations: Some(out.iterations),
                values: &out.values,
                accounting: out.accounting.as_ref(),
                histograms: &out.histograms,
                roles: &out.roles,
            },
        )?;
        u.next_idx += 1;
        u.spent_s += wall;
        u.cleanup_s += out.left_files as f64 * UNLINK_S;
        // A case keeps the notes of its latest trial: notes state facts (the
        // source of a figure, a verified precondition) and some carry that
        // trial's numbers, which must not pile up.
        u.notes = out.notes;
        if warmup {
            u.warmup_iterations = Some(out.iterations);
            bar.inc(1);
            return Ok(());
        }
        u.first_counted.get_or_insert(started);
        u.counted.push(out.values[u.workload.primary().name]);
        u.host
            .push(kscale_core::hostfit::measures(out.accounting.as_ref()));
        u.refit(opts);
        // Paced: the next counted trial starts a gap after this one's
        // start; back-to-back trials would follow one host spell and
        // narrow the interval without sampling more of the machine.
        u.due = opts
            .pace_s()
            .map(|g| started + std::time::Duration::from_secs_f64(g));
        if u.counted.len() <= opts.rule.min_trials {
            bar.inc(1);
        }
        match decide(u.workload, opts, u) {
            Decision::Continue => {
                if u.counted.len() >= opts.rule.min_trials {
                    bar.inc_length(1);
                    bar.inc(1);
                }
                Ok(())
            }
            d => self.finish(u, d, None),
        }
    }

    /// A crashed or hung worker costs its case, not the run.
    fn failed(&mut self, u: &mut Unit, e: &str) -> Result<()> {
        let bar = self.env.bar;
        u.finished = true;
        let remaining = (1 + self.opts.rule.min_trials).saturating_sub(u.next_idx as usize + 1);
        bar.inc(1 + remaining as u64);
        let msg = format!(
            "  {} [cpus {}] failed: {e}",
            u.entry.workload,
            kscale_core::cpus::base_name(&u.entry.cpus_name)
        );
        // A hidden bar (no terminal, --no-progress) prints nothing.
        if bar.is_hidden() {
            eprintln!("{msg}");
        } else {
            bar.println(msg);
        }
        self.store.finish_case(
            u.case_id,
            CaseStatus::Failed,
            None,
            Some(e),
            u.warmup_iterations,
            &u.notes,
        )?;
        Ok(())
    }

    /// Leaves `u` out of the run (kscale_core::budget::Allotment::Leave): its
    /// trials are removed from the store, and the run names it with what
    /// its spread needed. Its case goes too, or, `beside` a converged twin
    /// that stays, is kept as skipped with that line
    /// ([`kscale_store::Store::leave_out_case`]).
    fn leave_out(
        &mut self,
        u: &mut Unit,
        need: kscale_core::budget::Need,
        why: &str,
        beside: bool,
    ) -> Result<()> {
        u.finished = true;
        u.profiled = true;
        // A converged twin left with its case is no longer in the run.
        u.converged = false;
        let line = set_aside_line(u, "left out", need, why);
        self.store
            .leave_out_case(self.run_id, u.case_id, &line, beside)?;
        self.say(format!("  {line}"));
        Ok(())
    }

    /// Prints one line of the run's account above its progress bar (on
    /// stderr when the bar is hidden: no terminal, `--no-progress`).
    fn say(&self, msg: String) {
        if self.env.bar.is_hidden() {
            eprintln!("{msg}");
        } else {
            self.env.bar.println(msg);
        }
    }

    /// Stores the case's end, with what it would have needed when it did
    /// not converge (`why` says why it stopped, when the budget stopped
    /// it). A case that converged and was given more trials for its
    /// family's scalability ([`Unit::floor`]) and is stopped short of them
    /// still converged, if its interval still meets the rule.
    fn finish(&mut self, u: &mut Unit, d: Decision, why: Option<String>) -> Result<()> {
        let opts = self.opts;
        let started = Instant::now();
        u.finished = true;
        let d = if u.floor > 0 && d == Decision::NotConverged && opts.rule.is_converged(&u.judged) {
            Decision::Converged
        } else {
            d
        };
        // A median-of-N case is not run to convergence.
        let converged = match u.workload.rule {
            RunRule::Converge => Some(d == Decision::Converged),
            RunRule::MedianOf(_) => None,
        };
        u.converged = converged == Some(true);
        let mut notes = u.notes.clone();
        if converged == Some(false) {
            let need = kscale_core::budget::need(&opts.rule, &u.case_state(opts));
            // Tables print a note after its workload's name.
            let params = u.label()[u.entry.workload.len()..].trim().to_string();
            notes.push(format!(
                "{params}{}[cpus {}] NOT CONVERGED: {}{}",
                if params.is_empty() { "" } else { " " },
                kscale_core::cpus::base_name(&u.entry.cpus_name),
                need.message(),
                why.map(|w| format!("; {w}")).unwrap_or_default()
            ));
        }
        self.store.finish_case(
            u.case_id,
            CaseStatus::Done,
            converged,
            None,
            u.warmup_iterations,
            &notes,
        )?;
        self.finish_cost.add(started.elapsed().as_secs_f64());
        Ok(())
    }

    /// Mean seconds storing a case's end has taken in this run
    /// ([`FINISH_S`] before the first).
    fn finish_mean(&self) -> f64 {
        self.finish_cost.mean_or(FINISH_S)
    }

    /// The case's profiled trial: an extra, uncounted, sampled trial taken
    /// right after its warm-up, so that its time is spent, and known, while
    /// the budget still plans the counted trials — not in a burst once the
    /// budget is spent.
    fn profile(&mut self, u: &mut Unit) -> Result<()> {
        let (opts, bar) = (self.opts, self.env.bar);
        u.profiled = true;
        bar.set_message(format!(
            "{} [cpus {}] profiled trial",
            u.entry.workload,
            kscale_core::cpus::base_name(&u.entry.cpus_name)
        ));
        let secs = profile_target_s(u.entry.cpus.len()) * self.profile_scale;
        let length = self.profile_length(u);
        let started = Instant::now();
        let req = profile_request(
            u,
            &u.request(opts, self.env.scratch),
            opts.trial_time_s,
            secs,
        );
        let timeout = trial_timeout(u.workload, &req.params, opts.trial_time_s.max(secs));
        let (w, available, load) = (u.workload, self.env.available, self.env.load_cpus);
        let peers = self.peers.as_deref_mut();
        self.profiler.profile_case(
            self.store,
            u.case_id,
            &req,
            u.workload.primary().name,
            bar,
            |r| run_trial(w, r, timeout, available, load, peers),
        )?;
        let took = started.elapsed().as_secs_f64();
        super::budget::draw(super::budget::Spender::Profiles, took);
        self.profile_extra.add((took - length).max(0.0));
        if let Some(sig) = signals::interrupted() {
            return Err(Interrupted(sig, self.run_id).into());
        }
        Ok(())
    }
}

/// The workload's limit for these params ([`WorkloadDef::time_limit`]);
/// `KSCALE_TRIAL_TIMEOUT` (seconds) overrides it, which kscale's tests use to
/// exercise hangs quickly.
fn trial_timeout(
    w: &WorkloadDef,
    params: &std::collections::BTreeMap<String, String>,
    trial_time_s: f64,
) -> Duration {
    std::env::var("KSCALE_TRIAL_TIMEOUT")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or_else(|| w.time_limit(&kscale_core::Params(params.clone()), trial_time_s))
}

#[cfg(test)]
mod tests {
    use super::{unmeasurable, Standing};
    use std::collections::BTreeMap;

    #[test]
    fn a_case_that_cannot_converge_is_left_out_while_its_family_keeps_others() {
        let p = |k: &str| -> BTreeMap<String, String> {
            [("procs".to_string(), k.to_string())].into_iter().collect()
        };
        let (two, eight) = (p("2"), p("8"));
        let st = |workload, params, cpus, usable| Standing {
            workload,
            params,
            cpus,
            usable,
        };
        // ctx.lat procs=2 on all CPUs cannot converge; its one-CPU twin
        // converged; procs=8 is measuring on both.
        let cases = [
            st("ctx.lat", &two, "1", true),
            st("ctx.lat", &two, "all", true),
            st("ctx.lat", &eight, "1", true),
            st("ctx.lat", &eight, "all", true),
            st("mem.rd", &two, "all", true),
        ];
        assert!(unmeasurable(&cases, 1));
        // The family's last usable case on all CPUs stays, NOT CONVERGED:
        // another family's case does not count.
        let cases = [
            st("ctx.lat", &two, "1", true),
            st("ctx.lat", &two, "all", true),
            st("ctx.lat", &eight, "1", true),
            st("ctx.lat", &eight, "all", false),
            st("mem.rd", &two, "all", true),
        ];
        assert!(!unmeasurable(&cases, 1));
        // Nor on the twin's configuration.
        let cases = [
            st("ctx.lat", &two, "1", true),
            st("ctx.lat", &two, "all", true),
            st("ctx.lat", &eight, "1", false),
            st("ctx.lat", &eight, "all", true),
        ];
        assert!(!unmeasurable(&cases, 1));
    }
}
