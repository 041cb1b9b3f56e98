//! Verdicts (docs/verdicts.md): every comparison kscale makes ends in one
//! word a script or a reader can act on, given with its interval. A gate
//! asks "is B worse than A by more than the threshold?" and answers
//! *worse*, *not worse* or *cannot tell*; a comparison asks "how does B
//! stand to A?" and answers *faster*, *slower*, *the same within ±threshold*
//! or *cannot tell*. Both read one interval of the change, the
//! (1 − 2α) interval of Schuirmann's two one-sided tests (1987): a change
//! lies inside the threshold when both one-sided tests at α reject, which is
//! that interval lying inside it — Kruschke's region of practical
//! equivalence (2018) read with a confidence interval. A change is outside
//! the threshold when its estimate is, and the interval excludes no change.
//!
//! Changes are logarithms of ratios oriented so that above 0 is worse
//! (slower, or less throughput): a threshold of 10 % is ln 1.1 either way,
//! and a 10 % faster and a 10 % slower case weigh alike.

use crate::model::Direction;
use crate::stats::t_quantile;

/// ln of `v`, turned so that a larger figure is worse: every change a
/// verdict reads is a difference of these (worse above 0), for a latency
/// and a throughput alike.
pub fn worse_ln(v: f64, d: Direction) -> f64 {
    match d {
        Direction::Lower => v.ln(),
        Direction::Higher => -v.ln(),
    }
}

/// An interval of ln(after ÷ before), `(est, lo, hi)`, turned worse above
/// 0: a throughput's bounds swap ends.
pub fn worse_interval(est: f64, lo: f64, hi: f64, d: Direction) -> (f64, f64, f64) {
    match d {
        Direction::Lower => (est, lo, hi),
        Direction::Higher => (-est, -hi, -lo),
    }
}

/// The chance, over the cases one gate or comparison reads, that a case
/// that did not move beyond the threshold is called worse, or that one that
/// did is called not worse: each case is read at this over their number
/// (Bonferroni), one-sided, so its interval is the (1 − 2α/k) one.
pub const ALPHA: f64 = 0.05;

/// Runs a side the "runs needed" figure stops at: past that the answer is
/// "not on this machine", not a number of runs.
pub const MAX_RUNS_NEEDED: u32 = 1000;

/// One change: its estimate, standard error and degrees of freedom, all in
/// ln of the ratio, worse above 0. `sigma` is one run's spread about its
/// level (ln), where the change was made from runs: with it a verdict can
/// say how many runs a side another threshold would take.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Change {
    pub est: f64,
    pub se: f64,
    pub df: f64,
    pub sigma: Option<f64>,
}

impl Change {
    /// The change between the mean of `now` and the mean of `base`, each
    /// a set of one value per run (ln), whose runs spread by `spread`.
    /// `None` without a run on either side or without a usable spread.
    pub fn between_runs(base: &[f64], now: &[f64], spread: Spread) -> Option<Change> {
        if base.is_empty() || now.is_empty() || !spread.is_usable() {
            return None;
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let (nb, na) = (base.len() as f64, now.len() as f64);
        let est = mean(now) - mean(base);
        if !est.is_finite() {
            return None;
        }
        Some(Change {
            est,
            se: spread.sd * (1.0 / nb + 1.0 / na).sqrt(),
            df: spread.df,
            sigma: Some(spread.sd),
        })
    }
}

/// The spread of one run's value about its level (ln) and its degrees of
/// freedom.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub sd: f64,
    pub df: f64,
    /// How many runs it was read from.
    pub runs: usize,
}

impl Spread {
    fn is_usable(self) -> bool {
        self.sd.is_finite() && self.sd >= 0.0 && self.df.is_finite() && self.df > 0.0
    }

    /// The between-run spread from a case's runs in the order they were
    /// measured (ln of each run's value, with the build that measured it).
    /// Each pair of consecutive runs of one build gives a difference; the
    /// spread is von Neumann's mean squared successive difference
    /// (σ² ≈ Σ Δ² / 2m). Unlike the variance about one mean it is not
    /// inflated by a slow drift or by a step between builds, and a step
    /// within one build (a setting turned on) costs one difference of many
    /// rather than every run's deviation. Pairs that straddle a change of
    /// build are left out: that change may be the regression a gate looks
    /// for. From [`STEP_PAIRS`] pairs on, a difference beyond
    /// [`STEP_SIGMAS`] times the others' robust spread is a step, not
    /// spread, and is left out too: one seccomp filter turned on in a
    /// store of 110 same-build runs (+37 %) took one run's spread from
    /// 2.8 to 4.1 %. Its degrees of freedom are the chi-square fit of the
    /// MSSD, 2m²/(3m − 1) for m differences (m at 1 is 1). `None` below
    /// one pair.
    pub fn successive<B: PartialEq>(runs: &[(f64, B)]) -> Option<Spread> {
        let mut diffs: Vec<f64> = runs
            .windows(2)
            .filter(|w| w[0].1 == w[1].1)
            .map(|w| w[1].0 - w[0].0)
            .filter(|d| d.is_finite())
            .collect();
        without_steps(&mut diffs, |d| *d);
        let m = diffs.len();
        if m == 0 {
            return None;
        }
        let mssd = diffs.iter().map(|d| d * d).sum::<f64>() / m as f64;
        Some(Spread {
            sd: (mssd / 2.0).sqrt(),
            df: mssd_df(m),
            runs: runs.len(),
        })
    }
}

/// The successive differences from which a step is told from spread
/// ([`Spread::successive`]).
pub const STEP_PAIRS: usize = 10;

/// How many robust standard deviations of the successive differences a
/// difference must lie beyond to be a step: normal differences pass it
/// about once in five hundred million.
pub const STEP_SIGMAS: f64 = 6.0;

/// Leaves out of successive pairs `pairs` those whose difference
/// (`diff`) is a step, not spread: from [`STEP_PAIRS`] pairs on, beyond
/// [`STEP_SIGMAS`] times the differences' robust standard deviation (their
/// median absolute value over 0.6745).
pub fn without_steps<T>(pairs: &mut Vec<T>, diff: impl Fn(&T) -> f64) {
    if pairs.len() < STEP_PAIRS {
        return;
    }
    let abs: Vec<f64> = pairs.iter().map(|p| diff(p).abs()).collect();
    let robust = crate::stats::median(&abs) / 0.6745;
    if robust > 0.0 {
        pairs.retain(|p| diff(p).abs() <= STEP_SIGMAS * robust);
    }
}

/// An interval of a change in percent of the baseline, worse above 0.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Interval {
    pub est_pct: f64,
    pub lo_pct: f64,
    pub hi_pct: f64,
    /// Its two-sided confidence, in %.
    pub confidence_pct: f64,
}

fn pct(ln: f64) -> f64 {
    (ln.exp() - 1.0) * 100.0
}

/// A gate's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GateWord {
    Worse,
    NotWorse,
    CannotTell,
}

impl GateWord {
    pub fn as_str(self) -> &'static str {
        match self {
            GateWord::Worse => "worse",
            GateWord::NotWorse => "not worse",
            GateWord::CannotTell => "cannot tell",
        }
    }
}

/// A gate's answer with what it stood on.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct GateVerdict {
    pub verdict: GateWord,
    pub interval: Interval,
    /// The smallest threshold (%) at which this change would have been
    /// "not worse": the interval's upper end.
    pub smallest_threshold_pct: f64,
    /// Runs a side the asked threshold would take at this spread, where
    /// the change was measured from runs and the estimate leaves room;
    /// `None` where no number of runs would (the estimate itself is beyond
    /// the threshold) or the spread is not a run's.
    pub runs_needed: Option<u32>,
    /// Where [`beside_machine`] withheld the verdict: how much slower
    /// (above 0) or faster the machine itself ran now, in %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine_pct: Option<f64>,
}

/// A comparison's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CompareWord {
    Faster,
    Slower,
    Same,
    CannotTell,
}

impl CompareWord {
    pub fn as_str(self) -> &'static str {
        match self {
            CompareWord::Faster => "faster",
            CompareWord::Slower => "slower",
            CompareWord::Same => "same",
            CompareWord::CannotTell => "cannot tell",
        }
    }
}

/// A comparison's answer with its interval and, where it could not tell,
/// the smallest threshold at which the interval would have said "same"
/// (its larger end from 0, in %).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct CompareVerdict {
    pub verdict: CompareWord,
    pub interval: Interval,
    pub smallest_threshold_pct: f64,
    /// Where it could not tell and the change came from runs: runs a side
    /// at which "same" at the asked threshold is in reach at the spread
    /// measured, the estimate where it is; `None` where none would (the
    /// estimate on or beyond the threshold) or the spread is not a run's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs_needed: Option<u32>,
}

/// The (1 − 2α) interval of `c`, in ln, and its confidence in %.
fn bounds(c: Change, alpha: f64) -> (f64, f64, f64) {
    let conf = (1.0 - 2.0 * alpha) * 100.0;
    let half = if c.se == 0.0 {
        0.0
    } else {
        t_quantile(conf, c.df) * c.se
    };
    (c.est - half, c.est + half, conf)
}

/// The change's (1 − 2α) interval, in % of the baseline.
pub fn interval(c: Change, alpha: f64) -> Interval {
    let (lo, hi, conf) = bounds(c, alpha);
    Interval {
        est_pct: pct(c.est),
        lo_pct: pct(lo),
        hi_pct: pct(hi),
        confidence_pct: conf,
    }
}

/// Runs a side (both sides alike) for the interval's upper end to fall
/// below `limit` (ln) at one run's spread `sigma`, with the estimate where
/// it is. The runs that narrow the interval also measure the spread: at
/// `n` runs a side their successive pairs give it [`runs_df`]`(n)` degrees
/// of freedom where the store had fewer. Read at the one pair two fresh
/// runs have (t 6.3), two runs of one binary spread 10 % asked for more
/// than a thousand runs a side, where ~12 decide it.
fn runs_needed(c: Change, alpha: f64, limit: f64) -> Option<u32> {
    let sigma = c.sigma?;
    let room = limit - c.est.max(0.0);
    if !(room > 0.0 && sigma.is_finite()) {
        return None;
    }
    let conf = (1.0 - 2.0 * alpha) * 100.0;
    // se = σ √(2/n) ≤ room / t, t falling as n grows: the first n that
    // holds (the condition only gets easier with n).
    let fits = |n: u32| {
        let df = c.df.max(runs_df(n));
        t_quantile(conf, df) * sigma * (2.0 / f64::from(n)).sqrt() <= room
    };
    if !fits(MAX_RUNS_NEEDED) {
        return None;
    }
    let (mut lo, mut hi) = (1u32, MAX_RUNS_NEEDED);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

/// Degrees of freedom of a spread read from `n` runs a side of one
/// machine: the successive pairs within each side, 2(n − 1), at the
/// chi-square fit of their mean squared difference ([`mssd_df`]).
pub fn runs_df(n: u32) -> f64 {
    mssd_df(2 * n.saturating_sub(1) as usize)
}

/// The chi-square fit of a mean squared successive difference's degrees
/// of freedom for `m` differences, 2m²/(3m − 1); 1 at one or none.
pub fn mssd_df(m: usize) -> f64 {
    let mf = m as f64;
    if m <= 1 {
        return 1.0;
    }
    2.0 * mf * mf / (3.0 * mf - 1.0)
}

/// The gate's verdict on `c` at `threshold` (a fraction: 0.05 is 5 %),
/// each one-sided test at `alpha`.
///
/// - worse: the estimate is beyond the threshold and the interval's lower
///   end above no change;
/// - not worse: the interval's upper end below the threshold (a
///   non-inferiority test);
/// - cannot tell: neither.
pub fn gate(c: Change, threshold: f64, alpha: f64) -> GateVerdict {
    let limit = (1.0 + threshold).ln();
    let (lo, hi, _) = bounds(c, alpha);
    let verdict = if c.est > limit && lo > 0.0 {
        GateWord::Worse
    } else if hi < limit {
        GateWord::NotWorse
    } else {
        GateWord::CannotTell
    };
    GateVerdict {
        verdict,
        interval: interval(c, alpha),
        smallest_threshold_pct: pct(hi).max(0.0),
        runs_needed: match verdict {
            GateWord::CannotTell => runs_needed(c, alpha, limit),
            _ => None,
        },
        machine_pct: None,
    }
}

/// How many times the user-space loop's move a host spell moved a
/// kernel-path case on the development VM: `syscall.null` 13.4, 13.9,
/// 14.2 and 14.8 % slower in four slow spells while the loop ran 3.9,
/// 4.9, 4.7 and 5.4 % slower (2.7–3.4×; docs/validation.md, "The
/// regression gate on its own binary").
pub const SPELL_GAIN: f64 = 3.0;

/// How many times the pace's move (the chains timed beside each trial,
/// `crate::pace`) a host spell moved a kernel-path case: `getppid` followed
/// the chains at slopes of 0.98–1.17 over 2- to 30-second bins on the
/// 2-vCPU AMD EPYC VM (r = 0.98), so twice the move leaves room for a case
/// steeper than the crossing. The most a gate may still lay at the
/// machine's door beside the unit gain, where too few runs fit one
/// (`crate::pace::Gain::follow`). The single dependent chain the pace was
/// before moved 5–9 times less than the case, and this bound was 8.
pub const PACE_SPELL_GAIN: f64 = 2.0;

/// How far a case may follow the machine's probe beyond what its reading
/// already took out: `gain` times the probe's move between the sides,
/// give or take `se` times it (the slope's standard error where the runs
/// fitted one, 0 for a bound taken as it is).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Follow {
    pub gain: f64,
    pub se: f64,
}

impl Follow {
    /// A bound taken as it is: at most `gain` times the move.
    pub fn at_most(gain: f64) -> Follow {
        Follow { gain, se: 0.0 }
    }
}

/// A gate's verdict `v` on change `c` beside the machine's own move between the sides,
/// `machine`: the change of a probe that runs none of the code a case
/// measures (the pace beside its trials, or the gauge's user-space CPU
/// loop), worse (slower) above 0. Where the machine itself ran slower
/// now, beyond its spread at `alpha`, a "worse" is withheld; where it ran
/// faster, a "not worse": either could be the machine's, and the verdict
/// becomes "cannot tell", with the move said. The machine's move never
/// makes a verdict, and never turns one into its opposite: on a VM whose
/// host moved the guest into a slower phase for a minute, three runs of
/// an unchanged binary read 13 % worse (docs/verdicts.md, "The machine
/// beside the verdicts").
///
/// The verdict is withheld only where it does not hold once the change
/// is read with what the machine may have added to it (`follow`: its
/// gain times the move taken out, its uncertainty added to the change's
/// in quadrature, so the test stays at `alpha`): a verdict whose
/// interval lies beyond that stands (a case a hundred times slower is
/// worse however much the loop moved).
pub fn beside_machine(
    v: GateVerdict,
    c: Change,
    machine: Option<Change>,
    follow: Follow,
    threshold: f64,
    alpha: f64,
) -> GateVerdict {
    let Some(m) = machine else { return v };
    let (m_lo, m_hi, _) = bounds(m, alpha);
    let read = Change {
        est: c.est - follow.gain * m.est,
        se: (c.se.powi(2) + (follow.se * m.est).powi(2)).sqrt(),
        ..c
    };
    let (lo, hi, _) = bounds(read, alpha);
    let withheld = match v.verdict {
        GateWord::Worse => m_lo > 0.0 && lo <= 0.0,
        GateWord::NotWorse => m_hi < 0.0 && hi >= (1.0 + threshold).ln(),
        GateWord::CannotTell => false,
    };
    if !withheld {
        return v;
    }
    GateVerdict {
        verdict: GateWord::CannotTell,
        machine_pct: Some(pct(m.est)),
        ..v
    }
}

/// The comparison's verdict on `c` at ±`threshold`: the same where the
/// interval lies inside ±threshold; slower (faster) where the estimate is
/// beyond it on that side and the interval excludes no change; cannot
/// tell otherwise.
pub fn compare(c: Change, threshold: f64, alpha: f64) -> CompareVerdict {
    let (lo, hi, _) = bounds(c, alpha);
    let verdict = classify(c.est, lo, hi, threshold);
    CompareVerdict {
        verdict,
        interval: interval(c, alpha),
        smallest_threshold_pct: pct(hi.max(-lo)).max(0.0),
        runs_needed: match verdict {
            // "Same" needs both ends inside: the nearer threshold to the
            // estimate's side is the one its far end must clear.
            CompareWord::CannotTell => runs_needed(
                Change {
                    est: c.est.abs(),
                    ..c
                },
                alpha,
                (1.0 + threshold).ln(),
            ),
            _ => None,
        },
    }
}

/// The comparison's rule on an interval already made (ln of the ratio,
/// worse above 0): the one rule [`compare`] and a change point's interval
/// (`kscale changes`) are read by.
pub fn classify(est: f64, lo: f64, hi: f64, threshold: f64) -> CompareWord {
    let limit = (1.0 + threshold).ln();
    if lo > -limit && hi < limit {
        CompareWord::Same
    } else if est > limit && lo > 0.0 {
        CompareWord::Slower
    } else if est < -limit && hi < 0.0 {
        CompareWord::Faster
    } else {
        CompareWord::CannotTell
    }
}

/// A scalability's verdict (docs/verdicts.md): all ÷ 1 read as a
/// comparison at ± half the run's interval width (the precision it asked
/// of each case), on the interval's own ends. The one rule the decisions
/// table and the runner's funding of undecided cells read.
///
/// The ends, not the estimate ± t·se: for a ratio of estimates they are the same
/// interval, but a capacity answer's is its brackets', uneven about the
/// windows' ratio (decisions table, "bracketed scalability"): a quick
/// study tabled web at 0.958× in 0.898–0.993×, which read about the
/// ratio was 0.911–1.009×. Read so, a ratio of 0.93× near the low end of
/// a bracket 0.92–1.01× would be "slower" though the bracket holds 1×.
pub fn scaling(
    i: &crate::decision::Interval,
    width_pct: f64,
    confidence_pct: f64,
) -> CompareVerdict {
    let c = scaling_change(i);
    let threshold = width_pct / 200.0;
    // Worse above 0: the high end is the least worse.
    let (lo, hi) = (-i.high.ln(), -i.low.ln());
    if lo.is_nan() || hi.is_nan() {
        return compare(c, threshold, (1.0 - confidence_pct / 100.0) / 2.0);
    }
    CompareVerdict {
        verdict: classify(c.est, lo, hi, threshold),
        interval: Interval {
            est_pct: pct(c.est),
            lo_pct: pct(lo),
            hi_pct: pct(hi),
            confidence_pct,
        },
        smallest_threshold_pct: pct(hi.max(-lo)).max(0.0),
        runs_needed: None,
    }
}

/// A scalability interval as a change: above 1× is faster, which is
/// "better", a change below 0.
fn scaling_change(i: &crate::decision::Interval) -> Change {
    Change {
        est: -i.value.ln(),
        se: i.se_log,
        df: if i.df.is_finite() { i.df } else { 1e6 },
        sigma: None,
    }
}

/// How many times the trials it stands on a scalability needs for
/// [`scaling`] to decide it, its estimate staying where it is and its
/// standard error shrinking as 1/√n: to "same" where the estimate lies
/// inside the margin, to "faster" or "slower" where it lies beyond it.
/// 1 where it is decided; `None` where no number of trials would (the
/// estimate on the margin itself, or no spread to shrink).
pub fn scaling_trials_factor(
    i: &crate::decision::Interval,
    width_pct: f64,
    confidence_pct: f64,
) -> Option<f64> {
    let c = scaling_change(i);
    let alpha = (1.0 - confidence_pct / 100.0) / 2.0;
    if compare(c, width_pct / 200.0, alpha).verdict != CompareWord::CannotTell {
        return Some(1.0);
    }
    let limit = (1.0 + width_pct / 200.0).ln();
    let a = c.est.abs();
    // The standard error at which the interval's far end meets the line
    // it must not cross: the margin for "same", no change for the others.
    let room = if a < limit { limit - a } else { a };
    // Off the margin's edge only: an estimate within a hundredth of it
    // needs trials without end.
    if !((a - limit).abs() > 0.01 * limit && c.se.is_finite() && c.se > 0.0) {
        return None;
    }
    let t = t_quantile((1.0 - 2.0 * alpha) * 100.0, c.df);
    Some((t * c.se / room).powi(2).max(1.0))
}

/// α for one of `cases` read together (Bonferroni).
pub fn per_case(alpha: f64, cases: usize) -> f64 {
    alpha / cases.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    fn ch(est_pct: f64, se: f64, df: f64) -> Change {
        Change {
            est: (1.0 + est_pct / 100.0).ln(),
            se,
            df,
            sigma: Some(se / 2f64.sqrt()),
        }
    }

    /// A comparison that cannot tell says the runs a side that would put
    /// its interval inside ±threshold, the estimate where it is; none
    /// where the estimate is beyond the threshold.
    #[test]
    fn a_comparison_that_cannot_tell_names_the_runs_that_would() {
        // Two runs a side, one run's spread 4 %: σ√(2/2) = 4 %, 1 df.
        let c = Change {
            est: (1.01f64).ln(),
            se: 0.04,
            df: 1.0,
            sigma: Some(0.04),
        };
        let v = compare(c, 0.05, ALPHA);
        assert_eq!(v.verdict, CompareWord::CannotTell);
        let n = v.runs_needed.expect("room inside ±5 %");
        // At n runs a side the spread has the runs' pairs besides.
        let at = |n: u32| Change {
            se: 0.04 * (2.0 / f64::from(n)).sqrt(),
            df: runs_df(n).max(c.df),
            ..c
        };
        assert_eq!(compare(at(n), 0.05, ALPHA).verdict, CompareWord::Same);
        assert_ne!(compare(at(n - 1), 0.05, ALPHA).verdict, CompareWord::Same);
        assert!(n < 40, "the runs' own pairs count: {n}");
        // A faster estimate is read on its own side alike.
        let f = compare(Change { est: -c.est, ..c }, 0.05, ALPHA);
        assert_eq!(f.runs_needed, Some(n));
        let beyond = compare(Change { est: 0.06, ..c }, 0.05, ALPHA);
        assert_eq!(beyond.runs_needed, None);
    }

    #[test]
    fn a_clear_slowdown_beyond_the_threshold_is_worse() {
        let v = gate(ch(30.0, 0.03, 20.0), 0.10, 0.05);
        assert_eq!(v.verdict, GateWord::Worse);
        assert!(v.interval.lo_pct > 0.0 && v.interval.hi_pct > 30.0);
        assert_eq!(v.runs_needed, None);
    }

    fn scal(value: f64, se_log: f64) -> crate::decision::Interval {
        let z = t_quantile(95.0, 1e6);
        crate::decision::Interval {
            value,
            low: (value.ln() - z * se_log).exp(),
            high: (value.ln() + z * se_log).exp(),
            se_log,
            df: 1e6,
        }
    }

    /// The trials an undecided scalability needs, by where its estimate
    /// lies: inside the ±5 % margin it narrows to "same", beyond it to
    /// "faster"; on the margin's edge no number of trials decides it. The
    /// factor found decides the interval it predicts, and a little less
    /// does not.
    #[test]
    fn an_undecided_scalability_names_the_trials_that_decide_it() {
        assert_eq!(
            scaling_trials_factor(&scal(1.3, 0.01), 10.0, 95.0),
            Some(1.0)
        );
        for value in [0.984, 1.033, 1.09, 0.91] {
            let i = scal(value, 0.05);
            assert_eq!(scaling(&i, 10.0, 95.0).verdict, CompareWord::CannotTell);
            let k = scaling_trials_factor(&i, 10.0, 95.0).expect("decidable");
            assert!(k > 1.0, "{value}: {k}");
            let at = |f: f64| scaling(&scal(value, 0.05 / f.sqrt()), 10.0, 95.0).verdict;
            let want = if (0.96..1.04).contains(&value) {
                CompareWord::Same
            } else if value > 1.0 {
                CompareWord::Faster
            } else {
                CompareWord::Slower
            };
            assert_eq!(at(k * 1.01), want, "{value}: {k}");
            assert_eq!(at(k * 0.95), CompareWord::CannotTell, "{value}: {k}");
        }
        assert_eq!(scaling_trials_factor(&scal(1.05, 0.03), 10.0, 95.0), None);
        // A bracket's interval is read on its ends, uneven about its ratio.
        let bracket = |value: f64, low: f64, high: f64| crate::decision::Interval {
            value,
            low,
            high,
            se_log: (high / low).ln() / (2.0 * t_quantile(95.0, 1e6)),
            df: 1e6,
        };
        let holds_one = bracket(0.93, 0.92, 1.01);
        assert_eq!(
            scaling(&holds_one, 10.0, 95.0).verdict,
            CompareWord::CannotTell
        );
        let beyond = bracket(0.93, 0.90, 0.99);
        assert_eq!(scaling(&beyond, 10.0, 95.0).verdict, CompareWord::Slower);
        assert_eq!(
            scaling_trials_factor(&scal(1.0, 0.0), 10.0, 95.0),
            Some(1.0)
        );
    }

    /// What the machine may have added is read with its uncertainty in
    /// quadrature, not as a second bound: a "not worse" at +1 % ± 3.4 %
    /// beside a pace 4 % faster stands where the case follows it no
    /// further than the gain took out give or take 0.5, and is withheld
    /// where the slope is 2 beyond the gain, or uncertain by 2.
    #[test]
    fn the_machines_part_is_read_with_its_error() {
        let c = ch(1.0, 0.02, 40.0);
        let v = gate(c, 0.10, 0.05);
        assert_eq!(v.verdict, GateWord::NotWorse);
        let faster = Some(ch(-4.0, 0.005, 40.0));
        let read = |gain, se| beside_machine(v, c, faster, Follow { gain, se }, 0.10, 0.05);
        assert_eq!(read(0.0, 0.5), v);
        assert_eq!(read(2.0, 0.0).verdict, GateWord::CannotTell);
        assert_eq!(read(0.0, 2.0).verdict, GateWord::CannotTell);
        assert_eq!(read(0.0, 0.0), v);
    }

    /// A step within one build (a setting turned on for some runs) is
    /// left out of the spread once there are enough pairs to tell it;
    /// with fewer it counts as one pair.
    #[test]
    fn a_step_is_a_change_not_spread() {
        let wobble = |i: usize| if i.is_multiple_of(2) { 0.02 } else { -0.02 };
        let runs: Vec<(f64, ())> = (0..30)
            .map(|i| (wobble(i) + if i >= 15 { 0.5 } else { 0.0 }, ()))
            .collect();
        let s = Spread::successive(&runs).expect("spread");
        assert!((s.sd - 0.04 / 2f64.sqrt()).abs() < 1e-9, "{s:?}");
        let few: Vec<(f64, ())> = (0..6)
            .map(|i| (wobble(i) + if i >= 3 { 0.5 } else { 0.0 }, ()))
            .collect();
        assert!(Spread::successive(&few).expect("spread").sd > 0.1);
    }

    #[test]
    fn the_machines_own_move_withholds_the_verdict_it_could_have_made() {
        let worse = gate(ch(13.0, 0.04, 30.0), 0.10, 0.05);
        assert_eq!(worse.verdict, GateWord::Worse);
        // The user-space loop ran 5 % slower, well beyond its 1 % spread:
        // the "worse" could be the machine's.
        let c = ch(13.0, 0.04, 30.0);
        let beside = |v, m| beside_machine(v, c, m, Follow::at_most(SPELL_GAIN), 0.10, 0.05);
        let slow = ch(5.0, 0.01, 30.0);
        let v = beside(worse, Some(slow));
        assert_eq!(v.verdict, GateWord::CannotTell);
        assert!((v.machine_pct.unwrap() - 5.0).abs() < 1e-9);
        assert_eq!(v.interval, worse.interval);
        // A loop that did not move, or ran faster, leaves it.
        assert_eq!(beside(worse, Some(ch(0.5, 0.01, 30.0))), worse);
        assert_eq!(beside(worse, Some(ch(-5.0, 0.01, 30.0))), worse);
        assert_eq!(beside(worse, None), worse);
        // A change far beyond what the machine's move explains stands: a
        // case a hundred times slower on a machine three times slower.
        let huge = ch(9900.0, 0.04, 30.0);
        let v = gate(huge, 0.10, 0.05);
        assert_eq!(v.verdict, GateWord::Worse);
        let m = Some(ch(200.0, 0.01, 30.0));
        assert_eq!(
            beside_machine(v, huge, m, Follow::at_most(SPELL_GAIN), 0.10, 0.05),
            v
        );
        // A faster machine withholds "not worse", never "worse".
        let f = ch(1.0, 0.02, 20.0);
        let fine = gate(f, 0.10, 0.05);
        assert_eq!(fine.verdict, GateWord::NotWorse);
        let v = beside_machine(
            fine,
            f,
            Some(ch(-5.0, 0.01, 30.0)),
            Follow::at_most(SPELL_GAIN),
            0.10,
            0.05,
        );
        assert_eq!(v.verdict, GateWord::CannotTell);
        assert_eq!(
            beside_machine(fine, f, Some(slow), Follow::at_most(SPELL_GAIN), 0.10, 0.05),
            fine
        );
    }

    #[test]
    fn a_narrow_interval_below_the_threshold_is_not_worse() {
        let v = gate(ch(1.0, 0.02, 20.0), 0.10, 0.05);
        assert_eq!(v.verdict, GateWord::NotWorse);
        assert!(v.smallest_threshold_pct < 10.0 && v.smallest_threshold_pct > 1.0);
    }

    #[test]
    fn a_wide_interval_cannot_tell_and_says_what_would_decide() {
        let v = gate(ch(2.0, 0.08, 10.0), 0.05, 0.05);
        assert_eq!(v.verdict, GateWord::CannotTell);
        assert!(v.smallest_threshold_pct > 5.0);
        let n = v.runs_needed.expect("room below the threshold");
        assert!(n > 1, "{n}");
        // At that many runs a side the upper end is below 5 %.
        let sigma = 0.08 / 2f64.sqrt();
        let at = |n: u32| Change {
            se: sigma * (2.0 / f64::from(n)).sqrt(),
            df: runs_df(n).max(10.0),
            ..ch(2.0, 0.0, 10.0)
        };
        assert_eq!(gate(at(n), 0.05, 0.05).verdict, GateWord::NotWorse);
        assert_ne!(gate(at(n - 1), 0.05, 0.05).verdict, GateWord::NotWorse);
    }

    #[test]
    fn worse_within_the_threshold_is_not_worse_but_not_called_worse() {
        // 4 % slower, clearly, at a 10 % threshold: not worse by more than 10 %.
        let v = gate(ch(4.0, 0.01, 30.0), 0.10, 0.05);
        assert_eq!(v.verdict, GateWord::NotWorse);
        // 12 % slower but the interval reaches below no change: cannot tell.
        let v = gate(ch(12.0, 0.08, 5.0), 0.10, 0.05);
        assert_eq!(v.verdict, GateWord::CannotTell);
        assert_eq!(v.runs_needed, None, "the estimate is beyond the threshold");
    }

    #[test]
    fn comparisons_read_both_sides() {
        assert_eq!(
            compare(ch(25.0, 0.04, 20.0), 0.05, 0.05).verdict,
            CompareWord::Slower
        );
        assert_eq!(
            compare(ch(-25.0, 0.04, 20.0), 0.05, 0.05).verdict,
            CompareWord::Faster
        );
        assert_eq!(
            compare(ch(0.5, 0.01, 20.0), 0.05, 0.05).verdict,
            CompareWord::Same
        );
        let v = compare(ch(3.0, 0.05, 20.0), 0.05, 0.05);
        assert_eq!(v.verdict, CompareWord::CannotTell);
        assert!(v.smallest_threshold_pct > 5.0);
    }

    #[test]
    fn the_successive_spread_skips_a_change_of_build_and_shrugs_off_a_drift() {
        // A slow drift of 1 % a run, no noise: the spread about the mean is
        // large, the successive one is 1/√2 of a step.
        let drift: Vec<(f64, u8)> = (0..10).map(|i| (0.01 * f64::from(i), 0)).collect();
        let s = Spread::successive(&drift).expect("pairs");
        assert!((s.sd - 0.01 / 2f64.sqrt()).abs() < 1e-9, "{s:?}");
        assert_eq!(s.runs, 10);
        // A 40 % step between builds is left out.
        let mut steps = drift.clone();
        steps.extend((10..20).map(|i| (0.4 + 0.01 * f64::from(i), 1)));
        let t = Spread::successive(&steps).expect("pairs");
        assert!((t.sd - s.sd).abs() < 1e-9, "{t:?}");
        assert!(t.df > s.df);
        assert!(Spread::successive(&[(0.0, 0), (0.1, 1)]).is_none());
    }

    #[test]
    fn between_runs_needs_both_sides() {
        let s = Spread {
            sd: 0.03,
            df: 10.0,
            runs: 12,
        };
        assert!(Change::between_runs(&[], &[0.0], s).is_none());
        let c = Change::between_runs(&[0.0], &[0.1, 0.1, 0.1, 0.1], s).expect("change");
        assert!((c.est - 0.1).abs() < 1e-12);
        assert!((c.se - 0.03 * 1.25f64.sqrt()).abs() < 1e-12);
    }

    proptest! {
        /// The verdicts never contradict the interval they are given with:
        /// "worse" has its lower end above 0 and its estimate above the
        /// threshold; "not worse" has its upper end below the threshold;
        /// the gate never calls worse what the comparison calls the same
        /// or faster, nor not worse what it calls slower.
        #[test]
        fn verdicts_agree_with_their_intervals(
            est in -60.0f64..150.0,
            se in 0.0f64..0.5,
            df in 1.0f64..200.0,
            threshold in 0.01f64..0.5,
        ) {
            let c = ch(est, se, df);
            let g = gate(c, threshold, 0.05);
            let k = compare(c, threshold, 0.05);
            let t = threshold * 100.0;
            match g.verdict {
                GateWord::Worse => {
                    prop_assert!(g.interval.lo_pct > 0.0 && g.interval.est_pct > t - 1e-9);
                    prop_assert_eq!(k.verdict, CompareWord::Slower);
                }
                GateWord::NotWorse => {
                    prop_assert!(g.interval.hi_pct < t + 1e-9);
                    prop_assert!(k.verdict != CompareWord::Slower);
                }
                GateWord::CannotTell => {
                    prop_assert!(g.smallest_threshold_pct >= t - 1e-9);
                }
            }
            if k.verdict == CompareWord::Same {
                prop_assert!(g.verdict == GateWord::NotWorse);
            }
        }

        /// A narrower interval never turns "not worse" into "cannot tell".
        #[test]
        fn more_runs_only_help(est in -20.0f64..8.0, se in 0.001f64..0.2) {
            let wide = gate(ch(est, se, 20.0), 0.10, 0.05);
            let narrow = gate(ch(est, se / 2.0, 20.0), 0.10, 0.05);
            if wide.verdict == GateWord::NotWorse {
                prop_assert_eq!(narrow.verdict, GateWord::NotWorse);
            }
        }
    }
}
