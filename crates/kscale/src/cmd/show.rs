//! `kscale show RUN`: a run's results as tables, one per family.

use anyhow::Result;
use kscale_report::impls::impl_table;
use kscale_report::results::{accounting_table, run_tables};
use kscale_report::Table;
use kscale_store::RunData;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// A run id, a label (its latest run) or `latest`.
    #[arg(default_value = "latest")]
    run: String,
    /// Output format.
    #[arg(long, value_enum, default_value = "terminal")]
    format: Format,
    /// Implementation the `threads` implementation table compares against
    /// (pthread, std, futex or spin).
    #[arg(long, value_name = "IMPL", default_value = DEFAULT_BASELINE)]
    baseline: String,
}

/// The seed compared every thread library against NPTL; glibc's pthreads
/// are NPTL today.
pub const DEFAULT_BASELINE: &str = "pthread";

#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    Terminal,
    Md,
    Csv,
}

pub fn header(data: &RunData) -> String {
    let r = &data.run;
    let snap = &r.snapshot;
    format!(
        "run {} · {} · {} · {} · kernel {} · {} · {} CPUs · {}{}\n",
        r.id,
        r.label,
        r.started_at,
        r.status,
        snap["kernel"]["release"].as_str().unwrap_or("?"),
        snap["cpu"]["model"].as_str().unwrap_or("?"),
        snap["cpu"]["online_count"].as_u64().unwrap_or(0),
        snap["hostname"].as_str().unwrap_or("?"),
        if r.options["quick"].as_bool() == Some(true) {
            " · --quick"
        } else {
            ""
        },
    )
}

/// The family tables, then (for a run with `threads` cases) the
/// implementation table of seed 001, then the CPU accounting of every case.
fn tables(data: &RunData, baseline: &str) -> Vec<Table> {
    let mut tables = run_tables(data, &super::Registry);
    tables.extend(impl_table(data, &super::Registry, baseline));
    tables.extend(accounting_table(data, &super::Registry));
    tables.extend(kscale_report::profile::profile_tables(
        data,
        &super::Registry,
    ));
    tables
}

pub fn render(data: &RunData, color: bool) -> String {
    render_against(data, color, DEFAULT_BASELINE)
}

fn render_against(data: &RunData, color: bool, baseline: &str) -> String {
    let mut out = header(data);
    for t in tables(data, baseline) {
        out.push('\n');
        out.push_str(&t.to_terminal(color));
    }
    out
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    let store = super::open_existing(db)?;
    let id = store.resolve(&args.run)?;
    let data = store.load_run(id)?;
    match args.format {
        Format::Terminal => print!(
            "{}",
            render_against(&data, super::use_color(), &args.baseline)
        ),
        Format::Md => {
            print!("{}", header(&data));
            for t in tables(&data, &args.baseline) {
                println!();
                print!("{}", t.to_markdown());
            }
        }
        Format::Csv => {
            for (i, t) in tables(&data, &args.baseline).iter().enumerate() {
                print!("{}", t.to_csv(i == 0));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
