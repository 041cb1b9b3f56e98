//! `kscale show RUN`: a run's results as tables, one per family.

use anyhow::Result;
use kscale_report::results::{accounting_table, run_tables};
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
}

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

/// Family tables, then the CPU accounting of every case.
pub fn tables(data: &RunData) -> Vec<kscale_report::Table> {
    let mut t = run_tables(data, &super::Registry);
    t.extend(accounting_table(data, &super::Registry));
    t
}

pub fn render(data: &RunData, color: bool) -> String {
    let mut out = header(data);
    for t in tables(data) {
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
        Format::Terminal => print!("{}", render(&data, super::use_color())),
        Format::Md => {
            print!("{}", header(&data));
            for t in tables(&data) {
                println!();
                print!("{}", t.to_markdown());
            }
        }
        Format::Csv => {
            for (i, t) in tables(&data).iter().enumerate() {
                print!("{}", t.to_csv(i == 0));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
