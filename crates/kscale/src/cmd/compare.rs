//! `kscale compare A B [C…]`: systems side by side, seed 003's layout.

use crate::error::user;
use anyhow::Result;
use kscale_report::compare::{compare_metric, tables};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kscale compare 6.1.0 6.8.0              the latest runs of two labels
  kscale compare 3 4 5 --format md        three runs, as a Markdown table")]
pub struct Args {
    /// Runs to compare (ids, labels or `latest`); the first is the baseline A.
    #[arg(value_name = "RUN", num_args = 2.., required = true)]
    runs: Vec<String>,
    /// Compare on this metric (e.g. `p99`, `sd_server`) instead of each
    /// case's primary one; `kscale list` shows every workload's metrics.
    #[arg(long, value_name = "NAME")]
    metric: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "terminal")]
    format: super::TableFormat,
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    let store = super::open_existing(db)?;
    let mut data = Vec::new();
    for spec in &args.runs {
        let id = store.resolve(spec)?;
        data.push(store.load_run(id)?);
    }
    let refs: Vec<&kscale_store::RunData> = data.iter().collect();
    let cmp = compare_metric(&refs, &super::Registry, args.metric.as_deref())
        .map_err(|e| user(e.to_string()))?;
    let mut tables = tables(&cmp);
    // How the machine itself moved between the runs, from their gauge
    // readings (docs/method.md, "The gauge and the control"): a ratio
    // within that is not the system's.
    let gauges = data
        .iter()
        .map(|d| store.gauge(d.run.id))
        .collect::<Result<Vec<_>, _>>()?;
    let any = gauges.iter().any(|g| !g.is_empty());
    if let Some(last) = tables.last_mut().filter(|_| any) {
        for (i, g) in gauges.iter().enumerate().skip(1) {
            let line = match kscale_core::noise::machine_move(&gauges[0], g, &[]) {
                Some(m) => format!(
                    "The machine: its CPU loop (the gauge) ran {:.1} % {} in run {} than in run {}; its spread between moments, ±{:.1} %, is not the system's.",
                    ((m.slower - 1.0) * 100.0).abs(),
                    if m.slower >= 1.0 { "slower" } else { "faster" },
                    data[i].run.id,
                    data[0].run.id,
                    m.between_cv * 100.0
                ),
                None => format!(
                    "The machine: run {} or run {} has no gauge readings, so how much the machine itself moved between them is unknown.",
                    data[0].run.id, data[i].run.id
                ),
            };
            last.notes.push(line);
        }
    }
    super::print_result(&cmp, &tables, args.format)?;
    Ok(ExitCode::SUCCESS)
}
