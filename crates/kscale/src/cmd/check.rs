//! `kscale check --baseline RUN TARGETS…`: a regression gate. It measures
//! the targets now, exactly as `kscale run` would, and compares each case
//! with the same case of the baseline run by the test that suits its trials
//! (docs/fleet.md, docs/method.md "Comparing two cases"). A case whose
//! minimum detectable change exceeds the threshold is "cannot tell": its
//! `~` would hide a regression of the threshold's size. The exit status is
//! what CI and `git bisect run` read: 0 good, 1 a case regressed, 125
//! nothing could be measured, or no case could tell ("skip this commit").

use crate::engine::plan::PlanEntry;
use crate::error::{user, Interrupted, UserError};
use crate::output::outln;
use anyhow::Result;
use kscale_core::cpus::base_name;
use kscale_core::noise::{self, Reading};
use kscale_core::twosample::{Test, POWER};
use kscale_core::Direction;
use kscale_report::compare::compare_metric;
use kscale_store::{CaseStatus, RunData, Store};
use kscale_workloads::Clock;
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

/// The chance, over all the cases one check compares, that it calls an
/// unchanged build regressed: each case is tested at this over their
/// number (Bonferroni). One check exits 1 when any case regressed, so at
/// 0.05 per case (two-sided: 0.025 on the worse side) one check in five
/// of ten unchanged cases would alarm; at 0.01 over them all, about one
/// in two hundred (docs/fleet.md).
pub const GATE_ALPHA: f64 = 0.01;

/// `git bisect run` reads 125 as "this commit cannot be tested".
pub const UNMEASURED: u8 = 125;

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 no case is significantly worse than the baseline by more \
than the threshold; 1 at least one is (one line each); 125 the measurement could not be made; \
2 bad input.

Examples:
  kscale check --baseline v6.8 syscall --cpus 1 --quick
  git bisect run kscale check --baseline good --threshold 10% syscall.null --cpus 1"
)]
// The flattened run options are a group named `Args` already.
#[group(skip)]
pub struct Args {
    /// The run to compare with: an id, a label (its latest run), a UUID or `latest`.
    #[arg(long, value_name = "RUN|LABEL")]
    baseline: String,
    /// Smallest change that counts as a regression, in % (`5%` or `5`).
    #[arg(long, value_name = "PCT", default_value = "5%")]
    threshold: String,
    /// Output format.
    #[arg(long, value_enum, default_value = "terminal")]
    format: Format,
    /// Measure the targets N times in a row and test the runs' mean
    /// against the line through the baseline label's runs: each run is
    /// one draw of the machine's spread about that line, so the mean of N
    /// sees a change about √N times smaller (docs/method.md, "The control
    /// as a covariate"). 1 to 20.
    #[arg(long, value_name = "N", default_value_t = 1)]
    repeat: u32,
    /// Report a case regressed on the first runs alone. By default a case
    /// found regressed is measured again alone (as many runs) and stays
    /// regressed only if those runs find it so too: a spell of the
    /// host's moves one run, not two (docs/method.md, "A regression
    /// reproduces").
    #[arg(long)]
    no_confirm: bool,
    #[command(flatten)]
    run: super::run::Args,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Terminal,
    Json,
}

/// `5%`, `5` or `0.5%`: a fraction in (0, 10].
fn parse_threshold(s: &str) -> Result<f64> {
    let t = s.trim().trim_end_matches('%').trim();
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1000.0 => Ok(v / 100.0),
        _ => Err(user(format!(
            "bad --threshold `{s}`: expected a percentage above 0 and at most 1000, e.g. 5%"
        ))),
    }
}

/// The baseline by id, label, `latest` or UUID.
fn resolve_baseline(store: &Store, spec: &str) -> Result<i64> {
    if kscale_store::import::is_uuid(spec.trim()) {
        if let Some(id) = store.run_by_uuid(spec.trim())? {
            return Ok(id);
        }
    }
    Ok(store.resolve(spec)?)
}

/// One compared case.
#[derive(Serialize)]
struct CaseCheck {
    workload: String,
    case: String,
    /// The case's params, to measure it again alone.
    #[serde(skip)]
    params: BTreeMap<String, String>,
    cpus: String,
    metric: String,
    unit: String,
    direction: Direction,
    baseline: f64,
    now: f64,
    /// How much worse (positive) or better (negative) now is, in %.
    worse_pct: f64,
    p: Option<f64>,
    significant: bool,
    /// The test between the two runs that gave `p`; `None` where the
    /// control's line decided (`machine.covariate`), whose p it is then.
    test: Option<Test>,
    /// Minimum detectable change of the comparison, in % of the baseline.
    mdc_pct: Option<f64>,
    regressed: bool,
    /// `regressed`, `ok` or `cannot_tell`.
    verdict: Verdict,
    /// The machine's move between the runs, when both read the gauge;
    /// `p` and `mdc_pct` then include its between-run spread.
    machine: Option<MachinePart>,
    /// The machine itself moved by more than the threshold: cannot tell.
    machine_moved: bool,
    /// What the runs measured again found, for a case the first runs found
    /// regressed.
    confirmation: Option<Confirmation>,
}

/// The second look at a case the first runs found regressed.
#[derive(Serialize)]
struct Confirmation {
    /// The runs measured again.
    runs: Vec<i64>,
    /// How much worse they found it, in % (about the control's line where
    /// it decided), and the p of their test (each `None` where they did
    /// not measure it).
    worse_pct: Option<f64>,
    p: Option<f64>,
    /// The level their test was made at: [`CONFIRM_ALPHA`] over the cases.
    alpha: f64,
    /// They found it regressed too: the case stays regressed.
    reproduced: bool,
}

impl CaseCheck {
    /// What the covariate test said, for a verdict line: empty when it did
    /// not decide the case.
    fn against_line(&self) -> String {
        let Some((m, c)) = self
            .machine
            .as_ref()
            .and_then(|m| Some((m, m.covariate.as_ref()?)))
        else {
            return String::new();
        };
        let now = if c.now_runs > 1 {
            format!("the mean of {} runs now", c.now_runs)
        } else {
            "now".to_string()
        };
        format!(
            "; against the {} runs of the baseline's label at the machine's level {now} ({}{}, slope {:.2}), {}: their spread ±{:.1}%, ±{:.1}% about the line",
            c.runs,
            c.probe.name(),
            clock_name(m.thread_clock),
            c.slope,
            change(c.worse_pct),
            c.plain_pct,
            c.residual_pct
        )
    }

    /// Where the runs now were noisier than the line's runs.
    fn noisier(&self) -> Option<&Noisier> {
        self.machine.as_ref().and_then(|m| m.noisier.as_ref())
    }

    /// `syscall.null (Simple syscall [1 CPU]): latency 0.12 → 0.15 µs
    /// (+22.4% worse`: what every verdict line begins with.
    fn head(&self) -> String {
        format!(
            "{} ({}): {} {} → {} {} ({}",
            self.workload,
            self.case,
            self.metric,
            sig(self.baseline),
            sig(self.now),
            self.unit,
            change(self.worse_pct)
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Verdict {
    Regressed,
    Ok,
    /// Not found worse, but the comparison could not have seen a change of
    /// the threshold's size.
    CannotTell,
}

impl Verdict {
    /// Significantly worse by more than the threshold: regressed.
    /// Significantly better: ok, whatever the noise. Otherwise ok only if
    /// the comparison could have seen a change of the threshold's size.
    fn of(
        significant: bool,
        better: Option<bool>,
        worse: f64,
        mdc: Option<f64>,
        threshold: f64,
    ) -> Verdict {
        if significant && better == Some(false) && worse > threshold {
            Verdict::Regressed
        } else if significant && better == Some(true) {
            Verdict::Ok
        } else if mdc.is_none_or(|m| m > threshold) {
            Verdict::CannotTell
        } else {
            Verdict::Ok
        }
    }
}

/// How much worse than the baseline a case is once a machine that ran
/// `slower` times slower is given the benefit: a fraction, like `worse`.
fn beyond_machine(direction: Direction, ratio: f64, slower: f64) -> f64 {
    match direction {
        Direction::Lower => ratio / slower - 1.0,
        Direction::Higher => 1.0 - ratio * slower,
    }
}

/// The most runs `--repeat` takes: past that a nightly gate costs more
/// than its history.
const MAX_REPEAT: u32 = 20;

pub fn run(mut args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    let threshold = parse_threshold(&args.threshold)?;
    if !(1..=MAX_REPEAT).contains(&args.repeat) {
        return Err(user(format!(
            "bad --repeat `{}`: expected a number of runs from 1 to {MAX_REPEAT}",
            args.repeat
        )));
    }
    if args.run.resume.is_some() {
        return Err(user("check measures afresh; --resume is not accepted here"));
    }
    if let Some(l) = &args.run.run.label {
        crate::engine::args::check_label(l)?;
    }
    let base = {
        let store = super::open_existing(db.clone())?;
        let id = resolve_baseline(&store, &args.baseline)?;
        store.load_run(id)?
    };
    // A baseline whose trials were paced is checked paced the same way,
    // unless told otherwise: both sides then sample the machine's moments
    // alike (docs/method.md, "Paced trials").
    if args.run.run.span.is_none() && args.run.run.budget.is_none() {
        if let Some(s) = base.run.options["span_s"].as_f64() {
            args.run.run.span = Some(format!("{s}s"));
            eprintln!(
                "kscale check: the baseline's trials were paced over {s} s (--span); so are these"
            );
        }
    }
    // Validated and matched before anything is measured: a typo costs one
    // line and status 2, not a run.
    let opts = crate::engine::args::options(&args.run.select, &args.run.run)?;
    let have: BTreeMap<_, _> = base
        .cases
        .iter()
        .map(|c| {
            (
                (
                    c.key.workload.clone(),
                    c.key.params.clone(),
                    base_name(&c.key.cpus).to_string(),
                ),
                c,
            )
        })
        .collect();
    let common = opts
        .plan
        .iter()
        .filter(|e| {
            have.contains_key(&(
                e.workload.clone(),
                e.params.clone(),
                base_name(&e.cpus_name).to_string(),
            ))
        })
        .count();
    if common == 0 {
        let mut names: Vec<String> = base.cases.iter().map(|c| c.key.workload.clone()).collect();
        names.dedup();
        return Err(user(format!(
            "baseline run {} ({}) has no case in common with the targets (it measured {} on cpus {})",
            base.run.id,
            base.run.label,
            names.join(", "),
            base.cases.first().map(|c| c.key.cpus.as_str()).unwrap_or("-")
        )));
    }

    let Some((store, ids)) = measure_runs(&args, &db, "", |_| true)? else {
        return Ok(ExitCode::from(UNMEASURED));
    };
    let Some((now, machine)) = compared(&store, &base, &ids, &[])? else {
        return Ok(ExitCode::from(UNMEASURED));
    };
    let mut assessed = assess(&base, &now, &machine, threshold, GATE_ALPHA)?;
    let flagged = assessed.cases.iter().filter(|c| c.regressed).count();
    if flagged > 0 && !args.no_confirm {
        // A spell of the host's can move one run as far as a real change
        // (docs/method.md, "A regression reproduces"); it does not move the
        // runs measured again a few seconds later.
        eprintln!(
            "kscale check: {flagged} case(s) regressed in run{} {}; measuring again to see whether it reproduces",
            if ids.len() > 1 { "s" } else { "" },
            join_ids(&ids)
        );
        // Only the cases found regressed: the others' verdicts stand, and
        // measuring them again would only spend the time.
        let regressed: Vec<&CaseCheck> = assessed.cases.iter().filter(|c| c.regressed).collect();
        let flagged_case = |e: &PlanEntry| {
            regressed.iter().any(|c| {
                c.workload == e.workload
                    && c.params == e.params
                    && base_name(&c.cpus) == base_name(&e.cpus_name)
            })
        };
        let Some((store, again)) = measure_runs(&args, &db, "again: ", flagged_case)? else {
            return Ok(ExitCode::from(UNMEASURED));
        };
        let Some((now2, machine2)) = compared(&store, &base, &again, &ids)? else {
            return Ok(ExitCode::from(UNMEASURED));
        };
        let second = assess(&base, &now2, &machine2, threshold, CONFIRM_ALPHA)?;
        confirm(&mut assessed, &second, &again);
    }
    report(&base, &machine, threshold, args.format, assessed)
}

/// The chance, over the cases compared, that the runs measured again find
/// a case regressed that did not change: looser than [`GATE_ALPHA`], since
/// only a case the first runs found regressed at that level is measured
/// again, and a real change should not be lost to the second look.
pub const CONFIRM_ALPHA: f64 = 0.05;

fn join_ids(ids: &[i64]) -> String {
    ids.iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Marks each case `first` found regressed with what the runs measured
/// again (`again`, assessed as `second`) found: a case they do not find
/// regressed too is "cannot tell".
fn confirm(first: &mut Assessed, second: &Assessed, again: &[i64]) {
    for c in first.cases.iter_mut().filter(|c| c.regressed) {
        let d = second
            .cases
            .iter()
            .find(|d| d.workload == c.workload && d.case == c.case && d.cpus == c.cpus);
        let reproduced = d.is_some_and(|d| d.regressed);
        c.confirmation = Some(Confirmation {
            runs: again.to_vec(),
            // As the verdict was reached: about the control's line where it
            // decided.
            worse_pct: d.map(|d| {
                d.machine
                    .as_ref()
                    .and_then(|m| m.covariate.as_ref())
                    .map_or(d.worse_pct, |c| c.worse_pct)
            }),
            p: d.and_then(|d| d.p),
            alpha: second.alpha,
            reproduced,
        });
        if !reproduced {
            c.regressed = false;
            c.verdict = Verdict::CannotTell;
        }
    }
}

/// Measures the targets' cases `keep` accepts `--repeat` times; `None`
/// (after saying why) when a run could not be measured.
fn measure_runs(
    args: &Args,
    db: &Option<PathBuf>,
    what: &str,
    keep: impl Fn(&PlanEntry) -> bool,
) -> Result<Option<(Store, Vec<i64>)>> {
    let mut ids = Vec::new();
    let mut measured = None;
    for i in 0..args.repeat {
        if args.repeat > 1 {
            eprintln!("kscale check: {what}run {} of {}", i + 1, args.repeat);
        }
        match super::run::measure_kept(&args.run, db.clone(), &keep) {
            Ok((store, id)) => {
                ids.push(id);
                measured = Some(store);
            }
            Err(e) => {
                if e.downcast_ref::<Interrupted>().is_some()
                    || e.downcast_ref::<UserError>().is_some()
                {
                    return Err(e);
                }
                if args.format == Format::Json {
                    outln!(
                        "{}",
                        serde_json::to_string_pretty(&json!({
                            "status": "unmeasured",
                            "error": format!("{e:#}"),
                        }))?
                    )?;
                }
                eprintln!("kscale: check: could not measure: {e:#}");
                return Ok(None);
            }
        }
    }
    Ok(measured.map(|s| (s, ids)))
}

/// The runs `ids` merged into one, and the machine's part in comparing
/// them with `base`: the gauge's readings, the runs of the baseline's label
/// (none of `ids` or `also_not`, the runs measured before them).
fn compared(
    store: &Store,
    base: &RunData,
    ids: &[i64],
    also_not: &[i64],
) -> Result<Option<(RunData, Machine)>> {
    let Some(&id) = ids.first() else {
        return Ok(None);
    };
    let excluded: Vec<i64> = ids.iter().chain(also_not).copied().collect();
    let earlier = earlier_runs(store, base, &excluded)?;
    let mut earlier_gauge = BTreeMap::new();
    for c in &earlier {
        if let std::collections::btree_map::Entry::Vacant(e) = earlier_gauge.entry(c.run_id) {
            e.insert(store.gauge(c.run_id)?);
        }
    }
    let mut repeats = Vec::new();
    let mut gauges = Vec::new();
    for &r in ids {
        repeats.push(store.load_run(r)?);
        gauges.push(store.gauge(r)?);
    }
    let wall = Gauges {
        base: store.gauge(base.run.id)?,
        now: gauges.iter().flatten().cloned().collect(),
        repeats: gauges,
        earlier: earlier_gauge,
    };
    let machine = Machine {
        thread: wall.on_thread_clock(),
        wall,
        repeats,
        earlier,
        same_kernel: {
            let now_run = store.run(id)?;
            let k = |s: &serde_json::Value| {
                (
                    s["kernel"]["release"].clone(),
                    s["kernel"]["version"].clone(),
                    s["kernel"]["cmdline"].clone(),
                )
            };
            k(&base.run.snapshot) == k(&now_run.snapshot)
        },
    };
    let Some((first, rest)) = machine.repeats.split_first() else {
        return Ok(None);
    };
    let merged = merge(first, rest.iter());
    Ok(Some((merged, machine)))
}

/// The runs `--repeat` took, as one: the first run's cases, each with the
/// trials of the same case in every run. The tests between two runs then
/// see all the trials measured now (each paced trial one moment of the
/// machine); the covariate test takes the runs one by one.
fn merge<'a>(first: &RunData, rest: impl Iterator<Item = &'a RunData>) -> RunData {
    let mut merged = first.clone();
    for run in rest {
        for c in &run.cases {
            if let Some(m) = merged.cases.iter_mut().find(|m| m.key == c.key) {
                m.trials.extend(c.trials.iter().cloned());
                if c.status != CaseStatus::Done {
                    m.status = c.status;
                    m.error.clone_from(&c.error);
                }
            }
        }
    }
    merged
}

/// The gauge's readings of the two runs (docs/method.md, "The gauge and
/// the control"): how much the machine itself moved between them; and the
/// baseline's repeated runs, from which a case's own between-run spread is
/// estimated.
struct Machine {
    /// The control's readings on the wall clock.
    wall: Gauges,
    /// The same on the thread's CPU clock, where the baseline and every
    /// run now read it: the machine as a case timed on that clock meets
    /// it ([`noise::on_thread_clock`]).
    thread: Option<Gauges>,
    /// Each run measured now (`--repeat`), in the order of the gauges'
    /// `repeats`.
    repeats: Vec<RunData>,
    earlier: Vec<kscale_store::series::SeriesCase>,
    /// Both runs on the same kernel (release, version and command line):
    /// only then is the gauge's kernel crossing the machine's alone.
    same_kernel: bool,
}

/// The control's readings a comparison reads, on one clock.
struct Gauges {
    base: Vec<Reading>,
    /// The readings of every run measured now.
    now: Vec<Reading>,
    /// Each run measured now with its own readings.
    repeats: Vec<Vec<Reading>>,
    /// The control's readings of each of the label's runs, by run id.
    earlier: BTreeMap<i64, Vec<Reading>>,
}

impl Gauges {
    /// The same readings on the thread's CPU clock; `None` unless the
    /// baseline and every run now have them. A label's run from before
    /// that clock was read drops out of the line.
    fn on_thread_clock(&self) -> Option<Gauges> {
        Some(Gauges {
            base: noise::on_thread_clock(&self.base)?,
            now: noise::on_thread_clock(&self.now)?,
            repeats: self
                .repeats
                .iter()
                .map(|g| noise::on_thread_clock(g))
                .collect::<Option<_>>()?,
            earlier: self
                .earlier
                .iter()
                .filter_map(|(id, g)| Some((*id, noise::on_thread_clock(g)?)))
                .collect(),
        })
    }
}

impl Machine {
    /// The readings a case of `workload` is compared at: a case timed on
    /// its thread's CPU clock meets neither the time other tasks took
    /// from its CPUs nor their move between runs (under `noisy-neighbour
    /// --duty 25` the wall's loop spread 40 % within a run, the thread
    /// clock's 1 %), so it is set against that clock's readings where
    /// every run compared has them.
    fn gauges(&self, workload: &str) -> (&Gauges, Clock) {
        let clock = kscale_workloads::find(workload).map_or(Clock::Wall, |w| w.clock);
        match (clock, &self.thread) {
            (Clock::Thread, Some(t)) => (t, Clock::Thread),
            _ => (&self.wall, Clock::Wall),
        }
    }
}

/// The cases of the baseline's repeated runs: every stored run with the
/// baseline's label, host and kernel (the baseline among them), but the
/// runs just measured. A nightly lab that takes its baseline under one
/// label has them; a first baseline has only itself.
fn earlier_runs(
    store: &Store,
    base: &RunData,
    now_ids: &[i64],
) -> Result<Vec<kscale_store::series::SeriesCase>> {
    let mut workloads: Vec<String> = base.cases.iter().map(|c| c.key.workload.clone()).collect();
    workloads.sort();
    workloads.dedup();
    let stored = store.series(&workloads)?;
    let host = base.run.snapshot["hostname"].as_str();
    let kernel = base.run.snapshot["kernel"]["release"].as_str();
    Ok(stored
        .cases
        .into_iter()
        .filter(|c| {
            !now_ids.contains(&c.run_id)
                && stored.runs.get(&c.run_id).is_some_and(|r| {
                    r.label == base.run.label
                        && r.hostname.as_deref() == host
                        && r.kernel.as_deref() == kernel
                })
        })
        .collect())
}

/// The machine's part in one case's comparison.
#[derive(Serialize)]
struct MachinePart {
    /// How much slower the machine's CPU loop ran now than at the
    /// baseline, in % (negative: faster), on the case's CPUs; `None` when
    /// a run has no gauge readings there.
    slower_pct: Option<f64>,
    /// The between-run spread added to each side, in % of its value
    /// (the moments' spread averaged over the moments each side sampled).
    between_pct: f64,
    /// Where that spread came from: the case's own runs under the
    /// baseline's label (how many), or the gauge (0).
    between_runs: usize,
    /// The label's runs were too few alone and were pooled with the
    /// gauge's spread ([`noise::pool_between`]).
    between_pooled: bool,
    /// How much slower the kernel crossing ran now, in %, on the case's
    /// CPUs, when both runs read it.
    syscall_slower_pct: Option<f64>,
    /// The probe whose move a `machine_moved` case reports.
    moved_by: noise::Probe,
    /// The probes were read on the thread's CPU clock, the case's own
    /// ([`Machine::gauges`]), not on the wall.
    thread_clock: bool,
    /// The covariate test, when the baseline's label has the runs for it:
    /// it then decides the case.
    covariate: Option<Covariate>,
    /// Where the runs now jumped within themselves more than the label's
    /// runs did (the CPU loop's spread within a run, in %): the line does
    /// not describe them, and the case cannot be told.
    noisier: Option<Noisier>,
}

#[derive(Serialize)]
struct Noisier {
    /// Whose spread within a run: the control's CPU loop or the case's
    /// own trials.
    by: Jumped,
    /// The mean spread of the runs now.
    now_pct: f64,
    /// The baseline's spread.
    baseline_pct: Option<f64>,
    /// The median spread of the label's runs.
    label_pct: f64,
    /// The regime's bound.
    bound_pct: f64,
}

/// The case set against its label's runs at the machine's level now
/// (docs/method.md, "The control as a covariate").
#[derive(Serialize)]
struct Covariate {
    probe: noise::Probe,
    /// How much worse (positive) or better than the runs' line predicts
    /// at the control's level now, in %.
    worse_pct: f64,
    slope: f64,
    /// The runs' spread about the line, and without it, in %.
    residual_pct: f64,
    plain_pct: f64,
    runs: usize,
    /// The runs measured now whose mean was tested (`--repeat`).
    now_runs: usize,
    /// The runs now (`--repeat`, at most 20) whose mean would see a
    /// change of the threshold's size at the machine's level now; `None`
    /// where no such number would, as the line itself is too uncertain.
    repeat_for_threshold: Option<usize>,
}

/// Whose jumps within a run showed the runs now in a regime the label's
/// runs were not in (docs/method.md, "Where the line does not apply").
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Jumped {
    /// The control's CPU loop ([`noise::burst_spread`]).
    Control,
    /// The case's own trials ([`noise::trial_spread`]).
    Trials,
}

/// What the control's line says of one case.
enum Line {
    /// Set against the line of this probe.
    Tested(noise::Probe, noise::CovariateTest),
    /// The runs now jumped within themselves more than the label's runs
    /// did: the line does not describe them (docs/method.md, "Where the
    /// line does not apply").
    Noisier(noise::Regime, Jumped),
    /// Too few runs or readings for a line.
    None,
}

/// The covariate test of one case: each run of the baseline's label with
/// the case's estimate and the control's level through it, against the
/// runs just measured, for the probe whose line leaves the runs the least
/// spread. Only the label's runs within the regime (the CPU loop's spread
/// within a run, [`noise::Regime`]) are fitted, and the runs now are
/// tested only while their mean spread, and the baseline's (`base`), are
/// within it — both the control's and the case's own trials'. The
/// control is read on the case's clock ([`Machine::gauges`]), as `now`'s
/// readings are.
fn covariate(
    machine: &Machine,
    runs: &[(i64, &kscale_store::CaseData)],
    now: &[(&kscale_store::CaseData, &[Reading])],
    base: &kscale_store::CaseData,
    metric: &str,
    est: &dyn Fn(&kscale_store::CaseData) -> Option<kscale_core::stats::Estimate>,
    alpha: f64,
) -> Line {
    let (g, _) = machine.gauges(&base.key.workload);
    let y = |c: &kscale_store::CaseData| {
        est(c)
            .map(|e| e.center)
            .filter(|v| v.is_finite() && *v > 0.0)
            .map(f64::ln)
    };
    // How much each run jumped within itself: with the loop's mean over
    // its repetitions where every run compared has it, since the mean
    // sees a burst the median steps past ([`noise::burst_spread`]); else,
    // for stores with runs from before it, the medians' spread alone,
    // alike for all.
    let has_mean = |g: &[Reading]| g.iter().any(|r| r.cpu_mean_ns.is_some());
    let bursts = runs
        .iter()
        .filter_map(|(id, _)| g.earlier.get(id))
        .filter(|g| !g.is_empty())
        .all(|g| has_mean(g))
        && now.iter().all(|(_, g)| has_mean(g))
        && has_mean(&g.base);
    let spread_of = |gauge: &[Reading], c: &kscale_store::CaseData| {
        if bursts {
            noise::burst_spread(gauge, &c.cpus)
        } else {
            noise::control_spread(gauge, &c.cpus, noise::Probe::Loop)
        }
    };
    let label: Vec<(i64, &kscale_store::CaseData, f64)> = runs
        .iter()
        .filter_map(|(id, c)| Some((*id, *c, spread_of(g.earlier.get(id)?, c)?)))
        .collect();
    if label.len() < noise::MIN_COVARIATE_RUNS {
        return Line::None;
    }
    let now_spreads: Vec<f64> = now
        .iter()
        .filter_map(|(c, gauge)| spread_of(gauge, c))
        .collect();
    let baseline = now.first().and_then(|(c, _)| spread_of(&g.base, c));
    let Some(regime) = noise::Regime::of(
        &label.iter().map(|l| l.2).collect::<Vec<_>>(),
        &now_spreads,
        baseline,
    ) else {
        return Line::None;
    };
    if regime.noisier() {
        return Line::Noisier(regime, Jumped::Control);
    }
    // The case's own trials take every burst in full; the control's
    // readings, between trials, can miss a low phase's few bursts that a
    // case's trials spend time in (docs/validation.md, the gate under the
    // neighbour: a run whose control spread 2 % had trials spread 22 %).
    let trials = |c: &kscale_store::CaseData| noise::trial_spread(&c.values(metric));
    if let Some(own) = noise::Regime::of(
        &runs
            .iter()
            .filter_map(|(_, c)| trials(c))
            .collect::<Vec<_>>(),
        &now.iter()
            .filter_map(|(c, _)| trials(c))
            .collect::<Vec<_>>(),
        trials(base),
    )
    .filter(|r| r.noisier())
    {
        return Line::Noisier(own, Jumped::Trials);
    }
    // The kernel crossing measures the machine alone only on the
    // baseline's kernel: across kernels a line through it would take a
    // change in the kernel's own entry path for the machine's level.
    [noise::Probe::Loop, noise::Probe::Syscall]
        .into_iter()
        .filter(|p| *p == noise::Probe::Loop || machine.same_kernel)
        .filter_map(|probe| {
            let at = now
                .iter()
                .map(|(c, gauge)| {
                    Some(noise::LevelRun {
                        y: y(c)?,
                        x: noise::control_level(gauge, &c.cpus, probe)?,
                    })
                })
                .collect::<Option<Vec<_>>>()?;
            let levels: Vec<noise::LevelRun> = label
                .iter()
                .filter(|(.., spread)| regime.admits(*spread))
                .filter_map(|(id, c, _)| {
                    Some(noise::LevelRun {
                        y: y(c)?,
                        x: noise::control_level(g.earlier.get(id)?, &c.cpus, probe)?,
                    })
                })
                .collect();
            noise::covariate_test(&levels, &at, alpha, POWER).map(|t| (probe, t))
        })
        .min_by(|a, b| a.1.residual.total_cmp(&b.1.residual))
        .map_or(Line::None, |(p, t)| Line::Tested(p, t))
}

/// A run's case of a compared row: same workload, params and CPU set.
fn case_of<'a>(
    run: &'a RunData,
    workload: &str,
    params: &BTreeMap<String, String>,
    cpus: &str,
) -> Option<&'a kscale_store::CaseData> {
    run.cases.iter().find(|c| {
        c.key.workload == workload
            && &c.key.params == params
            && base_name(&c.key.cpus) == base_name(cpus)
    })
}

/// What one comparison found: each case's verdict, the cases not measured
/// now, and what the tests were made at.
struct Assessed {
    cases: Vec<CaseCheck>,
    failed: Vec<String>,
    /// The per-case level of the tests: `family_alpha` over the cases.
    alpha: f64,
    family_alpha: f64,
    estimator: &'static str,
}

/// Compares each case measured now (`now`, the runs of `machine.repeats`
/// merged) with the baseline's, at `family_alpha` over the cases.
fn assess(
    base: &RunData,
    now: &RunData,
    machine: &Machine,
    threshold: f64,
    family_alpha: f64,
) -> Result<Assessed> {
    let cmp = compare_metric(&[base, now], &super::Registry, None)
        .map_err(|e| anyhow::anyhow!("cannot compare with the baseline: {e}"))?;
    let rows: Vec<_> = cmp
        .families
        .iter()
        .flat_map(|f| f.rows.iter())
        .filter(|row| !row.summary && !row.cpus.is_empty())
        .filter_map(|row| {
            row.ratios
                .iter()
                .find(|r| r.num == 1 && r.den == 0)
                .map(|r| (row, r))
        })
        .collect();
    let alpha = family_alpha / rows.len().max(1) as f64;
    let mut cases = Vec::new();
    for (row, r) in rows {
        let worse = match row.direction {
            Direction::Lower => r.ratio - 1.0,
            Direction::Higher => 1.0 - r.ratio,
        };
        let find = |run: &RunData| case_of(run, &row.workload, &row.params, &row.cpus).cloned();
        let (Some(cb), Some(cn)) = (find(base), find(now)) else {
            continue;
        };
        // The test across the two runs with the between-run spread added:
        // the case's own, from the baseline's repeated runs, where there
        // are enough of them, else the machine's, when both runs read the
        // gauge on these CPUs.
        let (g, clock) = machine.gauges(&row.workload);
        let mv = noise::machine_move(&g.base, &g.now, &cn.cpus);
        let (mut p, mut mdc, mut significant) = (r.p, r.mdc, r.p.is_some_and(|p| p < alpha));
        let mut moved = false;
        let est = |c: &kscale_store::CaseData| {
            cmp.estimator
                .estimate(&c.values(&row.metric))
                .filter(|_| c.rule == kscale_core::RunRule::Converge)
        };
        let label_runs: Vec<(i64, &kscale_store::CaseData)> = machine
            .earlier
            .iter()
            .filter(|s| {
                s.case.key.workload == row.workload
                    && s.case.key.params == row.params
                    && base_name(&s.case.key.cpus) == base_name(&row.cpus)
            })
            .map(|s| (s.run_id, &s.case))
            .collect();
        let runs: Vec<(f64, f64)> = label_runs
            .iter()
            .filter_map(|(_, c)| est(c).map(|e| (e.center, e.se)))
            .collect();
        let own = noise::between_runs(&runs);
        let now_runs: Vec<(&kscale_store::CaseData, &[Reading])> = machine
            .repeats
            .iter()
            .zip(&g.repeats)
            .filter_map(|(run, gauge)| {
                Some((
                    case_of(run, &row.workload, &row.params, &row.cpus)?,
                    gauge.as_slice(),
                ))
            })
            .collect();
        let (cov, noisier) = match covariate(
            machine,
            &label_runs,
            &now_runs,
            &cb,
            &row.metric,
            &est,
            alpha,
        ) {
            Line::Tested(probe, t) => (Some((probe, t)), None),
            Line::Noisier(regime, by) => (None, Some((regime, by))),
            Line::None => (None, None),
        };
        let sys_move = noise::probe_move(&g.base, &g.now, &cn.cpus, noise::Probe::Syscall);
        // The between-run spread, its degrees of freedom and the moments
        // each side spans: the case's own from its earlier runs, else the
        // gauge's. `with_shift` counts the machine's move between the two
        // runs as spread (the plain test); without it the move is divided
        // out instead (the test beyond the machine, below).
        // The moments of the machine a side's trials sampled: a paced run's
        // trials each one (docs/method.md, "Paced trials"), an unpaced
        // run's as many as its trials' span holds.
        let moments_of = |run: &RunData, c: &kscale_store::CaseData| {
            if run.run.options["span_s"].as_f64().is_some() {
                (c.values(&row.metric).len() as f64).max(1.0)
            } else {
                noise::moments(c.span_s())
            }
        };
        let (kb, kn) = (moments_of(base, &cb), moments_of(now, &cn));
        // The gauge's spread between moments as it weighs on one run of
        // each side, known to its readings' degrees of freedom.
        let gauge_df = |m: &noise::Move| (m.n_base + m.n_now).saturating_sub(2) as f64;
        let prior = mv.map(|m| {
            (
                m.moment_cv * ((1.0 / kb.max(1.0) + 1.0 / kn.max(1.0)) / 2.0).sqrt(),
                gauge_df(&m),
            )
        });
        // The label's own spread, pooled with the gauge's where its runs do
        // not spread beyond it.
        let own_pooled = own.map(|o| noise::pool_between(Some(o), prior).unwrap_or(o));
        let pooled = own.is_some() && own_pooled != own;
        let spread = |with_shift: bool| {
            // Half the larger of the probes' moves: on the same kernel the
            // kernel crossing's too, which a case on a kernel path follows
            // where the loop does not.
            let shift = [mv, sys_move.filter(|_| machine.same_kernel)]
                .into_iter()
                .flatten()
                .map(|m| (m.slower - 1.0).abs() / 2.0)
                .fold(0.0, f64::max);
            match own_pooled {
                Some((b, df)) => (
                    if with_shift { b.max(shift) } else { b },
                    Some(df),
                    1.0,
                    1.0,
                ),
                None => {
                    // The machine's shift between the runs is one draw on
                    // each side however many moments they sampled: kept
                    // whole while the moments' spread is averaged down.
                    let floor = if with_shift {
                        shift * (2.0 / (1.0 / kb + 1.0 / kn)).sqrt()
                    } else {
                        0.0
                    };
                    // The moments' spread is known to the gauge's
                    // readings; a shift that sets the floor is one draw,
                    // known no better than the trials' own spread.
                    let df = mv.filter(|m| m.moment_cv >= floor).map(|m| gauge_df(&m));
                    (mv.map_or(0.0, |m| m.moment_cv.max(floor)), df, kb, kn)
                }
            }
        };
        let mut part = None;
        if let Some((probe, t)) = cov {
            // The runs' line has the machine's level in it: the case is
            // tested against the line, and the machine's move is no
            // reason to say "cannot tell".
            p = Some(t.p);
            mdc = Some(t.mdc);
            significant = t.p < alpha;
            part = Some(MachinePart {
                slower_pct: mv.map(|m| (m.slower - 1.0) * 100.0),
                between_pct: t.residual * 100.0,
                between_runs: t.runs,
                between_pooled: false,
                syscall_slower_pct: sys_move.map(|s| (s.slower - 1.0) * 100.0),
                moved_by: probe,
                thread_clock: clock == Clock::Thread,
                covariate: Some(Covariate {
                    probe,
                    worse_pct: match row.direction {
                        Direction::Lower => t.d.exp() - 1.0,
                        Direction::Higher => 1.0 - t.d.exp(),
                    } * 100.0,
                    slope: t.slope,
                    residual_pct: t.residual * 100.0,
                    plain_pct: t.plain * 100.0,
                    runs: t.runs,
                    now_runs: t.now_runs,
                    repeat_for_threshold: t.repeats_for(threshold, MAX_REPEAT as usize),
                }),
                noisier: None,
            });
        } else if mv.is_some() || own.is_some() || noisier.is_some() {
            // The case's own spread counts no less than half the machine's
            // move since the baseline: a shift the gauge saw is between-run
            // spread whatever the history says.
            let (between, between_df, mb, mn) = spread(true);
            if let (Some(eb), Some(en)) = (est(&cb), est(&cn)) {
                if let Some((p2, mdc2)) =
                    noise::across_runs(eb, en, between, between_df, mb, mn, alpha, POWER)
                {
                    p = Some(p2);
                    mdc = Some(mdc2);
                    significant = p2 < alpha;
                }
            }
            let sys = sys_move.map(|s| (s.slower - 1.0) * 100.0);
            let loop_pct = mv.map(|m| (m.slower - 1.0) * 100.0);
            // The kernel crossing is the machine's only on the same kernel:
            // across kernels it is part of what is compared.
            let sys_moved = machine.same_kernel
                && sys.is_some_and(|s| s.abs() > threshold * 100.0)
                && loop_pct.is_none_or(|l| l.abs() <= threshold * 100.0);
            moved = loop_pct.is_some_and(|l| l.abs() > threshold * 100.0) || sys_moved;
            part = Some(MachinePart {
                slower_pct: loop_pct,
                // As it weighs on one side: averaged over the moments.
                between_pct: between
                    * ((1.0 / mb.max(1.0) + 1.0 / mn.max(1.0)) / 2.0).sqrt()
                    * 100.0,
                between_runs: if own.is_some() { runs.len() } else { 0 },
                between_pooled: pooled,
                syscall_slower_pct: sys,
                moved_by: if sys_moved {
                    noise::Probe::Syscall
                } else {
                    noise::Probe::Loop
                },
                thread_clock: clock == Clock::Thread,
                covariate: None,
                noisier: noisier.map(|(r, by)| Noisier {
                    by,
                    now_pct: r.now * 100.0,
                    baseline_pct: r.baseline.map(|b| b * 100.0),
                    label_pct: r.label * 100.0,
                    bound_pct: r.bound * 100.0,
                }),
            });
        }
        let adjusted_worse = part
            .as_ref()
            .and_then(|m| m.covariate.as_ref())
            .map(|c| c.worse_pct / 100.0);
        let verdict = if let Some(w) = adjusted_worse {
            Verdict::of(significant, Some(w < 0.0), w, mdc, threshold)
        } else if noisier.is_some() {
            // The runs now are in a regime none of the label's runs saw:
            // the line cannot say what the machine explains, and the test
            // between two runs cannot either (docs/method.md).
            Verdict::CannotTell
        } else if moved {
            // A machine that ran s times slower explains a case up to s
            // times worse, no more: tested against the baseline as the
            // slower machine would have measured it, with the spread
            // between moments and the move's own uncertainty, a case worse
            // beyond that by more than the threshold is still a regression.
            let sys = sys_move.filter(|_| machine.same_kernel);
            let by = [mv, sys]
                .into_iter()
                .flatten()
                .filter(|m| m.slower > 1.0)
                .max_by(|a, b| a.slower.total_cmp(&b.slower));
            let s = by.map_or(1.0, |m| m.slower);
            let beyond = beyond_machine(row.direction, r.ratio, s);
            // Only a slower machine is given the benefit. One the gauge saw
            // run faster cannot explain a case that got worse: that case is
            // judged by the plain test above, whose spread counts half the
            // machine's move, so only a change well beyond the move is
            // regressed (a 27-fold one was "cannot tell" before).
            let adjusted = match (by, est(&cb), est(&cn)) {
                (None, ..) => p.zip(mdc),
                (Some(m), Some(eb), Some(en)) => {
                    let k = match row.direction {
                        Direction::Lower => s,
                        Direction::Higher => 1.0 / s,
                    };
                    let eb = kscale_core::stats::Estimate {
                        center: eb.center * k,
                        se: eb.se * k,
                        ..eb
                    };
                    let (b, df, mb, mn) = spread(false);
                    let rse = m.ratio_se;
                    let b = (b * b + rse * rse / (1.0 / mb.max(1.0) + 1.0 / mn.max(1.0))).sqrt();
                    noise::across_runs(eb, en, b, df, mb, mn, alpha, POWER)
                }
                _ => None,
            };
            match adjusted {
                Some((p2, mdc2))
                    if Verdict::of(p2 < alpha, r.better, beyond, Some(mdc2), threshold)
                        == Verdict::Regressed =>
                {
                    p = Some(p2);
                    significant = true;
                    Verdict::Regressed
                }
                _ => Verdict::CannotTell,
            }
        } else {
            Verdict::of(significant, r.better, worse, mdc, threshold)
        };
        cases.push(CaseCheck {
            workload: row.workload.clone(),
            case: row.label.clone(),
            params: row.params.clone(),
            cpus: row.cpus.clone(),
            metric: row.metric.clone(),
            unit: row.unit.clone(),
            direction: row.direction,
            baseline: row.means[0],
            now: row.means[1],
            worse_pct: worse * 100.0,
            p,
            significant,
            test: if adjusted_worse.is_some() {
                None
            } else {
                r.test
            },
            mdc_pct: mdc.map(|m| m * 100.0),
            regressed: verdict == Verdict::Regressed,
            verdict,
            machine: part,
            machine_moved: moved,
            confirmation: None,
        });
    }
    // Cases of the baseline that were targeted but not measured now.
    let in_base = |w: &str, p: &BTreeMap<String, String>, c: &str| {
        base.cases.iter().any(|b| {
            b.key.workload == w && &b.key.params == p && base_name(&b.key.cpus) == base_name(c)
        })
    };
    let failed: Vec<String> = now
        .cases
        .iter()
        .filter(|c| {
            c.status != CaseStatus::Done && in_base(&c.key.workload, &c.key.params, &c.key.cpus)
        })
        .map(|c| {
            format!(
                "{} [cpus {}]: {}",
                c.key.workload,
                c.key.cpus,
                c.error.as_deref().unwrap_or("not measured")
            )
        })
        .collect();
    Ok(Assessed {
        cases,
        failed,
        alpha,
        family_alpha,
        estimator: cmp.estimator.as_str(),
    })
}

/// Prints what `assessed` found (each case's confirmation by the runs
/// measured again, where one was asked for) and returns the exit status.
fn report(
    base: &RunData,
    machine: &Machine,
    threshold: f64,
    format: Format,
    assessed: Assessed,
) -> Result<ExitCode> {
    let Assessed {
        cases,
        failed,
        alpha,
        family_alpha,
        estimator,
    } = assessed;
    let now_ids: Vec<i64> = machine.repeats.iter().map(|r| r.run.id).collect();
    let now_id = now_ids.first().copied().unwrap_or(0);
    let now_label = machine
        .repeats
        .first()
        .map_or(String::new(), |r| r.run.label.clone());
    let overall = noise::machine_move(&machine.wall.base, &machine.wall.now, &[]);
    let regressed = cases.iter().filter(|c| c.regressed).count();
    let cannot_tell = cases
        .iter()
        .filter(|c| c.verdict == Verdict::CannotTell)
        .count();
    let (status, code) = if regressed > 0 {
        ("regressed", 1)
    } else if !failed.is_empty() || cases.is_empty() {
        ("unmeasured", UNMEASURED)
    } else if cannot_tell == cases.len() {
        ("cannot_tell", UNMEASURED)
    } else {
        ("ok", 0)
    };
    match format {
        Format::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "status": status,
                "baseline": {"id": base.run.id, "label": base.run.label},
                "run": {"id": now_id, "label": now_label},
                "runs": machine.repeats.iter().map(|r| r.run.id).collect::<Vec<_>>(),
                "threshold_pct": threshold * 100.0,
                "alpha": alpha,
                "alpha_family": family_alpha,
                "power": POWER,
                "estimator": estimator,
                "machine": overall.map(|m| json!({
                    "slower_pct": (m.slower - 1.0) * 100.0,
                    "between_pct": m.between_cv * 100.0,
                    "readings": [m.n_base, m.n_now],
                })),
                "cases": cases,
                "failed": failed,
            }))?
        )?,
        Format::Terminal => {
            let color = super::use_color();
            let paint = |s: &str| {
                if color {
                    format!("\x1b[1;31m{s}\x1b[0m")
                } else {
                    s.to_string()
                }
            };
            for c in cases.iter().filter(|c| c.regressed) {
                outln!(
                    "{} {}, p = {}){}{}",
                    paint("REGRESSED"),
                    c.head(),
                    c.p.map(p_value).unwrap_or_else(|| "-".into()),
                    c.against_line(),
                    c.confirmation
                        .as_ref()
                        .map(|f| format!(
                            "; measured again in run{}: {}",
                            plural(&f.runs),
                            f.found()
                        ))
                        .unwrap_or_default()
                )?;
            }
            for (c, f) in cases.iter().filter_map(|c| {
                c.confirmation
                    .as_ref()
                    .filter(|f| !f.reproduced)
                    .map(|f| (c, f))
            }) {
                outln!(
                    "CANNOT TELL {}, p = {}) in run{}, but not when measured again in run{} ({}): a spell of the machine moves one run, not a change; check again",
                    c.head(),
                    c.p.map(p_value).unwrap_or_else(|| "-".into()),
                    plural(&now_ids),
                    plural(&f.runs),
                    f.found()
                )?;
            }
            for c in cases
                .iter()
                .filter(|c| c.machine_moved && !c.regressed && c.noisier().is_none())
            {
                let (m, probe, clock): (f64, noise::Probe, &str) = c
                    .machine
                    .as_ref()
                    .map(|m| {
                        let v = match m.moved_by {
                            noise::Probe::Syscall => m.syscall_slower_pct,
                            noise::Probe::Loop => m.slower_pct,
                        };
                        (v.unwrap_or(0.0), m.moved_by, clock_name(m.thread_clock))
                    })
                    .unwrap_or((0.0, noise::Probe::Loop, ""));
                outln!(
                    "CANNOT TELL {}): the machine ran {:.1}% {} than at the baseline (the gauge's {}{clock} on cpus {}), more than the {}% threshold",
                    c.head(),
                    m.abs(),
                    if m > 0.0 { "slower" } else { "faster" },
                    probe.name(),
                    c.cpus,
                    threshold * 100.0,
                )?;
            }
            for c in cases.iter().filter(|c| !c.regressed) {
                let Some(n) = c.noisier() else { continue };
                outln!(
                    "CANNOT TELL {}): the machine is noisier now than in the baseline label's runs ({} spread ±{:.1}% within a run now, {}±{:.1}% in theirs, beyond ±{:.1}%): their line does not describe it; check again when it is quieter",
                    c.head(),
                    match n.by {
                        Jumped::Control => format!(
                            "the gauge's CPU loop{}",
                            clock_name(c.machine.as_ref().is_some_and(|m| m.thread_clock))
                        ),
                        Jumped::Trials => "the case's own trials".into(),
                    },
                    n.now_pct,
                    n.baseline_pct
                        .map(|b| format!("±{b:.1}% in the baseline, "))
                        .unwrap_or_default(),
                    n.label_pct,
                    n.bound_pct,
                )?;
            }
            for c in cases.iter().filter(|c| {
                c.verdict == Verdict::CannotTell
                    && !c.machine_moved
                    && c.noisier().is_none()
                    && c.confirmation.is_none()
            }) {
                outln!(
                    "CANNOT TELL {}, {}): the smallest change this comparison could see is {}, above the {}% threshold{}",
                    c.head(),
                    // Where the line decided, its p is the line's, not
                    // the two runs' test's.
                    match (c.machine.as_ref().and_then(|m| m.covariate.as_ref()), c.test, c.p) {
                        (Some(_), _, Some(p)) => format!("the control's line, p = {}", p_value(p)),
                        (None, Some(t), Some(p)) => format!("{}, p = {}", t.name(), p_value(p)),
                        _ => "no test".into(),
                    },
                    c.mdc_pct
                        .map(|m| format!("{m:.1}%"))
                        .unwrap_or_else(|| "unknown".into()),
                    threshold * 100.0,
                    c.machine
                        .as_ref()
                        .map(|m| if let Some(cv) = &m.covariate {
                            format!("{}{}", c.against_line(), match cv.repeat_for_threshold {
                                Some(n) if n > cv.now_runs => format!(
                                    "; the mean of {n} runs now (`--repeat {n}`) would see {}%",
                                    threshold * 100.0
                                ),
                                Some(_) => String::new(),
                                None => format!(
                                    "; no number of runs now up to {MAX_REPEAT} would see {}%: more runs of the baseline's label would narrow the line",
                                    threshold * 100.0
                                ),
                            })
                        } else if m.between_runs > 0 {
                            format!(
                                " (the case's own spread between runs, ±{:.1}% from {} runs of the baseline's label{}, included)",
                                m.between_pct,
                                m.between_runs,
                                if m.between_pooled { " pooled with the gauge's" } else { "" }
                            )
                        } else {
                            format!(
                                " (the machine's own spread between runs, ±{:.1}%, included)",
                                m.between_pct
                            )
                        })
                        .unwrap_or_default(),
                )?;
            }
            for f in &failed {
                outln!("{} {f}", paint("FAILED"))?;
            }
            match overall {
                Some(m) => outln!(
                    "kscale check: the machine ran {:.1}% {} than at the baseline (the gauge's CPU loop, {} and {} readings); its spread between moments, ±{:.1}%, is part of every test",
                    ((m.slower - 1.0) * 100.0).abs(),
                    if m.slower >= 1.0 { "slower" } else { "faster" },
                    m.n_base,
                    m.n_now,
                    m.between_cv * 100.0
                )?,
                None => outln!(
                    "kscale check: no gauge readings in one of the runs: the machine's own move between them is unknown and not in the tests"
                )?,
            }
            outln!(
                "kscale check: {} case(s) of run{} compared with baseline run {} ({}): {} regressed by more than {}% (p < {} each, {family_alpha} over the {} cases), {} cannot tell (minimum detectable change above {}%, power {POWER}), {} not measured",
                cases.len(),
                plural(&now_ids),
                base.run.id,
                base.run.label,
                regressed,
                threshold * 100.0,
                p_value(alpha),
                cases.len(),
                cannot_tell,
                threshold * 100.0,
                failed.len()
            )?;
        }
    }
    Ok(ExitCode::from(code))
}

/// What a probe's figure is read on, after its name: nothing for the
/// wall, which every other line means.
fn clock_name(thread: bool) -> &'static str {
    if thread {
        " on the thread's CPU clock"
    } else {
        ""
    }
}

/// ` 12` or `s 12, 13`: after "run".
fn plural(ids: &[i64]) -> String {
    format!("{} {}", if ids.len() > 1 { "s" } else { "" }, join_ids(ids))
}

impl Confirmation {
    /// `+11.0% worse, p = 0.0004`: what the runs measured again found.
    fn found(&self) -> String {
        match self.worse_pct {
            Some(w) => format!(
                "{}, p = {}{}",
                change(w),
                self.p.map(p_value).unwrap_or_else(|| "-".into()),
                if self.reproduced {
                    ""
                } else {
                    ", not regressed"
                }
            ),
            None => "not measured".into(),
        }
    }
}

/// `+22.4% worse` or `7.2% better`: a faster result is never "worse".
fn change(worse_pct: f64) -> String {
    if worse_pct < 0.0 {
        format!("{:.1}% better", -worse_pct)
    } else {
        format!("{worse_pct:+.1}% worse")
    }
}

fn p_value(p: f64) -> String {
    if p >= 0.001 {
        format!("{p:.3}")
    } else {
        format!("{p:.1e}")
    }
}

fn sig(x: f64) -> String {
    kscale_report::format::sig(x, 4)
}

#[cfg(test)]
mod tests {
    use super::Verdict;

    #[test]
    fn verdicts() {
        let v = |sig, better, worse, mdc| Verdict::of(sig, better, worse, mdc, 0.05);
        // Worse beyond the threshold, and significant: regressed.
        assert_eq!(v(true, Some(false), 0.2, Some(0.5)), Verdict::Regressed);
        // Worse but within the threshold, and the noise could show 5 %: ok.
        assert_eq!(v(true, Some(false), 0.03, Some(0.04)), Verdict::Ok);
        // No difference found, and one of 5 % would have shown: ok.
        assert_eq!(v(false, Some(false), 0.01, Some(0.04)), Verdict::Ok);
        // No difference found, but 25 % could hide: cannot tell.
        assert_eq!(v(false, Some(false), 0.2, Some(0.25)), Verdict::CannotTell);
        assert_eq!(v(false, Some(true), -0.2, Some(0.25)), Verdict::CannotTell);
        assert_eq!(v(false, None, 0.0, None), Verdict::CannotTell);
        // Significantly better is no regression, however noisy.
        assert_eq!(v(true, Some(true), -0.4, Some(0.3)), Verdict::Ok);
    }

    #[test]
    fn a_slower_machine_explains_only_its_own_share() {
        use super::{beyond_machine, Direction};
        // Latency 100x with the machine 1.6x slower: still 61x worse.
        assert!((beyond_machine(Direction::Lower, 100.0, 1.6) - 61.5).abs() < 1e-9);
        // Latency 1.5x on a 1.6x slower machine: nothing left over.
        assert!(beyond_machine(Direction::Lower, 1.5, 1.6) < 0.0);
        // Throughput at a tenth on a 2x slower machine: 80 % worse.
        assert!((beyond_machine(Direction::Higher, 0.1, 2.0) - 0.8).abs() < 1e-9);
        // Throughput at 60 % on a 2x slower machine: better than explained.
        assert!(beyond_machine(Direction::Higher, 0.6, 2.0) < 0.0);
    }

    fn case(cpus: &str, worse: f64, regressed: bool) -> super::CaseCheck {
        super::CaseCheck {
            workload: "syscall.null".into(),
            case: "Simple syscall".into(),
            params: Default::default(),
            cpus: cpus.into(),
            metric: "latency".into(),
            unit: "µs".into(),
            direction: super::Direction::Lower,
            baseline: 1.0,
            now: 1.0 + worse / 100.0,
            worse_pct: worse,
            p: Some(if regressed { 1e-4 } else { 0.3 }),
            significant: regressed,
            test: None,
            mdc_pct: Some(4.0),
            regressed,
            verdict: if regressed {
                Verdict::Regressed
            } else {
                Verdict::Ok
            },
            machine: None,
            machine_moved: false,
            confirmation: None,
        }
    }

    fn reading(cpu_ns: f64, thread: Option<f64>) -> super::Reading {
        super::Reading {
            cpu_ns,
            cpu_thread_ns: thread,
            ..Default::default()
        }
    }

    /// A case timed on its thread's CPU clock is compared at the control's
    /// readings on that clock, one on the wall at the wall's; a label's
    /// run read before the thread clock was drops out of the line, a
    /// baseline without it leaves every case on the wall.
    #[test]
    fn each_case_is_compared_on_its_own_clock() {
        use super::{Clock, Gauges, Machine};
        let gauges = |base: Vec<super::Reading>| Gauges {
            base,
            // A neighbour doubled the loop on the wall, not on the thread.
            now: vec![reading(200.0, Some(100.0))],
            repeats: vec![vec![reading(200.0, Some(100.0))]],
            earlier: [
                (1, vec![reading(100.0, Some(100.0))]),
                (2, vec![reading(100.0, None)]),
            ]
            .into_iter()
            .collect(),
        };
        let wall = gauges(vec![reading(100.0, Some(100.0))]);
        let machine = Machine {
            thread: wall.on_thread_clock(),
            wall,
            repeats: Vec::new(),
            earlier: Vec::new(),
            same_kernel: true,
        };
        let (g, clock) = machine.gauges("syscall.null");
        assert_eq!(clock, Clock::Thread);
        assert_eq!(g.now[0].cpu_ns, 100.0);
        assert_eq!(g.earlier.keys().copied().collect::<Vec<_>>(), vec![1]);
        let mv = super::noise::machine_move(&g.base, &g.now, &[]).unwrap();
        assert!((mv.slower - 1.0).abs() < 1e-9);
        let (g, clock) = machine.gauges("ctx.lat");
        assert_eq!(clock, Clock::Wall);
        assert_eq!(g.now[0].cpu_ns, 200.0);
        let old = gauges(vec![reading(100.0, None)]);
        assert!(old.on_thread_clock().is_none());
    }

    fn assessed(cases: Vec<super::CaseCheck>, family_alpha: f64) -> super::Assessed {
        super::Assessed {
            alpha: family_alpha / cases.len() as f64,
            cases,
            failed: Vec::new(),
            family_alpha,
            estimator: "trimmed",
        }
    }

    #[test]
    fn a_regression_stands_only_where_the_runs_measured_again_find_it_too() {
        // The first run: both CPU configurations 12 % worse, a third case
        // fine.
        let mut first = assessed(
            vec![
                case("1", 12.0, true),
                case("all", 12.0, true),
                case("2", 1.0, false),
            ],
            super::GATE_ALPHA,
        );
        // Measured again: one configuration still worse, the other was a
        // spell of the machine.
        let second = assessed(
            vec![
                case("1", 11.0, true),
                case("all", 0.5, false),
                case("2", 1.0, false),
            ],
            super::CONFIRM_ALPHA,
        );
        super::confirm(&mut first, &second, &[7]);
        let [one, all, two] = &first.cases[..] else {
            panic!("three cases")
        };
        assert!(one.regressed && one.verdict == Verdict::Regressed);
        let f = one.confirmation.as_ref().expect("looked at again");
        assert!(f.reproduced && f.runs == [7] && f.worse_pct == Some(11.0));
        assert!(!all.regressed && all.verdict == Verdict::CannotTell);
        let f = all.confirmation.as_ref().expect("looked at again");
        assert!(!f.reproduced && f.worse_pct == Some(0.5));
        assert!(f.found().contains("not regressed"), "{}", f.found());
        // A case that was not regressed is not looked at again.
        assert!(two.confirmation.is_none() && two.verdict == Verdict::Ok);
        // A case the second look could not measure is not confirmed.
        let mut first = assessed(vec![case("1", 12.0, true)], super::GATE_ALPHA);
        super::confirm(&mut first, &assessed(vec![], super::CONFIRM_ALPHA), &[8]);
        assert!(!first.cases[0].regressed);
        assert_eq!(
            first.cases[0].confirmation.as_ref().map(|f| f.found()),
            Some("not measured".to_string())
        );
    }

    #[test]
    fn a_faster_result_reads_better_not_negative_worse() {
        assert_eq!(super::change(-7.2), "7.2% better");
        assert_eq!(super::change(22.4), "+22.4% worse");
    }

    #[test]
    fn thresholds() {
        assert_eq!(super::parse_threshold("5%").unwrap(), 0.05);
        assert_eq!(super::parse_threshold(" 10 ").unwrap(), 0.1);
        for bad in ["", "0%", "-3%", "x", "nan%"] {
            assert!(super::parse_threshold(bad).is_err(), "{bad}");
        }
    }
}
