//! `kscale show RUN`: a run's results as tables, one per family.

use crate::output::{out, Csv, Exporter, Format, Terminal};
use anyhow::Result;
use kscale_core::noise::Reading;
use kscale_report::decision::decision_table;
use kscale_report::machine::machine_table;
use kscale_report::results::{accounting_table, run_tables};
use kscale_report::variants::variant_tables;
use kscale_report::Table;
use kscale_store::RunData;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kscale show                                the latest run
  kscale show 6.8.0 --format md              a label's latest run, as Markdown tables
  kscale show 12 --format csv > run12.csv    run 12 as CSV
  kscale show latest --baseline futex        threads' table against the futex implementation")]
pub struct Args {
    /// A run id, a label (its latest run) or `latest`.
    #[arg(default_value = "latest")]
    run: String,
    /// Output format: terminal, md or csv.
    #[arg(long, value_enum, default_value_t, hide_possible_values = true)]
    format: Format,
    /// The variant that variant tables compare against (e.g. an
    /// implementation of `threads`: pthread, std, futex or spin); default:
    /// the one each workload definition names (pthread for `threads`).
    #[arg(long, value_name = "VALUE")]
    baseline: Option<String>,
}

pub fn header(data: &RunData) -> String {
    let r = &data.run;
    let snap = &r.snapshot;
    format!(
        "run {} · {} · {} · {} · kernel {} · {} · {} CPUs · {}{}{}\n",
        r.id,
        r.label,
        r.started_at,
        r.status_line(),
        snap["kernel"]["release"].as_str().unwrap_or("?"),
        snap["cpu"]["model"].as_str().unwrap_or("?"),
        snap["cpu"]["online_count"].as_u64().unwrap_or(0),
        snap["hostname"].as_str().unwrap_or("?"),
        if r.options["quick"].as_bool() == Some(true) {
            " · --quick"
        } else {
            ""
        },
        if r.idle_cpus_polled() {
            " · idle CPUs polled"
        } else {
            ""
        },
    ) + &booted(data)
        + &concurrent(data)
        + &dir_moved(data)
        + &left_out(data)
}

/// How `kscale vm` booted the guest the run was measured in, its
/// emulated mark first (docs/vm.md); empty for a run on a host's kernel.
fn booted(data: &RunData) -> String {
    let vm = &data.run.snapshot["vm"];
    let Some(accel) = vm["accel"].as_str() else {
        return String::new();
    };
    let how = format!(
        "booted by kscale vm: {}, {} vCPU{}, {}",
        accel,
        vm["vcpus"].as_u64().unwrap_or(0),
        if vm["up"] == true { " (nosmp)" } else { "" },
        vm["image"].as_str().unwrap_or("?"),
    );
    match data.run.emulated_mark() {
        Some(m) => format!("{m}: {how}\n"),
        None => format!("{how}\n"),
    }
}

/// Where a study measured instead of its working directory, and why.
fn dir_moved(data: &RunData) -> String {
    data.run.options["dir_moved"]
        .as_str()
        .map_or_else(String::new, |l| format!("{l}\n"))
}

/// A line naming the cases a noise-planned study left out (empty when it
/// measured its whole plan).
fn left_out(data: &RunData) -> String {
    let Some(list) = data.run.options["left_out"]
        .as_array()
        .filter(|l| !l.is_empty())
    else {
        return String::new();
    };
    let names: Vec<&str> = list.iter().filter_map(|v| v.as_str()).collect();
    let mut s =
        "left out by the study's plan (the machine too noisy for the budget to decide them, or a directory where they cannot settle):\n".to_string();
    for n in names {
        s += &format!("  {n}\n");
    }
    s
}

/// A line naming the other kscale runs that measured on the machine while
/// this one did (empty when none did).
fn concurrent(data: &RunData) -> String {
    let Some(list) = data.run.snapshot["concurrent"]
        .as_array()
        .filter(|l| !l.is_empty())
    else {
        return String::new();
    };
    let names: Vec<String> = list
        .iter()
        .map(|v| match v {
            serde_json::Value::String(s) => s.clone(),
            v => format!("pid {}: {}", v["pid"], v["cmdline"].as_str().unwrap_or("?")),
        })
        .collect();
    format!(
        "warning: other kscale runs measured on this machine during this run, so the two measured each other: {}\n",
        names.join("; ")
    )
}

/// The family tables and the decisions on them, then the variant tables
/// the definitions declare (seed 001's thread-library implementations),
/// then the CPU accounting and the kernel profiles of every case.
fn tables(data: &RunData, gauge: &[Reading], baseline: Option<&str>) -> Vec<Table> {
    let mut tables = run_tables(data, &super::Registry);
    tables.extend(decision_table(data, &super::Registry));
    tables.extend(machine_table(gauge));
    tables.extend(variant_tables(data, &super::Registry, baseline));
    tables.extend(accounting_table(data, &super::Registry));
    tables.extend(kscale_report::profile::profile_tables(
        data,
        &super::Registry,
    ));
    tables
}

pub fn render(data: &RunData, gauge: &[Reading], color: bool) -> String {
    headed(data, &tables(data, gauge, None), &Terminal { color })
}

/// The run's header, then its `tables` as `exporter` lays them out, a
/// blank line after the header.
fn headed(data: &RunData, tables: &[Table], exporter: &dyn Exporter) -> String {
    let mut out = header(data);
    if !tables.is_empty() {
        out.push('\n');
        out.push_str(&exporter.tables(tables));
    }
    out
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    let format = args
        .format
        .accepted("show", &[Format::Terminal, Format::Md, Format::Csv])?;
    let store = super::open_existing(db)?;
    let id = store.resolve(&args.run)?;
    let data = store.load_run(id)?;
    let gauge = store.gauge(id)?;
    let tables = tables(&data, &gauge, args.baseline.as_deref());
    let text = match format {
        // A spreadsheet reads one table: no header above it.
        Format::Csv => Csv.tables(&tables),
        // json was refused above.
        Format::Terminal | Format::Md | Format::Json => {
            headed(&data, &tables, format.exporter().as_ref())
        }
    };
    out!("{text}")?;
    Ok(ExitCode::SUCCESS)
}
