//! The run rules of docs/method.md: Student-t confidence intervals of the mean and
//! the stopping decision built on their *full* width, as in the seed paper.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// When to stop repeating trials of one case. The rule never looks at other
/// cases or systems: re-running until a difference looks significant is
/// forbidden (docs/method.md).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StopRule {
    /// Maximum full CI width as a percentage of the mean.
    pub width_pct: f64,
    /// Confidence level in percent.
    pub confidence_pct: f64,
    pub min_trials: usize,
    pub max_trials: usize,
    /// Seconds of trial wall time (warm-up included) a case may take before
    /// it stops unconverged. Noise on a shared machine comes in spells of a
    /// few hundred milliseconds to seconds (docs/method.md, "trials and
    /// budgets"): many short trials spread over a budget sample more spells
    /// than a few long ones, so the budget, not a trial count, bounds a case.
    #[serde(default)]
    pub case_budget_s: Option<f64>,
    /// What a case's result and interval are (docs/method.md, "Host spells
    /// and the estimator"). Runs stored before there was a choice read as
    /// [`Estimator::Mean`], the rule they were measured under.
    #[serde(default)]
    pub estimator: Estimator,
    /// Seconds a case's counted trials must span, first start to last
    /// trial's end, before it may stop converged (fewer trials than the
    /// maximum). A host that moves its guest between speeds in phases of
    /// seconds lets a few back-to-back trials agree inside one phase: their
    /// interval is narrow and their run's figure off by the phases' gap, and
    /// one such run is all a gate's baseline may be (docs/verdicts.md, "One
    /// run's spread"). Runs stored before the floor read as none.
    #[serde(default)]
    pub min_span_s: Option<f64>,
}

impl StopRule {
    pub const DEFAULT: StopRule = StopRule {
        width_pct: 5.0,
        confidence_pct: 95.0,
        min_trials: 3,
        max_trials: 30,
        case_budget_s: None,
        estimator: Estimator::Trimmed,
        min_span_s: Some(10.0),
    };
    /// `--quick`: used with 0.05 s trials, so a case that is still noisy at
    /// 5 s has had 30–100 trials (docs/method.md, "trials and budgets").
    pub const QUICK: StopRule = StopRule {
        width_pct: 10.0,
        confidence_pct: 95.0,
        min_trials: 3,
        max_trials: 100,
        case_budget_s: Some(5.0),
        estimator: Estimator::Trimmed,
        min_span_s: None,
    };

    /// Counted trials a case has before the budget planner may judge, from
    /// its spread, that it cannot converge: the rule's minimum and, under
    /// the trimmed estimator, the five at which it first sets a trial aside
    /// at each end. Before that one window a host spell wrecked sets the
    /// spread: a study stopped `fileserver` after two trials a spread of
    /// about 100 % apart, which a third to fifth trial would have trimmed.
    pub fn judged_after(&self) -> usize {
        let robust = match self.estimator {
            Estimator::Mean => 0,
            Estimator::Trimmed => Trimmed::FIRST_TRIMMED,
        };
        self.min_trials.max(robust).min(self.max_trials.max(1))
    }

    /// Parses `W@C`, e.g. `5@95`.
    pub fn parse_ci(s: &str) -> Option<(f64, f64)> {
        let (w, c) = s.split_once('@')?;
        let w: f64 = w.trim().trim_end_matches('%').parse().ok()?;
        let c: f64 = c.trim().trim_end_matches('%').parse().ok()?;
        (w > 0.0 && w.is_finite() && c > 0.0 && c < 100.0).then_some((w, c))
    }

    /// Is the CI of these counted values narrow enough?
    pub fn is_converged(&self, values: &[f64]) -> bool {
        values.len() >= 2 && self.summary(values).width_pct() <= self.width_pct
    }

    /// The result and interval of these counted values under the rule's
    /// estimator.
    pub fn summary(&self, values: &[f64]) -> Summary {
        Summary::by(self.estimator, values, self.confidence_pct)
    }

    /// Whether a case goes on, given its counted values and the trial wall
    /// time it has spent so far.
    pub fn decide(&self, values: &[f64], spent_s: f64) -> Decision {
        let n = values.len();
        if n < self.min_trials {
            return Decision::Continue;
        }
        if self.is_converged(values) {
            Decision::Converged
        } else if n >= self.max_trials
            || self.budget(n, spent_s).is_some_and(|b| spent_s >= b)
            || self.futile(values, spent_s)
        {
            Decision::NotConverged
        } else {
            Decision::Continue
        }
    }
}

impl StopRule {
    /// Trials before a case may be judged futile: fewer say too little about
    /// its spread.
    const FUTILITY_MIN_TRIALS: usize = 8;
    /// Counted trials a budget always allows, whatever one costs: a
    /// fixed-duration trial (a macro workload's window, a timed loop) can
    /// outlast the whole budget, and such a case still gets the five the
    /// quick rule gave every case before budgets.
    const BUDGET_MIN_TRIALS: f64 = 5.0;

    /// The case's budget in seconds after `n` counted trials (and the
    /// warm-up) that took `spent_s`: the configured budget, or the warm-up
    /// and [`Self::BUDGET_MIN_TRIALS`] trials at this case's pace if that is
    /// more.
    fn budget(&self, n: usize, spent_s: f64) -> Option<f64> {
        let per_trial = spent_s / (n + 1) as f64;
        self.case_budget_s
            .map(|b| b.max((Self::BUDGET_MIN_TRIALS + 1.0) * per_trial))
    }

    /// Whether a budgeted case cannot plausibly converge in what is left of
    /// its budget: the trials its spread so far needs (normal quantile, so
    /// the count is not inflated by small-n t values) are more than twice
    /// the trials it has plus those the rest of its budget buys at its cost
    /// per trial so far. A cross-CPU case whose trials spread by 80 % needs
    /// about a thousand trials at 10 %; stopping it after eight leaves its
    /// budget's worth of time to the run instead of spending it for nothing.
    fn futile(&self, values: &[f64], spent_s: f64) -> bool {
        let n = values.len();
        let Some(budget) = self.budget(n, spent_s) else {
            return false;
        };
        if n < Self::FUTILITY_MIN_TRIALS || spent_s <= 0.0 {
            return false;
        }
        let s = self.summary(values);
        if s.mean == 0.0 {
            return false;
        }
        // The spread the estimator's interval sees: for the trimmed mean the
        // winsorized one, scaled by what trimming costs (÷ (1 − 2·0.2)).
        let cv = s.se_sqrt_n() / s.mean.abs();
        let z = t_quantile(self.confidence_pct, 1e6);
        let needed = (2.0 * z * cv / (self.width_pct / 100.0)).powi(2);
        // The warm-up is one of the trials that spent the time.
        let per_trial = spent_s / (n + 1) as f64;
        let affordable = ((budget - spent_s).max(0.0) / per_trial).floor();
        needed > 2.0 * (n as f64 + affordable)
    }
}

/// What a case's result is, and so what its interval and its comparisons
/// are built on (docs/method.md, "Host spells and the estimator").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Estimator {
    /// The mean with its Student-t interval: the seeds' rule, and the rule
    /// of every run stored before the choice existed.
    #[default]
    Mean,
    /// The 20 % trimmed mean with the Tukey–McLaughlin (Yuen) interval: one
    /// trial in five at either end may be wrecked by a host spell without
    /// moving the result or blowing up its interval.
    Trimmed,
}

impl Estimator {
    /// The name stored with a run and accepted by `--estimator`.
    pub fn as_str(self) -> &'static str {
        match self {
            Estimator::Mean => "mean",
            Estimator::Trimmed => "trimmed",
        }
    }

    pub fn parse(s: &str) -> Option<Estimator> {
        match s {
            "mean" => Some(Estimator::Mean),
            "trimmed" => Some(Estimator::Trimmed),
            _ => None,
        }
    }

    /// How tables name it.
    pub fn describe(self) -> &'static str {
        match self {
            Estimator::Mean => "mean of the trials, Student-t interval",
            Estimator::Trimmed => {
                "20% trimmed mean of the trials, Tukey–McLaughlin (Yuen) interval"
            }
        }
    }

    /// The estimate, its standard error and the degrees of freedom of its
    /// t statistic; `None` below two values.
    pub fn estimate(self, values: &[f64]) -> Option<Estimate> {
        if values.len() < 2 {
            return None;
        }
        match self {
            Estimator::Trimmed => {
                if let Some(t) = Trimmed::of(values) {
                    return Some(Estimate {
                        center: t.center,
                        se: t.se,
                        df: t.df(),
                    });
                }
            }
            Estimator::Mean => {}
        }
        let s = Summary::of(values, 95.0);
        Some(Estimate {
            center: s.mean,
            se: s.sd / (values.len() as f64).sqrt(),
            df: (values.len() - 1) as f64,
        })
    }
}

/// A location estimate with the standard error and degrees of freedom of
/// its t statistic.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub center: f64,
    pub se: f64,
    pub df: f64,
}

/// A 20 % trimmed mean and its Tukey–McLaughlin standard error.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Trimmed {
    center: f64,
    /// Winsorized standard deviation (n − 1).
    sd_w: f64,
    se: f64,
    /// Values kept.
    h: usize,
}

impl Trimmed {
    const GAMMA: f64 = 0.2;
    /// The fewest values of which one is trimmed at each end: ⌊0.2·5⌋ = 1.
    const FIRST_TRIMMED: usize = 5;

    /// Values trimmed from each end of `n`: ⌊0.2·n⌋.
    fn trimmed_each_side(n: usize) -> usize {
        (Self::GAMMA * n as f64 + 1e-9).floor() as usize
    }

    /// `None` when nothing would be trimmed (fewer than five values) or a
    /// value is NaN.
    fn of(values: &[f64]) -> Option<Trimmed> {
        let n = values.len();
        let g = Self::trimmed_each_side(n);
        if g == 0 || values.iter().any(|v| v.is_nan()) {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let h = n - 2 * g;
        let center = v[g..n - g].iter().sum::<f64>() / h as f64;
        let (lo, hi) = (v[g], v[n - g - 1]);
        let w: Vec<f64> = v.iter().map(|x| x.clamp(lo, hi)).collect();
        let wm = w.iter().sum::<f64>() / n as f64;
        let var_w = w.iter().map(|x| (x - wm).powi(2)).sum::<f64>() / (n - 1) as f64;
        let se = ((n - 1) as f64 * var_w / (h * (h - 1)) as f64).sqrt();
        Some(Trimmed {
            center,
            sd_w: var_w.sqrt(),
            se,
            h,
        })
    }

    fn df(&self) -> f64 {
        (self.h - 1) as f64
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Decision {
    Continue,
    Converged,
    NotConverged,
}

/// Mean and confidence interval of a sample.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1).
    pub sd: f64,
    pub ci_low: f64,
    pub ci_high: f64,
}

impl Summary {
    pub fn of(values: &[f64], confidence_pct: f64) -> Summary {
        let n = values.len();
        if n == 0 {
            return Summary {
                n,
                mean: f64::NAN,
                sd: f64::NAN,
                ci_low: f64::NAN,
                ci_high: f64::NAN,
            };
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        if n == 1 {
            return Summary {
                n,
                mean,
                sd: f64::NAN,
                ci_low: f64::NEG_INFINITY,
                ci_high: f64::INFINITY,
            };
        }
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let sd = var.sqrt();
        let half = t_quantile(confidence_pct, (n - 1) as f64) * sd / (n as f64).sqrt();
        Summary {
            n,
            mean,
            sd,
            ci_low: mean - half,
            ci_high: mean + half,
        }
    }

    /// The summary under an estimator.
    pub fn by(estimator: Estimator, values: &[f64], confidence_pct: f64) -> Summary {
        match estimator {
            Estimator::Mean => Summary::of(values, confidence_pct),
            Estimator::Trimmed => Summary::trimmed(values, confidence_pct),
        }
    }

    /// The 20 % trimmed mean with the Tukey–McLaughlin interval: the mean
    /// of the middle 60 % of the values, and a Student-t interval with
    /// h − 1 degrees of freedom (h values kept) on the winsorized variance.
    /// `sd` is the winsorized standard deviation. Below five values nothing
    /// is trimmed and this is [`Summary::of`].
    pub fn trimmed(values: &[f64], confidence_pct: f64) -> Summary {
        let Some(t) = Trimmed::of(values) else {
            return Summary::of(values, confidence_pct);
        };
        let half = t_quantile(confidence_pct, t.df()) * t.se;
        Summary {
            n: values.len(),
            mean: t.center,
            sd: t.sd_w,
            ci_low: t.center - half,
            ci_high: t.center + half,
        }
    }

    /// The standard deviation that, in the mean's formula, gives this
    /// estimator's standard error (se · √n): the sd for the mean; for the
    /// trimmed mean the winsorized sd scaled up by what trimming costs.
    fn se_sqrt_n(&self) -> f64 {
        let g = Trimmed::trimmed_each_side(self.n);
        if g == 0 {
            return self.sd;
        }
        let (n, h) = (self.n as f64, (self.n - 2 * g) as f64);
        self.sd * (n * (n - 1.0) / (h * (h - 1.0))).sqrt()
    }

    /// The median, as the result of a median-of-N run rule; its "interval"
    /// is the range of the values, since a median of three has no useful
    /// Student-t interval.
    pub fn median_of(values: &[f64]) -> Summary {
        let n = values.len();
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return Summary::of(&[], 95.0);
        }
        v.sort_by(f64::total_cmp);
        let m = v.len();
        let median = median_sorted(&v);
        let of = Summary::of(values, 95.0);
        Summary {
            n,
            mean: median,
            sd: of.sd,
            ci_low: v[0],
            ci_high: v[m - 1],
        }
    }

    pub fn half_width(&self) -> f64 {
        (self.ci_high - self.ci_low) / 2.0
    }

    /// Full CI width as a percentage of the mean's magnitude.
    pub fn width_pct(&self) -> f64 {
        let w = self.ci_high - self.ci_low;
        if w == 0.0 {
            return 0.0;
        }
        if self.mean == 0.0 || !w.is_finite() {
            return f64::INFINITY;
        }
        100.0 * w / self.mean.abs()
    }
}

/// The median of a sample (the mean of the middle two for an even count);
/// NaN for an empty one. Every median kscale reports is this one, so that a
/// workload's in-trial estimator and a run rule's median agree.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    median_sorted(&v)
}

fn median_sorted(v: &[f64]) -> f64 {
    let m = v.len();
    match m {
        0 => f64::NAN,
        _ if m % 2 == 1 => v[m / 2],
        _ => (v[m / 2 - 1] + v[m / 2]) / 2.0,
    }
}

/// Two-sided Student-t quantile for a confidence level in percent.
///
/// Remembered per thread: a budgeted run plans again after every trial,
/// asking for the same few quantiles for each of a hundred cases, and
/// statrs inverts the t distribution by iteration (some 12 ms a planning
/// of 124 cases before this was kept, ~1,000 plannings a study).
pub fn t_quantile(confidence_pct: f64, df: f64) -> f64 {
    use std::cell::RefCell;
    use std::collections::HashMap;
    thread_local! {
        static SEEN: RefCell<HashMap<(u64, u64), f64>> = RefCell::new(HashMap::new());
    }
    let key = (confidence_pct.to_bits(), df.to_bits());
    if let Some(t) = SEEN.with(|s| s.borrow().get(&key).copied()) {
        return t;
    }
    let p = 1.0 - (1.0 - confidence_pct / 100.0) / 2.0;
    let t = match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.inverse_cdf(p),
        Err(_) => f64::INFINITY,
    };
    SEEN.with(|s| {
        let mut s = s.borrow_mut();
        // Bounded: fractional degrees of freedom could otherwise pile up.
        if s.len() > 100_000 {
            s.clear();
        }
        s.insert(key, t);
    });
    t
}

/// Welch's unequal-variance t-test (two-sided), which comparisons use to mark
/// a ratio as not significant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Welch {
    pub t: f64,
    pub df: f64,
    pub p: f64,
}

impl Welch {
    /// `None` when either sample has fewer than two values.
    pub fn test(a: &[f64], b: &[f64]) -> Option<Welch> {
        if a.len() < 2 || b.len() < 2 {
            return None;
        }
        let (sa, sb) = (Summary::of(a, 95.0), Summary::of(b, 95.0));
        let (va, vb) = (
            sa.sd.powi(2) / a.len() as f64,
            sb.sd.powi(2) / b.len() as f64,
        );
        let diff = sa.mean - sb.mean;
        if va + vb == 0.0 {
            // No spread at all: the samples either agree exactly or differ for certain.
            let p = if diff == 0.0 { 1.0 } else { 0.0 };
            return Some(Welch {
                t: if diff == 0.0 {
                    0.0
                } else {
                    diff.signum() * f64::INFINITY
                },
                df: f64::NAN,
                p,
            });
        }
        let t = diff / (va + vb).sqrt();
        let df = (va + vb).powi(2)
            / (va.powi(2) / (a.len() - 1) as f64 + vb.powi(2) / (b.len() - 1) as f64);
        let p = match StudentsT::new(0.0, 1.0, df) {
            Ok(dist) => 2.0 * (1.0 - dist.cdf(t.abs())),
            Err(_) => f64::NAN,
        };
        Some(Welch {
            t,
            df,
            p: p.clamp(0.0, 1.0),
        })
    }

    pub fn significant(&self, alpha: f64) -> bool {
        self.p < alpha
    }
}

/// Geometric mean of positive values; `None` when any value is not positive.
pub fn geomean(values: &[f64]) -> Option<f64> {
    if values.is_empty()
        || values
            .iter()
            .any(|v| v.is_nan() || *v <= 0.0 || !v.is_finite())
    {
        return None;
    }
    Some((values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp())
}

/// Trials whose figures follow something of the host's rather than the
/// kernel's. On a virtual machine the host runs other work on the vCPUs in
/// spells (steal time) and moves the vCPUs between its cores (the
/// measured round trip of a cache line between two of them);
/// a trial slowed by either is slower for reasons outside the kernel under
/// test. Tables name such cases, so a NOT CONVERGED mark can be read as the
/// host's and not the workload's (docs/host.md, "Steal time" and "vCPU
/// placement").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Follows {
    /// Lowest and highest value of the host's measure over the trials.
    pub low: f64,
    pub high: f64,
    /// Pearson correlation of the trials' figures with it.
    pub r: f64,
}

impl Follows {
    /// At least this many trials with the measure, as many as the
    /// correlation needs to mean something.
    pub const MIN_TRIALS: usize = 5;
    /// Steal time that moves less than this (percentage points) between
    /// trials cannot explain a spread.
    pub const MIN_STEAL_RANGE_PCT: f64 = 5.0;
    /// A line round trip whose slowest trial is less than this many times
    /// its fastest: the vCPUs stayed where they were.
    pub const MIN_LINE_RATIO: f64 = 1.5;
    /// The figures must follow it at least this closely, either way (a
    /// latency rises with steal, a throughput falls).
    pub const MIN_ABS_R: f64 = 0.5;
    /// Others' share of the trial's CPUs that moves less than this
    /// (percentage points) between trials cannot explain a spread.
    pub const MIN_OTHERS_RANGE_PCT: f64 = 5.0;

    /// The share of the trial's CPUs that other tasks ran, `others_pct[i]`
    /// over trial `i` (a noisy neighbour, another program).
    pub fn others(others_pct: &[f64], values: &[f64]) -> Option<Follows> {
        Self::of(others_pct, values, |low, high| {
            crate::hostfit::HostMeasure::Others.moved(low, high)
        })
    }

    /// The hypervisor's steal time, `steal_pct[i]` of trial `i`.
    pub fn steal(steal_pct: &[f64], values: &[f64]) -> Option<Follows> {
        Self::of(steal_pct, values, |low, high| {
            crate::hostfit::HostMeasure::Steal.moved(low, high)
        })
    }

    /// The round trip of a cache line between two of the trial's CPUs,
    /// `line_ns[i]` around trial `i`.
    pub fn line(line_ns: &[f64], values: &[f64]) -> Option<Follows> {
        Self::of(line_ns, values, |low, high| {
            crate::hostfit::HostMeasure::Line.moved(low, high)
        })
    }

    /// `follows` ([`Follows::steal`], [`Follows::line`] or
    /// [`Follows::others`]) over the trials
    /// that recorded the measure: `trials[i]` is trial `i`'s figure and
    /// its measure (`None` or NaN where it has none). The runner asks it
    /// of a case left out after its pilot and the tables of a NOT
    /// CONVERGED case, so both pair the trials alike.
    pub fn over(
        trials: impl IntoIterator<Item = (f64, Option<f64>)>,
        follows: fn(&[f64], &[f64]) -> Option<Follows>,
    ) -> Option<Follows> {
        let (x, values): (Vec<f64>, Vec<f64>) = trials
            .into_iter()
            .filter_map(|(v, m)| Some((m.filter(|m| m.is_finite())?, v)))
            .unzip();
        follows(&x, &values)
    }

    fn of(x: &[f64], values: &[f64], moved: impl Fn(f64, f64) -> bool) -> Option<Follows> {
        if x.len() != values.len() || values.len() < Self::MIN_TRIALS {
            return None;
        }
        let low = x.iter().copied().fold(f64::INFINITY, f64::min);
        let high = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !(high - low).is_finite() || !moved(low, high) {
            return None;
        }
        let r = pearson(x, values)?;
        (r.abs() >= Self::MIN_ABS_R).then_some(Follows { low, high, r })
    }
}

/// Pearson's correlation coefficient; `None` when either side is constant
/// or not finite.
pub(crate) fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    use statrs::statistics::Statistics;
    let r = x.iter().covariance(y.iter()) / (x.iter().std_dev() * y.iter().std_dev());
    r.is_finite().then_some(r.clamp(-1.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_link_needs_a_range_a_correlation_and_five_trials() {
        // The chat trials of docs/method.md: throughput falls as steal rises.
        let steal = [
            17.6, 20.9, 14.1, 15.2, 10.6, 22.2, 18.2, 3.9, 1.1, 0.7, 0.7, 0.0,
        ];
        let msgs = [
            76.8, 71.6, 83.7, 82.2, 89.3, 67.1, 77.4, 90.7, 90.6, 128.2, 122.8, 124.2,
        ];
        let l = Follows::steal(&steal, &msgs).unwrap();
        assert!(l.r < -0.8, "{l:?}");
        assert_eq!((l.low, l.high), (0.0, 22.2));
        // A latency rises with it: the same link, positive.
        let lat: Vec<f64> = msgs.iter().map(|m| 1.0 / m).collect();
        assert!(Follows::steal(&steal, &lat).unwrap().r > 0.8);
        // Steal that barely moves explains nothing.
        let flat: Vec<f64> = steal.iter().map(|s| 1.0 + s / 10.0).collect();
        assert_eq!(Follows::steal(&flat, &msgs), None);
        // Figures that do not follow it.
        let noise = [1.0, 3.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0, 2.0, 1.0, 3.0, 2.0];
        assert_eq!(Follows::steal(&steal, &noise), None);
        // Too few trials, or mismatched lengths.
        assert_eq!(Follows::steal(&steal[..4], &msgs[..4]), None);
        assert_eq!(Follows::steal(&steal, &msgs[..5]), None);
    }

    #[test]
    fn line_link_needs_the_vcpus_to_have_moved() {
        // The TCP ping-pong of docs/method.md: fewer round trips/s while a
        // line takes 400 ns to cross than while it takes 90.
        let line = [95.0, 430.0, 88.0, 470.0, 101.0, 415.0, 92.0, 440.0];
        let tps = [48.0, 33.0, 51.0, 31.0, 47.0, 35.0, 49.0, 30.0];
        let l = Follows::line(&line, &tps).unwrap();
        assert!(l.r < -0.9, "{l:?}");
        assert_eq!((l.low, l.high), (88.0, 470.0));
        // The vCPUs stayed put (within 1.5×): nothing to name.
        let steady: Vec<f64> = line.iter().map(|x| 400.0 + x / 10.0).collect();
        assert_eq!(Follows::line(&steady, &tps), None);
        // No probe figure (0) cannot anchor a ratio.
        let zero = [0.0, 430.0, 88.0, 470.0, 101.0, 415.0, 92.0, 440.0];
        assert_eq!(Follows::line(&zero, &tps), None);
    }

    #[test]
    fn over_pairs_only_the_trials_that_recorded_the_measure() {
        let line = [95.0, 430.0, 88.0, 470.0, 101.0, 415.0];
        let tps = [48.0, 33.0, 51.0, 31.0, 47.0, 35.0];
        let direct = Follows::line(&line, &tps);
        assert!(direct.is_some());
        // Two trials without a probe figure (one None, one NaN) are left
        // out, not paired with the next trial's figure.
        let mut trials: Vec<(f64, Option<f64>)> =
            tps.iter().zip(line).map(|(v, l)| (*v, Some(l))).collect();
        trials.insert(2, (5.0, None));
        trials.insert(4, (900.0, Some(f64::NAN)));
        assert_eq!(Follows::over(trials.clone(), Follows::line), direct);
        // Fewer than five with the measure: nothing to name.
        trials.truncate(5);
        assert_eq!(Follows::over(trials, Follows::line), None);
    }

    #[test]
    fn median_takes_the_middle_or_the_mean_of_two() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
    use proptest::prelude::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-12)
    }

    #[test]
    fn t_quantiles_match_tables() {
        // Standard two-sided 95 % table values.
        assert!(close(t_quantile(95.0, 1.0), 12.706, 1e-3));
        assert!(close(t_quantile(95.0, 2.0), 4.303, 1e-3));
        assert!(close(t_quantile(95.0, 4.0), 2.776, 1e-3));
        assert!(close(t_quantile(95.0, 29.0), 2.045, 1e-3));
        assert!(close(t_quantile(99.0, 9.0), 3.250, 1e-3));
    }

    #[test]
    fn ci_by_hand() {
        // mean 10, sd 1 (values 9,10,11), n=3: half = 4.303 * 1/sqrt(3) = 2.484
        let s = Summary::of(&[9.0, 10.0, 11.0], 95.0);
        assert_eq!(s.n, 3);
        assert!(close(s.mean, 10.0, 1e-12));
        assert!(close(s.sd, 1.0, 1e-12));
        assert!(close(s.half_width(), 2.4843, 1e-3));
        assert!(close(s.width_pct(), 49.69, 1e-3));
    }

    #[test]
    fn stopping_decisions() {
        let r = StopRule::DEFAULT;
        // Too few trials: always continue, even if identical.
        assert_eq!(r.decide(&[1.0, 1.0], 0.0), Decision::Continue);
        // Tight: converged at the minimum.
        assert_eq!(r.decide(&[100.0, 100.5, 99.8], 0.0), Decision::Converged);
        // Wide but below max: continue.
        assert_eq!(r.decide(&[50.0, 150.0, 100.0], 0.0), Decision::Continue);
        // Wide at the maximum: not converged.
        let wide: Vec<f64> = (0..30)
            .map(|i| if i % 2 == 0 { 50.0 } else { 150.0 })
            .collect();
        assert_eq!(r.decide(&wide, 0.0), Decision::NotConverged);
        // Quick: wide at 5 → not converged.
        assert_eq!(
            StopRule::QUICK.decide(&[1.0, 2.0, 1.0, 2.0, 1.0], 5.0),
            Decision::NotConverged
        );
    }

    #[test]
    fn the_budget_stops_a_noisy_case_and_spares_a_steady_one() {
        let q = StopRule::QUICK;
        let wide = [1.0, 2.0, 1.0, 2.0, 1.0];
        assert_eq!(q.decide(&wide, 3.4), Decision::Continue);
        assert_eq!(q.decide(&wide, 5.0), Decision::NotConverged);
        // Below the minimum the budget does not end a case: a CI needs trials.
        assert_eq!(q.decide(&[1.0, 2.0], 50.0), Decision::Continue);
        // A converged case is converged whatever it spent.
        assert_eq!(q.decide(&[1.0, 1.0, 1.0], 50.0), Decision::Converged);
        // No budget: only the trial count ends it.
        assert_eq!(StopRule::DEFAULT.decide(&wide, 1e9), Decision::Continue);
        // Trials of 3 s each (a macro window): five counted trials whatever
        // the budget, then it ends.
        assert_eq!(q.decide(&[1.0, 2.0, 1.0], 12.0), Decision::Continue);
        assert_eq!(q.decide(&[1.0, 2.0, 1.0, 2.0], 15.0), Decision::Continue);
        assert_eq!(q.decide(&wide, 18.0), Decision::NotConverged);
    }

    #[test]
    fn a_hopeless_case_stops_early_and_a_slow_one_goes_on() {
        let q = StopRule::QUICK;
        // Eight trials spread by ±60 % after 0.5 s: about a thousand needed,
        // about eighty affordable.
        let hopeless = [0.4, 1.6, 0.4, 1.6, 0.4, 1.6, 0.4, 1.6];
        assert_eq!(q.decide(&hopeless, 0.5), Decision::NotConverged);
        // Seven of them: too few to judge.
        assert_eq!(q.decide(&hopeless[..7], 0.5), Decision::Continue);
        // Spread by ±13 %: about 30 needed at this pace, so it goes on.
        let slow = [0.87, 1.13, 0.87, 1.13, 0.87, 1.13, 0.87, 1.13];
        assert_eq!(q.decide(&slow, 0.5), Decision::Continue);
        // The same spread with its budget nearly spent: futile.
        assert_eq!(q.decide(&slow, 3.3), Decision::NotConverged);
        // Without a budget nothing is judged futile.
        assert_eq!(StopRule::DEFAULT.decide(&hopeless, 0.5), Decision::Continue);
    }

    #[test]
    fn width_is_full_width() {
        // 5 % full width means ±2.5 %: half width 2.4 % of the mean converges,
        // half width 2.6 % does not.
        let rule = StopRule {
            width_pct: 5.0,
            confidence_pct: 95.0,
            min_trials: 3,
            max_trials: 30,
            case_budget_s: None,
            estimator: Estimator::Mean,
            min_span_s: None,
        };
        let mk = |half_pct: f64| {
            // three values m-d, m, m+d: half = 4.303*d/sqrt(3)
            let d = half_pct / 100.0 * 100.0 * 3f64.sqrt() / t_quantile(95.0, 2.0);
            vec![100.0 - d, 100.0, 100.0 + d]
        };
        assert!(rule.is_converged(&mk(2.4)));
        assert!(!rule.is_converged(&mk(2.6)));
    }

    #[test]
    fn parse_ci() {
        assert_eq!(StopRule::parse_ci("5@95"), Some((5.0, 95.0)));
        assert_eq!(StopRule::parse_ci("2.5%@99%"), Some((2.5, 99.0)));
        assert_eq!(StopRule::parse_ci("5"), None);
        assert_eq!(StopRule::parse_ci("5@100"), None);
        assert_eq!(StopRule::parse_ci("0@95"), None);
    }

    #[test]
    fn geomeans() {
        assert!(close(geomean(&[1.0, 4.0]).unwrap(), 2.0, 1e-12));
        assert_eq!(geomean(&[1.0, 0.0]), None);
        assert_eq!(geomean(&[]), None);
    }

    #[test]
    fn welch_by_hand() {
        // a: mean 3, var 2.5; b: mean 4.6, var 7.3 → se² = 1.96, t = -1.6/1.4.
        let w = Welch::test(&[1.0, 2.0, 3.0, 4.0, 5.0], &[2.0, 3.0, 4.0, 5.0, 9.0]).unwrap();
        assert!(close(w.t, -1.142857, 1e-5), "{w:?}");
        assert!(close(w.df, 6.4521, 1e-3), "{w:?}");
        assert!(w.p > 0.25 && w.p < 0.35 && !w.significant(0.05), "{w:?}");
        let w = Welch::test(&[10.1, 10.3, 9.9, 10.2], &[11.0, 11.2, 10.9, 11.1, 11.3]).unwrap();
        assert!(w.significant(0.05) && w.p < 1e-4, "{w:?}");
        assert_eq!(Welch::test(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(Welch::test(&[2.0, 2.0], &[2.0, 2.0]).unwrap().p, 1.0);
        assert_eq!(Welch::test(&[2.0, 2.0], &[3.0, 3.0]).unwrap().p, 0.0);
    }

    proptest! {
        #[test]
        fn steal_link_r_is_a_correlation(v in prop::collection::vec((0.0f64..100.0, 0.001f64..1e6), 0..30)) {
            let (s, x): (Vec<f64>, Vec<f64>) = v.into_iter().unzip();
            if let Some(l) = Follows::steal(&s, &x) {
                prop_assert!((-1.0..=1.0).contains(&l.r));
                prop_assert!(l.r.abs() >= Follows::MIN_ABS_R);
                prop_assert!(l.high - l.low >= Follows::MIN_STEAL_RANGE_PCT);
                prop_assert!(s.len() >= Follows::MIN_TRIALS);
            }
        }

        #[test]
        fn welch_is_symmetric(a in prop::collection::vec(1.0f64..100.0, 2..20), b in prop::collection::vec(1.0f64..100.0, 2..20)) {
            let x = Welch::test(&a, &b).unwrap();
            let y = Welch::test(&b, &a).unwrap();
            prop_assert!((x.p - y.p).abs() < 1e-9);
            prop_assert!((x.t + y.t).abs() < 1e-9);
            prop_assert!((0.0..=1.0).contains(&x.p));
        }

        #[test]
        fn ci_contains_mean_and_is_ordered(v in prop::collection::vec(0.001f64..1e6, 2..40)) {
            let s = Summary::of(&v, 95.0);
            prop_assert!(s.ci_low <= s.mean && s.mean <= s.ci_high);
            let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
            let max = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            prop_assert!(s.mean >= min * (1.0 - 1e-12) && s.mean <= max * (1.0 + 1e-12));
        }

        #[test]
        fn higher_confidence_is_wider(v in prop::collection::vec(0.001f64..1e6, 2..40)) {
            let a = Summary::of(&v, 90.0);
            let b = Summary::of(&v, 99.0);
            prop_assert!(b.half_width() >= a.half_width());
        }

        #[test]
        fn scaling_values_keeps_relative_width(v in prop::collection::vec(1.0f64..1e3, 3..20), k in 0.01f64..100.0) {
            let a = Summary::of(&v, 95.0).width_pct();
            let scaled: Vec<f64> = v.iter().map(|x| x * k).collect();
            let b = Summary::of(&scaled, 95.0).width_pct();
            prop_assert!((a - b).abs() <= 1e-6 * a.max(1.0));
        }

        #[test]
        fn decision_respects_bounds(v in prop::collection::vec(0.001f64..1e6, 0..40)) {
            let r = StopRule::DEFAULT;
            match r.decide(&v, 0.0) {
                Decision::Continue => prop_assert!(v.len() < r.max_trials),
                Decision::Converged => prop_assert!(v.len() >= r.min_trials),
                Decision::NotConverged => prop_assert!(v.len() >= r.max_trials),
            }
        }
    }
}
