//! Fills a SQLite (or PostgreSQL) store with synthetic runs for
//! `scripts/bench-history`: `synthetic_store DB RUNS CASES TRIALS`. The
//! cases cycle through the catalogue's workloads, so `history` and
//! `changes` resolve their targets as on a real store; every value steps
//! up 10 % from the run at 80 % of the series.

use kscale_store::synthetic::Spec;
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize| args.get(i).and_then(|s| s.parse::<usize>().ok());
    let (Some(db), Some(runs), Some(cases), Some(trials)) = (args.first(), num(1), num(2), num(3))
    else {
        eprintln!("usage: synthetic_store DB RUNS CASES TRIALS");
        return ExitCode::from(2);
    };
    let spec = Spec {
        runs,
        workloads: kscale_workloads::workloads().map(|w| w.id()).collect(),
        cases_per_run: cases,
        trials,
        step: Some((runs * 4 / 5, 0.10)),
        seed: 32,
    };
    let store = match kscale_store::Store::open(Path::new(db)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("synthetic_store: {e}");
            return ExitCode::from(2);
        }
    };
    match store.fill_synthetic(&spec) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("synthetic_store: {e}");
            ExitCode::FAILURE
        }
    }
}
