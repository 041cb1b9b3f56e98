//! A run's wall-clock budget, spent where intervals narrow most
//! (docs/budget.md, "The run's budget").
//!
//! On a shared virtual machine the noise a case meets changes by the hour,
//! so no fixed per-case budget suits every hour: what one quiet case gets
//! and does not need, a noisy one needs and does not get. Here a run has one
//! budget of seconds; after each trial the cases that have not converged
//! are planned again from their spread so far. Cases that can converge are
//! funded, cheapest first, with the trials their spread needs; the rest of
//! the time goes to the others in proportion to what they need; a case
//! that could not converge even if it had all that is left stops at once,
//! and says what it would have needed.
//!
//! Nothing here measures: the runner passes each case's counted values and
//! its seconds per trial, and asks for a plan and for the next case to run.

use crate::stats::{t_quantile, StopRule};
use statrs::distribution::{ChiSquared, ContinuousCDF};

/// One case as the planner sees it.
#[derive(Clone, Copy, Debug)]
pub struct CaseState<'a> {
    /// Its counted trials' primary values.
    pub values: &'a [f64],
    /// Mean wall seconds one more trial costs, everything the runner does
    /// around it included (the worker's start, probes, the store).
    pub secs_per_trial: f64,
    /// Whether its interval already meets the rule.
    pub converged: bool,
    /// The part of the run's answer it belongs to (the runner's: a family
    /// on one CPU configuration), while that part has no converged case
    /// yet; `None` once it has one, or when parts do not matter.
    pub part: Option<u32>,
    /// How late it is kept when the budget cannot fund every case: 0 for
    /// the case that represents its part best, larger for cases whose
    /// sweep neighbours already say most of what they would (the runner's
    /// ranks: a sweep's middle, then its ends, then midpoints). Only rank
    /// 0 matters to the planner: such a case is never left out.
    pub rank: u32,
    /// Whether the run may leave it out when its first judged trials show
    /// the budget cannot fund it after the cases ranked before it
    /// ([`Allotment::Leave`]): a study planning to the noise, never a case its
    /// part depends on.
    pub may_leave: bool,
    /// An even share of the whole run's rounds: the trials every case
    /// would get if the budget bought all of them the same number (0:
    /// none). A leavable case whose spread, at any point, needs more trials
    /// than this is left out too — the spread a case shows after its pilot
    /// can grow with the host's minute drift, and one that then needs more
    /// than its share would spend the trials of several others.
    pub share_trials: f64,
    /// Counted trials it must have before it ends, whatever its own
    /// interval says (0: none): what a family's undecided scalability asks
    /// of its cases (docs/budget.md, "Undecided cells first").
    pub floor: usize,
}

/// The trials a case still needs, at the spread it has shown.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Need {
    /// Counted trials beyond those it has; infinite when its mean is 0.
    pub more_trials: f64,
    /// What those trials cost at the case's seconds per trial.
    pub more_s: f64,
    /// False while fewer than two trials give no spread: the need is then
    /// the rule's minimum, not an estimate.
    pub estimated: bool,
}

impl Need {
    /// What an unconverged case says it would have needed.
    pub fn message(&self) -> String {
        if !self.more_trials.is_finite() {
            return "cannot converge: its mean is 0".into();
        }
        let n = self.more_trials.ceil().max(1.0) as u64;
        let s = if self.more_s >= 10.0 {
            format!("{:.0}", self.more_s)
        } else {
            format!("{:.1}", self.more_s)
        };
        let trials = if n == 1 { "trial" } else { "trials" };
        if self.estimated {
            format!("needs ~{n} more {trials} (~{s} s) at this spread")
        } else {
            format!("needs at least {n} more {trials} (~{s} s) before its spread is known")
        }
    }
}

/// Why a case was stopped before the run's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// Even the luckiest reading of its spread needs more than what is left
    /// of the run's budget buys at its pace.
    Budget,
    /// Even the luckiest reading of its spread needs more trials than the
    /// rule's maximum.
    MaxTrials,
}

impl StopReason {
    pub fn describe(&self) -> &'static str {
        match self {
            StopReason::Budget => "cannot converge within the run's remaining budget",
            StopReason::MaxTrials => "cannot converge within the rule's maximum trials",
        }
    }
}

/// What a case gets from one planning.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Allotment {
    /// Its interval meets the rule: it gets nothing.
    Converged,
    /// Seconds of trials granted; `grant_s >= need.more_s` when it is
    /// funded in full.
    Run { grant_s: f64, need: Need },
    /// It cannot converge in what is left; stop it now.
    Stop { need: Need, reason: StopReason },
    /// Its first trials show a spread the budget cannot fund after the
    /// cases ranked before it: the run leaves it out rather than spend
    /// trials on an interval that will not close (docs/planning.md,
    /// "Planning to the noise").
    Leave { need: Need },
}

impl Allotment {
    pub fn grant_s(&self) -> f64 {
        match self {
            Allotment::Run { grant_s, .. } => *grant_s,
            _ => 0.0,
        }
    }

    pub fn need(&self) -> Option<Need> {
        match self {
            Allotment::Run { need, .. }
            | Allotment::Stop { need, .. }
            | Allotment::Leave { need } => Some(*need),
            Allotment::Converged => None,
        }
    }
}

/// One-sided confidence of the "luckiest reading" of a spread: a case is
/// stopped only when even the variance's lower bound at this level needs
/// more than is left. At 8 trials it allows the half of the point estimate
/// that the per-case futility rule allowed (docs/method.md).
const OPTIMISM: f64 = 0.95;

/// One-sided confidence of the spread a study that may leave cases out
/// funds a case at: the variance's upper bound at this level. Funded at
/// its point estimate, a case whose first trials read its spread low (the
/// sample variance of a few trials is below the true one more often than
/// above) or whose spread grows with the host's drift runs out of budget a
/// few trials short: three quick studies on the 2-vCPU VM ended 5 to 12 of
/// their 26 to 50 chosen cases that way. The margin is what the
/// case's own trials say they may still need, large while they are few
/// (×1.8 the trials at 5, ×1.2 at 30) and gone as they accumulate.
const PRUDENCE: f64 = 0.7;

/// Iterations of the t-quantile fixed point; it settles in three or four.
const FIXED_POINT_STEPS: usize = 20;
/// Degrees of freedom beyond which t is the normal quantile to five
/// digits; statrs' t inverse takes seconds at a hundred million.
const MAX_DF: f64 = 1e5;

/// The full width, in % of the mean, of the interval the rule judges.
/// The one place the planner reads an interval, so that the planner follows
/// whatever estimator the rule uses.
fn width_pct(rule: &StopRule, values: &[f64]) -> f64 {
    rule.summary(values).width_pct()
}

/// The relative spread (in % of the mean) that the interval of these values
/// implies: the width is 2·t(n−1)·s / (√n·mean), so s/mean is recovered
/// from the width, whatever estimator produced it.
fn spread_pct(rule: &StopRule, values: &[f64]) -> f64 {
    let n = values.len();
    let w = width_pct(rule, values);
    if w == 0.0 {
        return 0.0;
    }
    w * (n as f64).sqrt() / (2.0 * t_quantile(rule.confidence_pct, (n - 1) as f64))
}

/// Counted trials in all for an interval of `rule.width_pct` at a relative
/// spread of `spread` %: n = (2·t(n−1)·s / (W·mean))², iterated because t
/// depends on n.
fn trials_for(rule: &StopRule, spread: f64) -> f64 {
    if spread == 0.0 {
        return 0.0;
    }
    if !spread.is_finite() {
        return f64::INFINITY;
    }
    let k = 2.0 * spread / rule.width_pct;
    let mut n = (k * t_quantile(rule.confidence_pct, MAX_DF)).powi(2);
    for _ in 0..FIXED_POINT_STEPS {
        // Whole degrees of freedom: trials are counted in whole numbers,
        // and whole ones let t_quantile's memory answer.
        let df = (n.max(2.0) - 1.0).round().clamp(1.0, MAX_DF);
        let next = (k * t_quantile(rule.confidence_pct, df)).powi(2);
        if (next - n).abs() < 0.01 {
            return next;
        }
        n = next;
    }
    n
}

/// Counted trials in all that the case's spread so far needs; `None` with
/// fewer than two values (no spread yet).
pub fn trials_needed(rule: &StopRule, values: &[f64]) -> Option<f64> {
    (values.len() >= 2).then(|| trials_for(rule, spread_pct(rule, values)))
}

/// Which reading of a case's spread a need is computed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reading {
    /// The sample variance: the need a NOT CONVERGED case reports.
    Point,
    /// The variance's lower bound at [`OPTIMISM`]: a case is stopped only
    /// when even this needs more than is left.
    Lucky,
    /// The variance's upper bound at [`PRUDENCE`]: what a study that may
    /// leave cases out funds (docs/planning.md, "Planning to the noise").
    Prudent,
}

/// The variance at `reading`'s bound, as a factor of the sample variance
/// of `n` values: (n−1)/χ²(q; n−1), with q = [`OPTIMISM`] for the lower
/// bound and 1 − [`PRUDENCE`] for the upper one.
fn variance_factor(n: usize, reading: Reading) -> f64 {
    use std::cell::RefCell;
    thread_local! {
        // By reading and n: the planner asks for it for every case after
        // every trial.
        static SEEN: RefCell<[Vec<f64>; 2]> = const { RefCell::new([Vec::new(), Vec::new()]) };
    }
    let (slot, q) = match reading {
        Reading::Point => return 1.0,
        Reading::Lucky => (0, OPTIMISM),
        Reading::Prudent => (1, 1.0 - PRUDENCE),
    };
    let n = n.max(2);
    if let Some(f) = SEEN.with(|s| s.borrow()[slot].get(n).copied().filter(|f| *f > 0.0)) {
        return f;
    }
    let df = (n - 1) as f64;
    let f = match ChiSquared::new(df) {
        Ok(c) => df / c.inverse_cdf(q),
        Err(_) => 1.0,
    };
    if n <= 100_000 {
        SEEN.with(|s| {
            let seen = &mut s.borrow_mut()[slot];
            if seen.len() <= n {
                seen.resize(n + 1, 0.0);
            }
            seen[n] = f;
        });
    }
    f
}

/// What the case needs beyond its counted trials, at its spread's
/// `reading`.
fn need_of(rule: &StopRule, c: &CaseState<'_>, reading: Reading) -> Need {
    let n = c.values.len();
    let floor = rule.min_trials.max(2).max(c.floor).saturating_sub(n) as f64;
    let (more, estimated) = match trials_needed(rule, c.values) {
        None => (floor, false),
        Some(_) if c.converged => (0.0, true),
        Some(_) => {
            let spread = spread_pct(rule, c.values) * variance_factor(n, reading).sqrt();
            // Not converged means at least one more trial, whatever the
            // estimate says.
            let total = trials_for(rule, spread).ceil();
            ((total - n as f64).max(1.0).max(floor), true)
        }
    };
    Need {
        more_trials: more,
        more_s: more * c.secs_per_trial.max(0.0),
        estimated,
    }
}

/// The trials `c` still needs at its spread so far (the figure a NOT
/// CONVERGED case reports).
pub fn need(rule: &StopRule, c: &CaseState<'_>) -> Need {
    need_of(rule, c, Reading::Point)
}

/// Plans `remaining_s` seconds over the cases, one plan per case in their
/// order.
///
/// - A converged case gets nothing.
/// - A case stops when even the luckiest reading of its spread needs more
///   trials than the rule's maximum, or more seconds than all that is left;
///   not before it has the trials to be judged
///   ([`StopRule::judged_after`]) while those fit, and they are granted
///   first.
/// - First, each part of the answer with no converged case yet (a family on
///   a CPU configuration, [`CaseState::part`]) has its cheapest case funded
///   in full, cheapest part first, while it fits: a study that answers for
///   every family on every configuration is worth more than one that
///   converges a few more cheap cases of a family it already answers for.
/// - The others are funded in full, cheapest first, while the funded total
///   fits in `remaining_s`: that converges the most cases the time can buy.
/// - What is left after them goes to the cases not funded in full, in
///   proportion to what they need: their estimates improve with trials,
///   and one that turns out cheaper is funded at a later planning.
/// - Where cases may be left out, "in full" means at the spread's prudent
///   bound ([`PRUDENCE`]), so that what is funded is what converges.
///
/// The grants never add up to more than `remaining_s`.
pub fn allocate(rule: &StopRule, cases: &[CaseState<'_>], remaining_s: f64) -> Vec<Allotment> {
    let remaining_s = remaining_s.max(0.0);
    let mut plans: Vec<Allotment> = cases
        .iter()
        .map(|c| first_plan(rule, c, remaining_s))
        .collect();
    // What funding a case in full reserves: its need at the spread's point
    // estimate, or at its prudent bound where cases may be left out.
    let leaving = cases.iter().any(|c| c.may_leave);
    let costs: Vec<f64> = plans
        .iter()
        .zip(cases)
        .map(|(p, c)| match p {
            Allotment::Run { .. } if leaving => prudent_need(rule, c).more_s,
            Allotment::Run { need, .. } => need.more_s,
            _ => 0.0,
        })
        .collect();
    let mut order: Vec<usize> = (0..plans.len())
        .filter(|&i| matches!(plans[i], Allotment::Run { .. }))
        .collect();
    order.sort_by(|&a, &b| costs[a].total_cmp(&costs[b]).then(a.cmp(&b)));
    let mut left = remaining_s;
    // A case too young to judge first gets the trials that allow it
    // (each was checked to fit alone; together they may not).
    for &i in &order {
        let probation = probation_s(rule, &cases[i]);
        if probation > 0.0 && probation <= left {
            if let Allotment::Run { grant_s, need } = &mut plans[i] {
                // Never more than its spread says it needs.
                *grant_s = probation.min(need.more_s);
                left -= *grant_s;
            }
        }
    }
    // One case per uncovered part, its cheapest (`order` is by cost).
    let mut firsts: Vec<usize> = Vec::new();
    for &i in &order {
        if let Some(p) = cases[i].part {
            if !firsts.iter().any(|&f| cases[f].part == Some(p)) {
                firsts.push(i);
            }
        }
    }
    let mut funded = vec![false; plans.len()];
    for &i in &firsts {
        let extra = (costs[i] - plans[i].grant_s()).max(0.0);
        if extra > left {
            break;
        }
        if let Allotment::Run { grant_s, .. } = &mut plans[i] {
            *grant_s += extra;
            left -= extra;
            funded[i] = true;
        }
    }
    let mut unfunded = Vec::new();
    // Where cases may be left out, each that fits is funded, cheapest
    // first; one just judged that does not fit and needs more than an
    // even share of the time is left out: a case that would cost the
    // budget several cheaper ones. Otherwise cheapest first, while they
    // fit.
    let open = plans
        .iter()
        .filter(|p| matches!(p, Allotment::Run { .. }))
        .count();
    let fair_s = remaining_s / open.max(1) as f64;
    for i in order {
        if funded[i] {
            continue;
        }
        if let Allotment::Run { grant_s, need } = &mut plans[i] {
            let extra = (costs[i] - *grant_s).max(0.0);
            if extra <= left && (leaving || unfunded.is_empty()) {
                *grant_s += extra;
                left -= extra;
            } else if cases[i].may_leave
                && ((just_judged(rule, &cases[i]) && need.more_s > fair_s)
                    || (cases[i].share_trials > 0.0
                        && cases[i].values.len() >= rule.judged_after()
                        && need.more_trials > cases[i].share_trials))
            {
                let need = *need;
                plans[i] = Allotment::Leave { need };
            } else {
                unfunded.push(i);
            }
        }
    }
    let wanted: f64 = unfunded
        .iter()
        .filter_map(|&i| match plans[i] {
            Allotment::Run { grant_s, .. } => Some((costs[i] - grant_s).max(0.0)),
            _ => None,
        })
        .sum();
    if wanted > 0.0 && left > 0.0 {
        for &i in &unfunded {
            if let Allotment::Run { grant_s, .. } = &mut plans[i] {
                // Never more than it needs, never more than is left.
                let short = (costs[i] - *grant_s).max(0.0);
                *grant_s += (left * short / wanted).min(short);
            }
        }
    }
    plans
}

/// A case's plan before any is funded: converged, stopped (it cannot
/// converge within the rule's maximum or what is left), or to run, with
/// nothing granted yet.
fn first_plan(rule: &StopRule, c: &CaseState<'_>, remaining_s: f64) -> Allotment {
    if c.converged {
        return Allotment::Converged;
    }
    let need = need(rule, c);
    let lucky = need_of(rule, c, Reading::Lucky);
    let probation = probation_s(rule, c);
    if probation > 0.0 && probation <= remaining_s {
        // Too few trials to judge from its spread, and the trials
        // that would allow it fit.
        return Allotment::Run { grant_s: 0.0, need };
    }
    if c.values.len() as f64 + lucky.more_trials > rule.max_trials as f64 {
        Allotment::Stop {
            need,
            reason: StopReason::MaxTrials,
        }
    } else if lucky.more_s > remaining_s {
        Allotment::Stop {
            need,
            reason: StopReason::Budget,
        }
    } else {
        Allotment::Run { grant_s: 0.0, need }
    }
}

/// The trials `c` needs at its spread's luckiest reading ([`OPTIMISM`]):
/// the least the planner still runs a case on, never more than its point
/// estimate. A run with nothing else to spend its remainder on resumes a
/// case set aside on this, not on the point estimate of its first few
/// trials, which can read a passing neighbour's spread as the case's own.
pub fn lucky_need(rule: &StopRule, c: &CaseState<'_>) -> Need {
    need_of(rule, c, Reading::Lucky)
}

/// What funding `c` in full reserves where cases may be left out: its need
/// at its spread's prudent bound, never less than at its point estimate
/// ([`PRUDENCE`]).
pub fn prudent_need(rule: &StopRule, c: &CaseState<'_>) -> Need {
    let point = need(rule, c);
    let prudent = need_of(rule, c, Reading::Prudent);
    if prudent.more_s >= point.more_s {
        prudent
    } else {
        point
    }
}

/// A group of cases set aside at its pilot, waiting for what the other
/// cases leave (docs/planning.md, "Planning to the noise", step 4).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Waiting {
    /// Seconds its trials need at their spread's point estimate.
    pub point_s: f64,
    /// Seconds at their luckiest reading ([`lucky_need`]).
    pub lucky_s: f64,
    /// How many other cases its family keeps on its configuration: fewer
    /// come first, since a macro family has two cases there and a micro
    /// one up to a dozen.
    pub kept: usize,
}

/// Which of `groups` (in the run's order) `spare_s` seconds resume, in
/// the order they are resumed. While other cases still run (`last`
/// false) a group resumes on its point estimate, those whose families
/// keep the fewest cases first; one that does not fit on it but would on
/// its luckiest reading holds the rest back for the run's end, where
/// (`last`) groups resume on their luckiest reading, the cheapest first
/// among those whose families keep as many. Under the wandering neighbour
/// chat's threads case on one CPU (~64 s with its twin) missed the 56 s
/// left mid-run, a micro case that fit took them, and the run ended with
/// 10 s, under chat's luckiest reading (~25 s).
pub fn to_resume(groups: &[Waiting], spare_s: f64, last: bool) -> Vec<usize> {
    let mut order: Vec<usize> = (0..groups.len()).collect();
    if last {
        order.sort_by(|&a, &b| {
            let (a, b) = (&groups[a], &groups[b]);
            a.kept.cmp(&b.kept).then(a.lucky_s.total_cmp(&b.lucky_s))
        });
    } else {
        order.sort_by_key(|&g| groups[g].kept);
    }
    let mut spare = spare_s;
    let mut out = Vec::new();
    for g in order {
        let w = &groups[g];
        let need = if last { w.lucky_s } else { w.point_s };
        if need <= spare {
            out.push(g);
            spare -= need;
        } else if !last && w.lucky_s <= spare {
            break;
        }
    }
    out
}

/// A case a study's plan left out before its first trial, priced after
/// the pilot by the cases it kept (docs/planning.md, "Taking cases back").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Held {
    /// Cases of one group (one param combination on every CPU
    /// configuration) are taken back together, as they were left out:
    /// scalability pairs them.
    pub group: usize,
    /// The plan's rank ([`CaseState::rank`]): lower ranks are taken back
    /// first.
    pub rank: u32,
    /// Seconds it takes in all: its warm-up, its trials at the spread of
    /// the cases like it, its profile. Infinite where nothing prices it.
    pub need_s: f64,
}

/// The counted trials a case needs in all, priced by the trials of cases
/// like it (its workload's kept sizes on its configuration): their spreads
/// pooled over their degrees of freedom, read at the pooled variance's
/// prudent bound, never fewer than the trials that judge a case. `None`
/// where none has two trials. A kept size's spread stands for its
/// neighbours' because the pilot read them over the same minutes, on the
/// same CPUs, through the same kernel path.
pub fn priced_by(rule: &StopRule, like: &[&[f64]]) -> Option<f64> {
    let (mut ss, mut df) = (0.0, 0usize);
    for v in like.iter().filter(|v| v.len() >= 2) {
        let s = spread_pct(rule, v);
        ss += (v.len() - 1) as f64 * s * s;
        df += v.len() - 1;
    }
    (df > 0).then(|| {
        let s = (ss / df as f64).sqrt() * variance_factor(df + 1, Reading::Prudent).sqrt();
        trials_for(rule, s).ceil().max(rule.judged_after() as f64)
    })
}

/// Which of `held` the run takes back with `spare_s` seconds: whole
/// groups, lowest rank first and the cheapest first within a rank, each
/// while it fits in what is still spare; a group that does not fit is
/// passed over for a cheaper one after it.
pub fn take_back(held: &[Held], spare_s: f64) -> Vec<bool> {
    let mut groups: Vec<(u32, f64, usize)> = Vec::new();
    for h in held {
        match groups.iter_mut().find(|g| g.2 == h.group) {
            Some(g) => {
                g.0 = g.0.min(h.rank);
                g.1 += h.need_s;
            }
            None => groups.push((h.rank, h.need_s, h.group)),
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut left = spare_s;
    let mut taken = Vec::new();
    for (_, secs, group) in groups {
        if secs.is_finite() && secs <= left {
            left -= secs;
            taken.push(group);
        }
    }
    held.iter().map(|h| taken.contains(&h.group)).collect()
}

/// How many of `plans` the budget decides: the cases converged and those
/// funded in full at their spread's point estimate. After the pilot this
/// is the run's revised outlook (docs/planning.md, "Planning to the noise"):
/// the gauge's second of readings cannot see the host's minute drift, the
/// cases' first trials can.
pub fn decidable(plans: &[Allotment]) -> usize {
    plans
        .iter()
        .filter(|p| match p {
            Allotment::Converged => true,
            Allotment::Run { grant_s, need } => *grant_s >= need.more_s * (1.0 - 1e-9),
            Allotment::Stop { .. } | Allotment::Leave { .. } => false,
        })
        .count()
}

/// Trials past [`StopRule::judged_after`] within which a case may still be
/// left out: the planning after its first judged trial decides, and a
/// trial or two of slack covers a planning that came late. A case funded
/// then keeps its trials and ends converged or NOT CONVERGED: what runs
/// out at the end of a budget is not left out for its spread.
const PILOT_SLACK: usize = 2;

/// Whether `c` has just been judged: its pilot trials are done, and no
/// more than [`PILOT_SLACK`] beyond them.
fn just_judged(rule: &StopRule, c: &CaseState<'_>) -> bool {
    let n = c.values.len();
    let first = rule.judged_after().max(2);
    n >= first && n <= first + PILOT_SLACK
}

/// Seconds of the trials a case still needs before its spread may judge it
/// ([`StopRule::judged_after`]); 0 once it has them.
fn probation_s(rule: &StopRule, c: &CaseState<'_>) -> f64 {
    let short = rule.judged_after().saturating_sub(c.values.len());
    short as f64 * c.secs_per_trial.max(0.0)
}

/// Which case runs next, so that each case's trials spread over the whole
/// run, interleaved with every other case's, and a spell of the host's of
/// some tens of seconds falls on many cases once rather than on one case
/// many times.
///
/// A case still short of the rule's minimum trials goes first (its spread
/// is not known, so it cannot be planned); then the planned case furthest
/// behind its plan, counting its trials so far against those it has plus
/// those its grant buys: a case that needs eight times the trials of
/// another runs eight times as often, and both reach their plan together.
/// Ties go to the case whose last turn is oldest (`last_turn[i]`, 0 for
/// never), which makes equal cases plain round-robin. `None` when no case
/// has a grant that buys a trial.
pub fn next(
    rule: &StopRule,
    cases: &[CaseState<'_>],
    plans: &[Allotment],
    last_turn: &[u64],
) -> Option<usize> {
    let turn = |i: usize| last_turn.get(i).copied().unwrap_or(0);
    let runnable = |i: usize| match plans.get(i) {
        Some(Allotment::Run { grant_s, .. }) => {
            let spt = cases[i].secs_per_trial;
            // A grant for at least one trial; a case with no spread yet
            // gets its minimum trials whatever its grant.
            cases[i].values.len() < rule.min_trials
                || (spt > 0.0 && *grant_s >= 0.999 * spt)
                || (spt <= 0.0 && *grant_s > 0.0)
        }
        _ => false,
    };
    let candidates = (0..cases.len()).filter(|&i| runnable(i));
    let exploring = candidates
        .clone()
        .filter(|&i| cases[i].values.len() < rule.min_trials)
        .min_by_key(|&i| (cases[i].values.len(), turn(i), i));
    if exploring.is_some() {
        return exploring;
    }
    let progress = |i: usize| {
        let n = cases[i].values.len() as f64;
        let spt = cases[i].secs_per_trial;
        let granted = if spt > 0.0 {
            plans[i].grant_s() / spt
        } else {
            1.0
        };
        n / (n + granted)
    };
    candidates.min_by(|&a, &b| {
        progress(a)
            .total_cmp(&progress(b))
            .then(turn(a).cmp(&turn(b)))
            .then(a.cmp(&b))
    })
}

/// Parses a run's budget: `90s`, `5m`, `1h`, `1.5m` or bare seconds
/// (`300`). `None` for anything else, zero or negative included.
pub fn parse_duration(s: &str) -> Option<f64> {
    let t = s.trim();
    let (num, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let k = match unit.trim() {
        "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    let v: f64 = num.trim().parse().ok()?;
    let secs = v * k;
    (secs.is_finite() && secs > 0.0).then_some(secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Summary;
    use proptest::prelude::*;

    const RULE: StopRule = StopRule {
        width_pct: 10.0,
        confidence_pct: 95.0,
        min_trials: 3,
        max_trials: 1000,
        case_budget_s: None,
        estimator: crate::stats::Estimator::Mean,
        min_span_s: None,
    };

    fn case(values: &[f64], spt: f64) -> CaseState<'_> {
        CaseState {
            values,
            secs_per_trial: spt,
            converged: RULE.is_converged(values),
            part: None,
            rank: 0,
            may_leave: false,
            share_trials: 0.0,
            floor: 0,
        }
    }

    /// A case whose own interval is narrow enough but whose family's
    /// scalability asks more of it is funded for the trials up to its
    /// floor, and stops when even those do not fit.
    #[test]
    fn a_floor_funds_a_converged_case_up_to_it() {
        let quiet: Vec<f64> = (0..8).map(|i| 100.0 + (i % 2) as f64).collect();
        assert!(RULE.is_converged(&quiet));
        let c = CaseState {
            converged: false,
            floor: 14,
            ..case(&quiet, 1.0)
        };
        assert_eq!(need(&RULE, &c).more_trials, 6.0);
        let plans = allocate(&RULE, &[c], 100.0);
        assert!(
            matches!(plans[0], Allotment::Run { need, .. } if need.more_trials == 6.0),
            "{plans:?}"
        );
        let plans = allocate(&RULE, &[c], 3.0);
        assert!(matches!(plans[0], Allotment::Stop { .. }), "{plans:?}");
    }

    /// Five trials at a CV of ~14 % (chat's threads case under the steady
    /// neighbour) read a need the luckiest reading puts at under half:
    /// what a run's remainder can still resume such a case on.
    /// Mid-run a macro group that fits only at its luckiest reading keeps
    /// the remainder from a micro group that fits; at the run's end it is
    /// resumed first, and a group that fits nowhere does not hold back.
    #[test]
    fn a_group_that_may_fit_at_the_end_holds_the_rest_back_mid_run() {
        let chat = Waiting {
            point_s: 64.0,
            lucky_s: 25.0,
            kept: 1,
        };
        let mem = Waiting {
            point_s: 20.0,
            lucky_s: 8.0,
            kept: 9,
        };
        let huge = Waiting {
            point_s: 900.0,
            lucky_s: 300.0,
            kept: 0,
        };
        assert_eq!(to_resume(&[mem, chat], 56.0, false), Vec::<usize>::new());
        assert_eq!(to_resume(&[mem, chat], 56.0, true), vec![1, 0]);
        assert_eq!(to_resume(&[mem, chat], 30.0, true), vec![1]);
        assert_eq!(to_resume(&[mem, huge, chat], 100.0, false), vec![2, 0]);
        assert_eq!(to_resume(&[mem, chat], 10.0, false), Vec::<usize>::new());
        assert_eq!(to_resume(&[mem, chat], 21.0, false), vec![0]);
    }

    #[test]
    fn the_luckiest_reading_of_five_trials_needs_under_half() {
        let v = [1.0, 1.2, 0.85, 1.1, 0.8];
        let c = case(&v, 1.0);
        let (point, lucky) = (need(&RULE, &c), lucky_need(&RULE, &c));
        assert!(point.more_trials > 20.0, "{point:?}");
        assert!(
            lucky.more_s < 0.5 * point.more_s,
            "{lucky:?} against {point:?}"
        );
        assert!(lucky.more_trials >= 1.0);
    }

    /// Cases like a held one price it: a quiet kept size prices its
    /// neighbour at a few trials, a noisy one at many, more kept sizes
    /// narrow the prudent margin, and no trials price nothing.
    #[test]
    fn a_held_case_is_priced_by_the_cases_like_it() {
        let quiet = [1.0, 1.02, 0.98, 1.01, 0.99];
        let noisy = [1.0, 1.3, 0.7, 1.2, 0.8];
        let q = priced_by(&RULE, &[&quiet]).expect("priced");
        let n = priced_by(&RULE, &[&noisy]).expect("priced");
        assert!(q >= RULE.judged_after() as f64 && q <= 5.0, "{q}");
        assert!(n > 20.0, "{n}");
        // Pooled with a second size as noisy: more degrees of freedom, a
        // smaller margin on the same spread.
        let two = priced_by(&RULE, &[&noisy, &noisy]).expect("priced");
        assert!(two < n, "{two} {n}");
        assert_eq!(priced_by(&RULE, &[&[1.0][..]]), None);
        assert_eq!(priced_by(&RULE, &[]), None);
    }

    /// Whole groups come back, lowest rank first, the cheaper first within
    /// a rank; one that does not fit is passed over for a cheaper one, and
    /// one nothing prices never comes back.
    #[test]
    fn held_groups_come_back_by_rank_while_they_fit() {
        let h = |group, rank, need_s| Held {
            group,
            rank,
            need_s,
        };
        let held = [
            h(0, 1000, 4.0),
            h(0, 1000, 4.0),
            h(1, 2000, 1.0),
            h(1, 2000, 1.0),
            h(2, 1000, 20.0),
            h(3, 3000, f64::INFINITY),
        ];
        assert_eq!(take_back(&held, 0.0), vec![false; 6]);
        // 8 s buys group 0 (rank 1000, cheapest of its rank); group 2 does
        // not fit; group 1 fits in what is left.
        assert_eq!(
            take_back(&held, 10.0),
            vec![true, true, true, true, false, false]
        );
        assert_eq!(
            take_back(&held, 1e9),
            vec![true, true, true, true, true, false]
        );
        // Half a group never comes back.
        assert_eq!(
            take_back(&held, 7.0),
            vec![false, false, true, true, false, false]
        );
    }

    #[test]
    fn decidable_counts_what_the_budget_funds_in_full() {
        // Two cheap quiet cases and one that needs far more than is left.
        let a = [0.9, 1.1, 0.9, 1.1, 1.0];
        let wide = [0.5, 1.5, 0.6, 1.4, 1.0];
        let cases = [case(&a, 0.1), case(&a, 0.1), case(&wide, 1.0)];
        let need_a = need(&RULE, &cases[0]).more_s;
        let need_w = need(&RULE, &cases[2]).more_s;
        assert!(need_w > 10.0 * need_a, "{need_a} {need_w}");
        // Room for the two cheap ones and part of the wide one.
        let plans = allocate(&RULE, &cases, 2.0 * need_a + need_w / 2.0);
        assert_eq!(decidable(&plans), 2, "{plans:?}");
        // Room for all.
        let plans = allocate(&RULE, &cases, 2.0 * need_a + need_w + 1.0);
        assert_eq!(decidable(&plans), 3, "{plans:?}");
        // A converged case counts; a stopped one does not.
        let stop = Allotment::Stop {
            need: need(&RULE, &cases[2]),
            reason: StopReason::Budget,
        };
        assert_eq!(decidable(&[Allotment::Converged, stop]), 1);
    }

    #[test]
    fn a_study_planning_to_the_noise_leaves_out_what_would_cost_several_others() {
        // Five judged trials each; b and c spread twice as much as a.
        let a = [0.9, 1.1, 0.9, 1.1, 1.0];
        let b = [0.8, 1.2, 0.8, 1.2, 1.0];
        let leavable = |v, rank| CaseState {
            rank,
            may_leave: true,
            ..case(v, 1.0)
        };
        let cases = [
            CaseState {
                rank: 0,
                ..case(&a, 1.0)
            },
            leavable(&b, 2000),
            leavable(&b, 1000),
            leavable(&a, 3000),
        ];
        let need_a = need(&RULE, &cases[0]).more_s;
        let need_b = need(&RULE, &cases[1]).more_s;
        assert!(need_b > 2.0 * need_a, "{need_a} {need_b}");
        // Where cases may be left out, a case is funded at its spread's
        // prudent bound.
        let cost = |c: &CaseState<'_>| need_of(&RULE, c, Reading::Prudent).more_s;
        let (cost_a, cost_b) = (cost(&cases[0]), cost(&cases[1]));
        assert!(cost_a > need_a && cost_b > need_b, "{cost_a} {cost_b}");
        // Room for both a's and one b: the a's are funded (cheapest first),
        // then the first b; the second b needs more than an even share of
        // the time and is left out.
        let plans = allocate(&RULE, &cases, 2.0 * cost_a + cost_b + 0.5);
        assert_eq!(plans[0].grant_s(), cost_a);
        assert_eq!(plans[1].grant_s(), cost_b);
        assert!(
            matches!(plans[2], Allotment::Leave { .. }),
            "{:?}",
            plans[2]
        );
        assert_eq!(plans[3].grant_s(), cost_a);
        // With room for everything nothing is left out.
        let plans = allocate(&RULE, &cases, 2.0 * cost_a + 2.0 * cost_b + 0.5);
        assert!(
            plans
                .iter()
                .all(|p| matches!(p, Allotment::Run { grant_s, need } if *grant_s >= need.more_s)),
            "{plans:?}"
        );
        // A rank-0 case is never left out, however costly.
        let plans = allocate(
            &RULE,
            &[
                CaseState {
                    rank: 0,
                    ..case(&b, 1.0)
                },
                cases[0],
            ],
            need_a,
        );
        assert!(!matches!(plans[0], Allotment::Leave { .. }), "{plans:?}");
        // Judged long ago, a case whose spread grew past its share of the
        // run is left out; one within its share is not.
        let grown: Vec<f64> = b.iter().cycle().take(12).copied().collect();
        let need_g = need(&RULE, &case(&grown, 1.0)).more_s;
        let with_share = |share_trials| CaseState {
            share_trials,
            ..leavable(&grown, 5000)
        };
        let plans = allocate(&RULE, &[with_share(need_g / 2.0)], need_g / 2.0);
        assert!(matches!(plans[0], Allotment::Leave { .. }), "{plans:?}");
        let plans = allocate(&RULE, &[with_share(need_g * 2.0)], need_g / 2.0);
        assert!(!matches!(plans[0], Allotment::Leave { .. }), "{plans:?}");
        // A case not yet judged (two trials, under the rule's minimum of
        // three) is not left out, nor is one that may not be: they share
        // what is left.
        let young = [0.8, 1.2];
        let cases = [
            leavable(&young, 5000),
            CaseState {
                rank: 9000,
                ..case(&b, 1.0)
            },
        ];
        let plans = allocate(&RULE, &cases, need_b);
        assert!(
            plans.iter().all(|p| matches!(p, Allotment::Run { .. })),
            "{plans:?}"
        );
        assert!(plans[1].grant_s() < need_b, "{plans:?}");
        // Nor for its share of the run's rounds: two trials 40 % apart say
        // too little of its spread (a study left `mem.wr` out so).
        let young_share = CaseState {
            share_trials: 1.0,
            ..leavable(&young, 5000)
        };
        let plans = allocate(&RULE, &[young_share, cases[1]], need_b);
        assert!(matches!(plans[0], Allotment::Run { .. }), "{plans:?}");
        // Nor is one judged long ago and funded then: what the budget's end
        // leaves unfunded stays in the run as NOT CONVERGED.
        let old: Vec<f64> = b.iter().cycle().take(12).copied().collect();
        let plans = allocate(
            &RULE,
            &[leavable(&old, 5000)],
            0.5 * need(&RULE, &leavable(&old, 0)).more_s,
        );
        assert!(!matches!(plans[0], Allotment::Leave { .. }), "{plans:?}");
        // Where nothing may be left out, the plan is cheapest first as before.
        let cases = [case(&b, 1.0), case(&a, 1.0)];
        let plans = allocate(&RULE, &cases, need_a + 0.9 * need_b);
        assert_eq!(plans[1].grant_s(), need_a);
        assert!(
            matches!(plans[0], Allotment::Run { grant_s, .. } if grant_s < need_b),
            "{plans:?}"
        );
    }

    #[test]
    fn a_study_funds_the_trials_a_case_may_still_need_and_the_margin_shrinks() {
        // The same spread read from 5 and from 40 trials.
        let few = [0.6, 1.4, 0.6, 1.4, 1.0];
        let many: Vec<f64> = few.iter().cycle().take(40).copied().collect();
        let margin = |v: &[f64]| {
            let c = case(v, 1.0);
            let total = |r| v.len() as f64 + need_of(&RULE, &c, r).more_trials;
            total(Reading::Prudent) / total(Reading::Point)
        };
        let (m5, m40) = (margin(&few), margin(&many));
        assert!(m5 > 1.5 && m5 < 2.2, "{m5}");
        assert!(m40 > 1.0 && m40 < m5, "{m40}");
        // A study funds a case at that bound: with room for its point need
        // only, it is not funded in full; with room for the bound, it is.
        let c = CaseState {
            rank: 1,
            may_leave: true,
            ..case(&few, 1.0)
        };
        let prudent = need_of(&RULE, &c, Reading::Prudent).more_s;
        let plans = allocate(&RULE, &[c], need(&RULE, &c).more_s);
        assert!(
            matches!(plans[0], Allotment::Run { grant_s, .. } if grant_s < prudent),
            "{plans:?}"
        );
        let plans = allocate(&RULE, &[c], prudent);
        assert_eq!(plans[0].grant_s(), prudent);
        // A run that leaves nothing out funds the point estimate, as before.
        let plain = case(&few, 1.0);
        let plans = allocate(&RULE, &[plain], 2.0 * prudent);
        assert_eq!(plans[0].grant_s(), need(&RULE, &plain).more_s);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Some(90.0));
        assert_eq!(parse_duration("5m"), Some(300.0));
        assert_eq!(parse_duration("1h"), Some(3600.0));
        assert_eq!(parse_duration("1.5m"), Some(90.0));
        assert_eq!(parse_duration("300"), Some(300.0));
        for bad in ["", "0s", "-5m", "5x", "m", "5 minutes", "inf", "NaNs"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_need_follows_the_formula_with_t_iterated() {
        // CV 22 % at W 10 %: (2·t·0.22/0.1)² with t(df≈75) ≈ 1.99 → about 76.
        let v = [0.8, 1.2, 0.8, 1.2, 0.8, 1.2];
        let s = Summary::of(&v, 95.0);
        let cv = 100.0 * s.sd / s.mean;
        let n = trials_needed(&RULE, &v).unwrap();
        let t = t_quantile(95.0, n - 1.0);
        assert!((n - (2.0 * t * cv / 10.0).powi(2)).abs() < 0.05, "{n}");
        assert!((70.0..85.0).contains(&n), "{n}");
        // The t of few trials is larger than the normal quantile: a spread
        // that needs few trials needs more than z alone would say.
        let v = [0.97, 1.03, 0.96, 1.04];
        let n = trials_needed(&RULE, &v).unwrap();
        let s = Summary::of(&v, 95.0);
        let z_only = (2.0 * 1.96 * s.sd / s.mean / 0.1).powi(2);
        assert!(n > z_only, "{n} {z_only}");
        assert_eq!(trials_needed(&RULE, &[1.0]), None);
        // A need of billions is computed, and at once.
        let tiny = StopRule {
            width_pct: 0.0001,
            ..RULE
        };
        let t0 = std::time::Instant::now();
        assert!(trials_needed(&tiny, &v).unwrap() > 1e9);
        assert!(t0.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(trials_needed(&RULE, &[2.0, 2.0]), Some(0.0));
    }

    #[test]
    fn the_need_follows_the_rules_estimator() {
        // One wrecked trial in ten: the mean's interval needs hundreds of
        // trials, the trimmed mean's (the default rule's) a handful.
        let v = [51.2, 52.0, 50.9, 51.7, 8.3, 51.4, 52.3, 50.8, 51.9, 51.1];
        let trimmed = StopRule {
            estimator: crate::stats::Estimator::Trimmed,
            ..RULE
        };
        let mean = trials_needed(&RULE, &v).unwrap();
        let robust = trials_needed(&trimmed, &v).unwrap();
        assert!(mean > 100.0 && robust < 10.0, "{mean} {robust}");
    }

    #[test]
    fn a_wrecked_trial_does_not_condemn_a_case_before_the_estimator_can_trim_it() {
        // fileserver in a study: two windows near 1,000 MB/s and one a host
        // spell wrecked. The trimmed rule cannot set it aside before five
        // trials, so the case gets those first, while they fit.
        let trimmed = StopRule {
            estimator: crate::stats::Estimator::Trimmed,
            ..RULE
        };
        assert_eq!(trimmed.judged_after(), 5);
        assert_eq!(RULE.judged_after(), 3);
        let young = [1000.0, 1010.0, 150.0];
        let c = [case(&young, 0.7)];
        let plans = allocate(&trimmed, &c, 100.0);
        assert!(
            matches!(plans[0], Allotment::Run { grant_s, .. } if grant_s >= 1.4 - 1e-9),
            "{:?}",
            plans[0]
        );
        assert_eq!(next(&trimmed, &c, &plans, &[0]), Some(0));
        // The mean never trims: three trials judge it, and it stops.
        assert!(matches!(
            allocate(&RULE, &c, 100.0)[0],
            Allotment::Stop { .. }
        ));
        // Judged on five, the wrecked one trimmed: a few trials more.
        let five = [1000.0, 1010.0, 150.0, 1005.0, 995.0];
        let plans = allocate(&trimmed, &[case(&five, 0.7)], 100.0);
        assert!(
            matches!(plans[0], Allotment::Run { need, .. } if need.more_trials < 10.0),
            "{:?}",
            plans[0]
        );
        // When even the two trials do not fit, it is judged as it stands.
        assert!(matches!(
            allocate(&trimmed, &c, 1.0)[0],
            Allotment::Stop {
                reason: StopReason::Budget,
                ..
            }
        ));
    }

    #[test]
    fn messages_say_trials_and_seconds() {
        let v = [0.8, 1.2, 0.8, 1.2, 0.8, 1.2];
        let n = need(&RULE, &case(&v, 1.5));
        assert!(n.estimated);
        let more = trials_needed(&RULE, &v).unwrap().ceil() - 6.0;
        assert_eq!(n.more_trials, more);
        assert_eq!(
            n.message(),
            format!(
                "needs ~{} more trials (~{:.0} s) at this spread",
                more,
                more * 1.5
            )
        );
        let n = need(&RULE, &case(&[1.0], 0.2));
        assert!(!n.estimated);
        assert_eq!(
            n.message(),
            "needs at least 2 more trials (~0.4 s) before its spread is known"
        );
        let n = need(&RULE, &case(&[-1.0, 1.0, -1.0, 1.0], 0.2));
        assert_eq!(n.message(), "cannot converge: its mean is 0");
    }

    /// Recorded trials of the quick study in a noisy hour (docs/method.md):
    /// `chat` msgs/s of twelve trials that followed the host's steal time
    /// (CV about 22 %), and `syscall.pipe` on one CPU (CV about 6 %).
    const CHAT: [f64; 12] = [
        76.8, 71.6, 83.7, 82.2, 89.3, 67.1, 77.4, 90.7, 90.6, 128.2, 122.8, 124.2,
    ];
    const PIPE: [f64; 5] = [4.71, 5.12, 4.95, 5.38, 4.82];

    #[test]
    fn recorded_trials_time_goes_to_the_case_that_can_converge() {
        // A chat trial costs 3 s; it needs some ninety more. The pipe case
        // costs 0.1 s a trial and needs a handful. 20 s are left.
        let chat = case(&CHAT, 3.0);
        let pipe = case(&PIPE, 0.1);
        assert!(!chat.converged && !pipe.converged);
        let plans = allocate(&RULE, &[chat, pipe], 20.0);
        match plans[0] {
            Allotment::Stop { need, reason } => {
                assert_eq!(reason, StopReason::Budget);
                assert!(need.more_trials > 50.0, "{need:?}");
                assert!(need.message().starts_with("needs ~"), "{}", need.message());
            }
            p => panic!("chat should stop: {p:?}"),
        }
        match plans[1] {
            Allotment::Run { grant_s, need } => {
                assert!(
                    grant_s >= need.more_s && grant_s > 0.0,
                    "{grant_s} {need:?}"
                );
            }
            p => panic!("pipe should run: {p:?}"),
        }
        assert_eq!(next(&RULE, &[chat, pipe], &plans, &[0, 0]), Some(1));
        // With ten minutes left chat can converge, and both are funded.
        let plans = allocate(&RULE, &[chat, pipe], 600.0);
        assert!(plans
            .iter()
            .all(|p| matches!(p, Allotment::Run { grant_s, need } if *grant_s >= need.more_s)));
    }

    #[test]
    fn cheapest_first_then_the_rest_in_proportion() {
        let a = [0.9, 1.1, 0.9, 1.1]; // needs some 30 trials
        let b = [0.8, 1.2, 0.8, 1.2]; // needs some 60
        let cases = [case(&a, 1.0), case(&a, 1.0), case(&b, 1.0)];
        let need_a = need(&RULE, &cases[0]).more_s;
        let need_b = need(&RULE, &cases[2]).more_s;
        // Enough for both a's and a third of b.
        let left = 2.0 * need_a + need_b / 3.0;
        let plans = allocate(&RULE, &cases, left);
        assert_eq!(plans[0].grant_s(), need_a);
        assert_eq!(plans[1].grant_s(), need_a);
        assert!((plans[2].grant_s() - need_b / 3.0).abs() < 1e-9);
        assert!(matches!(plans[2], Allotment::Run { .. }));
    }

    #[test]
    fn every_uncovered_part_is_funded_before_more_of_one() {
        let a = [0.9, 1.1, 0.9, 1.1]; // needs some 30 trials
        let b = [0.8, 1.2, 0.8, 1.2]; // needs some 60
        fn part(c: CaseState<'_>, p: Option<u32>) -> CaseState<'_> {
            CaseState { part: p, ..c }
        }
        // Two cheap cases of part 0, a dearer one of part 1.
        let cases = [
            part(case(&a, 1.0), Some(0)),
            part(case(&a, 1.0), Some(0)),
            part(case(&b, 1.0), Some(1)),
        ];
        let need_a = need(&RULE, &cases[0]).more_s;
        let need_b = need(&RULE, &cases[2]).more_s;
        let left = need_a + need_b + need_a / 2.0;
        let plans = allocate(&RULE, &cases, left);
        // One case of each part in full, the rest to the second of part 0.
        assert_eq!(plans[0].grant_s(), need_a);
        assert_eq!(plans[2].grant_s(), need_b);
        assert!((plans[1].grant_s() - need_a / 2.0).abs() < 1e-9);
        // Without parts, cheapest first leaves part 1 short.
        let plain: Vec<CaseState> = cases.iter().map(|&c| part(c, None)).collect();
        let plans = allocate(&RULE, &plain, left);
        assert_eq!(plans[1].grant_s(), need_a);
        assert!(plans[2].grant_s() < need_b);
        // A part that already has a converged case (`None`) gets no head start.
        let covered = [cases[0], cases[1], part(cases[2], None)];
        let plans = allocate(&RULE, &covered, left);
        assert!(plans[2].grant_s() < need_b);
    }

    #[test]
    fn a_case_past_the_maximum_stops() {
        let rule = StopRule {
            max_trials: 30,
            ..RULE
        };
        let wide = [0.4, 1.6, 0.4, 1.6, 0.4, 1.6, 0.4, 1.6];
        let plans = allocate(&rule, &[case(&wide, 0.01)], 1e6);
        assert!(matches!(
            plans[0],
            Allotment::Stop {
                reason: StopReason::MaxTrials,
                ..
            }
        ));
    }

    #[test]
    fn a_few_trials_are_judged_with_more_slack_than_many() {
        // Same spread, same pace: the point estimate's cost is just over
        // what is left. Three trials say too little to stop; thirty do.
        let few = [0.7, 1.3, 1.0];
        let many: Vec<f64> = (0..30).map(|i| few[i % 3]).collect();
        let cost = |v: &[f64]| need(&RULE, &case(v, 1.0)).more_s;
        let p = allocate(&RULE, &[case(&few, 1.0)], cost(&few) * 0.9);
        assert!(matches!(p[0], Allotment::Run { .. }), "{p:?}");
        let p = allocate(&RULE, &[case(&many, 1.0)], cost(&many) * 0.4);
        assert!(matches!(p[0], Allotment::Stop { .. }), "{p:?}");
    }

    #[test]
    fn new_cases_go_first_then_the_one_furthest_behind() {
        let steady = [1.0, 1.01, 0.99];
        let noisy = [0.8, 1.2, 0.8, 1.2];
        let fresh: [f64; 0] = [];
        let cases = [case(&noisy, 0.1), case(&fresh, 0.1), case(&steady, 0.1)];
        let plans = allocate(&RULE, &cases, 100.0);
        assert_eq!(plans[2], Allotment::Converged);
        assert_eq!(next(&RULE, &cases, &plans, &[3, 1, 2]), Some(1));
        let cases = [case(&noisy, 0.1), case(&steady, 0.1)];
        let plans = allocate(&RULE, &cases, 100.0);
        assert_eq!(next(&RULE, &cases, &plans, &[3, 2]), Some(0));
        // Nothing granted, nothing to run.
        assert_eq!(
            next(&RULE, &cases, &[Allotment::Converged; 2], &[0, 0]),
            None
        );
    }

    #[test]
    fn trials_spread_over_the_run_in_proportion_to_need() {
        // Simulate: each case's values alternate ±spread; a case needing
        // eight times as many trials gets about eight turns for one, and
        // the cheap one's trials are spread over the whole sequence.
        let spreads = [0.05, 0.14];
        let mut vals: Vec<Vec<f64>> = vec![Vec::new(); 2];
        let mut turns = [0u64; 2];
        let mut seq = Vec::new();
        for step in 1..=400u64 {
            let cases: Vec<CaseState> = vals.iter().map(|v| case(v, 0.1)).collect();
            let plans = allocate(&RULE, &cases, 1000.0);
            let Some(i) = next(&RULE, &cases, &plans, &turns) else {
                break;
            };
            let sign = if vals[i].len().is_multiple_of(2) {
                1.0
            } else {
                -1.0
            };
            vals[i].push(1.0 + sign * spreads[i]);
            turns[i] = step;
            seq.push(i);
        }
        assert!(vals.iter().all(|v| RULE.is_converged(v)), "{vals:?}");
        // After the first rounds, the cheap case's trials are not bunched
        // at either end.
        let cheap: Vec<usize> = seq
            .iter()
            .enumerate()
            .filter(|(_, &c)| c == 0)
            .map(|(k, _)| k)
            .collect();
        let last = *cheap.last().unwrap();
        assert!(last > seq.len() / 2, "{seq:?}");
    }

    fn arb_case() -> impl Strategy<Value = (Vec<f64>, f64)> {
        (
            prop::collection::vec(0.5f64..1.5, 0..40),
            prop_oneof![Just(0.0), 0.001f64..5.0],
        )
    }

    proptest! {
        #[test]
        fn never_more_than_remaining_and_converged_get_nothing(
            cs in prop::collection::vec(arb_case(), 0..12),
            remaining in prop_oneof![Just(0.0), -5.0f64..0.0, 0.0f64..500.0],
            trimmed in any::<bool>(),
        ) {
            let rule = if trimmed { StopRule { estimator: crate::stats::Estimator::Trimmed, ..RULE } } else { RULE };
            let cases: Vec<CaseState> = cs.iter().map(|(v, s)| case(v, *s)).collect();
            let plans = allocate(&rule, &cases, remaining);
            prop_assert_eq!(plans.len(), cases.len());
            let total: f64 = plans.iter().map(Allotment::grant_s).sum();
            prop_assert!(total <= remaining.max(0.0) * (1.0 + 1e-9) + 1e-12, "{} > {}", total, remaining);
            for (c, p) in cases.iter().zip(&plans) {
                prop_assert!(p.grant_s() >= 0.0);
                if c.converged {
                    prop_assert_eq!(*p, Allotment::Converged);
                } else {
                    prop_assert!(*p != Allotment::Converged);
                }
                if let Allotment::Run { grant_s, need } = p {
                    prop_assert!(*grant_s <= need.more_s + 1e-9);
                }
            }
            if let Some(i) = next(&rule, &cases, &plans, &vec![0; cases.len()]) {
                prop_assert!(matches!(plans[i], Allotment::Run { .. }), "{:?}", plans[i]);
                prop_assert!(!cases[i].converged);
            }
        }

        #[test]
        fn an_unconverged_case_needs_at_least_one_more(v in prop::collection::vec(0.5f64..1.5, 2..40)) {
            let c = case(&v, 0.1);
            let n = need(&RULE, &c);
            if c.converged {
                prop_assert_eq!(n.more_trials, 0.0);
            } else {
                prop_assert!(n.more_trials >= 1.0);
                prop_assert!(lucky_need(&RULE, &c).more_trials <= n.more_trials);
                prop_assert!(need_of(&RULE, &c, Reading::Prudent).more_trials >= n.more_trials);
            }
        }
    }
}
