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
    /// Continue a killed or interrupted run from its first unfinished case,
    /// with the options it stored: of the run flags, only --no-progress and
    /// --token may come with it.
    #[arg(long, value_name = "RUN", conflicts_with_all = args::refused_with_resume())]
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
    measure_kept(args, db, |_| true)
}

/// [`measure`] of the planned cases `keep` accepts only (a new run):
/// `check` measures again just the cases its first runs found regressed.
pub fn measure_kept(
    args: &Args,
    db: Option<PathBuf>,
    keep: impl Fn(&crate::engine::plan::PlanEntry) -> bool,
) -> Result<(kscale_store::Store, i64)> {
    let start = match &args.resume {
        Some(spec) => Start::Resume(spec),
        None => Start::New {
            opts: Box::new({
                let mut o = args::options(&args.select, &args.run)?;
                o.plan.retain(|e| keep(e));
                // Where nobody named the directory, file cases that cannot
                // settle in this one are measured where they can, as the
                // study does: on ext4 without a journal two runs of one
                // binary a minute apart read fs.create at 110,000 and
                // 5,600 files/s, the second allocating past the inodes the
                // first had freed (`--dir` wins).
                if args.run.dir.is_none() {
                    if let Some((place, why)) = crate::engine::plan::settling_dir(&o.plan, &o.dir) {
                        let line = crate::engine::plan::moved_line(&o.dir, &place, &why, "the run");
                        eprintln!("kscale: {line}");
                        o.dir_moved = Some(line);
                        o.dir = place;
                    }
                }
                o
            }),
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

#[cfg(test)]
mod tests {
    use super::Args;
    use crate::engine::args::{self, GIVEN_WITH_RESUME};
    use clap::{Args as _, FromArgMatches as _};

    fn command() -> clap::Command {
        Args::augment_args(clap::Command::new("run"))
    }

    /// Where a resumed run finds each refused flag's value: the key of the
    /// stored options that holds it (`label` is the run's own label).
    /// A new run flag fails this test until it is either named here (and
    /// stored) or in [`GIVEN_WITH_RESUME`].
    const RESTORED_FROM: &[(&str, &str)] = &[
        ("targets", "targets"),
        ("suite", "suite"),
        ("cpus", "cpus"),
        ("load_cpus", "load_cpus"),
        ("target", "plan"),
        ("capacity", "capacity"),
        ("params", "plan"),
        ("profile", "profile"),
        ("peers", "peers"),
        ("label", "label"),
        ("quick", "quick"),
        ("ci", "rule"),
        ("estimator", "rule"),
        ("min_trials", "rule"),
        ("max_trials", "rule"),
        ("trial_time", "trial_time_s"),
        ("case_budget", "rule"),
        ("budget", "budget_s"),
        ("span", "span_s"),
        ("dir", "dir"),
        ("cpu_order", "cpu_order"),
        ("cpu_mode", "cpu_mode"),
        ("cpu_idle", "cpu_idle"),
    ];

    /// Every flag of `run` but `--resume` itself, however it came into
    /// `run`'s arguments, is either restored from the stored run and
    /// refused with `--resume`, or accepted with it and not stored.
    #[test]
    fn every_run_flag_is_restored_and_refused_or_accepted() {
        let cmd = command();
        let resume = cmd
            .get_arguments()
            .find(|a| a.get_id() == "resume")
            .expect("run has --resume");
        let conflicts: Vec<&str> = cmd
            .get_arg_conflicts_with(resume)
            .iter()
            .map(|a| a.get_id().as_str())
            .collect();
        let mut seen = 0;
        for id in cmd.get_arguments().map(|a| a.get_id().as_str()) {
            if id == "resume" {
                continue;
            }
            seen += 1;
            let restored = RESTORED_FROM.iter().any(|(f, _)| *f == id);
            let given = GIVEN_WITH_RESUME.contains(&id);
            assert!(
                restored != given,
                "`{id}` must be in exactly one of RESTORED_FROM and GIVEN_WITH_RESUME"
            );
            assert_eq!(
                conflicts.contains(&id),
                restored,
                "`{id}`: --resume refuses a flag exactly when the stored run restores it"
            );
        }
        assert_eq!(seen, RESTORED_FROM.len() + GIVEN_WITH_RESUME.len());
        let mut derived: Vec<String> = args::refused_with_resume()
            .iter()
            .map(|id| id.to_string())
            .collect();
        derived.sort();
        let mut table: Vec<String> = RESTORED_FROM.iter().map(|(f, _)| f.to_string()).collect();
        table.sort();
        assert_eq!(derived, table);
    }

    /// Every flag `--resume` refuses is one the stored run restores, and
    /// the flags it accepts are not stored (else they would be ignored).
    #[test]
    fn refused_flags_are_the_stored_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let m = command()
            .try_get_matches_from([
                "run",
                "syscall.null",
                "--dir",
                dir.path().to_str().expect("utf-8 temp dir"),
                "--cpus",
                "1",
            ])
            .expect("parses");
        let a = Args::from_arg_matches(&m).expect("args");
        let mut opts = args::options(&a.select, &a.run).expect("options");
        // Fields stored only when set.
        opts.peers = vec!["peer.example:7000".into()];
        opts.load_cpus = Some(vec![0]);
        opts.capacity = true;
        opts.span_s = Some(20.0);
        let stored = serde_json::to_value(&opts).expect("serialises");
        let keys: Vec<&str> = stored
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        for id in args::refused_with_resume() {
            let Some((_, key)) = RESTORED_FROM.iter().find(|(f, _)| *f == id) else {
                panic!("--resume refuses `{id}` but RESTORED_FROM does not say where the stored run keeps it");
            };
            assert!(
                *key == "label" || keys.contains(key),
                "`{id}`: the stored options have no `{key}` ({keys:?})"
            );
        }
        for id in GIVEN_WITH_RESUME {
            assert!(
                !keys.contains(id),
                "`{id}` is accepted with --resume but stored, so it would be ignored"
            );
        }
    }
}
