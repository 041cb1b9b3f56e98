//! `kscale scale RUN [--up RUN]`: scalability, efficiency, SMP overhead and
//! the Universal Scalability Law fit of one system.

use crate::error::user;
use anyhow::Result;
use kscale_report::scale::{scale_metric, tables};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kscale run --suite micro --cpus sweep --label smp && kscale scale smp
  kscale scale smp --up up-kernel          adds SMP-1/UP overhead columns")]
pub struct Args {
    /// A run measured on several CPU configurations (id, label or `latest`).
    #[arg(default_value = "latest")]
    run: String,
    /// A run of the same workloads on a uniprocessor kernel, for SMP overhead.
    #[arg(long, value_name = "RUN")]
    up: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "terminal")]
    format: crate::output::Format,
    /// Scale on this metric (e.g. `p99`) instead of each case's primary one.
    #[arg(long, value_name = "NAME")]
    metric: Option<String>,
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    let store = super::open_existing(db)?;
    let data = store.load_run(store.resolve(&args.run)?)?;
    let up = match &args.up {
        Some(u) => Some(store.load_run(store.resolve(u)?)?),
        None => None,
    };
    let report = scale_metric(&data, up.as_ref(), &super::Registry, args.metric.as_deref())
        .map_err(|e| user(e.to_string()))?;
    let mut tables = tables(&report);
    // The CPUs a scalability compares are not equally fast on a virtual
    // machine: the gauge's CPU loop per CPU over the run says by how much
    // (docs/noise.md, "The gauge and the control").
    let mut gauges = vec![(data.run.id, store.gauge(data.run.id)?)];
    if let Some(u) = &up {
        gauges.push((u.run.id, store.gauge(u.run.id)?));
    }
    if let Some(last) = tables.last_mut() {
        for (id, g) in gauges.iter().filter(|(_, g)| !g.is_empty()) {
            let cpus = kscale_core::noise::per_cpu(g);
            let fastest = cpus
                .iter()
                .map(|n| n.median_ns)
                .fold(f64::INFINITY, f64::min);
            let each: Vec<String> = cpus
                .iter()
                .map(|n| {
                    format!(
                        "CPU {} {:+.1} % (CV {:.0} %)",
                        n.cpu,
                        (n.median_ns / fastest - 1.0) * 100.0,
                        n.cv * 100.0
                    )
                })
                .collect();
            last.notes.push(format!(
                "The machine in run {id}: each CPU's loop time (the gauge) against the fastest: {}: a scalability that differs from 1 by as little may be the machine's, not the kernel's.",
                each.join(", ")
            ));
        }
    }
    super::print_result(&report, &tables, args.format)?;
    Ok(ExitCode::SUCCESS)
}
