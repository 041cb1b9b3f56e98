//! `kscale check --baseline RUN TARGETS…`: a regression gate. It measures
//! the targets now in several runs, exactly as `kscale run` would, and
//! gives each case a verdict against the baseline (docs/verdicts.md):
//! worse, not worse, or cannot tell, with its interval. The spread those
//! intervals stand on is the spread between the case's runs on this host
//! and kernel — the store's and the ones just measured — never a probe
//! that runs the code under test. The exit status is what CI and
//! `git bisect run` read: 0 every case not worse, 1 a case worse, 125 a
//! case could not be told or measured ("skip this commit"), 2 bad input.

use crate::engine::gate::{self, Judged, Target};
use crate::engine::plan::PlanEntry;
use crate::error::{user, Interrupted, Stopped, UserError};
use crate::output::{outln, print, Format, Json};
use anyhow::Result;
use kscale_core::cpus::base_name;
use kscale_core::noise;
use kscale_core::verdict::{GateWord, ALPHA};
use kscale_store::{RunData, Store};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

/// `git bisect run` reads 125 as "this commit cannot be tested".
pub const UNMEASURED: u8 = 125;

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 every case is not worse than the baseline by the threshold (the \
interval's upper end below it); 1 at least one case is worse by more than the threshold (one line \
each); 125 a case cannot be told either way or could not be measured; 2 bad input.

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
    /// Output format: terminal or json.
    #[arg(long, value_enum, default_value_t, hide_possible_values = true)]
    format: Format,
    /// Runs to measure the targets in before the first verdict: the runs
    /// now are one side of each comparison, and their spread one part of
    /// the between-run spread it stands on. 1 to 20.
    #[arg(long, value_name = "N", default_value_t = 3)]
    repeat: u32,
    /// The most runs to measure in all: while a case cannot be told and
    /// more runs could decide it at the spread measured, it is measured
    /// again, alone, up to this many runs, while the check stays within a
    /// minute a case. `--repeat` to 20.
    #[arg(long, value_name = "N", default_value_t = 6)]
    max_runs: u32,
    /// Measure in this kernel image booted in QEMU (`kscale vm`), each run a boot, not on the
    /// host's kernel: a kernel bisect step, against a baseline measured the same way (docs/vm.md).
    #[arg(long, value_name = "IMAGE")]
    kernel: Option<PathBuf>,
    #[command(flatten)]
    run: super::run::Args,
}

/// The `run` command line a guest measures for `check --kernel`: this
/// check's words as given, its own options left out.
fn guest_run(argv: &[String]) -> Vec<String> {
    const OWN: &[&str] = &[
        "--baseline",
        "--threshold",
        "--format",
        "--repeat",
        "--max-runs",
        "--kernel",
    ];
    let mut out = vec!["run".to_string()];
    let mut words = argv.iter().skip_while(|w| *w != "check").skip(1);
    while let Some(w) = words.next() {
        let name = w.split('=').next().unwrap_or(w);
        if OWN.contains(&name) {
            if !w.contains('=') {
                words.next();
            }
            continue;
        }
        out.push(w.clone());
    }
    out
}

/// `5%`, `5` or `0.5%`: a fraction in (0, 10].
pub fn parse_threshold(s: &str) -> Result<f64> {
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

/// The most runs a check measures.
const MAX_RUNS: u32 = 20;

/// How long a check may take a case before it stops measuring more runs
/// of the undecided ones: a bisect step is a minute a case, not ten.
const SECONDS_A_CASE: f64 = 60.0;

pub fn run(mut args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    let format = args
        .format
        .accepted("check", &[Format::Terminal, Format::Json])?;
    let threshold = parse_threshold(&args.threshold)?;
    if !(1..=MAX_RUNS).contains(&args.repeat) {
        return Err(user(format!(
            "bad --repeat `{}`: expected a number of runs from 1 to {MAX_RUNS}",
            args.repeat
        )));
    }
    if !(args.repeat..=MAX_RUNS).contains(&args.max_runs) {
        return Err(user(format!(
            "bad --max-runs `{}`: expected a number of runs from --repeat ({}) to {MAX_RUNS}",
            args.max_runs, args.repeat
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
    // alike (docs/noise.md, "Paced trials").
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
    let targets: Vec<Target> = gate::targets(&base)
        .into_iter()
        .filter(|t| opts.plan.iter().any(|e| planned(e, t)))
        .collect();
    if targets.is_empty() {
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

    let vcpus = super::vm::vcpus_of(&base.run.snapshot);
    let started = std::time::Instant::now();
    let mut ids = Vec::new();
    let mut store = None;
    // Each run's wall seconds: the next run is priced at the longest.
    let mut runs_s: Vec<f64> = Vec::new();
    for i in 0..args.repeat {
        eprintln!("kscale check: run {} of {}", i + 1, args.repeat);
        let at = std::time::Instant::now();
        let Some((s, id)) = measure(&args, &db, vcpus, |e| targets.iter().any(|t| planned(e, t)))?
        else {
            return Ok(ExitCode::from(UNMEASURED));
        };
        runs_s.push(at.elapsed().as_secs_f64());
        ids.push(id);
        store = Some(s);
    }
    let Some(mut store) = store else {
        return Ok(ExitCode::from(UNMEASURED));
    };
    let mut judged = gate::judge(&store, &base, &ids, &targets, threshold)?;
    // Runs until every case is decided, or no number of runs left could
    // decide the rest, or another run would take the check past
    // [`SECONDS_A_CASE`] a case: only the undecided cases are measured
    // again.
    let limit_s = SECONDS_A_CASE * targets.len() as f64;
    while (ids.len() as u32) < args.max_runs {
        if !another_run_fits(started.elapsed().as_secs_f64(), &runs_s, limit_s) {
            break;
        }
        let left = args.max_runs as usize - ids.len();
        let open: Vec<&Target> = judged
            .iter()
            .filter(|j| gate::more_runs_could_decide(j, left, threshold))
            .map(|j| &j.target)
            .collect();
        if open.is_empty() {
            break;
        }
        eprintln!(
            "kscale check: run {}: {} case(s) cannot be told yet; measuring them again",
            ids.len() + 1,
            open.len()
        );
        let at = std::time::Instant::now();
        let Some((s, id)) = measure(&args, &db, vcpus, |e| open.iter().any(|t| planned(e, t)))?
        else {
            return Ok(ExitCode::from(UNMEASURED));
        };
        runs_s.push(at.elapsed().as_secs_f64());
        ids.push(id);
        store = s;
        judged = gate::judge(&store, &base, &ids, &targets, threshold)?;
    }
    let machine = machine_line(&store, &base, &ids)?;
    report(&base, &ids, threshold, format, &judged, machine)
}

/// What a check keeps of its minute for reading the runs and saying the
/// verdict, after its last run.
const VERDICT_S: f64 = 1.0;

/// Whether another run keeps a check that has spent `spent` seconds
/// within `limit_s`: priced at the longest run so far, not the mean. Runs
/// of one case differ by their pilot and the host's spells, and priced at
/// the mean a check under the neighbour took a fourth run at 45 s and
/// ended at 61–63 s.
fn another_run_fits(spent: f64, runs_s: &[f64], limit_s: f64) -> bool {
    let longest = runs_s.iter().copied().fold(0.0, f64::max);
    spent + longest + VERDICT_S <= limit_s
}

/// `e` measures target `t`: same workload, params and CPU configuration.
fn planned(e: &PlanEntry, t: &Target) -> bool {
    e.workload == t.workload
        && e.params == t.params
        && base_name(&e.cpus_name) == base_name(&t.cpus)
}

/// Measures the cases `keep` accepts in one run; `None` (after saying
/// why) when it could not be measured.
fn measure(
    args: &Args,
    db: &Option<PathBuf>,
    vcpus: Option<super::vm::Vcpus>,
    keep: impl Fn(&PlanEntry) -> bool,
) -> Result<Option<(Store, i64)>> {
    let measured = match &args.kernel {
        // The guest measures every target each boot (the filter is the
        // host's plan's), booted as the baseline was.
        Some(k) => {
            let argv: Vec<String> = std::env::args().collect();
            super::open_store(db.clone()).and_then(|s| {
                let id = super::vm::measure_in(&s, k, &guest_run(&argv), vcpus)?;
                Ok((s, id))
            })
        }
        None => super::run::measure_kept(&args.run, db.clone(), &keep),
    };
    match measured {
        Ok(r) => Ok(Some(r)),
        Err(e) => {
            if e.downcast_ref::<Interrupted>().is_some()
                || e.downcast_ref::<Stopped>().is_some()
                || e.downcast_ref::<UserError>().is_some()
            {
                return Err(e);
            }
            if args.format == Format::Json {
                print(&Json.document(&json!({
                    "status": "unmeasured",
                    "error": format!("{e:#}"),
                }))?)?;
            }
            eprintln!("kscale: check: could not measure: {e:#}");
            Ok(None)
        }
    }
}

/// The machine beside the verdicts, from the gauge's user-space CPU loop
/// alone (it runs no kernel code, so a slower kernel path cannot move it):
/// how much slower it ran now than at the baseline, and its spread within
/// the runs now. Shown, never used to explain a case away: the runs'
/// spread already holds the machine's moves between runs.
#[derive(serde::Serialize)]
struct MachineLine {
    loop_slower_pct: Option<f64>,
    loop_cv_now_pct: f64,
    loop_cv_base_pct: f64,
}

fn machine_line(store: &Store, base: &RunData, ids: &[i64]) -> Result<MachineLine> {
    let b = store.gauge(base.run.id)?;
    let mut now = Vec::new();
    for &id in ids {
        now.extend(store.gauge(id)?);
    }
    Ok(MachineLine {
        loop_slower_pct: noise::machine_move(&b, &now, &[]).map(|m| (m.slower - 1.0) * 100.0),
        loop_cv_now_pct: crate::engine::gauge::worst_loop_cv(&now) * 100.0,
        loop_cv_base_pct: crate::engine::gauge::worst_loop_cv(&b) * 100.0,
    })
}

fn word(j: &Judged) -> GateWord {
    j.verdict.map_or(GateWord::CannotTell, |v| v.verdict)
}

/// What the pace beside the trials did to the comparison, for its line.
fn pace_words(f: &gate::Footing) -> String {
    let (Some(g), Some(m)) = (f.pace, f.pace_move_pct) else {
        return String::new();
    };
    format!(
        "; the pace beside the trials ran {:.1}% {} than at the baseline, taken out at {:.2}× ({})",
        m.abs(),
        if m >= 0.0 { "slower" } else { "faster" },
        g.gain,
        if g.fitted {
            format!("fitted over {} runs", g.runs)
        } else {
            "the unit gain until 8 runs".to_string()
        }
    )
}

/// One case's line: its verdict, interval and what it stood on.
fn case_line(j: &Judged, threshold: f64) -> String {
    let t = &j.target;
    let f = &j.footing;
    let head = format!("{} [cpus {}] ({})", t.name(), t.cpus, t.metric);
    let runs = format!(
        "{} baseline run{}, {} now; one run spreads ±{} ({} runs on this host and kernel){}",
        f.base_runs.len(),
        if f.base_runs.len() == 1 { "" } else { "s" },
        f.now_runs.len(),
        f.spread_pct.map_or("–".into(), |s| format!("{s:.1}%")),
        f.spread_runs,
        pace_words(f)
    );
    let Some(v) = j.verdict else {
        return format!(
            "CANNOT TELL {head}: {}; a spread between runs needs two runs of one build",
            if f.now_runs.is_empty() {
                "not measured now".to_string()
            } else {
                runs
            }
        );
    };
    let i = v.interval;
    let interval = format!(
        "{:+.1}% [{:+.1}%, {:+.1}%] ({:.0}% interval)",
        i.est_pct, i.lo_pct, i.hi_pct, i.confidence_pct
    );
    match v.verdict {
        GateWord::Worse => format!(
            "WORSE {head}: {interval}, beyond the {:.0}% threshold; {runs}",
            threshold * 100.0
        ),
        GateWord::NotWorse => format!(
            "not worse {head}: {interval}, below the {:.0}% threshold; {runs}",
            threshold * 100.0
        ),
        GateWord::CannotTell if v.machine_pct.is_some() => {
            let m = v.machine_pct.unwrap_or_default();
            format!(
                "CANNOT TELL {head}: {interval}, but the machine itself ran {:.1}% {} than at the baseline ({}, beyond its spread between runs), so a \"{}\" could be the machine's: check again later; {runs}",
                m.abs(),
                if m > 0.0 { "slower" } else { "faster" },
                if f.pace.is_some() {
                    "the user-space loop timed beside each trial"
                } else {
                    "the gauge's user-space CPU loop"
                },
                if m > 0.0 { "worse" } else { "not worse" },
            )
        }
        GateWord::CannotTell => format!(
            "CANNOT TELL {head}: {interval}: this comparison could decide a threshold of {:.1}%, not {:.0}%; {}; {runs}",
            v.smallest_threshold_pct,
            threshold * 100.0,
            match v.runs_needed {
                Some(n) => format!("{:.0}% would take about {n} runs a side", threshold * 100.0),
                None => "its estimate itself is beyond the threshold, and more runs would tell whether it is worse".into(),
            },
        ),
    }
}

/// Prints the verdicts and returns the exit status.
fn report(
    base: &RunData,
    ids: &[i64],
    threshold: f64,
    format: Format,
    judged: &[Judged],
    machine: MachineLine,
) -> Result<ExitCode> {
    let count = |w: GateWord| judged.iter().filter(|j| word(j) == w).count();
    let (worse, fine, unsure) = (
        count(GateWord::Worse),
        count(GateWord::NotWorse),
        count(GateWord::CannotTell),
    );
    let (status, code) = if worse > 0 {
        ("worse", 1)
    } else if unsure > 0 {
        ("cannot_tell", UNMEASURED)
    } else {
        ("not_worse", 0)
    };
    match format {
        Format::Json => {
            let cases: Vec<_> = judged
                .iter()
                .map(|j| {
                    json!({
                        "workload": j.target.workload,
                        "params": j.target.params,
                        "cpus": j.target.cpus,
                        "metric": j.target.metric,
                        "unit": j.target.unit,
                        "verdict": word(j),
                        "interval": j.verdict.map(|v| v.interval),
                        "smallest_threshold_pct": j.verdict.map(|v| v.smallest_threshold_pct),
                        "runs_needed": j.verdict.and_then(|v| v.runs_needed),
                        // Where the machine's own move withheld the verdict.
                        "machine_pct": j.verdict.and_then(|v| v.machine_pct),
                        "footing": j.footing,
                    })
                })
                .collect();
            print(&Json.document(&json!({
                "status": status,
                "baseline": {"id": base.run.id, "label": base.run.label},
                "runs": ids,
                "threshold_pct": threshold * 100.0,
                "alpha": ALPHA,
                "machine": machine,
                "cases": cases,
            }))?)?;
        }
        // csv and md were refused in `run`.
        Format::Terminal | Format::Csv | Format::Md => {
            for j in judged {
                outln!("{}", case_line(j, threshold))?;
            }
            match machine.loop_slower_pct {
                Some(m) => eprintln!(
                    "kscale check: the machine: its user-space CPU loop ran {:.1}% {} than at the baseline, spreading {:.1}% within the runs now ({:.1}% in the baseline's); shown beside the verdicts, not part of them",
                    m.abs(),
                    if m >= 0.0 { "slower" } else { "faster" },
                    machine.loop_cv_now_pct,
                    machine.loop_cv_base_pct
                ),
                None => eprintln!(
                    "kscale check: the machine: no gauge readings of both sides to show beside the verdicts"
                ),
            }
            eprintln!(
                "kscale check: {} case(s) of run{} {} against baseline run {} ({}) at {:.0}%: {worse} worse, {fine} not worse, {unsure} cannot tell (each interval at {:.0}%: α {ALPHA} over the cases, one-sided)",
                judged.len(),
                if ids.len() == 1 { "" } else { "s" },
                ids.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", "),
                base.run.id,
                base.run.label,
                threshold * 100.0,
                (1.0 - 2.0 * ALPHA / judged.len().max(1) as f64) * 100.0,
            );
        }
    }
    Ok(ExitCode::from(code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_runs_the_checks_run_options() {
        let argv: Vec<String> = [
            "kscale",
            "--db",
            "x.db",
            "check",
            "--baseline",
            "good",
            "--kernel=bzImage",
            "syscall.null",
            "--threshold",
            "10%",
            "--cpus",
            "1",
            "--quick",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            guest_run(&argv),
            ["run", "syscall.null", "--cpus", "1", "--quick"]
        );
    }

    #[test]
    fn thresholds_parse_with_or_without_percent() {
        assert_eq!(parse_threshold("5%").ok(), Some(0.05));
        assert_eq!(parse_threshold(" 10 ").ok(), Some(0.1));
        assert!(parse_threshold("0").is_err());
        assert!(parse_threshold("abc").is_err());
        assert!(parse_threshold("2000%").is_err());
    }

    /// Three runs of 12, 15 and 18 s: a mean-priced fourth (15 s) would
    /// be taken at 45 s and end past the minute; the longest is not.
    #[test]
    fn another_run_is_priced_at_the_longest() {
        let runs = [12.0, 15.0, 18.0];
        assert!(!another_run_fits(45.0, &runs, 60.0));
        assert!(another_run_fits(40.0, &runs, 60.0));
        assert!(another_run_fits(0.0, &[], 60.0));
    }
}
