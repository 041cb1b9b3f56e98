//! `kscale study`: the seeds' whole method in one command — measure the
//! micro and macro suites (the seeds' method is both) on one CPU and on all
//! CPUs with interleaved trials, store it, print the direct results and the
//! scalability, and write the HTML report. A workload with a capacity param
//! (web's `conns`) is measured by its capacity, searched within a share of
//! the budget, rather than by a sweep that every offered load passes.

use crate::engine::args::{options, RunArgs, RunOptions, Targets};
use crate::engine::lifecycle::{self, Start};
use crate::engine::{gauge, plan};
use crate::output::{out, outln};
use anyhow::Result;
use kscale_report::results::run_tables;
use kscale_report::scale::{scale, tables as scale_tables};
use std::path::PathBuf;
use std::process::ExitCode;

/// `study --quick`'s budget: a first look that finishes in five minutes on
/// a 2-vCPU VM, profiles included (docs/budget.md, "The run's budget").
const QUICK_BUDGET: &str = "5m";

/// Seconds the budget keeps for what the study does after its run: the
/// control's last reading, load the run, print its tables, write the
/// report. That takes under a second; the rest absorbs a run's last trial
/// past its budget. With 16 s kept, nine quick studies ended 278–290 s
/// in (a profiled trial ran long in one); profiling one case a family,
/// three ended at 284 s, 16 s of their budget unspent while web's
/// brackets stayed 11–13 % wide for want of a step.
const REPORT_S: f64 = 8.0;

/// `study --quick`'s macro sweep, narrower than the workloads' own quick
/// sweeps: ten cases that each get enough windows to converge on a 2-vCPU
/// VM, rather than eighteen with five windows each (docs/budget.md, "The
/// run's budget"). `net.tcp_rr` keeps the conns at which the server's CPU,
/// not one cache line's trip between two vCPUs, sets the pace; chat keeps
/// two rooms under both server designs (a trial of ten rooms takes 2–3 s
/// here at much the same spread, so it needs four times the time to
/// converge); fileserver keeps four clients.
const QUICK_MACRO: &[(&str, &str, &[&str])] = &[
    ("net.tcp_rr", "conns", &["4", "16"]),
    ("chat.relay", "rooms", &["2"]),
    ("fileserver.mix", "clients", &["4"]),
    // The workload that agrees with dbench (docs/validation.md).
    ("fileserver.trace", "clients", &["4"]),
];

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kscale study --quick                     a first look in a few minutes
  kscale study --label 6.8-tuned           micro and macro suites under a label
  kscale study --suite micro --quick       the lmbench-style half only")]
pub struct Args {
    /// The suites to study, comma-separated (see `kscale list`).
    #[arg(long, value_name = "NAME[,NAME…]", default_value = "micro,macro")]
    suite: String,
    /// Where to write the report (default: kscale-study-<label>.html).
    #[arg(short, long, value_name = "FILE.html")]
    output: Option<PathBuf>,
    /// Skip the kernel profiles (by default every case gets one extra,
    /// uncounted, perf-sampled trial, as the seeds' method profiles).
    #[arg(long)]
    no_profile: bool,
    #[command(flatten)]
    run: RunArgs,
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    // The budget is the whole study's: its setup and its report count.
    let started = std::time::Instant::now();
    // `--quick` spends five minutes on the whole study unless told otherwise.
    let mut run = args.run.clone();
    if run.quick && run.budget.is_none() {
        run.budget = Some(QUICK_BUDGET.to_string());
    }
    let mut opts = options(&selection(&args, run.quick), &run)?;
    let mut sweep_held = decide_first(&args, &mut opts)?;
    // Where nobody named the directory, file cases that cannot settle in
    // this one are measured where they can, not left out (`--dir` wins).
    if args.run.dir.is_none() {
        if let Some((place, why)) = plan::settling_dir(&opts.plan, &opts.dir) {
            let line = plan::moved_line(&opts.dir, &place, &why, "the study");
            eprintln!("kscale: {line}");
            opts.dir_moved = Some(line);
            opts.dir = place;
        }
    }
    opts.budget = opts
        .budget_s
        .map(|t| crate::engine::budget::Budget::since(started, t, REPORT_S));
    // A quick study profiles each family's representative, not each case:
    // its profiles took 43–69 s of the 300, while macro cells stayed
    // undecided for want of 10–60 s (docs/budget.md, "Profiles").
    if run.quick && opts.budget_s.is_some() && opts.profile {
        opts.profile_only = Some(plan::family_representatives(&opts.plan));
    }
    if opts.budget_s.is_some() {
        plan_to_the_noise(&mut opts);
    }
    // A quick study's pilot of its whole plan took 278–283 s of its 300
    // at an hour when a trial cost 0.2 s: each workload's representative
    // first, its sweep after (docs/planning.md, "Decisions first").
    if run.quick && opts.budget_s.is_some() {
        let kept = opts.plan.len();
        let mut held = plan::hold_sweeps(&mut opts.plan);
        if !held.is_empty() {
            eprintln!(
                "kscale: the study measures each workload's representative case first ({} of its {kept} cases, the middle of each sweep) and takes back the sweeps' other {} as its budget allows",
                opts.plan.len(),
                held.len()
            );
        }
        held.extend(sweep_held);
        sweep_held = held;
    }
    // The sweeps' cases wait behind the decisions, taken back as the
    // gauge's held cases are, and named with them one line per workload,
    // as the run rewrites the lines when it takes some back.
    let before = plan::held_lines(opts.held.iter().map(|h| &h.entry));
    opts.left_out.retain(|l| !before.contains(l));
    opts.held.extend(sweep_held);
    opts.left_out
        .extend(plan::held_lines(opts.held.iter().map(|h| &h.entry)));
    let start = Start::New {
        opts: Box::new(opts),
        label: super::run::label(&args.run),
        // A sweep of offered connections restates its input when every one
        // conforms: web's figure is its capacity, searched within a share
        // of the budget (docs/budget.md, "The run's budget").
        capacity: true,
    };
    let (store, run_id) =
        lifecycle::measure(start, None, args.run.progress(), |_| super::open_store(db))?;
    let data = store.load_run(run_id)?;
    print_results(&data)?;
    let path = args.output.unwrap_or_else(|| report_path(&data.run.label));
    super::report::write(std::slice::from_ref(&data), &path)?;
    outln!(
        "\nreport: {}",
        std::path::absolute(&path).unwrap_or(path).display()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// What the study measures: the suites on one CPU and on all, profiled
/// unless told not to; `quick` narrows the macro sweep to
/// [`QUICK_MACRO`].
fn selection(args: &Args, quick: bool) -> Targets {
    // The quick macro sweep adds the trace replay, which is not in
    // fileserver's own quick set: it is the workload that agrees with
    // dbench (docs/validation.md).
    let macro_too = args.suite.split(',').any(|s| s.trim() == "macro");
    Targets {
        targets: if quick && macro_too {
            vec!["fileserver.trace".into()]
        } else {
            vec![]
        },
        suite: Some(args.suite.clone()),
        cpus: vec!["1,all".into()],
        profile: !args.no_profile,
        only: if quick {
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
        ..Targets::default()
    }
}

/// Under a budget the study plans to the machine's noise: on a noisy
/// machine it measures each workload's representative sizes, with the
/// trials they need, and names what it left out (docs/planning.md,
/// "Planning to the noise").
fn plan_to_the_noise(opts: &mut RunOptions) {
    // The study searches capacities (see `run`); the plan's outlook keeps
    // their share.
    opts.capacity = true;
    // And past the gauge, the cases' own first trials: one whose
    // spread the budget cannot fund after the cases ranked before it
    // is left out, and named.
    opts.leave_out = true;
    let whole = opts.plan.len();
    // Time spent on a case that cannot settle in this directory is time
    // the others lack: such cases go first, each named with its reason.
    let mut left_out = plan::leave_unsettled(&mut opts.plan, &opts.dir);
    if !left_out.is_empty() {
        eprintln!(
            "kscale: the study leaves out the cases that cannot settle in {}:",
            opts.dir.display()
        );
        for l in &left_out {
            eprintln!("  {l}");
        }
    }
    let mut noisy = Vec::new();
    if let Some(readings) = gauge::before_plan(opts) {
        noisy = gauge::fit_to_noise(opts, &readings, true).0;
        let planned = gauge::plan_wall_cv(&readings);
        if noisy.is_empty() && planned > gauge::QUIET_CV && gauge::whole_plan(&readings) {
            eprintln!(
                "kscale: the kernel crossing reads a CV of {:.0} % and the CPU loop {:.0} %: the study measures its whole plan, and its pilot leaves out the cases whose own trials spread too far to converge",
                planned * 100.0,
                gauge::worst_loop_cv(&readings) * 100.0
            );
        }
        if !noisy.is_empty() {
            eprintln!(
                "kscale: the machine is noisy (planned at a CV of {:.0} %): the study measures {} of its {} cases, each workload's representative sizes; it leaves out, unless its pilot finds room for them:",
                gauge::plan_wall_cv(&readings) * 100.0,
                opts.plan.len(),
                whole
            );
            for l in &noisy {
                eprintln!("  {l}");
            }
        }
    }
    if noisy.is_empty() && !left_out.is_empty() {
        eprintln!(
            "kscale: the study measures {} of its {} cases",
            opts.plan.len(),
            whole
        );
    }
    left_out.extend(noisy);
    opts.left_out = left_out;
}

/// A budget that cannot measure the whole study at its default lengths
/// buys decisions first: the quick study's cases, at `--quick`'s trial
/// lengths and stop rule, each family's cells on its representatives,
/// and every capacity search; the sweeps' other cases are held, and the
/// run takes them back with what the decided cells leave (docs/planning.md,
/// "Decisions first"). Returns the held cases, none where the whole
/// study fits or no budget was given.
fn decide_first(args: &Args, opts: &mut RunOptions) -> Result<Vec<crate::engine::plan::HeldCase>> {
    let (Some(budget_s), false) = (opts.budget_s, args.run.quick) else {
        return Ok(Vec::new());
    };
    let searched = opts.plan.iter().any(plan::searched);
    let least_s = crate::engine::costs::least_s(opts)
        / crate::engine::budget::cases_share(opts.profile_share(), searched);
    if least_s <= budget_s {
        return Ok(Vec::new());
    }
    let mut quick = args.run.clone();
    quick.quick = true;
    let mut first = options(&selection(args, true), &quick)?;
    let whole = opts.plan.len();
    let (kept, held) = plan::decisions_first(std::mem::take(&mut first.plan), &opts.plan);
    eprintln!(
        "kscale: the {} budget cannot measure the whole study (its {whole} cases take at least {} at their default lengths): it decides each family's cells first, on {} cases at --quick's trial lengths and stop rule, and takes back the sweeps' other {} as the budget allows",
        crate::engine::progress::duration(budget_s),
        crate::engine::progress::duration(least_s),
        kept.len(),
        held.len()
    );
    first.plan = kept;
    first.budget_s = Some(budget_s);
    *opts = first;
    Ok(held)
}

/// The study's answer on the terminal: decisions, direct results,
/// scalability and what the profiles saw grow.
fn print_results(data: &kscale_store::RunData) -> Result<()> {
    let color = super::use_color();
    outln!("{}", super::show::header(data))?;
    if let Some(t) = kscale_report::decision::decision_table(data, &super::Registry) {
        outln!("== Decisions\n")?;
        out!("{}", t.to_terminal(color))?;
        outln!()?;
    }
    outln!("== Direct results")?;
    for t in run_tables(data, &super::Registry) {
        outln!()?;
        out!("{}", t.to_terminal(color))?;
    }
    outln!("\n== Scalability (all CPUs ÷ 1 CPU)")?;
    match scale(data, None, &super::Registry) {
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
    if let Some(t) = kscale_report::profile::cpu_growth(data, &super::Registry) {
        outln!("\n== Kernel profiles")?;
        outln!()?;
        out!("{}", t.to_terminal(color))?;
        outln!(
            "each case's top routines: kscale show {} (or the report below)",
            data.run.id
        )?;
    }
    Ok(())
}

/// The default report file, named for the label with anything a shell or
/// a file system might trip on replaced.
fn report_path(label: &str) -> PathBuf {
    let safe: String = label
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
