//! Several runs measured together, one machine switched between their
//! configurations (docs/tune.md, "Interleaved steps"): each round gives
//! every run still measuring one turn — a trial of each of its unfinished
//! cases — in an order drawn afresh for the round, and before its turn a
//! run's `switch` puts the machine in its configuration. A drift of the
//! host then falls on every run alike instead of on whichever ran last.
//!
//! Each run keeps its own cases, stopping rules, profiles and stored
//! trials: the turns are the runner's own ([`Runner::turn`]), only their
//! order is this module's.

use super::{close, open, units, with_hotplug, Env, Runner, Unit};
use crate::engine::args::RunOptions;
use crate::engine::hotplug::Hotplug;
use crate::engine::peers::PeerSet;
use crate::engine::profiling::Profiler;
use anyhow::Result;
use kscale_core::order::{self, SplitMix64};
use kscale_core::Decision;
use kscale_store::Store;

/// One run of an interleaved set.
pub struct Arm<'a> {
    pub run_id: i64,
    pub opts: &'a RunOptions,
    pub peers: Option<&'a mut PeerSet>,
    /// Puts the machine in this run's configuration; called before each
    /// of its turns (it may skip what is already so).
    pub switch: &'a mut dyn FnMut() -> Result<()>,
}

/// Measures every unfinished case of every arm, the arms' turns in a
/// random order per round drawn from `seed`. The arms share the first
/// one's directory, CPU mode and load CPUs (they differ in what their
/// switches change and in their cases' params and CPUs). Under `--budget`
/// the set may take each run's budget once per arm; what is unfinished
/// when it is spent stops unconverged.
pub fn execute(store: &Store, arms: &mut [Arm<'_>], show_progress: bool, seed: u64) -> Result<()> {
    let Some(first) = arms.first() else {
        return Ok(());
    };
    let opts = first.opts;
    with_hotplug(store, opts, |hotplug| {
        execute_with(store, arms, show_progress, seed, hotplug)
    })
}

fn execute_with(
    store: &Store,
    arms: &mut [Arm<'_>],
    show_progress: bool,
    seed: u64,
    hotplug: Option<&Hotplug<'_>>,
) -> Result<()> {
    let opts = arms[0].opts;
    let mut sets: Vec<Vec<Unit>> = arms
        .iter()
        .map(|a| units(store, a.run_id, a.opts))
        .collect::<Result<_>>()?;
    let (scratch, available) = open(&opts.dir, sets.iter().flatten())?;
    let len: u64 = arms
        .iter()
        .zip(&sets)
        .map(|(a, us)| {
            us.iter().filter(|u| !u.finished).count() as u64 * (1 + a.opts.rule.min_trials as u64)
        })
        .sum();
    let bar = crate::engine::progress::bar(show_progress, len, true);
    let env = Env::new(scratch.path(), &bar, &available, opts, hotplug);
    let mut profilers: Vec<Profiler> = arms.iter().map(|a| Profiler::new(a.opts.profile)).collect();
    // Each arm its budget, interleaved: the arms' budgets together.
    let budget = opts
        .budget_s
        .map(|b| crate::engine::budget::Budget::start(b * arms.len() as f64, 0.0));
    let mut rng = SplitMix64::new(seed);
    loop {
        let alive: Vec<usize> = (0..arms.len())
            .filter(|&a| sets[a].iter().any(|u| !u.finished))
            .collect();
        if alive.is_empty() {
            break;
        }
        let spent = budget.is_some_and(|b| b.spent());
        for a in order::round(&mut rng, &alive) {
            let arm = &mut arms[a];
            // A case's profiled trial is one of its turns: switched too.
            (arm.switch)()?;
            let mut r = Runner::new(store, arm.run_id, arm.opts, &env, &mut profilers[a])
                .with_peers(arm.peers.as_deref_mut());
            r.spender = crate::engine::budget::Spender::TuneArms;
            for u in sets[a].iter_mut().filter(|u| !u.finished) {
                if spent {
                    let why = "the run's budget was spent".to_string();
                    r.finish(u, Decision::NotConverged, Some(why))?;
                } else {
                    r.turn(u)?;
                }
            }
        }
    }
    bar.finish_and_clear();
    close(scratch, &opts.dir, sets.iter().flatten());
    if let Some(b) = budget {
        eprintln!(
            "kscale: {}",
            crate::engine::budget::ledger_line(&b, &b.drawn())
        );
    }
    Ok(())
}
