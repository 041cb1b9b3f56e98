//! `kscale export RUN --format json|csv`: the run's results for other tools.
//! The JSON layout is documented in the README and is a stable interface.

use crate::output::{csv_record, Format, Json};
use anyhow::Result;
use kscale_report::results::RuleInfo;
use kscale_store::RunData;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// A run id, a label (its latest run) or `latest`.
    run: String,
    /// Output format: json or csv.
    #[arg(long, value_enum, hide_possible_values = true)]
    format: Format,
    /// Write to this file instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// One object per case and metric (the primary metric first).
pub fn results(data: &RunData) -> Vec<Value> {
    let rule = RuleInfo::of(data);
    let mut out = Vec::new();
    for c in &data.cases {
        for m in &c.metrics {
            let s = c.summary(&m.name, rule.confidence_pct);
            let finite = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
            let mut row = json!({
                "workload": c.key.workload,
                "params": c.key.params,
                "cpus": c.key.cpus,
                "cpu_list": c.cpus,
                "metric": m.name,
                "primary": m.primary,
                "unit": m.unit,
                "direction": m.direction,
                "mean": finite(s.mean),
                "ci_low": finite(s.ci_low),
                "ci_high": finite(s.ci_high),
                "n": s.n,
                "converged": c.converged.unwrap_or(false),
                "rule": match c.rule {
                    kscale_core::RunRule::Converge => "converge".to_string(),
                    kscale_core::RunRule::MedianOf(n) => format!("median of {n}"),
                },
                "load_bound": c.load_bound(),
                "status": c.status.as_str(),
                "error": c.error,
                "trials": c.values(&m.name),
                "warmup": c.trials.iter().find(|t| t.warmup).and_then(|t| t.values.get(&m.name)),
                "iterations": c.iterations,
                "accounting": c.accounting(),
                // What a NOT CONVERGED case needed, among other facts.
                "notes": c.notes,
            });
            // Profiles belong to the case; they ride on its primary row.
            if m.primary && !c.profiles.is_empty() {
                row["profiles"] = json!(c.profiles);
            }
            out.push(row);
        }
    }
    out
}

/// The whole run: `results` for other tools, and (for `kscale import`,
/// docs/fleet.md) the run's UUID, the store schema it was written under and
/// its raw `cases` with every trial.
pub fn to_json(data: &RunData, uuid: &str) -> Result<Value> {
    let r = &data.run;
    Ok(json!({
        "schema": kscale_store::SCHEMA_VERSION,
        "system": r.snapshot,
        "run": {
            "id": r.id,
            "uuid": uuid,
            "label": r.label,
            "started_at": r.started_at,
            "ended_at": r.ended_at,
            "status": r.status,
            "kscale_version": r.kscale_version,
            "git_rev": r.git_rev,
            "args": r.args,
            "options": r.options,
        },
        "results": results(data),
        // The decisions table as data: one object per family and cell.
        "decisions": kscale_report::decision::decisions(data, &super::Registry),
        "cases": kscale_store::import::raw_cases(data)?,
    }))
}

/// A stored run as `kscale export --format json` writes it.
pub fn run_json(store: &kscale_store::Store, id: i64) -> Result<Value> {
    let uuid = store.run_uuid(id)?;
    to_json(&store.load_run(id)?, &uuid)
}

pub fn to_csv(data: &RunData) -> String {
    let mut out = String::from(
        "run_id,label,workload,params,cpus,metric,primary,unit,direction,mean,ci_low,ci_high,n,converged,status,trials\n",
    );
    for r in results(data) {
        let params: Vec<String> = r["params"]
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect()
            })
            .unwrap_or_default();
        let num = |v: &Value| v.as_f64().map(|x| format!("{x}")).unwrap_or_default();
        let trials: Vec<String> = r["trials"]
            .as_array()
            .map(|a| a.iter().map(num).collect())
            .unwrap_or_default();
        let fields = [
            data.run.id.to_string(),
            data.run.label.clone(),
            r["workload"].as_str().unwrap_or("").to_string(),
            params.join(" "),
            r["cpus"].as_str().unwrap_or("").to_string(),
            r["metric"].as_str().unwrap_or("").to_string(),
            r["primary"].to_string(),
            r["unit"].as_str().unwrap_or("").to_string(),
            r["direction"].as_str().unwrap_or("").to_string(),
            num(&r["mean"]),
            num(&r["ci_low"]),
            num(&r["ci_high"]),
            r["n"].to_string(),
            r["converged"].to_string(),
            r["status"].as_str().unwrap_or("").to_string(),
            trials.join(";"),
        ];
        out.push_str(&csv_record(&fields));
    }
    out
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    let format = args
        .format
        .accepted("export", &[Format::Json, Format::Csv])?;
    let store = super::open_existing(db)?;
    let id = store.resolve(&args.run)?;
    let text = match format {
        Format::Json => Json.document(&run_json(&store, id)?)?,
        // terminal and md were refused above.
        Format::Csv | Format::Terminal | Format::Md => to_csv(&store.load_run(id)?),
    };
    match &args.output {
        Some(p) => std::fs::write(p, text)
            .map_err(|e| crate::error::user(format!("cannot write {}: {e}", p.display())))?,
        None => crate::output::print(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}
