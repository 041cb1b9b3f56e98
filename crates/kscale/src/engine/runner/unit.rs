//! One case of a run as the runner carries it: its plan entry, its
//! counted and judged trials, what it spent and cost, where it stands.

use super::*;

pub(super) struct Unit {
    pub(super) entry: PlanEntry,
    pub(super) workload: &'static WorkloadDef,
    pub(super) case_id: i64,
    pub(super) next_idx: i64,
    pub(super) warmup_iterations: Option<u64>,
    pub(super) counted: Vec<f64>,
    /// Each counted trial's host measures (others' share of its CPUs,
    /// line round trip between two of them, steal time): what its figures
    /// are fitted on and a case left out after its pilot is set beside
    /// (docs/host.md, "vCPU placement").
    pub(super) host: Vec<Measures>,
    /// The counted values the rule judges and the planner funds: where
    /// they followed the host and a fit on its measures narrows their
    /// interval, the fit's judged figures, else `counted` itself
    /// (docs/host.md, "Others on the trial's CPUs").
    pub(super) judged: Vec<f64>,
    /// Trial wall time spent so far, warm-up included: what a case budget
    /// limits.
    pub(super) spent_s: f64,
    pub(super) notes: Vec<String>,
    pub(super) finished: bool,
    /// Its profiled trial is stored (or was not wanted when it ran).
    pub(super) profiled: bool,
    /// It finished converged.
    pub(super) converged: bool,
    /// Seconds that removing what its trials left in the scratch directory
    /// will take at the run's end ([`UNLINK_S`] a file).
    pub(super) cleanup_s: f64,
    /// Under `--budget`: the step of the run at which it last ran (0:
    /// never), and the wall time and count of its counted turns, the
    /// runner's own work around each trial included.
    pub(super) turn: u64,
    pub(super) cost_s: f64,
    pub(super) cost_n: usize,
    /// Under `--span`: when its next counted trial may start.
    pub(super) due: Option<Instant>,
    /// When its first counted trial started: what the rule's
    /// `min_span_s` counts from.
    pub(super) first_counted: Option<Instant>,
    /// What the same case cost in an earlier run here: what the time left
    /// expects of it before its own trials say (docs/budget.md, "How
    /// long").
    pub(super) before: Option<kscale_store::costs::CaseCost>,
    /// Counted trials it must have before it ends (0: none): what its
    /// family's undecided scalability asked of it after it had converged
    /// (docs/budget.md, "Undecided cells first").
    pub(super) floor: usize,
}

impl Unit {
    /// The plan's case `entry`, taken up where its stored form `old` left
    /// it (a resumed run's finished cases stay finished), `before` what it
    /// cost in an earlier run here. The runner and a resumed run's outlook
    /// ([`resumed_left_s`]) both build their cases here, so the outlook
    /// reads a started case's trials as the first progress line does.
    pub(super) fn taken_up(
        entry: &PlanEntry,
        workload: &'static WorkloadDef,
        case_id: i64,
        old: Option<&CaseData>,
        before: Option<kscale_store::costs::CaseCost>,
        opts: &RunOptions,
    ) -> Unit {
        let mut unit = Unit {
            entry: entry.clone(),
            workload,
            case_id,
            next_idx: 0,
            warmup_iterations: None,
            counted: Vec::new(),
            judged: Vec::new(),
            host: Vec::new(),
            spent_s: 0.0,
            notes: Vec::new(),
            finished: false,
            profiled: false,
            converged: false,
            cleanup_s: 0.0,
            turn: 0,
            cost_s: 0.0,
            cost_n: 0,
            due: None,
            first_counted: None,
            before,
            floor: 0,
        };
        // A case the run does not profile counts as profiled: nothing is
        // kept for its profile, and its turns skip it.
        unit.profiled = opts.profile_only.as_ref().is_some_and(|only| {
            !only
                .iter()
                .any(|(w, p)| *w == entry.workload && *p == entry.params)
        });
        if let Some(old) = old {
            unit.finished = old.status != CaseStatus::Pending;
            unit.profiled |= !old.profiles.is_empty();
            unit.converged = old.converged == Some(true);
            unit.next_idx = old.trials.iter().map(|t| t.idx + 1).max().unwrap_or(0);
            unit.warmup_iterations = old
                .trials
                .iter()
                .find(|t| t.warmup)
                .and_then(|t| t.iterations);
            unit.counted = old.values(workload.primary().name);
            unit.host = old
                .trials
                .iter()
                .filter(|t| !t.warmup && t.values.contains_key(workload.primary().name))
                .map(|t| kscale_core::hostfit::measures(t.accounting.as_ref()))
                .collect();
            unit.refit(opts);
            unit.spent_s = old.trials.iter().map(|t| t.wall_s).sum();
        }
        unit
    }

    /// The case as the time left sees it ([`kscale_core::ahead`]).
    pub(super) fn ahead(&self, opts: &RunOptions) -> kscale_core::ahead::Case<'_> {
        kscale_core::ahead::Case {
            workload: &self.entry.workload,
            finished: self.finished,
            turns: self.next_idx.max(0) as usize,
            secs: self.spent_s,
            needed: self.needed(opts),
            guess_s: self.guess_secs(opts),
            guess_turns: 1 + opts.rule.min_trials,
            before: self.before.map(|b| (b.trials, b.wall_s)),
        }
    }

    /// The same case on another CPU configuration.
    pub(super) fn twin_of(&self, other: &Unit) -> bool {
        self.entry.workload == other.entry.workload
            && self.entry.params == other.entry.params
            && self.entry.cpus_name != other.entry.cpus_name
    }

    /// The case's params, as tables print them.
    pub(super) fn label(&self) -> String {
        let key = CaseKey {
            workload: self.entry.workload.clone(),
            params: self.entry.params.clone(),
            cpus: String::new(),
        };
        format!(
            "{} {}",
            self.entry.workload,
            key.params_label(&self.workload.param_order())
        )
        .trim_end()
        .to_string()
    }

    pub(super) fn request(&self, opts: &RunOptions, scratch: &std::path::Path) -> TrialRequest {
        TrialRequest {
            workload: self.entry.workload.clone(),
            params: self.entry.params.clone(),
            cpus: self.entry.cpus.clone(),
            trial_time_s: opts.trial_time_s,
            iterations: self.warmup_iterations,
            dir: scratch.to_path_buf(),
            role: None,
        }
    }

    /// Its workload's seconds params (a window, a timed loop) as set.
    pub(super) fn timed_params(&self) -> Vec<f64> {
        timed_params(self.workload, &self.entry)
    }

    pub(super) fn timed(&self) -> bool {
        !self.timed_params().is_empty()
    }

    /// A trial's wall seconds before any has run.
    pub(super) fn guess_secs(&self, opts: &RunOptions) -> f64 {
        guess_secs(&self.timed_params(), opts)
    }

    /// Wall seconds one more counted trial costs: measured once there is
    /// one, else the warm-up's, else a guess from the trial time and the
    /// workload's seconds params.
    pub(super) fn secs_per_trial(&self, opts: &RunOptions) -> f64 {
        if self.cost_n > 0 {
            return self.cost_s / self.cost_n as f64;
        }
        if self.next_idx > 0 {
            return self.spent_s / self.next_idx as f64;
        }
        self.guess_secs(opts)
    }

    /// The counted trials its rule needs in all, once its own trials can
    /// say: a median-of-N case's N; a converging one's as the budget
    /// planner reads its spread ([`kscale_core::budget::need`]), from its
    /// third on.
    pub(super) fn needed(&self, opts: &RunOptions) -> Option<usize> {
        match self.workload.rule {
            RunRule::MedianOf(n) => Some(n),
            RunRule::Converge if self.judged.len() >= opts.rule.min_trials.max(3) => {
                let need = kscale_core::budget::need(&opts.rule, &self.case_state(opts));
                let all = self.judged.len() as f64 + need.more_trials.ceil();
                need.estimated
                    .then_some(all.min(opts.rule.max_trials as f64) as usize)
            }
            RunRule::Converge => None,
        }
    }

    /// Recomputes `judged` after a counted trial.
    pub(super) fn refit(&mut self, opts: &RunOptions) {
        self.judged = judged(
            &opts.rule,
            self.workload.rule == RunRule::Converge,
            &self.counted,
            &self.host,
        );
    }

    /// The case as the budget planner sees it, on its own: no part, rank,
    /// leave or share (the run's planning sets those).
    pub(super) fn case_state(&self, opts: &RunOptions) -> kscale_core::budget::CaseState<'_> {
        kscale_core::budget::CaseState {
            values: &self.judged,
            secs_per_trial: self.secs_per_trial(opts),
            converged: false,
            part: None,
            rank: 0,
            may_leave: false,
            share_trials: 0.0,
            floor: self.floor,
        }
    }
}
