//! kscale: a Linux kernel performance and SMP-scalability lab.
//!
//! `main` only parses the command line and maps errors to exit codes; each
//! sub-command lives in its own file under `cmd/`.

mod cmd;
mod engine;
mod error;
mod idle;
mod output;
mod signals;

use clap::{CommandFactory, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// A Linux kernel performance and SMP-scalability lab: runs lmbench-style and
/// macro workloads on 1..N CPUs until their confidence intervals converge,
/// stores every trial, and shows the results as the classic kernel studies did.
#[derive(Parser)]
#[command(
    name = "kscale",
    version,
    propagate_version = true,
    max_term_width = 100
)]
struct Cli {
    /// Result database: a SQLite file, or a shared PostgreSQL store as postgres://user@host/db
    /// (docs/store.md) (default: $KSCALE_DB, else $XDG_DATA_HOME/kscale/kscale.db).
    #[arg(long, global = true, value_name = "PATH|URL")]
    db: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The seeds' method in one command: a suite on 1 CPU and on all, stored, summarised, reported.
    Study(cmd::study::Args),
    /// List the workload catalogue: families, workloads, params, metrics and suites.
    List(cmd::list::Args),
    /// Run workloads, suites or families on one or more CPU configurations.
    Run(cmd::run::Args),
    /// List the stored runs, one line each.
    Results(cmd::results::Args),
    /// Show a run's results as tables, one per family.
    Show(cmd::show::Args),
    /// Compare systems: a column per run, ratio columns, geometric means, significance.
    Compare(cmd::compare::Args),
    /// A case's result across the stored runs: value, interval, trials, kernel, label.
    History(cmd::history::Args),
    /// Change points in each case's history of runs, worst first; exit 1 on a regression.
    Changes(cmd::changes::Args),
    /// Scalability (N CPUs / 1 CPU), efficiency, SMP overhead and a USL fit for one run.
    Scale(cmd::scale::Args),
    /// Write a self-contained HTML report with tables and SVG charts.
    Report(cmd::report::Args),
    /// Kernel profiles: `profile diff A B` shows which routines grew or shrank.
    Profile(cmd::profile::Args),
    /// The CPUs each configuration would use and where its load would go (nothing is run).
    Cpus(cmd::cpus::Args),
    /// Before a run: the machine's noise (the gauge) and what a run of the targets needs.
    Doctor(cmd::doctor::Args),
    /// Export a run's results as JSON or CSV.
    Export(cmd::export::Args),
    /// Merge runs exported (`export --format json`) on other machines into this store.
    Import(cmd::import::Args),
    /// Regression gate: measure targets now, exit 1 if a case is worse than a baseline run.
    Check(cmd::check::Args),
    /// Run kscale on several hosts over ssh and import their results here.
    Fleet(cmd::fleet::Args),
    /// A cumulative tuning study: baseline, each step, baseline again; every setting restored.
    Tune(cmd::tune::Args),
    /// Generate load for another host's `kscale run … --peer` (netserver's role, reversed).
    Peer(cmd::peer::Args),
    /// The web family's tools: `web fileset` writes its file set for an external server.
    Web(cmd::web::Args),
    /// Print a shell completion script for bash, zsh, fish or elvish.
    Completions(cmd::completions::Args),
    /// Kernel images booted in QEMU, kscale measuring inside, the runs stored here by kernel.
    Vm(cmd::vm::Args),
    /// Man pages (and docs/cli.md), generated from these definitions.
    Man(cmd::man::Args),
    /// Internal: run one trial in a worker process (started by `kscale run`).
    #[command(name = "__worker", hide = true)]
    Worker,
    #[command(name = "__gauge", hide = true)]
    Gauge,
}

fn main() -> ExitCode {
    // The kernel starts init without arguments: a guest `kscale vm`
    // booted.
    if cmd::vm_init::is_guest_init() {
        return cmd::vm_init::main();
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                let _ = e.print();
                return ExitCode::from(2);
            }
            let text = e.to_string();
            let line = text
                .lines()
                .next()
                .unwrap_or("bad arguments")
                .trim_start_matches("error: ");
            // clap lists an enum's accepted values on a line of their own.
            let accepted = text
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with("[possible values:"))
                .map(|l| format!(" {l}"))
                .unwrap_or_default();
            eprintln!("kscale: error: {line}{accepted} (see --help)");
            return ExitCode::from(2);
        }
    };
    let db = cli.db;
    let result = match cli.command {
        Command::Worker => return cmd::worker::main(),
        Command::Gauge => return cmd::worker::gauge_main(),
        Command::List(a) => cmd::list::run(a),
        Command::Study(a) => cmd::study::run(a, db),
        Command::Cpus(a) => cmd::cpus::run(a),
        Command::Run(a) => cmd::run::run(a, db),
        Command::Results(a) => cmd::results::run(a, db),
        Command::Show(a) => cmd::show::run(a, db),
        Command::Export(a) => cmd::export::run(a, db),
        Command::Compare(a) => cmd::compare::run(a, db),
        Command::History(a) => cmd::history::run(a, db),
        Command::Changes(a) => cmd::changes::run(a, db),
        Command::Scale(a) => cmd::scale::run(a, db),
        Command::Report(a) => cmd::report::run(a, db),
        Command::Profile(a) => cmd::profile::run(a, db),
        Command::Peer(a) => cmd::peer::run(a),
        Command::Import(a) => cmd::import::run(a, db),
        Command::Check(a) => cmd::check::run(a, db),
        Command::Doctor(a) => cmd::doctor::run(a, db),
        Command::Fleet(a) => cmd::fleet::run(a, db),
        Command::Web(a) => cmd::web::run(a),
        Command::Tune(a) => cmd::tune::run(a, db),
        Command::Vm(a) => cmd::vm::run(a, db),
        Command::Completions(a) => cmd::completions::run(a, Cli::command()),
        Command::Man(a) => cmd::man::run(a, Cli::command()),
    };
    match result {
        Ok(code) => code,
        // `kscale show | head`: the reader has all it wanted.
        Err(e) if e.downcast_ref::<output::Closed>().is_some() => ExitCode::SUCCESS,
        Err(e) => error::report(&e),
    }
}
