//! `--budget`: the run's cases planned again after every trial by
//! [`kscale_core::budget`] — who gets the next trial, who is left out, and
//! which held cases the pilot takes back (docs/budget.md, "The run's
//! budget"). The runner's budgeted loop, apart from its unbudgeted one.

use super::*;

mod aside;
use aside::Aside;

/// Each case as [`unmeasurable`] reads it: usable while it is in the run
/// (not left out nor waiting) and converging, or converged.
fn standing<'u>(units: &'u [Unit], left_out: &[bool]) -> Vec<Standing<'u>> {
    units
        .iter()
        .zip(left_out)
        .map(|(u, &out)| Standing {
            workload: &u.entry.workload,
            params: &u.entry.params,
            cpus: &u.entry.cpus_name,
            usable: !out && u.workload.rule == RunRule::Converge && (!u.finished || u.converged),
        })
        .collect()
}

/// `--budget`: every case of the run, all workloads together, planned
/// again after each trial by [`kscale_core::budget`]. Median-of-N cases
/// take their N trials first; the others get their first trials in turn,
/// then the time their spread needs, their trials interleaved over the
/// whole run; cases that cannot converge in what is left stop at once.
pub(super) fn run_budgeted(
    r: &mut Runner<'_, '_>,
    units: &mut Vec<Unit>,
    budget_s: f64,
) -> Result<()> {
    // The command's budget when it counts its own setup and output (study),
    // else one started now.
    let clock = r
        .opts
        .budget_from(Instant::now())
        .unwrap_or_else(|| crate::engine::budget::Budget::start(budget_s, 0.0));
    let mut st = Budgeted::new(r, units);
    let mut step = 0u64;
    loop {
        let left = clock.left_s() - kept_s(r, units);
        let median = units
            .iter()
            .enumerate()
            .filter(|(_, u)| !u.finished && matches!(u.workload.rule, RunRule::MedianOf(_)))
            .min_by_key(|(_, u)| (u.counted.len(), u.turn))
            .map(|(i, _)| i);
        // A median-of-N trial is not started unless what is left buys it.
        let pick = if let Some(i) = median.filter(|&i| left >= units[i].secs_per_trial(r.opts)) {
            Some(i)
        } else {
            match st.converging_next(r, units, (budget_s, left), &clock, median.is_none())? {
                Next::Replan => continue,
                Next::Case(i) => i,
            }
        };
        let Some(i) = pick else {
            // Nothing left to run: what is left goes to the cases still
            // waiting; what it cannot resume, or resumed and did not
            // settle, is left out as it would have been at its pilot.
            if st.resume(r, units, left - r.opts.kept_back_s, true)?
                || st.leave_waiting(r, units)?
            {
                continue;
            }
            break;
        };
        step += 1;
        let u = &mut units[i];
        u.turn = step;
        let (n, t0, c0) = (u.counted.len(), Instant::now(), u.cleanup_s);
        r.turn(u)?;
        if u.counted.len() > n {
            // What the trial left to remove is part of its price.
            u.cost_s += t0.elapsed().as_secs_f64() + (u.cleanup_s - c0);
            u.cost_n += 1;
        }
    }
    for u in units.iter_mut().filter(|u| !u.finished) {
        r.finish(
            u,
            Decision::NotConverged,
            Some("the run's budget was spent".into()),
        )?;
    }
    Ok(())
}

/// What the runner keeps of the time left before planning trials: the
/// profiles not yet taken, ending the open cases (storing each one's end,
/// removing what their trials left) and an answer's confirming windows.
fn kept_s(r: &Runner<'_, '_>, units: &[Unit]) -> f64 {
    let reserve: f64 = if r.profiler.wanted() {
        units
            .iter()
            .filter(|u| !u.finished && !u.profiled)
            .map(|u| r.profile_cost(u))
            .sum()
    } else {
        0.0
    };
    let open = units.iter().filter(|u| !u.finished).count();
    let cleanup: f64 = units.iter().map(|u| u.cleanup_s).sum();
    reserve + r.finish_mean() * open as f64 + cleanup + r.opts.confirm_s
}

/// What one planning of the converging cases decided: plan again (cases
/// stopped, were left out or taken back), or the case whose trial is next
/// (`None`: none is).
enum Next {
    Replan,
    Case(Option<usize>),
}

/// What the budgeted loop keeps from one step to the next: each case's
/// part (its family's share of the plan), the cases the study's plan held
/// back (which the run may take back after its pilot), the converging
/// cases and their ranks, as the study's plan ranked them, the cases left
/// out after their pilot, and whether the revised outlook was said.
struct Budgeted {
    parts: Vec<u32>,
    held: Vec<crate::engine::plan::HeldCase>,
    converging: Vec<usize>,
    ranks: Vec<u32>,
    left_out: Vec<bool>,
    piloted: bool,
    /// Families whose undecided scalability the run funded, and how often
    /// ([`cells`]).
    funded: BTreeMap<String, u32>,
    /// Each case's place among those set aside ([`Aside`]).
    aside: Vec<Aside>,
}

impl Budgeted {
    fn new(r: &Runner<'_, '_>, units: &[Unit]) -> Budgeted {
        let converging: Vec<usize> = (0..units.len())
            .filter(|&i| units[i].workload.rule == RunRule::Converge)
            .collect();
        let mut ranks = vec![0u32; units.len()];
        for (&i, rank) in converging.iter().zip(crate::engine::plan::ranks(
            converging.iter().map(|&i| &units[i].entry),
        )) {
            ranks[i] = rank;
        }
        Budgeted {
            parts: parts(units),
            held: r.opts.held.clone(),
            converging,
            ranks,
            left_out: vec![false; units.len()],
            piloted: false,
            funded: BTreeMap::new(),
            aside: vec![Aside::No; units.len()],
        }
    }

    /// Plans the open converging cases with `left` of the budget
    /// (`budget_s` in all): stops those that cannot converge, leaves out
    /// those that would cost an even share of the run, says the revised
    /// outlook once every case had its pilot, and then (`may_take`: no
    /// median-of-N case waits) takes back held cases with what their needs
    /// leave.
    fn converging_next(
        &mut self,
        r: &mut Runner<'_, '_>,
        units: &mut Vec<Unit>,
        (budget_s, left): (f64, f64),
        clock: &crate::engine::budget::Budget,
        may_take: bool,
    ) -> Result<Next> {
        use kscale_core::budget::{self, Allotment};
        let rule = r.opts.rule;
        let conv: Vec<usize> = (0..units.len())
            .filter(|&i| !units[i].finished && units[i].workload.rule == RunRule::Converge)
            .collect();
        let share_trials = self.share_trials(r, units, budget_s);
        let states = self.states(r, units, &conv, share_trials);
        let plans = budget::allocate(&rule, &states, left);
        // What the open cases' needs take, at their spread's prudent
        // bound: what taking cases back must leave them.
        let funded: f64 = states
            .iter()
            .zip(&plans)
            .filter(|(_, p)| matches!(p, Allotment::Run { .. }))
            .map(|(c, _)| budget::prudent_need(&rule, c).more_s)
            .sum();
        let turns: Vec<u64> = conv.iter().map(|&i| units[i].turn).collect();
        let next = budget::next(&rule, &states, &plans, &turns).map(|k| conv[k]);
        let stops: Vec<(usize, budget::StopReason, budget::Need)> = conv
            .iter()
            .zip(&plans)
            .filter_map(|(&i, p)| match p {
                Allotment::Stop { reason, need } => Some((i, *reason, *need)),
                _ => None,
            })
            .collect();
        // The plan without those stopped or left out: its next case may
        // differ.
        if self.stop(r, units, stops, share_trials, left - funded)? {
            return Ok(Next::Replan);
        }
        let leaves: Vec<(usize, budget::Need)> = conv
            .iter()
            .zip(&plans)
            .filter_map(|(&i, p)| match p {
                Allotment::Leave { need } => Some((i, *need)),
                _ => None,
            })
            .collect();
        if !leaves.is_empty() {
            self.leave(r, units, leaves, share_trials)?;
            return Ok(Next::Replan);
        }
        let pilot_done = !conv.is_empty()
            && conv
                .iter()
                .all(|&i| units[i].counted.len() >= rule.judged_after());
        if pilot_done && !self.piloted {
            self.piloted = true;
            self.say_pilot(r, units, clock.started(), budget::decidable(&plans));
        }
        // With every open case past its pilot, what their spread leaves
        // of the budget goes first to families whose scalability is still
        // undecided, then takes back cases the gauge left out.
        let spare = left - funded - r.opts.kept_back_s;
        if (pilot_done || conv.is_empty()) && self.fund_cells(r, units, spare)? {
            return Ok(Next::Replan);
        }
        if (pilot_done || conv.is_empty()) && self.resume(r, units, spare, false)? {
            return Ok(Next::Replan);
        }
        let waits = self.waiting_s(r, units, left);
        if (pilot_done || conv.is_empty()) && may_take && self.take_back(r, units, spare - waits)? {
            return Ok(Next::Replan);
        }
        Ok(Next::Case(next))
    }

    /// An even share of the run's rounds: the whole budget over what one
    /// trial of every converging case costs (generous: the profiles and
    /// capacity searches take their part of it too).
    fn share_trials(&self, r: &Runner<'_, '_>, units: &[Unit], budget_s: f64) -> f64 {
        let round_s: f64 = self
            .converging
            .iter()
            .map(|&i| units[i].secs_per_trial(r.opts))
            .sum();
        if round_s > 0.0 {
            budget_s / round_s
        } else {
            0.0
        }
    }

    /// The open converging cases `conv` as the budget's planner reads
    /// them: each one's part while no case of it has converged, its rank,
    /// and whether it may be left out.
    fn states<'u>(
        &self,
        r: &Runner<'_, '_>,
        units: &'u [Unit],
        conv: &[usize],
        share_trials: f64,
    ) -> Vec<kscale_core::budget::CaseState<'u>> {
        let covered: Vec<u32> = (0..units.len())
            .filter(|&i| units[i].converged)
            .map(|i| self.parts[i])
            .collect();
        conv.iter()
            .map(|&i| kscale_core::budget::CaseState {
                part: Some(self.parts[i]).filter(|p| !covered.contains(p)),
                rank: self.ranks[i],
                // A case goes with its unconverged twins or not at all: a
                // family's scalability pairs them. So not once a twin has
                // ended unconverged or waits; a converged twin stays
                // ([`Budgeted::leave_pair`]). Nor is the last case that
                // can still decide its part left out: a stand-in, or the
                // one a family kept there.
                may_leave: r.opts.leave_out
                    && self.aside[i] != Aside::Resumed
                    && units[i].floor == 0
                    && self.ranks[i] > 0
                    && !units
                        .iter()
                        .any(|o| o.finished && !o.converged && o.twin_of(&units[i]))
                    && !self.alone(units, i),
                share_trials,
                ..units[i].case_state(r.opts)
            })
            .collect()
    }

    /// True when case `i` is the only case of its part (family on its
    /// configuration) that is measured and may still decide it: leaving it
    /// out for needing more than an even share would leave the part with
    /// no figure, which costs the answer more than the cases its time buys.
    fn alone(&self, units: &[Unit], i: usize) -> bool {
        self.kept_beside(units, i) == 0
    }

    /// Cases the run took on from `from` on, with their ranks.
    fn took(&mut self, units: &[Unit], from: usize, ranks: Vec<u32>) {
        self.converging.extend(from..units.len());
        self.ranks.extend(ranks);
        self.left_out.resize(units.len(), false);
        self.aside.resize(units.len(), Aside::No);
        self.parts = parts(units);
    }

    /// The plan's stops: each case stops unconverged, or, where it cannot
    /// be measured here at all, is left out with its twins, or a held case
    /// of its family stands in for it (out of `spare` seconds). True when
    /// the plan must be made again without them.
    fn stop(
        &mut self,
        r: &mut Runner<'_, '_>,
        units: &mut Vec<Unit>,
        stops: Vec<(
            usize,
            kscale_core::budget::StopReason,
            kscale_core::budget::Need,
        )>,
        share_trials: f64,
        spare: f64,
    ) -> Result<bool> {
        use kscale_core::budget::StopReason;
        let mut replan = false;
        for (i, reason, need) in stops {
            if units[i].finished {
                continue;
            }
            if self.aside[i] == Aside::Resumed {
                self.settle_resumed(r, units, i, need)?;
                replan = true;
                continue;
            }
            // A case grown for its family's scalability had converged: it
            // ends where the budget stops it ([`Runner::finish`]).
            if units[i].floor > 0 {
                let why = format!("stopped early: {}", reason.describe());
                r.finish(&mut units[i], Decision::NotConverged, Some(why))?;
                continue;
            }
            // Unmeasurable here: beyond the rule's maximum, or beyond an
            // even share of the run's rounds (not a case the end of the
            // budget caught a few trials short).
            let hopeless = reason == StopReason::MaxTrials || need.more_trials > share_trials;
            let out =
                r.opts.leave_out && hopeless && unmeasurable(&standing(units, &self.left_out), i);
            if !out {
                // A held case of its family may stand in for it.
                if hopeless && r.opts.leave_out && !self.held.is_empty() {
                    let from = units.len();
                    let taken = stand_in(r, units, &mut self.held, i, spare)?;
                    if !taken.is_empty() {
                        self.took(units, from, taken);
                        replan = true;
                        continue;
                    }
                }
                let why = format!("stopped early: {}", reason.describe());
                r.finish(&mut units[i], Decision::NotConverged, Some(why))?;
                continue;
            }
            let why = format!(
                "it {} at this spread, and its family is decided on the cases it keeps",
                reason.describe()
            );
            self.leave_pair(r, units, (i, need, &why))?;
            replan = true;
        }
        Ok(replan)
    }

    /// The revised outlook once every open case has had its pilot:
    /// `decidable` of the open cases, with those already converged.
    fn say_pilot(&self, r: &Runner<'_, '_>, units: &[Unit], started: Instant, decidable: usize) {
        let kept = self
            .converging
            .iter()
            .filter(|&&i| !self.left_out[i])
            .count();
        let done = self
            .converging
            .iter()
            .filter(|&&i| units[i].finished && units[i].converged)
            .count();
        say_pilot(r, started.elapsed().as_secs_f64(), done + decidable, kept);
    }

    /// Gives the cases of each family whose scalability is undecided the
    /// trials that decide it, out of `spare` seconds, cheapest family
    /// first ([`cells::undecided`]). True when it funded any.
    fn fund_cells(
        &mut self,
        r: &mut Runner<'_, '_>,
        units: &mut [Unit],
        spare: f64,
    ) -> Result<bool> {
        let times = |f: &str| self.funded.get(f).copied().unwrap_or(0);
        let mut found = {
            let cases: Vec<super::cells::Case<'_>> = units
                .iter()
                .zip(&self.left_out)
                .map(|(u, &out)| super::cells::Case {
                    family: u.workload.family,
                    metric: u.workload.primary().name,
                    workload: &u.entry.workload,
                    params: &u.entry.params,
                    cpus: u.entry.cpus.len(),
                    counted: &u.counted,
                    judged: &u.judged,
                    direction: u.workload.primary().direction,
                    converging: u.workload.rule == RunRule::Converge,
                    piloted: u.finished || u.counted.len() >= r.opts.rule.judged_after(),
                    growing: !u.finished && u.counted.len() < u.floor,
                    stopped: u.finished && !u.converged,
                    in_run: !out,
                    secs_per_trial: u.secs_per_trial(r.opts),
                })
                .collect();
            super::cells::undecided(&cases, &r.opts.rule, times)
        };
        found.sort_by(|a, b| a.cost_s.total_cmp(&b.cost_s));
        let mut spare = spare;
        let mut any = false;
        for f in found {
            if f.cost_s > spare {
                continue;
            }
            spare -= f.cost_s;
            for &(i, floor) in &f.floors {
                let u = &mut units[i];
                if u.counted.len() < floor {
                    u.finished = false;
                    u.floor = u.floor.max(floor);
                }
            }
            r.say(format!("  {}", f.line(&r.opts.rule)));
            *self.funded.entry(f.family).or_default() += 1;
            any = true;
        }
        Ok(any)
    }

    /// Takes back held cases, out of [`TAKE_BACK_SHARE`](crate::engine::budget::TAKE_BACK_SHARE) of what the open
    /// cases' needs leave (`left`). True when it took any.
    fn take_back(
        &mut self,
        r: &mut Runner<'_, '_>,
        units: &mut Vec<Unit>,
        left: f64,
    ) -> Result<bool> {
        if self.held.is_empty() {
            return Ok(false);
        }
        let spare = crate::engine::budget::TAKE_BACK_SHARE * left;
        if spare <= 0.0 {
            return Ok(false);
        }
        let from = units.len();
        let taken = take_back(r, units, &mut self.held, spare)?;
        if taken.is_empty() {
            return Ok(false);
        }
        self.took(units, from, taken);
        Ok(true)
    }
}

/// Each case's part of the run's answer, numbered: its family on its CPU
/// configuration (`syscall` on `1`, `chat` on `all`). The budget funds a
/// case of every part before more of any (kscale_core::budget::allocate).
fn parts(units: &[Unit]) -> Vec<u32> {
    let mut names: Vec<(&str, &str)> = Vec::new();
    units
        .iter()
        .map(|u| {
            let family = family(&u.entry.workload);
            let key = (family, kscale_core::cpus::base_name(&u.entry.cpus_name));
            let i = names.iter().position(|n| *n == key).unwrap_or_else(|| {
                names.push(key);
                names.len() - 1
            });
            i as u32
        })
        .collect()
}

/// Takes back the held cases that `spare_s` seconds fund at the spread
/// the cases like them showed (docs/planning.md, "Taking cases back"),
/// through [`admit`]. Returns the ranks of the cases added, in order.
fn take_back(
    r: &mut Runner<'_, '_>,
    units: &mut Vec<Unit>,
    held: &mut Vec<crate::engine::plan::HeldCase>,
    spare_s: f64,
) -> Result<Vec<u32>> {
    let rule = r.opts.rule;
    let mut groups: Vec<(&str, &BTreeMap<String, String>)> = Vec::new();
    let mut priced = Vec::new();
    for h in held.iter() {
        let e = &h.entry;
        let group = groups
            .iter()
            .position(|g| g.0 == e.workload && *g.1 == e.params)
            .unwrap_or_else(|| {
                groups.push((&e.workload, &e.params));
                groups.len() - 1
            });
        // Its workload's measured cases on its configuration, else its
        // family's.
        let like = |same: &dyn Fn(&Unit) -> bool| -> Vec<&Unit> {
            units
                .iter()
                .filter(|u| {
                    u.workload.rule == RunRule::Converge
                        && u.entry.cpus_name == e.cpus_name
                        && u.judged.len() >= 2
                        && same(u)
                })
                .collect()
        };
        let mut near = like(&|u| u.entry.workload == e.workload);
        if near.is_empty() {
            near = like(&|u| family(&u.entry.workload) == family(&e.workload));
        }
        let values: Vec<&[f64]> = near.iter().map(|u| u.judged.as_slice()).collect();
        let per_s = near
            .iter()
            .map(|u| u.secs_per_trial(r.opts))
            .fold(0.0, f64::max);
        let need_s = match (
            kscale_workloads::find(&e.workload),
            kscale_core::budget::priced_by(&rule, &values),
        ) {
            (Some(w), Some(trials)) if trials <= rule.max_trials as f64 => {
                let unit = Unit::taken_up(e, w, 0, None, None, r.opts);
                let profile = if r.profiler.wanted() && !unit.profiled {
                    r.profile_cost(&unit)
                } else {
                    0.0
                };
                // Its warm-up, its trials, its profile.
                per_s * (trials + 1.0) + profile
            }
            _ => f64::INFINITY,
        };
        priced.push(kscale_core::budget::Held {
            group,
            rank: h.rank,
            need_s,
        });
    }
    let take = kscale_core::budget::take_back(&priced, spare_s);
    let cvs: Vec<f64> = units
        .iter()
        .filter(|u| u.workload.rule == RunRule::Converge)
        .filter_map(|u| cv(&u.counted))
        .collect();
    let why = format!(
        "at the spread the kept cases showed (median CV {:.1} %), the budget has room for more",
        100.0 * kscale_core::stats::median(&cvs)
    );
    admit(r, units, held, &take, &why)
}

/// Takes back, in the place of case `i`, which cannot converge here and
/// whose family keeps no other case on one of its configurations
/// ([`unmeasurable`]), the lowest-ranked held case of its family whose
/// pilot fits in `spare_s` (its warm-up, the trials that judge it, its
/// profile, on every configuration): what its own trials then show decides
/// whether it stays. A study planned to a noisy gauge keeps one case of a
/// family on each configuration; under `noisy-neighbour --duty 25` one
/// kept `ctx.lat procs=8 size=16k` alone, whose cross-CPU trials on all
/// CPUs spread 26 %, and left the family's cell undecided.
fn stand_in(
    r: &mut Runner<'_, '_>,
    units: &mut Vec<Unit>,
    held: &mut Vec<crate::engine::plan::HeldCase>,
    i: usize,
    spare_s: f64,
) -> Result<Vec<u32>> {
    let me = &units[i];
    let mine = family(&me.entry.workload);
    let per_s = units
        .iter()
        .filter(|u| family(&u.entry.workload) == mine)
        .map(|u| u.secs_per_trial(r.opts))
        .fold(0.0, f64::max);
    let pilot = (r.opts.rule.judged_after() + 1) as f64 * per_s;
    // The family's held groups that cover this configuration, by rank.
    let mut groups: Vec<(u32, &str, &BTreeMap<String, String>)> = held
        .iter()
        .filter(|h| family(&h.entry.workload) == mine && h.entry.cpus_name == me.entry.cpus_name)
        .map(|h| (h.rank, h.entry.workload.as_str(), &h.entry.params))
        .collect();
    groups.sort_by_key(|g| g.0);
    for (_, w, params) in groups {
        let take: Vec<bool> = held
            .iter()
            .map(|h| h.entry.workload == w && h.entry.params == *params)
            .collect();
        let cost: f64 = held
            .iter()
            .zip(&take)
            .filter(|(_, t)| **t)
            .map(|(h, _)| {
                let profile = match kscale_workloads::find(&h.entry.workload) {
                    Some(wd) if r.profiler.wanted() => {
                        let u = Unit::taken_up(&h.entry, wd, 0, None, None, r.opts);
                        if u.profiled {
                            0.0
                        } else {
                            r.profile_cost(&u)
                        }
                    }
                    _ => 0.0,
                };
                pilot + profile
            })
            .sum();
        if cost <= spare_s {
            let why = format!(
                "{} [cpus {}] cannot converge at this spread and {mine} keeps no other case there",
                me.label(),
                kscale_core::cpus::base_name(&me.entry.cpus_name)
            );
            return admit(r, units, held, &take, &why);
        }
    }
    Ok(Vec::new())
}

/// Takes back the `take`n of `held`: each created in the store at its
/// place in the whole plan and added to `units`, and the run's stored
/// plan, held cases and `left_out` lines say so, so that a resumed run and
/// `show` agree with what ran. Says `why` and what came back; returns the
/// ranks of the cases added, in order.
fn admit(
    r: &mut Runner<'_, '_>,
    units: &mut Vec<Unit>,
    held: &mut Vec<crate::engine::plan::HeldCase>,
    take: &[bool],
    why: &str,
) -> Result<Vec<u32>> {
    if !take.iter().any(|t| *t) {
        return Ok(Vec::new());
    }
    let before = crate::engine::plan::held_lines(held.iter().map(|h| &h.entry));
    let mut ranks = Vec::new();
    let mut added = Vec::new();
    let mut kept = Vec::new();
    for (h, &t) in std::mem::take(held).into_iter().zip(take) {
        let Some(w) = kscale_workloads::find(&h.entry.workload).filter(|_| t) else {
            kept.push(h);
            continue;
        };
        let params = kscale_core::Params(h.entry.params.clone());
        if (w.unavailable)(w, &params).is_some() {
            kept.push(h);
            continue;
        }
        let seq = h
            .entry
            .seq
            .unwrap_or((r.opts.plan.len() + added.len()) as i64);
        let case_id = r.store.ensure_case(
            r.run_id,
            seq,
            &h.entry.key(),
            &h.entry.cpus,
            &MetricRow::rows_of(w.metrics),
            w.rule,
        )?;
        units.push(Unit::taken_up(&h.entry, w, case_id, None, None, r.opts));
        ranks.push(h.rank);
        added.push(h.entry);
    }
    *held = kept;
    // The stored run: the cases taken back join its plan, and the
    // gauge's lines name only what is still left out.
    let mut options = r.store.run(r.run_id)?.options;
    if let Some(plan) = options["plan"].as_array_mut() {
        for e in &added {
            plan.push(serde_json::to_value(e)?);
        }
        r.store
            .set_run_option(r.run_id, "plan", options["plan"].clone())?;
    }
    r.store
        .set_run_option(r.run_id, "held", serde_json::to_value(&*held)?)?;
    let after = crate::engine::plan::held_lines(held.iter().map(|h| &h.entry));
    let mut lines: Vec<serde_json::Value> =
        options["left_out"].as_array().cloned().unwrap_or_default();
    let at = lines
        .iter()
        .position(|l| before.iter().any(|b| l.as_str() == Some(b.as_str())))
        .unwrap_or(lines.len());
    lines.retain(|l| !before.iter().any(|b| l.as_str() == Some(b.as_str())));
    let at = at.min(lines.len());
    lines.splice(
        at..at,
        after.iter().map(|a| serde_json::Value::from(a.as_str())),
    );
    r.store
        .set_run_option(r.run_id, "left_out", serde_json::Value::Array(lines))?;
    let mut msg = format!(
        "kscale: {why}: the study takes back {} of the {} cases it left out:",
        added.len(),
        added.len() + held.len(),
    );
    for l in crate::engine::plan::held_lines(&added) {
        msg += &format!("\n  {l}");
    }
    if r.env.bar.is_hidden() {
        eprintln!("{msg}");
    } else {
        r.env.bar.println(msg);
    }
    Ok(ranks)
}

/// The run's outlook revised from its cases' first judged trials, said
/// once every open case has them (docs/planning.md, "Planning to the
/// noise"): the gauge's second of readings cannot see the host's minute
/// drift nor a spread that lives in one kernel path, the pilot can.
fn say_pilot(r: &Runner<'_, '_>, at_s: f64, decidable: usize, kept: usize) {
    let msg = format!(
        "kscale: after the pilot ({at_s:.0} s in, every case's first {} trials): the budget can decide about {decidable} of the {kept} cases kept (revised prediction: {:.0} % converged)",
        r.opts.rule.judged_after(),
        100.0 * decidable as f64 / kept.max(1) as f64
    );
    r.say(msg);
}
