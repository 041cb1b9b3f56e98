//! `kscale study`: the seeds' whole method in one command — measure the
//! micro and macro suites (the seeds' method is both) on one CPU and on all
//! CPUs with interleaved trials, store it, print the direct results and the
//! scalability, and write the HTML report.

use crate::output::{out, outln};
use anyhow::Result;
use kscale_report::results::run_tables;
use kscale_report::scale::{scale, tables as scale_tables};
use std::path::PathBuf;
use std::process::ExitCode;

/// `study --quick`'s budget: a first look that finishes in five minutes on
/// a 2-vCPU VM, profiles included (docs/method.md, "The run's budget").
const QUICK_BUDGET: &str = "5m";

/// `study --quick`'s macro sweep, narrower than the workloads' own quick
/// sweeps: ten cases that each get enough windows to converge on a 2-vCPU
/// VM, rather than eighteen with five windows each (docs/method.md, "The
/// run's budget"). `net.tcp_rr` keeps the conns at which the server's CPU,
/// not one cache line's trip between two vCPUs, sets the pace; chat keeps
/// VolanoMark's ten rooms under both server designs; fileserver keeps four
/// clients.
const QUICK_MACRO: &[(&str, &str, &[&str])] = &[
    ("net.tcp_rr", "conns", &["4", "16"]),
    ("chat.relay", "rooms", &["10"]),
    ("fileserver.mix", "clients", &["4"]),
];

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kscale study --quick                     a first look in a few minutes
  kscale study --label 6.8-tuned           micro and macro suites under a label
  kscale study --suite micro --quick       the lmbench-style half only")]
pub struct Args {
    /// Quick run rules (CI 10@95, 0.05 s trials, shorter sweeps) within a
    /// 5-minute budget for the whole study, profiles included.
    #[arg(long)]
    quick: bool,
    /// Wall-clock budget of the whole study (`90s`, `5m`, `1h`; `--quick`: 5m),
    /// spent where intervals narrow most (see `kscale run --help`).
    #[arg(long, value_name = "DURATION")]
    budget: Option<String>,
    /// The suites to study, comma-separated (see `kscale list`).
    #[arg(long, value_name = "NAME[,NAME…]", default_value = "micro,macro")]
    suite: String,
    /// Label of the system (default: the kernel release).
    #[arg(long)]
    label: Option<String>,
    /// Seconds one micro-benchmark trial lasts (default 0.5, --quick 0.05).
    #[arg(long, value_name = "SECONDS")]
    trial_time: Option<f64>,
    /// Directory for scratch files and the fs workloads (default: current directory).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Where to write the report (default: kscale-study-<label>.html).
    #[arg(short, long, value_name = "FILE.html")]
    output: Option<PathBuf>,
    /// Skip the kernel profiles (by default every case gets one extra,
    /// uncounted, perf-sampled trial, as the seeds' method profiles).
    #[arg(long)]
    no_profile: bool,
    /// Do not draw the progress bar.
    #[arg(long)]
    no_progress: bool,
    /// How 1 CPU is made: `affinity` (default) or `hotplug` (the other CPUs
    /// offline; root; restored however the study ends).
    #[arg(long, value_enum, default_value = "affinity")]
    cpu_mode: super::tune::hotplug::CpuMode,
    /// How idle CPUs wait: `auto` (default) polls in a virtual machine and
    /// leaves bare metal as it is; `poll`; `as-is` (see `kscale run --help`).
    #[arg(long, value_enum, default_value = "auto")]
    cpu_idle: crate::idle::CpuIdle,
    /// The estimator of each case's result: `trimmed` (default) or `mean`
    /// (see `kscale run --help`).
    #[arg(long, value_name = "mean|trimmed", value_parser = ["mean", "trimmed"])]
    estimator: Option<String>,
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    let run_args = super::run::Args {
        targets: vec![],
        suite: Some(args.suite.clone()),
        cpus: vec!["1,all".into()],
        label: args.label.clone(),
        quick: args.quick,
        ci: None,
        estimator: args.estimator.clone(),
        min_trials: None,
        max_trials: None,
        trial_time: args.trial_time,
        case_budget: None,
        budget: args
            .budget
            .clone()
            .or_else(|| args.quick.then(|| QUICK_BUDGET.to_string())),
        dir: args.dir.clone(),
        params: vec![],
        target: None,
        capacity: false,
        resume: None,
        profile: !args.no_profile,
        no_progress: args.no_progress,
        peers: vec![],
        token: None,
        cpu_mode: args.cpu_mode,
        cpu_idle: args.cpu_idle,
        cpu_order: kscale_core::CpuOrder::Compact,
        load_cpus: None,
        only: if args.quick {
            QUICK_MACRO
                .iter()
                .map(|(w, p, vs)| {
                    (
                        w.to_string(),
                        p.to_string(),
                        vs.iter().map(|v| v.to_string()).collect(),
                    )
                })
                .collect()
        } else {
            vec![]
        },
    };
    let (store, run_id) = super::run::measure(&run_args, db)?;
    let data = store.load_run(run_id)?;
    let color = super::use_color();
    outln!("{}", super::show::header(&data))?;
    outln!("== Direct results")?;
    for t in run_tables(&data, &super::Registry) {
        outln!()?;
        out!("{}", t.to_terminal(color))?;
    }
    outln!("\n== Scalability (all CPUs ÷ 1 CPU)")?;
    match scale(&data, None, &super::Registry) {
        Ok(s) => {
            for t in scale_tables(&s) {
                outln!()?;
                out!("{}", t.to_terminal(color))?;
            }
        }
        Err(e) => outln!("{e}")?,
    }
    // The profiles' answer in a screen: what grew from 1 CPU to all, per
    // family; every case's routines are in `show` and the report.
    if let Some(t) = kscale_report::profile::cpu_growth(&data, &super::Registry) {
        outln!("\n== Kernel profiles")?;
        outln!()?;
        out!("{}", t.to_terminal(color))?;
        outln!(
            "each case's top routines: kscale show {} (or the report below)",
            data.run.id
        )?;
    }
    let path = args.output.unwrap_or_else(|| {
        let safe: String = data
            .run
            .label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        PathBuf::from(format!("kscale-study-{safe}.html"))
    });
    super::report::write(std::slice::from_ref(&data), &path)?;
    outln!(
        "\nreport: {}",
        std::path::absolute(&path).unwrap_or(path).display()
    )?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    /// The quick macro sweep names real workloads and params, and keeps a
    /// part of each one's quick sweep (the plan is filtered, not widened).
    #[test]
    fn quick_macro_sweep_is_part_of_the_quick_sweeps() {
        for (w, p, vs) in super::QUICK_MACRO {
            let def = kscale_workloads::find(w).unwrap_or_else(|| panic!("{w}"));
            let quick = def
                .param(p)
                .unwrap_or_else(|| panic!("{w} {p}"))
                .values(true);
            assert!(
                vs.iter().all(|v| quick.contains(v)),
                "{w} {p}: {vs:?} of {quick:?}"
            );
            assert!(vs.len() < quick.len(), "{w} {p} is not narrowed");
        }
    }
}
