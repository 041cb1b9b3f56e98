//! `kscale report RUN… -o FILE.html`: a self-contained HTML report; with
//! `--history TARGET…`, each case over the stored runs with its change
//! points (docs/history.md). The series and their changes are read and
//! found here exactly as `history` and `changes` read and find them, so the
//! page never disagrees with the gate.

use super::history::{RunFilter, CONFIDENCE_PCT};
use crate::error::user;
use crate::output::outln;
use anyhow::Result;
use kscale_report::history::{HistoryHeading, HistorySeries};
use kscale_report::html;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kscale report latest -o run.html                    one run
  kscale report 6.8 6.9 -o compare.html               two systems, the first the baseline
  kscale report --history syscall --cpus 1 -o h.html  each case over the stored runs, changes marked")]
pub struct Args {
    /// Runs to report on (ids, labels or `latest`); with two or more, the
    /// report compares them, the first being the baseline.
    #[arg(
        value_name = "RUN",
        required_unless_present = "history",
        conflicts_with = "history"
    )]
    runs: Vec<String>,
    /// Instead of runs: each case of these families or workloads
    /// (`syscall`, `mem.rd:size=8m`) over the stored runs, a point a run,
    /// with the change points `kscale changes` finds (docs/history.md).
    #[arg(long, value_name = "TARGET", num_args = 1..)]
    history: Vec<String>,
    /// The HTML file to write.
    #[arg(short, long, value_name = "FILE.html")]
    output: PathBuf,
    #[command(flatten, next_help_heading = "With --history")]
    filter: RunFilter,
}

/// Writes the report for these runs; shared with `kscale study`.
pub fn write(runs: &[kscale_store::RunData], path: &Path) -> Result<()> {
    let refs: Vec<&kscale_store::RunData> = runs.iter().collect();
    write_report(&html::build(&refs, &super::Registry), path)
}

fn write_report(report: &html::Report, path: &Path) -> Result<()> {
    let text = html::render(report).map_err(|e| anyhow::anyhow!("rendering the report: {e}"))?;
    std::fs::write(path, text)
        .map_err(|e| user(format!("cannot write {}: {e}", path.display())))?;
    Ok(())
}

/// The history report: every series the targets and filters select, each
/// with the changes `changes` finds in it.
fn write_history(
    targets: &[String],
    filter: &RunFilter,
    db: Option<PathBuf>,
    path: &Path,
) -> Result<()> {
    let store = super::open_existing(db)?;
    let series = filter.series(targets, &store)?;
    let data: Vec<HistorySeries> = series
        .iter()
        .map(|s| HistorySeries {
            title: s.title(),
            metric: s.case.metric.clone(),
            unit: s.case.unit.clone(),
            direction: s.case.direction,
            confidence_pct: CONFIDENCE_PCT,
            points: s.points.iter().map(|p| p.at.clone()).collect(),
            changes: super::changes::detect_series(s),
        })
        .collect();
    let heading = HistoryHeading {
        selection: format!("{}{}", targets.join(" "), filter.flags()),
        order: filter.order.words().to_string(),
        kscale_version: crate::engine::VERSION.to_string(),
    };
    write_report(&kscale_report::history::build(&data, &heading), path)
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    if !args.history.is_empty() {
        write_history(&args.history, &args.filter, db, &args.output)?;
        outln!("{}", args.output.display())?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(flag) = args.filter.first_given() {
        return Err(user(format!(
            "{flag} selects the runs of a history: it goes with --history TARGET…, not with RUNs"
        )));
    }
    let store = super::open_existing(db)?;
    // One step of a tuning study: the study's report, staircase first.
    if let [spec] = args.runs.as_slice() {
        if let Some(tune) = store.tune_of_run(store.resolve(spec)?)? {
            super::tune::write_report(&store, tune, &args.output)?;
            outln!("{}", args.output.display())?;
            return Ok(ExitCode::SUCCESS);
        }
    }
    let mut data = Vec::new();
    for spec in &args.runs {
        data.push(store.load_run(store.resolve(spec)?)?);
    }
    write(&data, &args.output)?;
    outln!("{}", args.output.display())?;
    Ok(ExitCode::SUCCESS)
}
