//! What a run's cases are expected to cost before they have run: the
//! guesses the gauge's outlook, the budget's plan and the progress line
//! start from, and what this machine's earlier runs took. Apart from the
//! runner, so that the gauge can plan with them without importing it.

use super::args::RunOptions;
use super::plan::PlanEntry;
use kscale_core::RunRule;
use kscale_store::Store;
use kscale_workloads::WorkloadDef;

/// What the cases of the earlier runs on this machine cost; nothing where
/// the host has no name or the store cannot say (a guess is then all
/// there is, as on a machine's first run).
pub fn earlier_costs(store: &Store, run_id: i64) -> kscale_store::costs::EarlierCosts {
    kscale_store::owner::Here::current()
        .and_then(|here| store.earlier_costs(&here.host, run_id).ok())
        .unwrap_or_default()
}

/// A trial's wall seconds guessed from its workload's seconds params (a
/// window, a timed loop) and the run's trial time.
pub fn guess_secs(timed: &[f64], opts: &RunOptions) -> f64 {
    let timed: f64 = timed.iter().sum();
    if timed > 0.0 {
        timed * 1.3 + 0.2
    } else {
        opts.trial_time_s + 0.05
    }
}

/// A case's seconds params (a window, a timed loop) as its entry sets them.
pub fn timed_params(w: &WorkloadDef, e: &PlanEntry) -> Vec<f64> {
    let params = kscale_core::Params(e.params.clone());
    w.params
        .iter()
        .filter(|p| matches!(p.kind, kscale_core::ParamKind::Seconds { .. }))
        .filter_map(|p| params.seconds(p.name).ok())
        .collect()
}

/// A median-of-N case's guessed cost before anything has run: its N
/// windows and a warm-up, each a trial time and a second of setup.
pub fn guessed_median_cost(w: &WorkloadDef, opts: &RunOptions) -> Option<f64> {
    match w.rule {
        RunRule::MedianOf(n) => Some((n as f64 + 1.0) * (opts.trial_time_s + 1.0)),
        RunRule::Converge => None,
    }
}

/// Each converging case of the plan's guessed cost, (seconds a counted
/// trial, seconds once for its warm-up), before anything has run: what
/// the gauge's outlook plans with.
pub fn guessed_costs(opts: &RunOptions) -> Vec<(f64, f64)> {
    opts.plan
        .iter()
        .filter_map(|e| {
            let w = kscale_workloads::find(&e.workload)?;
            if w.rule != RunRule::Converge {
                return None;
            }
            let s = guess_secs(&timed_params(w, e), opts);
            Some((s, s))
        })
        .collect()
}

/// The least the plan's cases can take before anything has run, its
/// capacity searches aside (their share is bounded): each converging case
/// its warm-up and the rule's fewest trials, each median-of-N case its
/// windows. A budget below it cannot measure the whole plan at any noise;
/// a budgeted study then decides first (docs/planning.md, "Decisions
/// first").
pub fn least_s(opts: &RunOptions) -> f64 {
    opts.plan
        .iter()
        .filter(|e| !super::plan::searched(e))
        .filter_map(|e| Some((kscale_workloads::find(&e.workload)?, e)))
        .map(|(w, e)| match guessed_median_cost(w, opts) {
            Some(s) => s,
            None => guess_secs(&timed_params(w, e), opts) * (1.0 + opts.rule.min_trials as f64),
        })
        .sum()
}
