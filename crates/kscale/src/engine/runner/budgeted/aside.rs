//! A case set aside by the budgeted loop: one that needs more than an
//! even share at its pilot waits for what the other cases leave, is
//! resumed when they leave it (or at the run's end on its luckiest
//! reading), and is settled or left out at the end (docs/planning.md,
//! "Planning to the noise", step 4).

use super::*;

/// A case that needed more than an even share at its pilot waits, out of
/// the plan (and counted left out), for what the other cases leave
/// ([`Budgeted::resume`]), and is left out at the end if nothing does;
/// resumed, it is not set aside again.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Aside {
    No,
    /// `needed`: the case that needed the share, not a twin gone with it.
    Waits {
        needed: bool,
    },
    Resumed,
}

impl Budgeted {
    /// Sets aside each of `leaves`: each needs more than an even share of
    /// the run, and waits for what the other cases leave
    /// ([`Budgeted::resume`]), with those of its twins that would cost as
    /// much ([`waits_with`]). In a quick study under `noisy-neighbour
    /// --duty 25` chat on one CPU, left out at its pilot for needing
    /// ~67 s, took with it a macro case of 12, and the run then ended 83 s
    /// inside its budget. A case taken back waits alike: the 30 min study
    /// left out 13 taken-back macro cases at their pilots, five of them
    /// with a twin 0.6–16 s from converging, and ended with 221 s unspent.
    pub(super) fn leave(
        &mut self,
        r: &mut Runner<'_, '_>,
        units: &mut [Unit],
        leaves: Vec<(usize, kscale_core::budget::Need)>,
        share_trials: f64,
    ) -> Result<()> {
        for (i, need) in leaves {
            if units[i].finished {
                continue;
            }
            let twins: Vec<usize> = (0..units.len())
                .filter(|&k| {
                    !units[k].finished
                        && units[k].twin_of(&units[i])
                        && waits_with(r.opts, &units[k], share_trials)
                })
                .collect();
            for k in std::iter::once(i).chain(twins) {
                units[k].finished = true;
                self.left_out[k] = true;
                self.aside[k] = Aside::Waits { needed: k == i };
            }
            let why = "it needs more than an even share of the run, and resumes if the other cases leave the time";
            r.say(format!(
                "  {}",
                set_aside_line(&units[i], "waits", need, why)
            ));
        }
        Ok(())
    }

    /// Leaves case `i` out with its need and why, and its twins on the
    /// other configurations with it: a family's scalability pairs a case
    /// with its twin, so an unconverged twin does not stay without it. A
    /// twin that converged stays: it is a figure of its family there, and
    /// under the neighbours often a macro case (in a quick study under
    /// the wandering neighbour net's 4-connection pair went for its
    /// one-CPU case, CV 23 %, while the all-CPU one needed ~1.3 s more).
    /// The pair's other rows then stay as skipped, so that its family's
    /// mean on each configuration is over the cases it has there and its
    /// scalability over the pairs it has, as for a case that cannot run.
    pub(super) fn leave_pair(
        &mut self,
        r: &mut Runner<'_, '_>,
        units: &mut [Unit],
        (i, need, why): (usize, kscale_core::budget::Need, &str),
    ) -> Result<()> {
        let twins: Vec<usize> = (0..units.len())
            .filter(|&k| units[k].twin_of(&units[i]))
            .collect();
        // Left out for good (a waiting case is counted left out too).
        let gone =
            |b: &Budgeted, k: usize| b.left_out[k] && !matches!(b.aside[k], Aside::Waits { .. });
        let stays = |u: &Unit| u.finished && u.converged;
        let beside = twins.iter().any(|&k| stays(&units[k]));
        r.leave_out(&mut units[i], need, why, beside)?;
        self.left_out[i] = true;
        self.aside[i] = Aside::No;
        for k in twins {
            if stays(&units[k]) || gone(self, k) {
                continue;
            }
            let need = kscale_core::budget::need(&r.opts.rule, &units[k].case_state(r.opts));
            r.leave_out(
                &mut units[k],
                need,
                "left with its case on the other configuration, which scalability pairs it with",
                beside,
            )?;
            self.left_out[k] = true;
            self.aside[k] = Aside::No;
        }
        Ok(())
    }

    /// The waiting cases, each with its waiting twins, in the run's order
    /// (the order they resume in is [`kscale_core::budget::to_resume`]'s).
    pub(super) fn waiting_groups(&self, units: &[Unit]) -> Vec<Vec<usize>> {
        let waits = |k: usize| matches!(self.aside[k], Aside::Waits { .. });
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for i in (0..units.len()).filter(|&i| waits(i)) {
            if groups.iter().flatten().any(|&k| k == i) {
                continue;
            }
            groups.push(
                (i..units.len())
                    .filter(|&k| waits(k) && (k == i || units[k].twin_of(&units[i])))
                    .collect(),
            );
        }
        groups
    }

    /// How many other cases of its part (its family on its configuration)
    /// a waiting group's cases keep, at fewest: a macro family measures
    /// two cases there (chat's threads and epoll), a micro one up to a
    /// dozen. Under the wandering neighbour the remainder resumed three
    /// waiting micro cases in the run's order, ~67 s, and then had too
    /// little for net's 4-connection case, one of net's two (~50 s).
    pub(super) fn others_kept(&self, units: &[Unit], group: &[usize]) -> usize {
        group
            .iter()
            .map(|&i| self.kept_beside(units, i))
            .min()
            .unwrap_or(0)
    }

    /// The other cases of case `i`'s part that are measured and may still
    /// decide it.
    pub(super) fn kept_beside(&self, units: &[Unit], i: usize) -> usize {
        (0..units.len())
            .filter(|&k| {
                k != i
                    && self.parts[k] == self.parts[i]
                    && !self.left_out[k]
                    && units[k].workload.rule == RunRule::Converge
                    && (!units[k].finished || units[k].converged)
            })
            .count()
    }

    /// What a waiting group's trials still need: at its spread's point
    /// estimate, or at its luckiest reading (`lucky`).
    pub(super) fn group_need_s(
        &self,
        r: &Runner<'_, '_>,
        units: &[Unit],
        group: &[usize],
        lucky: bool,
    ) -> f64 {
        let need = if lucky {
            kscale_core::budget::lucky_need
        } else {
            kscale_core::budget::need
        };
        group
            .iter()
            .map(|&k| need(&r.opts.rule, &units[k].case_state(r.opts)).more_s)
            .sum()
    }

    /// What the waiting cases that `left` seconds could still settle keep
    /// from the take-backs, at their luckiest reading (what the run's
    /// remainder resumes them on): a case of the run's own plan comes
    /// before a sweep's held case.
    pub(super) fn waiting_s(&self, r: &Runner<'_, '_>, units: &[Unit], left: f64) -> f64 {
        self.waiting_groups(units)
            .iter()
            .map(|g| self.group_need_s(r, units, g, true))
            .filter(|&s| s <= left)
            .sum()
    }

    /// Resumes the waiting groups that `spare` seconds buy
    /// ([`kscale_core::budget::to_resume`]): while other cases run (`last`
    /// false) on their point estimate, holding the rest back for a group
    /// that may fit at the run's end; when nothing else is left to run
    /// (`last`), on their luckiest reading, since a point estimate from
    /// five trials under a neighbour overstated chat's need tenfold (docs/
    /// validation.md) and the remainder is otherwise unspent. A resumed
    /// case is not set aside again: it converges, or the planner stops it
    /// once even its luckiest reading does not fit, and it is settled
    /// ([`Budgeted::settle_resumed`]). True when it resumed any.
    pub(super) fn resume(
        &mut self,
        r: &mut Runner<'_, '_>,
        units: &mut [Unit],
        spare: f64,
        last: bool,
    ) -> Result<bool> {
        let groups = self.waiting_groups(units);
        let waiting: Vec<kscale_core::budget::Waiting> = groups
            .iter()
            .map(|g| kscale_core::budget::Waiting {
                point_s: self.group_need_s(r, units, g, false),
                lucky_s: self.group_need_s(r, units, g, true),
                kept: self.others_kept(units, g),
            })
            .collect();
        let mut spare = spare;
        let chosen = kscale_core::budget::to_resume(&waiting, spare, last);
        for &g in &chosen {
            let (group, w) = (&groups[g], &waiting[g]);
            for &k in group {
                self.aside[k] = Aside::Resumed;
                self.left_out[k] = false;
                units[k].finished = false;
            }
            let label = units[group[0]].label();
            r.say(if last {
                format!(
                    "kscale: {label} resumes on {} configuration(s) with the last {spare:.0} s of the budget: it needs ~{:.1} s at its spread so far, ~{:.1} s at its luckiest reading",
                    group.len(),
                    w.point_s,
                    w.lucky_s,
                )
            } else {
                format!(
                    "kscale: {label} resumes on {} configuration(s): the other cases leave {spare:.0} s of the budget, and it needs ~{:.1} s",
                    group.len(),
                    w.point_s,
                )
            });
            spare -= if last { w.lucky_s } else { w.point_s };
        }
        Ok(!chosen.is_empty())
    }

    /// At the run's end, leaves out what still waits, and each resumed case
    /// the time left did not settle, with its twins. True when it left out
    /// any.
    pub(super) fn leave_waiting(
        &mut self,
        r: &mut Runner<'_, '_>,
        units: &mut [Unit],
    ) -> Result<bool> {
        let mut any = false;
        // Each waiting group as its pilot would have left it: the case
        // that needed the share, with its twins.
        for group in self.waiting_groups(units) {
            let needed = Aside::Waits { needed: true };
            let i = group
                .iter()
                .copied()
                .find(|&k| self.aside[k] == needed)
                .unwrap_or(group[0]);
            let why = if self.aside[i] == needed {
                "it needs more than an even share of the run"
            } else {
                "left with its case on the other configuration, which scalability pairs it with"
            };
            let need = kscale_core::budget::need(&r.opts.rule, &units[i].case_state(r.opts));
            self.leave_pair(r, units, (i, need, why))?;
            any = true;
        }
        for i in 0..units.len() {
            if self.aside[i] == Aside::Resumed && !units[i].finished {
                let need = kscale_core::budget::need(&r.opts.rule, &units[i].case_state(r.opts));
                self.settle_resumed(r, units, i, need)?;
                any = true;
            }
        }
        Ok(any)
    }

    /// Ends resumed case `i`, which the time left does not settle: left
    /// out with its unconverged twins, a converged one staying
    /// ([`Budgeted::leave_pair`]), where its family keeps another usable
    /// case on each of their configurations ([`unmeasurable`]); else NOT
    /// CONVERGED where it stands, so that no family goes without a figure.
    /// (Under the wandering neighbour a resumed `ipc.tcp` on all CPUs once
    /// went alone, its row removed and its converged twin kept, and ipc's
    /// geometric mean on all CPUs had no figure: a pair that keeps one
    /// case now keeps the other's row, skipped.)
    pub(super) fn settle_resumed(
        &mut self,
        r: &mut Runner<'_, '_>,
        units: &mut [Unit],
        i: usize,
        need: kscale_core::budget::Need,
    ) -> Result<()> {
        for k in 0..units.len() {
            if k == i || units[k].twin_of(&units[i]) {
                self.aside[k] = Aside::No;
            }
        }
        if unmeasurable(&standing(units, &self.left_out), i) {
            let why = "it needs more than an even share of the run, and the time the other cases left did not settle it";
            self.leave_pair(r, units, (i, need, why))
        } else {
            r.finish(
                &mut units[i],
                Decision::NotConverged,
                Some("the run's budget was spent".into()),
            )
        }
    }
}

/// Whether a twin of a case set aside at its pilot waits with it rather
/// than going on in the run: it does unless its own spread, judged,
/// converges it within an even share (then it is a figure of its family
/// that stays whatever becomes of the case, [`Budgeted::leave_pair`]).
fn waits_with(opts: &RunOptions, twin: &Unit, share_trials: f64) -> bool {
    let state = twin.case_state(opts);
    !cheap_twin(
        state.values.len(),
        opts.rule.judged_after(),
        kscale_core::budget::need(&opts.rule, &state).more_trials,
        share_trials,
    )
}

/// A twin judged on its own trials whose need fits an even share of the
/// run's trials.
fn cheap_twin(trials: usize, judged_after: usize, more_trials: f64, share_trials: f64) -> bool {
    trials >= judged_after && more_trials <= share_trials
}

#[cfg(test)]
mod tests {
    use super::cheap_twin;

    #[test]
    fn a_twin_goes_on_only_once_judged_and_within_a_share() {
        // net's 4-connection case on all CPUs beside its waiting one-CPU
        // twin: 5 trials, ~2 more, a share of ~40.
        assert!(cheap_twin(5, 3, 2.0, 40.0));
        // Not yet judged: it waits with its case.
        assert!(!cheap_twin(2, 3, 2.0, 40.0));
        // Dear itself: it waits too.
        assert!(!cheap_twin(5, 3, 154.0, 40.0));
    }
}
