//! `kscale changes [TARGET…]`: the change points of each case's series of
//! runs (docs/history.md) — where its level moved, by how much, whether it
//! stayed moved — worst first, with the kernel profile diff of the runs
//! around a change where both were profiled. The exit status makes it a
//! gate over the whole history, as `check` is over one new run: 0 nothing
//! persistent is worse than the threshold, 1 something is, 2 bad input.

use super::history::{Select, Series, CONFIDENCE_PCT};
use crate::error::user;
use crate::output::{csv_record, outln, print, Format, Json};
use anyhow::Result;
use kscale_core::changes::{detect, Change, Point, Settings};
use kscale_core::verdict::CompareWord;
use kscale_report::format::{p_value as p_text, sig, signed_pct as pct};
use serde::Serialize;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 no persistent change is slower: worse beyond the threshold, \
its interval excluding no change (docs/verdicts.md); 1 at least one is (one line each, worst \
first); 2 bad input. The method and its false-alarm and \
detection rates: docs/history.md.

Examples:
  kscale changes                                    every stored case
  kscale changes syscall --cpus 1 --threshold 3%
  kscale changes mem.rd:size=8m --order kernel --format json"
)]
pub struct Args {
    #[command(flatten)]
    select: Select,
    /// Smallest worsening that fails the gate, in % (`5%` or `5`).
    #[arg(long, value_name = "PCT", default_value = "5%")]
    threshold: String,
    /// Routines listed in each profile diff.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Output format: terminal, json or csv.
    #[arg(long, value_enum, default_value_t, hide_possible_values = true)]
    format: Format,
}

/// `5%`, `5` or `0.5%`: a fraction.
fn parse_threshold(s: &str) -> Result<f64> {
    let t = s.trim().trim_end_matches('%').trim();
    match t.parse::<f64>() {
        Ok(v) if (0.0..=1000.0).contains(&v) => Ok(v / 100.0),
        _ => Err(user(format!(
            "bad --threshold `{s}`: expected a percentage from 0 to 1000, e.g. 5%"
        ))),
    }
}

/// One change as printed and exported.
#[derive(Serialize)]
struct Found {
    case: String,
    workload: String,
    params: std::collections::BTreeMap<String, String>,
    cpus: String,
    metric: String,
    unit: String,
    direction: kscale_core::Direction,
    /// The first run after the change, and the last before it.
    run: i64,
    label: String,
    started_at: String,
    kernel: Option<String>,
    run_before: i64,
    /// Place of `run` in the series (0-based) and the series' length.
    index: usize,
    runs: usize,
    before: f64,
    after: f64,
    change_pct: f64,
    change_low_pct: f64,
    change_high_pct: f64,
    /// How much worse (positive) or better (negative), in %.
    worse_pct: f64,
    p: f64,
    trial_test: Option<&'static str>,
    trial_p: Option<f64>,
    persistent: bool,
    /// The first run of the later change that undid it.
    reverted_by: Option<i64>,
    /// Persistent and worse than the threshold: fails the gate.
    regression: bool,
    /// The change read by the comparisons' rule at the threshold
    /// (docs/verdicts.md): a regression is a persistent "slower".
    verdict: CompareWord,
    #[serde(skip_serializing_if = "Option::is_none")]
    profile_diff: Option<serde_json::Value>,
    #[serde(skip)]
    profile_table: Option<kscale_report::Table>,
}

fn found(s: &Series, c: &Change, threshold: f64) -> Found {
    let (p_after, p_before) = (&s.points[c.at], &s.points[c.at - 1]);
    let worse = c.worse(s.case.direction);
    // The change's interval, worse above 0, read by the comparisons' rule
    // (docs/verdicts.md).
    let ln = |r: f64| (1.0 + r).ln();
    let (est, lo, hi) = kscale_core::verdict::worse_interval(
        ln(c.rel),
        ln(c.rel_low),
        ln(c.rel_high),
        s.case.direction,
    );
    let verdict = kscale_core::verdict::classify(est, lo, hi, threshold);
    Found {
        case: s.title(),
        workload: s.case.workload.clone(),
        params: s.case.params.clone(),
        cpus: s.case.cpus.clone(),
        metric: s.case.metric.clone(),
        unit: s.case.unit.clone(),
        direction: s.case.direction,
        run: p_after.run.id,
        label: p_after.run.label.clone(),
        started_at: p_after.run.started_at.clone(),
        kernel: p_after.run.kernel.clone(),
        run_before: p_before.run.id,
        index: c.at,
        runs: s.points.len(),
        before: c.before,
        after: c.after,
        change_pct: 100.0 * c.rel,
        change_low_pct: 100.0 * c.rel_low,
        change_high_pct: 100.0 * c.rel_high,
        worse_pct: 100.0 * worse,
        p: c.p,
        trial_test: c.trials.map(|t| t.test.name()),
        trial_p: c.trials.map(|t| t.p),
        persistent: c.persistent(),
        reverted_by: c.reverted_at.map(|i| s.points[i].run.id),
        regression: c.persistent() && verdict == CompareWord::Slower,
        verdict,
        profile_diff: None,
        profile_table: None,
    }
}

fn line(f: &Found) -> String {
    let kernel = f
        .kernel
        .as_deref()
        .map(|k| format!(", {k}"))
        .unwrap_or_default();
    let trials = match (f.trial_test, f.trial_p) {
        (Some(t), Some(p)) => format!(", trials {t} p {}", p_text(p)),
        _ => String::new(),
    };
    let fate = match f.reverted_by {
        Some(r) => format!("reverted at run #{r}"),
        None => "persistent".into(),
    };
    let verdict = if f.worse_pct > 0.0 { "worse" } else { "better" };
    format!(
        "{}  {} {verdict} ({})  {} {}: {} → {} {} from run #{} ({}, {}{kernel}; run {} of {})  [{}, {}]  p {}{trials}  {fate}",
        if f.regression { "REGRESSION" } else { "change    " },
        pct(f.worse_pct.abs()),
        f.verdict.as_str(),
        f.case,
        f.metric,
        sig(f.before, 4),
        sig(f.after, 4),
        f.unit,
        f.run,
        f.label,
        f.started_at.get(..10).unwrap_or(&f.started_at),
        f.index + 1,
        f.runs,
        pct(f.change_low_pct),
        pct(f.change_high_pct),
        p_text(f.p),
    )
}

fn csv(all: &[Found]) -> String {
    let mut out = String::from(
        "workload,params,cpus,metric,unit,direction,run,run_before,label,started_at,kernel,before,after,change_pct,change_low_pct,change_high_pct,worse_pct,p,trial_test,trial_p,persistent,reverted_by,regression\n",
    );
    for f in all {
        let params: Vec<String> = f.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let opt = |x: Option<String>| x.unwrap_or_default();
        let fields = [
            f.workload.clone(),
            params.join(" "),
            f.cpus.clone(),
            f.metric.clone(),
            f.unit.clone(),
            f.direction.to_string(),
            f.run.to_string(),
            f.run_before.to_string(),
            f.label.clone(),
            f.started_at.clone(),
            opt(f.kernel.clone()),
            f.before.to_string(),
            f.after.to_string(),
            f.change_pct.to_string(),
            f.change_low_pct.to_string(),
            f.change_high_pct.to_string(),
            f.worse_pct.to_string(),
            f.p.to_string(),
            opt(f.trial_test.map(String::from)),
            opt(f.trial_p.map(|p| p.to_string())),
            f.persistent.to_string(),
            opt(f.reverted_by.map(|r| r.to_string())),
            f.regression.to_string(),
        ];
        out.push_str(&csv_record(&fields));
    }
    out
}

/// The change points of one series, found as `changes` finds them; the
/// HTML history report marks the same ones.
pub fn detect_series(s: &Series) -> Vec<Change> {
    let points: Vec<Point> = s
        .points
        .iter()
        .map(|p| Point {
            value: p.value,
            trials: p.trials(&s.case.metric),
        })
        .collect();
    let settings = Settings {
        confidence_pct: CONFIDENCE_PCT,
        estimator: s
            .points
            .last()
            .map(|p| p.case.estimator)
            .unwrap_or_default(),
        ..Settings::default()
    };
    detect(&points, &settings)
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    let format = args
        .format
        .accepted("changes", &[Format::Terminal, Format::Json, Format::Csv])?;
    let threshold = parse_threshold(&args.threshold)?;
    let store = super::open_existing(db)?;
    let series = args.select.series(&store)?;
    let mut all: Vec<Found> = Vec::new();
    let mut searched = 0;
    for s in &series {
        if s.points.len() >= 2 * Settings::default().min_runs {
            searched += 1;
        }
        for c in detect_series(s) {
            let mut f = found(s, &c, threshold);
            let (a, b) = (&s.points[c.at - 1], &s.points[c.at]);
            let event = "cpu-clock";
            if a.profiled.iter().any(|e| e == event) && b.profiled.iter().any(|e| e == event) {
                let (mut ca, mut cb) = (a.case.clone(), b.case.clone());
                ca.profiles = store.profiles(ca.id)?;
                cb.profiles = store.profiles(cb.id)?;
                let names = (
                    format!("{}#{}", a.run.label, a.run.id),
                    format!("{}#{}", b.run.label, b.run.id),
                );
                if let Some((table, value)) =
                    super::profile::case_diff(&ca, &cb, event, (&names.0, &names.1), args.top)
                {
                    f.profile_table = Some(table);
                    f.profile_diff = Some(value);
                }
            }
            all.push(f);
        }
    }
    // Worst first: the largest worsening, then the largest improvement last.
    all.sort_by(|a, b| b.worse_pct.total_cmp(&a.worse_pct));
    let regressions = all.iter().filter(|f| f.regression).count();
    let reverted = all.iter().filter(|f| !f.persistent).count();
    let summary = format!(
        "{} case{}, {} with enough runs to search ({} each side of a change); {} change{}: {} regression{} worse than {} %, {} reverted",
        series.len(),
        if series.len() == 1 { "" } else { "s" },
        searched,
        Settings::default().min_runs,
        all.len(),
        if all.len() == 1 { "" } else { "s" },
        regressions,
        if regressions == 1 { "" } else { "s" },
        100.0 * threshold,
        reverted,
    );
    match format {
        Format::Json => print(&Json.document(&json!({
            "threshold_pct": 100.0 * threshold,
            "cases": series.len(),
            "searched": searched,
            "changes": all,
            "regressions": regressions,
        }))?)?,
        Format::Csv => print(&csv(&all))?,
        // md was refused above.
        Format::Terminal | Format::Md => {
            for f in &all {
                outln!("{}", line(f))?;
            }
            for f in &all {
                if let Some(t) = &f.profile_table {
                    outln!()?;
                    print(&t.to_terminal(super::use_color()))?;
                }
            }
            if !all.is_empty() {
                outln!()?;
            }
            outln!("{summary}")?;
        }
    }
    Ok(if regressions > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_parse_as_percentages() {
        assert_eq!(parse_threshold("5%").unwrap(), 0.05);
        assert_eq!(parse_threshold(" 2.5 ").unwrap(), 0.025);
        for bad in ["-1%", "x", "2000", "NaN"] {
            assert!(parse_threshold(bad).is_err(), "{bad}");
        }
    }
}
