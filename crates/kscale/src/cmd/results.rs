//! `kscale results`: the stored runs, one line each.

use crate::output::outln;
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    let store = super::open_existing(db)?;
    let runs = store.runs()?;
    if runs.is_empty() {
        outln!("no runs in {}", store.path().display())?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{:>4}  {:<24} {:<20}  {:<11} {:>6}  {:>6}  {:>6}  targets",
        "id",
        "label",
        "started",
        "status",
        "cases",
        "failed",
        "not-cv"
    )?;
    let killed: Vec<String> = runs
        .iter()
        .filter(|r| r.killed())
        .map(|r| r.id.to_string())
        .collect();
    for r in runs {
        let o = &r.options;
        let mut targets: Vec<String> = Vec::new();
        if let Some(s) = o["suite"].as_str() {
            targets.push(format!("--suite {s}"));
        }
        if let Some(t) = o["targets"].as_array() {
            targets.extend(t.iter().filter_map(|v| v.as_str().map(String::from)));
        }
        let cpus: Vec<&str> = o["cpus"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        outln!(
            "{:>4}  {:<24} {:<20}  {:<11} {:>6}  {:>6}  {:>6}  {} [cpus {}]{}",
            r.id,
            r.label,
            r.started_at,
            r.status,
            format!(
                "{}/{}",
                r.cases_done + r.cases_failed + r.cases_skipped,
                r.cases_total
            ),
            r.cases_failed,
            r.not_converged,
            targets.join(" "),
            cpus.join(","),
            if o["quick"].as_bool() == Some(true) {
                " --quick"
            } else {
                ""
            }
        )?;
    }
    // `killed`: `running` in the store, but its process is gone.
    if let Some(first) = killed.first() {
        outln!(
            "killed: run {} (its process is gone); `kscale run --resume {first}` continues it",
            killed.join(", ")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
