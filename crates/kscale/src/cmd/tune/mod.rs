//! `kscale tune PLAN.toml`: a cumulative tuning study (docs/tune.md). The
//! baseline, then each step with every earlier step's settings, then the
//! baseline again to catch drift, each measured as one run under the usual
//! run rules. Consecutive steps whose settings switch fast have their
//! states' trials interleaved in random order; the others are measured one
//! after the other. Every setting is journalled before it is changed and
//! restored however the study ends; `--restore` replays what a SIGKILL left
//! behind.

pub mod steps;
mod switch;

use crate::engine::args::{options, RunArgs, RunOptions, Targets};
use crate::engine::guard::{refuse_if_unrestored, Journal};
use crate::engine::hotplug::CpuMode;
use crate::engine::lifecycle::{self, AllFailed, Interleaved};
use crate::error::user;
use crate::output::{out, Format};
use anyhow::Result;
use kscale_report::staircase::{self, Measured, StepData};
use kscale_store::{RunStatus, Store, TuneStep};
use kscale_sys::settings::{self, LoopFs, Restore};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use steps::{Plan, Setting};
use switch::Switcher;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kscale tune examples/tune/netperf-gigabit.toml --quick     the seed's NetBench-style staircase
  kscale tune plan.toml --check                              parse and validate only
  kscale tune --restore                                      put back what a killed study changed")]
pub struct Args {
    /// The plan: a TOML file with [target] and [[step]]s (docs/tune.md).
    #[arg(value_name = "PLAN.toml", required_unless_present = "restore")]
    plan: Option<PathBuf>,
    /// Restore every setting a killed kscale left changed, newest first, and exit.
    #[arg(long, conflicts_with_all = ["plan", "check", "quick", "label"])]
    restore: bool,
    /// Parse and validate the plan, change nothing, measure nothing.
    #[arg(long)]
    check: bool,
    /// Where to write the HTML report with the staircase chart (default: LABEL.html).
    #[arg(short, long, value_name = "FILE.html")]
    output: Option<PathBuf>,
    #[command(flatten)]
    run: RunArgs,
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    if args.restore {
        let path = super::db_path(db.clone());
        if !path.exists() {
            out!("nothing to restore (no database at {})\n", path.display())?;
            return Ok(ExitCode::SUCCESS);
        }
        let store = super::open_existing(db)?;
        return restore_command(&store);
    }
    if let Some(d) = &args.run.span {
        // A plan's steps interleave round by round, which already spreads
        // every step over the same spells of the machine; pacing is not
        // implemented in that loop, so the flag is refused, not dropped.
        return Err(user(format!(
            "--span {d} does not apply to tune: its steps are interleaved round by round (use --min-trials for more rounds)"
        )));
    }
    let path = args.plan.clone().unwrap_or_default();
    let (plan, text) = steps::load(&path)?;
    if args.check {
        print_check(&path, &plan, args.run.cpu_mode == CpuMode::Hotplug)?;
        return Ok(ExitCode::SUCCESS);
    }
    let label = match &args.run.label {
        Some(l) => l.clone(),
        None => path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "tune".into()),
    };
    crate::engine::args::check_label(&label)?;
    let dir = match &args.run.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir()
            .map_err(|e| user(format!("cannot use the current directory: {e}")))?,
    };
    // Run options (--ci, --trial-time, --dir …) are checked before anything changes.
    let first = State {
        params: plan.params.clone(),
        cpus: plan.cpus.clone(),
        mount_options: String::new(),
        fs: None,
    };
    run_options(&args, &plan, &first, &dir)?;
    // Before any thread exists: a namespace is per thread.
    if plan.netns {
        settings::private_netns().map_err(user)?;
    }
    crate::signals::install();
    let store = super::open_store(db)?;
    refuse_if_unrestored(&store)?;

    let tune_id = store.create_tune(&label, &path.display().to_string(), &text)?;
    let journal = Journal {
        store: &store,
        tune_id: Some(tune_id),
    };
    eprintln!(
        "kscale: tune {tune_id} ({label}): baseline, {} step(s), baseline again; db {}",
        plan.steps.len(),
        store.path().display()
    );
    let outcome = measure_all(&args, &plan, &label, &dir, tune_id, &journal);
    if let Err(e) = close(&store, tune_id, &journal, outcome) {
        if let Some(i) = e.downcast_ref::<crate::error::Interrupted>() {
            eprintln!(
                "kscale: interrupted by signal {}; every setting was restored",
                i.0
            );
            return Ok(ExitCode::from((128 + i.0).clamp(0, 255) as u8));
        }
        return Err(e);
    }
    let steps = load_steps(&store, tune_id)?;
    let stairs = staircase::build(&steps, &super::Registry);
    let tables: Vec<kscale_report::Table> = stairs.iter().map(staircase::table).collect();
    out!("{}", Format::Terminal.exporter().tables(&tables))?;
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{label}.html")));
    write_report(&store, tune_id, &output)?;
    eprintln!(
        "kscale: report with the staircase chart: {}",
        output.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `--check`: the plan's steps, and how they would be measured — which
/// are interleaved and which wait for a slow switch, and why.
fn print_check(path: &Path, plan: &Plan, hotplug: bool) -> Result<()> {
    out!(
        "{}: {} workload(s), {} step(s): {}\n",
        path.display(),
        plan.workloads.len(),
        plan.steps.len(),
        plan.steps
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    for (first, last) in plan.groups(hotplug) {
        let name = |i: usize| match i {
            0 => "baseline",
            i => plan.steps[i - 1].name.as_str(),
        };
        if first > 0 {
            let why = plan.steps[first - 1].slow_switch(hotplug);
            out!(
                "  {} sequential: {}\n",
                name(first),
                why.unwrap_or_default()
            )?;
        }
        if last > first {
            let names: Vec<&str> = (first..=last).map(name).collect();
            out!("  interleaved: {}\n", names.join(", "))?;
        }
    }
    Ok(())
}

/// Every ending of a study comes through here — normal, failed,
/// interrupted: every setting restored, the study's status stored. A
/// setting that could not be restored outweighs how the measuring ended.
fn close(store: &Store, tune_id: i64, journal: &Journal<'_>, outcome: Result<()>) -> Result<()> {
    let restore_errors = journal.restore_all();
    for e in &restore_errors {
        eprintln!("kscale: could not restore: {e}");
    }
    let status = match &outcome {
        Ok(_) => RunStatus::Complete,
        Err(e) if e.downcast_ref::<crate::error::Interrupted>().is_some() => RunStatus::Interrupted,
        Err(_) => RunStatus::Failed,
    };
    store.set_tune_status(tune_id, status)?;
    if !restore_errors.is_empty() {
        anyhow::bail!(
            "{} setting(s) could not be restored; `kscale tune --restore` retries them",
            restore_errors.len()
        );
    }
    outcome
}

/// The steps of a stored study with their runs, as the report takes them.
pub fn load_steps(store: &Store, tune_id: i64) -> Result<Vec<StepData>> {
    let tune = store.tune(tune_id)?;
    let plan = steps::parse(&tune.plan_file, &tune.plan).ok();
    let mut out = Vec::new();
    for s in store.tune_steps(tune_id)? {
        let settings = plan
            .as_ref()
            .and_then(|p| p.steps.iter().find(|x| x.name == s.name))
            .map(|x| x.settings.iter().map(Setting::describe).collect())
            .unwrap_or_default();
        out.push(StepData {
            name: s.name,
            rationale: s.rationale,
            settings,
            run: match s.run_id {
                Some(id) => Some(store.load_run(id)?),
                None => None,
            },
            error: s.error,
            measured: Measured::decode(s.measured.as_deref()),
        });
    }
    Ok(out)
}

/// The HTML report of a study: its staircases first, then the step runs
/// compared with the baseline as `kscale report` compares runs.
pub fn write_report(store: &Store, tune_id: i64, path: &Path) -> Result<()> {
    let steps = load_steps(store, tune_id)?;
    let tune = store.tune(tune_id)?;
    let runs: Vec<&kscale_store::RunData> = steps.iter().filter_map(|s| s.run.as_ref()).collect();
    let mut report = kscale_report::html::build(&runs, &super::Registry);
    report.title = format!("Tuning study {}", tune.label);
    report
        .sections
        .insert(0, staircase::section(&steps, &super::Registry));
    let text = kscale_report::html::render(&report)
        .map_err(|e| anyhow::anyhow!("rendering the report: {e}"))?;
    std::fs::write(path, text)
        .map_err(|e| user(format!("cannot write {}: {e}", path.display())))?;
    Ok(())
}

/// What the measured steps share and change as they accumulate.
#[derive(Clone)]
struct State {
    params: Vec<(String, Vec<String>)>,
    cpus: String,
    mount_options: String,
    fs: Option<LoopFs>,
}

/// What every step of one study shares.
struct Study<'a> {
    args: &'a Args,
    plan: &'a Plan,
    label: &'a str,
    dir: &'a Path,
    tune_id: i64,
    journal: &'a Journal<'a>,
    /// The interleaved groups' order is drawn from it.
    seed: u64,
}

/// A state of a group that could be applied, ready to be measured.
struct Member {
    seq: usize,
    name: String,
    rationale: String,
    state: State,
}

fn measure_all(
    args: &Args,
    plan: &Plan,
    label: &str,
    dir: &Path,
    tune_id: i64,
    journal: &Journal<'_>,
) -> Result<()> {
    let initial = State {
        params: plan.params.clone(),
        cpus: plan.cpus.clone(),
        mount_options: plan
            .fs
            .as_ref()
            .map(|f| f.options.clone())
            .unwrap_or_default(),
        fs: None,
    };
    let mut state = initial.clone();
    if let Some(f) = &plan.fs {
        if !dir.is_dir() {
            return Err(user(format!("--dir {} is not a directory", dir.display())));
        }
        let fs = LoopFs::in_dir(dir, &tune_id.to_string());
        journal
            .create_fs(&fs, f.size, &f.options)
            .map_err(|e| user(format!("cannot make the plan's filesystem: {e}")))?;
        state.fs = Some(fs);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let study = Study {
        args,
        plan,
        label,
        dir,
        tune_id,
        journal,
        seed: kscale_core::order::fresh_seed(nanos, std::process::id()),
    };
    let hotplug = args.run.cpu_mode == CpuMode::Hotplug;
    for (first, last) in plan.groups(hotplug) {
        study.group(first, last, &mut state)?;
    }
    let n = plan.steps.len();

    if let Some(sig) = crate::signals::interrupted() {
        return Err(crate::error::Interrupted(sig, 0).into());
    }
    // Drift check: every setting back as it was, measured again.
    journal.restore_keeping_fs();
    state = State {
        fs: state.fs,
        ..initial
    };
    let again = Member {
        seq: n + 1,
        name: "baseline-again".into(),
        rationale: "The baseline re-measured after the steps, every setting restored: guards against drift.".into(),
        state,
    };
    study.sequential(
        &again,
        Measured::Sequential(
            "measured after every step, every setting restored: the drift check".into(),
        ),
    )
}

impl Study<'_> {
    /// Applies the states `first..=last` on top of what is applied (step
    /// `first` a slow switch, unless it is the baseline, the others fast)
    /// and measures them: interleaved when two or more could be applied.
    /// The machine is left in the last state that could be applied.
    fn group(&self, first: usize, last: usize, state: &mut State) -> Result<()> {
        if let Some(sig) = crate::signals::interrupted() {
            return Err(crate::error::Interrupted(sig, 0).into());
        }
        let hotplug = self.args.run.cpu_mode == CpuMode::Hotplug;
        let mut members = Vec::new();
        let mut switcher = Switcher::default();
        for seq in first..=last {
            let mut writes = Vec::new();
            let member = if seq == 0 {
                Member {
                    seq,
                    name: "baseline".into(),
                    rationale: "The target as the plan gives it, nothing changed.".into(),
                    state: state.clone(),
                }
            } else {
                let step = &self.plan.steps[seq - 1];
                if !self.apply(seq, state, &mut writes)? {
                    continue;
                }
                Member {
                    seq,
                    name: step.name.clone(),
                    rationale: step.rationale.clone(),
                    state: state.clone(),
                }
            };
            // The slow step's own writes stay as they are through the group.
            if seq == first {
                writes.clear();
            }
            switcher.push(writes);
            members.push(member);
        }
        // Why the group's first state was measured apart from the state
        // before it (or, the baseline alone, from the step after it).
        let slow = |i: usize| {
            let step = &self.plan.steps[i - 1];
            let why = step.slow_switch(hotplug).unwrap_or_default();
            (step.name.as_str(), why)
        };
        let apart = |m: &Member| -> String {
            if m.seq > first {
                let (name, why) = slow(first);
                format!(
                    "step {first} ({name}), which switches slowly ({why}), could not be \
                     applied: the state before it was measured with the steps before that"
                )
            } else if first > 0 {
                slow(first).1
            } else if last == 0 && self.plan.steps.len() > last {
                let (name, why) = slow(last + 1);
                format!("the next step, {name}, switches slowly: {why}")
            } else {
                "no step after it could be applied".into()
            }
        };
        match members.as_slice() {
            [] => Ok(()),
            [m] => self.sequential(m, Measured::Sequential(apart(m))),
            _ => self.interleaved(&members, &switcher, &apart),
        }
    }

    /// Applies step `seq` on top of `state`; a step that cannot be applied
    /// is recorded with its reason, whatever part of it was applied is
    /// restored, and the study goes on without it (false).
    fn apply(
        &self,
        seq: usize,
        state: &mut State,
        writes: &mut Vec<switch::Write>,
    ) -> Result<bool> {
        let step = &self.plan.steps[seq - 1];
        let mark = self.journal.mark()?;
        let saved = state.clone();
        let Err(e) = apply_step(step, state, self.journal, writes) else {
            return Ok(true);
        };
        eprintln!("kscale: step {seq} ({}) failed: {e}", step.name);
        // Later steps build on the ones that worked.
        for err in self.journal.restore_since(mark) {
            eprintln!("kscale: could not restore: {err}");
        }
        *state = saved;
        writes.clear();
        self.record(seq, &step.name, &step.rationale, None, Some(e), None)?;
        Ok(false)
    }

    fn record(
        &self,
        seq: usize,
        name: &str,
        rationale: &str,
        run_id: Option<i64>,
        error: Option<String>,
        measured: Option<&Measured>,
    ) -> Result<()> {
        self.journal.store.add_tune_step(
            self.tune_id,
            &TuneStep {
                seq: seq as i64,
                name: name.into(),
                rationale: rationale.into(),
                run_id,
                error,
                measured: measured.map(Measured::encode),
            },
        )?;
        Ok(())
    }

    fn run_label(&self, m: &Member) -> String {
        format!("{}.{}-{}", self.label, m.seq, m.name)
    }

    /// One state measured as a run of its own.
    fn sequential(&self, m: &Member, measured: Measured) -> Result<()> {
        if let Measured::Sequential(why) = &measured {
            eprintln!("kscale: step {}: {} (sequential: {why})", m.seq, m.name);
        }
        let (store, args) = (self.journal.store, self.args);
        match measure_step(
            store,
            args,
            self.plan,
            &m.state,
            &self.run_label(m),
            self.dir,
        ) {
            Ok(id) => self.record(
                m.seq,
                &m.name,
                &m.rationale,
                Some(id),
                None,
                Some(&measured),
            ),
            Err(e) => {
                let err = Some(format!("{e:#}"));
                self.record(m.seq, &m.name, &m.rationale, None, err, Some(&measured))?;
                Err(e)
            }
        }
    }

    /// The group's states measured together, one run each, their trials
    /// in a fresh random order every round and the machine switched to a
    /// state before each of its trials; then back in the last state.
    fn interleaved(
        &self,
        members: &[Member],
        switcher: &Switcher,
        apart: &dyn Fn(&Member) -> String,
    ) -> Result<()> {
        let store = self.journal.store;
        let mut runs = Vec::new();
        for (k, m) in members.iter().enumerate() {
            let opts = run_options(self.args, self.plan, &m.state, self.dir)?;
            let run = lifecycle::prepare(self.run_label(m), opts, false, None)?.create(store)?;
            let name = m.name.clone();
            let switch = move || {
                switcher
                    .switch(k, settings::write_value)
                    .map_err(|e| anyhow::anyhow!("switching to step {name}: {e}"))
            };
            runs.push(Interleaved {
                run,
                switch: Box::new(switch),
            });
        }
        let ids: Vec<i64> = runs.iter().map(|r| r.run.id()).collect();
        eprintln!(
            "kscale: steps {} interleaved: their trials in a fresh random order every round, \
             the settings switched before each (seed {:#x})",
            members
                .iter()
                .map(|m| format!("{} ({})", m.seq, m.name))
                .collect::<Vec<_>>()
                .join(", "),
            self.seed
        );
        let done = lifecycle::execute_interleaved(runs, self.args.run.progress(), self.seed);
        // The next steps build on the group's last state.
        let back = switcher.switch(members.len() - 1, settings::write_value);
        let interleaved = Measured::Interleaved {
            seed: Some(self.seed),
        };
        let measured = |k: usize| {
            if k > 0 || members[k].seq == 0 {
                interleaved.clone()
            } else {
                Measured::Sequential(apart(&members[k]))
            }
        };
        let results = match done {
            Ok(r) => r,
            Err(e) => {
                for (k, (m, id)) in members.iter().zip(&ids).enumerate() {
                    let err = Some(format!("{e:#}"));
                    self.record(
                        m.seq,
                        &m.name,
                        &m.rationale,
                        Some(*id),
                        err,
                        Some(&measured(k)),
                    )?;
                }
                return Err(e);
            }
        };
        let mut first_error = None;
        for (k, (m, r)) in members.iter().zip(results).enumerate() {
            let (id, err) = match r {
                Ok(id) => (id, None),
                Err(e) => match e.downcast_ref::<AllFailed>() {
                    Some(all) => (all.run_id, None),
                    None => {
                        let msg = format!("{e:#}");
                        first_error.get_or_insert(e);
                        (ids[k], Some(msg))
                    }
                },
            };
            self.record(
                m.seq,
                &m.name,
                &m.rationale,
                Some(id),
                err,
                Some(&measured(k)),
            )?;
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        back.map_err(|e| anyhow::anyhow!("back to step {}: {e}", members[members.len() - 1].name))
    }
}

/// Applies one step's settings in order; the first that cannot be changed
/// fails the step with its reason.
/// Each file written goes to `writes` with its value before, for the
/// switches of an interleaved group.
fn apply_step(
    step: &steps::Step,
    state: &mut State,
    journal: &Journal<'_>,
    writes: &mut Vec<switch::Write>,
) -> Result<(), String> {
    let mut set = |kind: &str, path: PathBuf, value: &str| -> Result<(), String> {
        let old = settings::read_value(&path)?;
        journal.set_file(kind, &path, value)?;
        writes.push((path, old, value.to_string()));
        Ok(())
    };
    for s in &step.settings {
        match s {
            Setting::File { kind, key, value } => {
                let path = match *kind {
                    "sysctl" => settings::sysctl_path(key)?,
                    "thp" => settings::thp_path(key)?,
                    "sched" => settings::sched_path(key)?,
                    "nic" => {
                        let mtu: u32 = value.parse().map_err(|_| format!("bad MTU {value}"))?;
                        journal.set_mtu(key, mtu)?;
                        continue;
                    }
                    other => return Err(format!("unknown file setting {other}")),
                };
                set(kind, path, value)?;
            }
            Setting::Irq { spec, cpus } => {
                let irqs = settings::irqs_matching(spec)?;
                if irqs.is_empty() {
                    return Err(format!("no IRQ in /proc/interrupts matches `{spec}`"));
                }
                for irq in irqs {
                    set("irq_affinity", settings::irq_path(irq), cpus)?;
                }
            }
            Setting::Affinity(c) => state.cpus = c.clone(),
            Setting::Param(k, v) => {
                state.params.retain(|(n, _)| n != k);
                state.params.push((k.clone(), vec![v.clone()]));
            }
            Setting::Mount(o) => {
                let fs = state
                    .fs
                    .as_ref()
                    .ok_or("a mount setting needs [target.fs]")?;
                let new = steps::merge_mount_options(&state.mount_options, o);
                journal.remount(fs, &state.mount_options, &new)?;
                state.mount_options = new;
            }
            Setting::NicOffload { dev, what, .. } => {
                eprintln!(
                    "kscale: skipped nic {dev}.{what}: setting offloads needs ethtool's \
                     SIOCETHTOOL feature ioctl, which kscale does not implement"
                );
            }
        }
    }
    Ok(())
}

/// Measures the target under the current state as one stored run, by
/// the run lifecycle every command shares. A step whose cases all failed
/// is recorded, and the study goes on.
fn measure_step(
    store: &Store,
    args: &Args,
    plan: &Plan,
    state: &State,
    label: &str,
    dir: &Path,
) -> Result<i64> {
    let opts = run_options(args, plan, state, dir)?;
    let run = lifecycle::prepare(label.to_string(), opts, false, None)?.create(store)?;
    match run.execute(args.run.progress()) {
        Ok(id) => Ok(id),
        Err(e) => match e.downcast_ref::<AllFailed>() {
            Some(all) => Ok(all.run_id),
            None => Err(e),
        },
    }
}

/// The options of one step's run, by `kscale run`'s own rules: the plan's
/// workloads with the step's params and CPUs, in the plan's filesystem
/// when it has one.
fn run_options(args: &Args, plan: &Plan, state: &State, dir: &Path) -> Result<RunOptions> {
    let select = Targets {
        targets: plan.workloads.iter().map(|w| w.id()).collect(),
        cpus: vec![state.cpus.clone()],
        params: state
            .params
            .iter()
            .map(|(k, vs)| format!("{k}={}", vs.join(",")))
            .collect(),
        ..Targets::default()
    };
    let mut run = args.run.clone();
    let run_dir = state.fs.as_ref().map_or(dir, |f| f.mountpoint.as_path());
    run.dir = Some(run_dir.to_path_buf());
    options(&select, &run)
}

/// `kscale tune --restore`: replays every unrestored entry of a process
/// that is gone, newest first.
fn restore_command(store: &Store) -> Result<ExitCode> {
    let entries = store.journal_unrestored(None)?;
    if entries.is_empty() {
        out!("nothing to restore\n")?;
        return Ok(ExitCode::SUCCESS);
    }
    let me = std::process::id() as i64;
    let (live, dead): (Vec<_>, Vec<_>) = entries
        .into_iter()
        .partition(|e| e.pid != me && kscale_sys::process::alive(e.pid as i32));
    for e in &live {
        eprintln!(
            "kscale: left {} {}: kscale pid {} is still running and restores it itself",
            e.kind, e.target, e.pid
        );
    }
    let n = dead.len();
    let mut failed = 0;
    for e in dead {
        let what = format!(
            "{} {} = {}",
            e.kind,
            e.target.replace('\n', " on "),
            e.old_value
        );
        match settings::restore(&e.kind, &e.target, &e.old_value) {
            Ok(()) => {
                store.journal_restored(e.id, None)?;
                out!("restored {what}\n")?;
            }
            Err(err) => {
                failed += 1;
                store.journal_note(e.id, &err.to_string())?;
                eprintln!("kscale: could not restore {what}: {err}");
                if matches!(err, Restore::Elsewhere(_)) {
                    continue;
                }
            }
        }
    }
    if failed > 0 {
        anyhow::bail!("{failed} of {n} setting(s) could not be restored (see above)");
    }
    Ok(ExitCode::SUCCESS)
}
