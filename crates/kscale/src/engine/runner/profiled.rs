//! A profiled trial's length under a budget: long enough for a top-10 of
//! samples, short enough that all of them fit in the share of the budget
//! profiles may take (docs/placement.md, "Kernel profiles"); and the
//! tally of what profiles (and cases' ends) have cost, which the budget
//! keeps for those still to come.

use super::*;

/// Samples a profiled trial should hold on each CPU configuration, so that
/// a top-10 stands on more than a few dozen (docs/placement.md, "Kernel
/// profiles").
const PROFILE_SAMPLES: f64 = 1000.0;
/// The CPU clock's sampling rate (SampleSpec::DEFAULTS).
const PROFILE_HZ: f64 = 997.0;
/// A profiled trial's cost beyond its length: the worker's start, perf's
/// setup, the store.
pub(super) const PROFILE_START_S: f64 = 0.2;

/// Seconds of profiled trial that give [`PROFILE_SAMPLES`] on `cpus` CPUs
/// sampled at once.
pub(super) fn profile_target_s(cpus: usize) -> f64 {
    PROFILE_SAMPLES / (PROFILE_HZ * cpus.max(1) as f64)
}

/// The factor by which every profiled trial that can be shortened is, so
/// that all of them fit in [`PROFILE_SHARE`](crate::engine::budget::PROFILE_SHARE) of the budget (1 without a
/// budget). A workload that ends after fixed work (chat) cannot be
/// shortened: its trials' guessed cost is taken off the share first.
pub(super) fn profile_scale(units: &[Unit], opts: &RunOptions, budget_s: f64) -> f64 {
    let (mut scalable, mut fixed) = (0.0, 0.0);
    for u in units.iter().filter(|u| !u.profiled) {
        fixed += PROFILE_START_S;
        if u.workload.roles.is_some() && !u.timed() {
            fixed += u.secs_per_trial(opts);
        } else {
            scalable += profile_target_s(u.entry.cpus.len());
        }
    }
    if scalable <= 0.0 {
        1.0
    } else {
        // Never below a tenth: a profile of a few samples answers nothing.
        ((crate::engine::budget::PROFILE_SHARE * budget_s - fixed) / scalable).clamp(0.1, 1.0)
    }
}

/// The profiled trial's request: as long as `secs`, by its seconds params
/// (a window, a timed loop) where it has them, else by more iterations
/// than the calibrated count. A workload that ends after fixed work (chat)
/// stays as it is.
pub(super) fn profile_request(
    u: &Unit,
    req: &TrialRequest,
    trial_time_s: f64,
    secs: f64,
) -> TrialRequest {
    let mut req = req.clone();
    let params = kscale_core::Params(u.entry.params.clone());
    let mut timed = false;
    for p in u.workload.params {
        if matches!(p.kind, kscale_core::ParamKind::Seconds { .. }) {
            if let Ok(s) = params.seconds(p.name) {
                timed = true;
                if s < secs {
                    req.params.insert(p.name.to_string(), format!("{secs:.3}"));
                }
            }
        }
    }
    if !timed && u.workload.roles.is_none() {
        if let Some(it) = req.iterations {
            let k = (secs / trial_time_s).max(1.0);
            req.iterations = Some(((it as f64) * k).ceil() as u64);
        }
    }
    req
}

/// Seconds something has cost in this run, summed, and how many times.
#[derive(Clone, Copy, Default)]
pub(super) struct Tally {
    sum: f64,
    n: usize,
}

impl Tally {
    pub(super) fn add(&mut self, secs: f64) {
        self.sum += secs;
        self.n += 1;
    }

    /// The mean so far, `before` until there is one.
    pub(super) fn mean_or(&self, before: f64) -> f64 {
        if self.n == 0 {
            before
        } else {
            self.sum / self.n as f64
        }
    }
}
