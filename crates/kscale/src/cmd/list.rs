//! `kscale list`: the catalogue, generated from the registry.

use crate::output::{outln, print, Format, Json};
use anyhow::Result;
use kscale_workloads::{suites::SUITES, REGISTRY};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Only this family.
    #[arg(long, value_name = "FAMILY")]
    family: Option<String>,
    /// Output format: terminal or json.
    #[arg(long, value_enum, default_value_t, hide_possible_values = true)]
    format: Format,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let format = args
        .format
        .accepted("list", &[Format::Terminal, Format::Json])?;
    if let Some(f) = &args.family {
        if kscale_workloads::family(f).is_none() {
            let all: Vec<&str> = REGISTRY.iter().map(|f| f.name).collect();
            return Err(crate::error::user(format!(
                "unknown family `{f}` (families: {})",
                all.join(", ")
            )));
        }
    }
    let families = REGISTRY
        .iter()
        .filter(|f| args.family.as_deref().is_none_or(|n| n == f.name));
    match format {
        Format::Json => {
            let v: Vec<serde_json::Value> = families
                .flat_map(|f| f.workloads.iter())
                .map(|w| {
                    serde_json::json!({
                        "workload": w.id(),
                        "family": w.family,
                        "title": w.title,
                        "help": w.help,
                        "params": w.params.iter().map(|p| serde_json::json!({
                            "name": p.name, "kind": p.kind_label(), "default": p.default,
                            "quick": if p.quick.is_empty() { p.default } else { p.quick }, "help": p.help,
                        })).collect::<Vec<_>>(),
                        "metrics": w.metrics.iter().map(|m| serde_json::json!({
                            "name": m.name, "unit": m.unit, "direction": m.direction,
                        })).collect::<Vec<_>>(),
                        "runs_as": runs_as(w),
                    })
                })
                .collect();
            print(&Json.document(&v)?)?;
        }
        // csv and md were refused above.
        Format::Terminal | Format::Csv | Format::Md => {
            for f in families {
                outln!("{} — {}\n  {}", f.name, f.title, f.help)?;
                for w in f.workloads {
                    let m = w.primary();
                    outln!(
                        "  {:<22} {} [{} {}, {} is better]",
                        w.id(),
                        w.help,
                        m.name,
                        m.unit,
                        m.direction
                    )?;
                    if let Some(how) = runs_as(w) {
                        outln!("  {:<22}   runs as: {how}", "")?;
                    }
                    for extra in &w.metrics[1..] {
                        outln!(
                            "  {:<22}   also: {} {} ({} is better)",
                            "",
                            extra.name,
                            extra.unit,
                            extra.direction
                        )?;
                    }
                    for p in w.params {
                        let quick = if p.quick.is_empty() {
                            String::new()
                        } else {
                            format!("; --quick: {}", p.quick.join(","))
                        };
                        outln!(
                            "  {:<22}   --param {}=<{}>  default {}{}  {}",
                            "",
                            p.name,
                            p.kind_label(),
                            p.default.join(","),
                            quick,
                            p.help
                        )?;
                    }
                }
                outln!()?;
            }
            outln!("suites (--suite NAME)")?;
            for s in SUITES {
                outln!("  {:<22} {} [{}]", s.name, s.help, s.targets.join(" "))?;
                if let Some(q) = s.quick {
                    outln!("  {:<22} --quick: [{}]", "", q.join(" "))?;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How a workload runs when that is not one worker converging a mean on
/// the wall clock: its roles (docs/macro.md), its run rule and its clock
/// (docs/host.md, "The thread's own clock").
fn runs_as(w: &kscale_workloads::WorkloadDef) -> Option<String> {
    use kscale_workloads::roles::Timing;
    let mut parts = Vec::new();
    if let Some(r) = w.roles {
        parts.push(match (r.server.is_some(), r.timing) {
            (true, Timing::Duration) => "a server on the measured CPUs, load from the others or \
                                         --peer hosts, for a fixed duration"
                .to_string(),
            (true, Timing::Work) => {
                "a server on the measured CPUs, load from the others or --peer \
                                     hosts, until a fixed amount of work is done"
                    .to_string()
            }
            (false, _) => "load generators only".to_string(),
        });
        if let Some(p) = r.spread {
            parts.push(format!("`{p}` split among peers"));
        }
    }
    if let kscale_core::RunRule::MedianOf(n) = w.rule {
        parts.push(format!("median of {n} trials"));
    }
    if w.clock == kscale_workloads::Clock::Thread {
        parts.push(
            "timed by its thread's CPU clock: time another task holds the CPU is left out"
                .to_string(),
        );
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}
