//! The run engine: everything that measures, below the commands. The
//! commands (`cmd/`) parse their arguments and print; they call the engine
//! through [`lifecycle`] (one run's life) and [`args`] (one set of run
//! arguments), and the engine never imports a command.
//!
//! - `args`: run arguments as typed and as stored; `plan`: the cases.
//! - `lifecycle`: create or resume, execute, finish a run.
//! - `runner`: a run's cases in interleaved rounds, a trial at a time
//!   (`runner::interleave`: several runs' trials in random order, the
//!   machine switched between their settings, for `tune`);
//!   `capacity`: `--capacity` searches on top of it; `profiling`: the
//!   extra sampled trial.
//! - `worker`, `roles`, `load`, `peers`: where a trial's processes run.
//! - `hotplug`, `guard`: settings changed for a run, journalled and put back.
//! - `progress`: the progress bar, for a person or for `kscale fleet`.
//! - `gate`: what a regression gate stands on: a case's runs here.
//! - `gauge`: the machine's own speed before a run and through it (the
//!   control), stored with the run.
//! - `vm`: kernel images booted in QEMU, kscale their init, the guests'
//!   runs brought back (docs/vm.md).

pub mod args;
pub mod budget;
pub mod capacity;
pub mod costs;
pub mod gate;
pub mod gauge;
pub mod guard;
pub mod hotplug;
pub mod lifecycle;
pub mod load;
pub mod peers;
pub mod plan;
pub mod profiling;
pub mod progress;
pub mod roles;
pub mod runner;
pub mod vm;
pub mod worker;

/// Stores trials that carry only their wall time, `(warm-up, seconds)`
/// each: what the planners' tests need of a case's history.
#[cfg(test)]
pub(crate) fn add_timed_trials(store: &kscale_store::Store, case: i64, walls: &[(bool, f64)]) {
    let values = Default::default();
    let histograms = Default::default();
    for (idx, &(warmup, wall_s)) in walls.iter().enumerate() {
        let t = kscale_store::NewTrial {
            idx: idx as i64,
            warmup,
            wall_s,
            iterations: None,
            values: &values,
            accounting: None,
            histograms: &histograms,
            roles: &[],
        };
        store.add_trial(case, &t).unwrap();
    }
}

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const GIT_REV: &str = env!("KSCALE_GIT_REV");
