//! `kscale run`: measure workloads on CPU configurations and store the trials.

use crate::engine::args::{self, RunArgs, Targets};
use crate::engine::lifecycle::{self, Start};
use crate::output::out;
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Clone)]
#[command(after_help = "Examples:
  kscale run syscall.null syscall.pipe        two workloads on all CPUs
  kscale run ctx --cpus 1,all --quick          a family on 1 CPU and on all, interleaved
  kscale run --suite micro --cpus sweep        every micro family on 1, 2, 4 … CPUs
  kscale run mem.frd --param size=1m,64m       override a param's sweep
  kscale run --resume latest                   finish a run that was killed")]
pub struct Args {
    #[command(flatten)]
    pub select: Targets,
    #[command(flatten)]
    pub run: RunArgs,
    /// Continue a killed or interrupted run from its first unfinished case.
    #[arg(long, value_name = "RUN", conflicts_with_all = ["targets", "suite", "cpus", "label", "quick", "ci", "estimator", "min_trials", "max_trials", "trial_time", "case_budget", "params", "profile", "peers", "target", "capacity", "cpu_idle", "load_cpus"])]
    pub resume: Option<String>,
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    let (store, run_id) = measure(&args, db)?;
    let data = store.load_run(run_id)?;
    let gauge = store.gauge(run_id)?;
    out!("{}", super::show::render(&data, &gauge, super::use_color()))?;
    Ok(ExitCode::SUCCESS)
}

/// Creates (or resumes) a run and measures it; shared with `kscale check`.
pub fn measure(args: &Args, db: Option<PathBuf>) -> Result<(kscale_store::Store, i64)> {
    let start = match &args.resume {
        Some(spec) => Start::Resume(spec),
        None => Start::New {
            opts: Box::new(args::options(&args.select, &args.run)?),
            label: label(&args.run),
            capacity: args.select.capacity,
        },
    };
    let token = crate::engine::peers::token(args.select.token.clone());
    lifecycle::measure(start, token.as_deref(), args.run.progress(), |existing| {
        if existing {
            super::open_existing(db)
        } else {
            super::open_store(db)
        }
    })
}

/// `--label`, or the kernel release.
pub fn label(args: &RunArgs) -> String {
    args.label
        .clone()
        .unwrap_or_else(kscale_sys::snapshot::kernel_release)
}
