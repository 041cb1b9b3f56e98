//! `kscale profile diff A B`: which kernel routines grew and which shrank
//! between two runs' profiles of the same case (docs/method.md).

use crate::error::user;
use anyhow::Result;
use kscale_report::profile::{case_title, diff_table};
use kscale_report::Table;
use kscale_store::{CaseData, RunData};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Routine by routine: shares and samples per operation of run A and run B.
    #[command(after_help = "Examples:
  kscale profile diff 6.1.0 6.8.0                         every case both runs profiled
  kscale profile diff 3 4 --case syscall.pipe --cpus 1    one workload on 1 CPU
  kscale profile diff 3 4 --case mem.rd:size=8m --event instructions")]
    Diff(DiffArgs),
}

#[derive(clap::Args)]
struct DiffArgs {
    /// Baseline run (id, label or `latest`).
    a: String,
    /// Run compared with A.
    b: String,
    /// Only this case: a workload, optionally with params (`mem.rd:size=8m`).
    #[arg(long, value_name = "WORKLOAD[:k=v,…]")]
    case: Option<String>,
    /// Only this CPU configuration (as named in the runs: `1`, `all`, `0-1`).
    #[arg(long, value_name = "NAME")]
    cpus: Option<String>,
    /// Sampled event to compare.
    #[arg(long, default_value = "cpu-clock", value_parser = ["cpu-clock", "instructions", "cache-misses"])]
    event: String,
    /// Routines listed per case (largest changes first).
    #[arg(long, default_value_t = 15)]
    top: usize,
    /// Output format.
    #[arg(long, value_enum, default_value = "terminal")]
    format: crate::output::Format,
}

/// `WORKLOAD[:k=v,…]` → workload and required params.
pub(crate) fn parse_case(s: &str) -> Result<(String, Vec<(String, String)>)> {
    let (w, rest) = s.split_once(':').unwrap_or((s, ""));
    let mut params = Vec::new();
    for kv in rest.split(',').filter(|x| !x.is_empty()) {
        let (k, v) = kv.split_once('=').ok_or_else(|| {
            user(format!(
                "bad --case `{s}`: expected WORKLOAD[:name=value,…], e.g. mem.rd:size=8m"
            ))
        })?;
        params.push((k.trim().to_string(), v.trim().to_string()));
    }
    if w.trim().is_empty() {
        return Err(user(format!("bad --case `{s}`: the workload is missing")));
    }
    Ok((w.trim().to_string(), params))
}

fn matches(
    c: &CaseData,
    want: &Option<(String, Vec<(String, String)>)>,
    cpus: &Option<String>,
) -> bool {
    if let Some(n) = cpus {
        if kscale_core::cpus::base_name(&c.key.cpus) != kscale_core::cpus::base_name(n) {
            return false;
        }
    }
    match want {
        None => true,
        Some((w, params)) => {
            &c.key.workload == w
                && params
                    .iter()
                    .all(|(k, v)| c.key.params.get(k).is_some_and(|x| x == v))
        }
    }
}

fn label(r: &RunData) -> String {
    format!("{}#{}", r.run.label, r.run.id)
}

/// The diff of one case's `event` profile in two runs (named `names` in
/// the title) as a table and as JSON; `None` unless both have that
/// profile. `kscale changes` shows the same for the runs around a change.
pub(crate) fn case_diff(
    a: &CaseData,
    b: &CaseData,
    event: &str,
    names: (&str, &str),
    top: usize,
) -> Option<(Table, serde_json::Value)> {
    let pa = a.profiles.iter().find(|p| p.event == event)?;
    let pb = b.profiles.iter().find(|p| p.event == event)?;
    let (la, lb) = names;
    let title = format!(
        "Profile diff — {}: {event}, A = {la}, B = {lb}",
        case_title(&super::Registry, a)
    );
    let value = serde_json::json!({
        "case": a.key,
        "event": event,
        "a": pa,
        "b": pb,
    });
    Some((diff_table(&title, "A", "B", pa, pb, top), value))
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    let Sub::Diff(args) = args.command;
    let want = args.case.as_deref().map(parse_case).transpose()?;
    let store = super::open_existing(db)?;
    let a = store.load_run(store.resolve(&args.a)?)?;
    let b = store.load_run(store.resolve(&args.b)?)?;
    let (la, lb) = (label(&a), label(&b));
    let mut tables = Vec::new();
    let mut json = Vec::new();
    for ca in a.cases.iter().filter(|c| matches(c, &want, &args.cpus)) {
        let Some(cb) = b.cases.iter().find(|c| c.key == ca.key) else {
            continue;
        };
        let Some((table, value)) = case_diff(ca, cb, &args.event, (&la, &lb), args.top) else {
            continue;
        };
        if args.format == crate::output::Format::Json {
            json.push(value);
        }
        tables.push(table);
    }
    if tables.is_empty() {
        return Err(user(format!(
            "no case has a {} profile in both run {} and run {}{} (profile with `kscale run --profile`)",
            args.event,
            a.run.id,
            b.run.id,
            args.case
                .as_deref()
                .map(|c| format!(" matching --case {c}"))
                .unwrap_or_default()
        )));
    }
    super::print_result(&json, &tables, args.format)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_case_specs() {
        let (w, p) = parse_case("mem.rd:size=4k,stride=64").unwrap();
        assert_eq!(w, "mem.rd");
        assert_eq!(p.len(), 2);
        assert_eq!(parse_case("syscall.null").unwrap().1.len(), 0);
        assert!(parse_case("mem.rd:size").is_err());
        assert!(parse_case(":size=4k").is_err());
    }
}
