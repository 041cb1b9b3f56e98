//! One run's life, the same for every command that measures (run, study,
//! check, each step of tune): prepared (options checked, label checked,
//! the idle-CPU request held, peers greeted) before the store is touched;
//! created, or resumed, in the store; executed; and finished with its
//! status however the execution ended.

use super::args::RunOptions;
use super::peers::PeerSet;
use super::progress::duration;
use super::{capacity, gauge, plan, runner, GIT_REV, VERSION};
use crate::error::{user, Interrupted};
use crate::idle::IdleHold;
use anyhow::Result;
use kscale_store::costs::EarlierCosts;
use kscale_store::{NewRun, RunStatus, Store};

/// How a command begins its run.
pub enum Start<'a> {
    /// A new run of these options, under this label.
    New {
        label: String,
        opts: Box<RunOptions>,
        capacity: bool,
    },
    /// `--resume RUN`.
    Resume(&'a str),
}

/// The one entry point of a measuring command: prepares, opens the store
/// (`open(false)` creates it when needed, `open(true)` wants it to exist),
/// refuses a machine kscale has left changed, creates or resumes the run
/// and executes it.
pub fn measure(
    start: Start<'_>,
    token: Option<&str>,
    progress: bool,
    open: impl FnOnce(bool) -> Result<Store>,
) -> Result<(Store, i64)> {
    crate::signals::install();
    let id = match start {
        Start::Resume(spec) => {
            let store = open(true)?;
            let id = resume(&store, spec, token)?.execute(progress)?;
            (store, id)
        }
        Start::New {
            label,
            opts,
            capacity,
        } => {
            let prepared = prepare(label, *opts, capacity, token)?;
            let store = open(false)?;
            super::guard::refuse_if_unrestored(&store)?;
            let id = prepared.create(&store)?.execute(progress)?;
            (store, id)
        }
    };
    Ok(id)
}

/// A new run, ready to be created: everything that can refuse it has.
pub struct Prepared {
    label: String,
    opts: RunOptions,
    snapshot: serde_json::Value,
    idle: IdleHold,
    peers: Option<PeerSet>,
}

/// Checks the label, takes the machine's snapshot, holds the idle-CPU
/// request and greets the peers — before the run exists, so that a wrong
/// token or an unreachable peer stops here with nothing measured.
/// `capacity`: the plan's workloads that have a capacity param are
/// searched (`run --capacity`, `study`), the others measured as planned.
pub fn prepare(
    label: String,
    mut opts: RunOptions,
    capacity: bool,
    token: Option<&str>,
) -> Result<Prepared> {
    // Stored with the run, so that `--resume` searches again.
    opts.capacity = capacity;
    super::args::check_label(&label)?;
    let mut snapshot = kscale_sys::snapshot::take(VERSION, GIT_REV);

    let idle = crate::idle::hold_for_run(opts.cpu_idle, &mut snapshot)?;
    let mut peers = None;
    if !opts.peers.is_empty() {
        let set = PeerSet::connect(&opts.peers, token)?;
        snapshot["peers"] = set.snapshots();
        peers = Some(set);
    }
    Ok(Prepared {
        label,
        opts,
        snapshot,
        idle,
        peers,
    })
}

/// A run in the store, about to be measured.
pub struct Active<'s> {
    store: &'s Store,
    id: i64,
    opts: RunOptions,
    peers: Option<PeerSet>,
    /// Held until the run ends.
    _idle: IdleHold,
}

impl Prepared {
    /// Creates the run in `store`, with the command line as every run
    /// stores it, and says what it will measure.
    pub fn create(self, store: &Store) -> Result<Active<'_>> {
        let new = NewRun {
            label: self.label,
            kscale_version: VERSION.into(),
            git_rev: GIT_REV.into(),
            // The store masks passwords and tokens in what it records.
            args: std::env::args().collect(),
            options: serde_json::to_value(&self.opts)?,
            snapshot: self.snapshot,
        };
        let id = store.create_run(&new)?;
        // Said once the run exists, after everything that can refuse it.
        for o in kscale_sys::process::other_runs() {
            eprintln!(
                "kscale: warning: another kscale is measuring on this machine (pid {}: {}); the two runs measure each other",
                o.pid, o.cmdline
            );
        }
        let rule = &self.opts.rule;
        eprintln!(
            "kscale: run {id} ({}): {} cases, CI {}@{}, {}–{} trials{}{}, db {}",
            new.label,
            self.opts.plan.len(),
            rule.width_pct,
            rule.confidence_pct,
            rule.min_trials,
            rule.max_trials,
            match (self.opts.budget_s, rule.case_budget_s) {
                (Some(b), _) => format!(
                    " within {b} s in all{}",
                    self.opts
                        .budget
                        .map(|c| format!(", ends by {}", clock_after(c.ends_in_s())))
                        .unwrap_or_default()
                ),
                (None, Some(b)) => format!(" or {b} s a case"),
                (None, None) => String::new(),
            },
            self.opts
                .pace_s()
                .map(|g| format!(", paced {g:.1} s apart"))
                .unwrap_or_default(),
            store.path().display()
        );
        eprintln!("kscale: {}", self.idle.why);
        Ok(Active {
            store,
            id,
            opts: self.opts,
            peers: self.peers,
            _idle: self.idle,
        })
    }
}

/// The time of day (UTC, to the minute) `secs` from now: when a budgeted
/// run says it will end, its ETA, in its first line.
fn clock_after(secs: f64) -> String {
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
        + secs.max(0.0);
    let minute = (at / 60.0).round() as u64 % (24 * 60);
    format!("{:02}:{:02} UTC", minute / 60, minute % 60)
}

/// Takes up a killed or interrupted run at its first unfinished case, with
/// its stored options.
pub fn resume<'s>(store: &'s Store, spec: &str, token: Option<&str>) -> Result<Active<'s>> {
    let id = store.resolve(spec)?;
    super::guard::refuse_if_unrestored(store)?;
    let row = store.run(id)?;
    if row.run_status() == Some(RunStatus::Complete) {
        return Err(user(format!(
            "run {id} ({}) is already complete; nothing to resume",
            row.label
        )));
    }
    refuse_if_live(&row)?;
    let opts: RunOptions = serde_json::from_value(row.options.clone()).map_err(|e| {
        user(format!(
            "run {id} cannot be resumed: its stored options are unreadable ({e})"
        ))
    })?;
    let peers = if opts.peers.is_empty() {
        None
    } else {
        Some(PeerSet::connect(&opts.peers, token)?)
    };
    let idle = crate::idle::hold(opts.cpu_idle)?;
    eprintln!("kscale: {}", idle.why);
    store.set_run_status(id, RunStatus::Running)?;
    eprintln!(
        "kscale: resuming run {id} ({}) at its first unfinished case",
        row.label
    );
    Ok(Active {
        store,
        id,
        opts,
        peers,
        _idle: idle,
    })
}

/// A run that still reads `running` has a live process here, or one on
/// another host that only that host can judge: resuming it now would
/// measure its cases twice at once. Runs stored before owners were
/// recorded cannot be judged and are resumed as before.
fn refuse_if_live(row: &kscale_store::RunRow) -> Result<()> {
    let (Some(o), Some(RunStatus::Running)) = (&row.owner, row.run_status()) else {
        return Ok(());
    };
    let here = kscale_store::owner::Here::current().map(|h| h.host.as_str());
    Err(user(if here == Some(o.host.as_str()) {
        format!(
            "run {} ({}) is still running as process {}; resume it once `kscale results` shows it killed",
            row.id, row.label, o.pid
        )
    } else {
        format!(
            "run {} ({}) is running on host {} (process {}), which only that host can judge; resume it there",
            row.id, row.label, o.host, o.pid
        )
    }))
}

impl Active<'_> {
    /// The run's id in the store.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// Measures every unfinished case and stores how the run ended; returns
    /// the run's id.
    pub fn execute(mut self, progress: bool) -> Result<i64> {
        // Started here unless the command started it (study).
        let budget = self.opts.budget_from(std::time::Instant::now());
        let (store, id) = (self.store, self.id);
        let cpus = gauge::used_cpus(&self.opts);
        let before = gauge::begin(store, id, &cpus);
        // What the cases cost in earlier runs here: the outlook's and the
        // searches' bound's best guess of what they cost again.
        let earlier = if self.opts.budget_s.is_none() {
            super::costs::earlier_costs(store, id)
        } else {
            Default::default()
        };
        // What the whole plan's other cases take: without a budget, the
        // searches' shares are of that (only such a run bounds them so).
        let left = unfinished(store, id, &self.opts);
        // A resumed run's cases ahead as its progress line will see them,
        // taught by its finished ones (runner::resumed_left_s).
        let resumed = self
            .opts
            .budget_s
            .is_none()
            .then(|| runner::resumed_left_s(store, id, &not_searched(&self.opts), &earlier))
            .flatten();
        let rest_s = (self.opts.capacity && self.opts.budget_s.is_none()).then(|| capacity::Rest {
            shares_of_s: kept_rest_s(store, id, self.opts.search_rest_s, || {
                expected_s(&not_searched(&self.opts), before.as_deref(), &earlier).0
            }),
            left_s: resumed
                .unwrap_or_else(|| expected_s(&not_searched(&left), before.as_deref(), &earlier).0),
        });
        if let Some(before) = &before {
            let shares_of = rest_s.map(|r| r.shares_of_s);
            let searches = capacity::left(store, id, &self.opts, shares_of);
            say_noise(before, &left, &earlier, resumed, searches);
        }
        let done = if self.opts.capacity {
            capacity::run(store, id, &self.opts, rest_s, progress, self.peers.as_mut())
        } else {
            runner::execute(store, id, &self.opts, progress, self.peers.as_mut())
        };
        if done.is_ok() {
            if let Some(all) = gauge::end(store) {
                for line in gauge::describe(&all) {
                    eprintln!("kscale: the machine over the run: {line}");
                }
            }
            if let Some(b) = budget {
                eprintln!("kscale: {}", super::budget::ledger_line(&b, &b.drawn()));
            }
        } else {
            gauge::abandon();
        }
        let others = gauge::others_seen();
        if !others.is_empty() {
            eprintln!(
                "kscale: warning: other kscale runs measured on this machine during run {id} (pids {}): its figures and theirs measure each other",
                others
                    .iter()
                    .map(|o| o.pid.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let _ = store.note_concurrent(
                id,
                &others
                    .iter()
                    .map(|o| format!("pid {}: {}", o.pid, o.cmdline))
                    .collect::<Vec<_>>(),
            );
        }
        finish(store, id, done)?;
        Ok(id)
    }
}

/// What the gauge's noise means for this run, said before its first
/// trial: each CPU's speed and spread, the trials a case needs for the
/// run's interval at the noisiest CPU's spread, and, under a budget, how
/// many of its converging cases that buys (docs/noise.md, "The gauge and
/// the control").
/// `resumed`: how long a resumed run's cases left take at what its
/// finished ones took ([`runner::resumed_left_s`]); `searches`: the
/// searches left to answer and at most how long they take
/// ([`capacity::left`]).
fn say_noise(
    readings: &[kscale_core::noise::Reading],
    opts: &RunOptions,
    earlier: &EarlierCosts,
    resumed: Option<f64>,
    searches: (usize, Option<f64>),
) {
    for line in gauge::describe(readings) {
        eprintln!("kscale: gauge: {line}");
    }
    let rule = &opts.rule;
    let Some(o) = (match opts.budget_s {
        Some(_) => gauge::fit_to_noise(&mut opts.clone(), readings, false).1,
        None => Some(kscale_core::noise::outlook(
            gauge::planned_cvs(readings).0,
            rule.width_pct / 100.0,
            rule.confidence_pct / 100.0,
            rule.max_trials,
            &super::costs::guessed_costs(opts),
            None,
        )),
    }) else {
        return;
    };
    if o.of == 0 {
        return;
    }
    let trials = if o.trials >= rule.max_trials {
        format!("more than {} trials", rule.max_trials)
    } else {
        format!("~{} trials", o.trials)
    };
    let thread = on_thread_clock(readings, opts, &o);
    let wall_cv = gauge::worst_cv(readings);
    let planned = planned_at(readings, &o, wall_cv);
    eprintln!(
        "kscale: gauge: at a gauge CV of {:.0} % (the CPU loop's or the system call's, the larger){planned} a {} % interval needs {trials} a case here{thread}{}",
        wall_cv * 100.0,
        rule.width_pct,
        match opts.budget_s {
            Some(b) => format!(
                "; the {b:.0} s budget can decide about {} of {} converging cases (predicted converged: {:.0} %)",
                o.decidable,
                o.of,
                100.0 * o.decidable as f64 / o.of as f64
            ),
            None => how_long(readings, opts, earlier, resumed, searches),
        }
    );
}

/// [`say_noise`]'s clause for cases timed on their thread's CPU clock,
/// which meet the machine on that clock (docs/host.md, "The thread's own
/// clock"); empty when the plan has none or that clock is no steadier.
fn on_thread_clock(
    readings: &[kscale_core::noise::Reading],
    opts: &RunOptions,
    o: &kscale_core::noise::Outlook,
) -> String {
    let rule = &opts.rule;
    let on_thread = opts
        .plan
        .iter()
        .filter_map(|e| kscale_workloads::find(&e.workload))
        .any(|w| w.clock == kscale_workloads::Clock::Thread);
    let thread_cv = gauge::planned_cvs(readings).1;
    if !(on_thread && thread_cv < o.cv) {
        return String::new();
    }
    let n = kscale_core::noise::trials_needed(
        thread_cv,
        rule.width_pct / 100.0,
        rule.confidence_pct / 100.0,
        rule.max_trials,
    );
    format!(
        " (cases timed on their thread's CPU clock: CV {:.0} %, ~{n} trials)",
        thread_cv * 100.0
    )
}

/// [`say_noise`]'s clause on the spread a case is planned at, where it is
/// below the wall's (`wall_cv`): why (gauge::plan_wall_cv). Said only
/// where the two differ as printed, to the percent.
fn planned_at(
    readings: &[kscale_core::noise::Reading],
    o: &kscale_core::noise::Outlook,
    wall_cv: f64,
) -> String {
    if gauge::loop_keeps_whole(readings) {
        format!(
            ", a case is planned at the CPU loop's {:.0} %, as steady as keeps the plan whole; its pilot reads what the kernel paths add (docs/method.md, \"Planning to the noise\"):",
            o.cv * 100.0
        )
    } else if (o.cv * 100.0).round() < (wall_cv * 100.0).round() {
        format!(
            ", {:.0} % on the thread's CPU clock: the rest is other tasks' time, which each trial records and the fit takes out of its interval (docs/method.md, \"Others on the trial's CPUs\"), so a case is planned at {:.0} %:",
            o.cv * 100.0,
            o.cv * 100.0
        )
    } else {
        ",".into()
    }
}

/// [`say_noise`]'s clause without a budget, where every case runs to its
/// rule: how long that takes at this noise, said before it starts, with
/// what the searches have left of their bounded shares.
fn how_long(
    readings: &[kscale_core::noise::Reading],
    opts: &RunOptions,
    earlier: &EarlierCosts,
    resumed: Option<f64>,
    searches: (usize, Option<f64>),
) -> String {
    let rest = not_searched(opts);
    let (rest_s, known) = expected_s(&rest, Some(readings), earlier);
    let search = match searches {
        (0, _) => String::new(),
        (n, Some(s)) => format!(
            ", and its {n} capacity {} at most {} more",
            if n == 1 { "search" } else { "searches" },
            duration(s)
        ),
        (_, None) => ", capacity searches aside".into(),
    };
    let (rest_s, at) = match resumed {
        Some(s) => (s, " at what its finished cases took".to_string()),
        None if known > 0 => (
            rest_s,
            format!(" at that ({known} of them at what they took in this machine's earlier runs)"),
        ),
        // Nothing here says what the cases' own spread asks:
        // `ctx.lat`'s processes waiting on each other took 5.2
        // trials a case where the gauge asked 3 (docs/budget.md,
        // "How long").
        None => (
            rest_s,
            " at that, if no case's own spread asks more (none was measured on this machine before; the progress lines revise it)".into(),
        ),
    };
    let n = rest.plan.len();
    format!(
        "; its {n} {} about {}{at}{search}",
        if n == 1 { "case takes" } else { "cases take" },
        duration(rest_s),
    )
}

/// The other cases' seconds the searches' shares are of: those the run's
/// first sitting guessed (`kept`, from its stored options), else `guess`,
/// stored for the sittings after this one. Guessed again at each resume,
/// the shares would follow the hour: a full study resumed at a gauge CV of
/// 3 % guessed 8 trials a case where its first sitting had guessed 3, and
/// its searches, cut short by their shares then, measured on.
fn kept_rest_s(store: &Store, id: i64, kept: Option<f64>, guess: impl FnOnce() -> f64) -> f64 {
    if let Some(s) = kept {
        return s;
    }
    let s = guess();
    if let Err(e) = store.set_run_option(id, "search_rest_s", s.into()) {
        eprintln!("kscale: warning: run {id}'s searches' shares not stored ({e:#}): a resumed run guesses them again");
    }
    s
}

/// The run's options with only the cases it has yet to finish: a resumed
/// run's outlook is of what is left of it.
fn unfinished(store: &Store, id: i64, opts: &RunOptions) -> RunOptions {
    let mut o = opts.clone();
    if let Ok(run) = store.load_run(id) {
        let done: std::collections::HashSet<kscale_core::CaseKey> = run
            .cases
            .into_iter()
            .filter(|c| c.status != kscale_store::CaseStatus::Pending)
            .map(|c| c.key)
            .collect();
        o.plan.retain(|e| !done.contains(&e.key()));
    }
    o
}

/// The run's options with the cases a capacity search measures taken out
/// of its plan (all of them when the run does not search).
fn not_searched(opts: &RunOptions) -> RunOptions {
    let mut o = opts.clone();
    if opts.capacity {
        o.plan.retain(|e| !plan::searched(e));
    }
    o
}

/// Seconds the plan's cases take without a budget, each to its rule: a
/// case measured in an earlier run here as long as it took then, with
/// what those runs spent around their trials; the others at the trials the
/// gauge's noise needs (the rule's least without a gauge). And how many
/// were known from earlier runs.
fn expected_s(
    opts: &RunOptions,
    readings: Option<&[kscale_core::noise::Reading]>,
    earlier: &EarlierCosts,
) -> (f64, usize) {
    let overhead = earlier.overhead.unwrap_or(1.0);
    let mut rest = opts.clone();
    let mut known_s = 0.0;
    rest.plan.retain(|e| match earlier.cases.get(&e.key()) {
        Some(c) => {
            known_s += c.wall_s * overhead;
            false
        }
        None => true,
    });
    let known = opts.plan.len() - rest.plan.len();
    let guessed = guessed_s(&rest, readings);
    // Paced, each workload's cases take the span at least.
    let mut workloads: Vec<&str> = opts.plan.iter().map(|e| e.workload.as_str()).collect();
    workloads.sort_unstable();
    workloads.dedup();
    let paced = opts.span_s.unwrap_or(0.0) * workloads.len() as f64;
    ((known_s + guessed).max(paced), known)
}

/// [`expected_s`] for cases not measured here before.
fn guessed_s(opts: &RunOptions, readings: Option<&[kscale_core::noise::Reading]>) -> f64 {
    let rule = &opts.rule;
    let trials = readings.map_or(rule.min_trials, |r| {
        kscale_core::noise::trials_needed(
            gauge::planned_cvs(r).0,
            rule.width_pct / 100.0,
            rule.confidence_pct / 100.0,
            rule.max_trials,
        )
    });
    let n = trials.clamp(rule.min_trials, rule.max_trials) as f64;
    let conv: f64 = super::costs::guessed_costs(opts)
        .iter()
        .map(|(per, once)| once + per * n)
        .sum();
    let median: f64 = opts
        .plan
        .iter()
        .filter_map(|e| kscale_workloads::find(&e.workload))
        .filter_map(|w| super::costs::guessed_median_cost(w, opts))
        .sum();
    conv + median
}

/// The error of a run every case of which failed: `run` and `check` stop
/// on it, a tuning study records the step and goes on.
#[derive(Debug)]
pub struct AllFailed {
    pub run_id: i64,
    /// The first case's error.
    pub first: String,
}

impl std::fmt::Display for AllFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "every case of run {id} failed (first: {}); `kscale show {id}` lists each error",
            self.first,
            id = self.run_id
        )
    }
}

impl std::error::Error for AllFailed {}

/// A run whose cases all failed measured nothing: it is `failed`. One in
/// which some cases failed is `complete`: its other results stand, and every
/// table lists the failures with their errors. An execution that stopped
/// on a signal is `interrupted`, on an error `failed`.
fn finish(store: &Store, id: i64, done: Result<()>) -> Result<()> {
    if let Err(e) = done {
        ended_by(store, id, &e);
        return Err(e);
    }
    let row = store.run(id)?;
    if row.cases_total > 0 && row.cases_failed == row.cases_total {
        store.set_run_status(id, RunStatus::Failed)?;
        let first = store
            .load_run(id)?
            .cases
            .into_iter()
            .find_map(|c| {
                c.error
                    .map(|e| format!("{} [cpus {}]: {e}", c.key.workload, c.key.cpus))
            })
            .unwrap_or_default();
        return Err(AllFailed { run_id: id, first }.into());
    }
    store.set_run_status(id, RunStatus::Complete)?;
    Ok(())
}

/// Stores how an execution that stopped on `e` left the run: interrupted
/// by a signal, else failed.
fn ended_by(store: &Store, id: i64, e: &anyhow::Error) {
    let status = if e.downcast_ref::<Interrupted>().is_some() {
        RunStatus::Interrupted
    } else {
        RunStatus::Failed
    };
    let _ = store.set_run_status(id, status);
}

/// A run of an interleaved set, with the switch that puts the machine in
/// its configuration before each of its turns.
pub struct Interleaved<'s, 'f> {
    pub run: Active<'s>,
    pub switch: Box<dyn FnMut() -> Result<()> + 'f>,
}

/// Measures several created runs together, their trials interleaved in a
/// random order drawn from `seed` (docs/tune.md, "Interleaved steps"). An
/// error of the whole (a signal, a switch that failed) ends every run with
/// it; otherwise each run ends as [`Active::execute`] ends it, and its
/// result (its id, or [`AllFailed`]) is returned in the arms' order.
pub fn execute_interleaved(
    mut runs: Vec<Interleaved<'_, '_>>,
    progress: bool,
    seed: u64,
) -> Result<Vec<Result<i64>>> {
    let Some(store) = runs.first().map(|r| r.run.store) else {
        return Ok(Vec::new());
    };
    if runs.iter().any(|r| r.run.opts.capacity) {
        anyhow::bail!("a --capacity search cannot be interleaved with other runs");
    }
    let done = {
        let mut arms: Vec<runner::interleave::Arm<'_>> = runs
            .iter_mut()
            .map(|r| runner::interleave::Arm {
                run_id: r.run.id,
                opts: &r.run.opts,
                peers: r.run.peers.as_mut(),
                switch: &mut *r.switch,
            })
            .collect();
        runner::interleave::execute(store, &mut arms, progress, seed)
    };
    if let Err(e) = done {
        for r in &runs {
            ended_by(store, r.run.id, &e);
        }
        return Err(e);
    }
    Ok(runs
        .iter()
        .map(|r| finish(store, r.run.id, Ok(())).map(|()| r.run.id))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store holding one run of a plan of `workloads` on CPU set 1, and
    /// the run's options.
    fn a_run(workloads: &[&str]) -> (tempfile::TempDir, Store, i64, RunOptions) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("k.db")).unwrap();
        let plan: Vec<_> = workloads
            .iter()
            .map(
                |w| serde_json::json!({"workload": w, "params": {}, "cpus_name": "1", "cpus": [0]}),
            )
            .collect();
        let options = serde_json::json!({
            "targets": [], "suite": null, "rule": kscale_core::StopRule::DEFAULT,
            "trial_time_s": 0.5, "quick": false, "dir": "/tmp", "cpus": [], "plan": plan,
        });
        let id = store
            .create_run(&NewRun {
                label: "t".into(),
                kscale_version: "0".into(),
                git_rev: "0".into(),
                args: vec![],
                options: options.clone(),
                snapshot: serde_json::json!({}),
            })
            .unwrap();
        let opts = serde_json::from_value(options).unwrap();
        (dir, store, id, opts)
    }

    /// The plan's `i`th case, stored in run `id` with nothing measured.
    fn stored_case(store: &Store, id: i64, opts: &RunOptions, i: usize) -> i64 {
        let e = &opts.plan[i];
        let w = kscale_workloads::find(&e.workload).unwrap();
        let metrics = kscale_store::MetricRow::rows_of(w.metrics);
        store
            .ensure_case(id, i as i64, &e.key(), &e.cpus, &metrics, w.rule)
            .unwrap()
    }

    /// `case` finished, converged.
    fn converged(store: &Store, case: i64) {
        store
            .finish_case(
                case,
                kscale_store::CaseStatus::Done,
                Some(true),
                None,
                None,
                &[],
            )
            .unwrap();
    }

    /// A resumed run's outlook of its cases ahead is taught by its
    /// finished ones, as its progress line is: a case of a workload not
    /// yet seen takes the trials its family's finished cases took, at
    /// their seconds a trial over their guess. A new run has none.
    #[test]
    fn a_resumed_runs_outlook_is_what_its_finished_cases_took() {
        let (_dir, store, id, opts) = a_run(&["syscall.null", "syscall.read"]);
        let earlier = EarlierCosts::default();
        assert_eq!(runner::resumed_left_s(&store, id, &opts, &earlier), None);
        let case = stored_case(&store, id, &opts, 0);
        let walls: Vec<(bool, f64)> = (0..10).map(|idx| (idx == 0, 0.5)).collect();
        crate::engine::add_timed_trials(&store, case, &walls);
        assert_eq!(runner::resumed_left_s(&store, id, &opts, &earlier), None);
        converged(&store, case);
        // Ten trials where four were guessed, at 0.5 s where 0.55 s was:
        // `syscall.read` is expected at ten trials of 0.5 s, not four.
        let left = runner::resumed_left_s(&store, id, &opts, &earlier).unwrap();
        assert!((left - 5.0).abs() < 1e-9, "{left}");
    }

    /// A case the earlier sitting started and left unfinished is expected
    /// at the trials its own spread asks, as the first progress line
    /// expects it (both build it with `Unit::taken_up`), not at what its
    /// family's finished cases took. Before they shared it, the outlook
    /// took `syscall.read`, five trials in at a CV of 30 %, at the one
    /// more trial `syscall.null`'s four asked (0.5 s left).
    #[test]
    fn a_resumed_runs_started_case_is_expected_at_its_own_need() {
        let (_dir, store, id, opts) = a_run(&["syscall.null", "syscall.read"]);
        let earlier = EarlierCosts::default();
        let cases: Vec<i64> = (0..2).map(|i| stored_case(&store, id, &opts, i)).collect();
        crate::engine::add_timed_trials(&store, cases[0], &[(true, 0.5); 4]);
        converged(&store, cases[0]);
        let metric = kscale_workloads::find("syscall.read")
            .unwrap()
            .primary()
            .name;
        let histograms = Default::default();
        for (idx, v) in [0.1, 0.1, 0.07, 0.13, 0.1, 0.06].into_iter().enumerate() {
            let values = [(metric.to_string(), v)].into_iter().collect();
            let t = kscale_store::NewTrial {
                idx: idx as i64,
                warmup: idx == 0,
                wall_s: 0.5,
                iterations: None,
                values: &values,
                accounting: None,
                histograms: &histograms,
                roles: &[],
            };
            store.add_trial(cases[1], &t).unwrap();
        }
        let left = runner::resumed_left_s(&store, id, &opts, &earlier).unwrap();
        assert!(left >= 5.0, "{left}");
    }

    /// The first sitting's guess is stored in the run's options and read
    /// back as the resumed run's options; a resumed run does not guess.
    #[test]
    fn a_resumed_run_keeps_its_searches_shares() {
        let (_dir, store, id, _) = a_run(&[]);
        assert_eq!(kept_rest_s(&store, id, None, || 1200.0), 1200.0);
        let stored: RunOptions = serde_json::from_value(store.run(id).unwrap().options).unwrap();
        assert_eq!(stored.search_rest_s, Some(1200.0));
        let resumed = kept_rest_s(&store, id, stored.search_rest_s, || panic!("guessed again"));
        assert_eq!(resumed, 1200.0);
    }
}
