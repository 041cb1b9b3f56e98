//! `kscale report RUN… -o FILE.html`: a self-contained HTML report.

use crate::error::user;
use crate::output::outln;
use anyhow::Result;
use kscale_report::html;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Runs to report on (ids, labels or `latest`); with two or more, the
    /// report compares them, the first being the baseline.
    #[arg(value_name = "RUN", required = true)]
    runs: Vec<String>,
    /// The HTML file to write.
    #[arg(short, long, value_name = "FILE.html")]
    output: PathBuf,
}

/// Writes the report for these runs; shared with `kscale study`.
pub fn write(runs: &[kscale_store::RunData], path: &Path) -> Result<()> {
    let refs: Vec<&kscale_store::RunData> = runs.iter().collect();
    let report = html::build(&refs, &super::Registry);
    let text = html::render(&report).map_err(|e| anyhow::anyhow!("rendering the report: {e}"))?;
    std::fs::write(path, text)
        .map_err(|e| user(format!("cannot write {}: {e}", path.display())))?;
    Ok(())
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
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
