//! Two samples of trials, a baseline and another: which test decides
//! whether they differ, and the smallest change the comparison could have
//! seen (docs/method.md, "Comparing two cases").

use crate::stats::{Estimate, Estimator};
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Two-sided significance level of every comparison.
pub const ALPHA: f64 = 0.05;
/// Power the minimum detectable change is computed for.
pub const POWER: f64 = 0.8;

/// The test a comparison used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Test {
    /// Welch's unequal-variance t-test on the means.
    Welch,
    /// Yuen's test: Welch's t on the 20 % trimmed means and their
    /// winsorized standard errors.
    Yuen,
    /// Wilcoxon–Mann–Whitney rank-sum test.
    RankSum,
}

impl Test {
    /// The test for these samples under this estimator: a t-test on the
    /// estimator when both samples look normal, the rank-sum test when
    /// either is skewed or has an outlier ([`looks_normal`]).
    pub fn choose(a: &[f64], b: &[f64], estimator: Estimator) -> Test {
        if !looks_normal(a) || !looks_normal(b) {
            Test::RankSum
        } else {
            match estimator {
                Estimator::Mean => Test::Welch,
                Estimator::Trimmed => Test::Yuen,
            }
        }
    }

    /// Short name for a table cell or legend.
    pub fn name(self) -> &'static str {
        match self {
            Test::Welch => "Welch t",
            Test::Yuen => "Yuen t",
            Test::RankSum => "rank-sum",
        }
    }
}

/// A modified z-score (Iglewicz and Hoaglin) above this marks an outlier.
/// Stricter than their 3.5, because the median absolute deviation of a
/// handful of trials is itself noisy: on normal samples of 5–12, 3.5 flags
/// 12–20 % of them and 5 flags 3–11 %, while a trial a host spell slowed
/// to a fraction of the others is tens of deviations out.
pub const OUTLIER_Z: f64 = 5.0;
/// Adjusted sample skewness beyond this (either way) marks a skewed sample.
pub const MAX_SKEW: f64 = 1.5;
/// Values needed before skewness is read at all: fewer say nothing of it.
pub const SKEW_MIN_N: usize = 8;

/// Whether a sample looks normal enough for a t-test: no value lies more
/// than [`OUTLIER_Z`] robust standard deviations (1.4826 × the median
/// absolute deviation) from the median, and, from [`SKEW_MIN_N`] values,
/// the adjusted skewness is within ±[`MAX_SKEW`]. The outlier half catches
/// the trial a host spell wrecked, which a t-test's variance would absorb;
/// the skewness half catches the long tail of a latency that queues.
pub fn looks_normal(values: &[f64]) -> bool {
    let n = values.len();
    if n < 3 || values.iter().any(|v| !v.is_finite()) {
        return true;
    }
    let med = crate::stats::median(values);
    let dev: Vec<f64> = values.iter().map(|v| (v - med).abs()).collect();
    let mad = crate::stats::median(&dev);
    if mad > 0.0 {
        if dev.iter().any(|d| d / (1.4826 * mad) > OUTLIER_Z) {
            return false;
        }
    } else if dev.iter().any(|d| *d > 0.0) {
        // Most values equal and one not: nothing normal about it.
        return false;
    }
    n < SKEW_MIN_N || skewness(values).is_none_or(|g| g.abs() <= MAX_SKEW)
}

/// Adjusted Fisher–Pearson skewness G1; `None` below three values or
/// without spread.
pub fn skewness(values: &[f64]) -> Option<f64> {
    let n = values.len() as f64;
    if values.len() < 3 {
        return None;
    }
    let m = values.iter().sum::<f64>() / n;
    let m2 = values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n;
    let m3 = values.iter().map(|v| (v - m).powi(3)).sum::<f64>() / n;
    if m2 <= 0.0 {
        return None;
    }
    let g1 = m3 / m2.powf(1.5);
    let g = (n * (n - 1.0)).sqrt() / (n - 2.0) * g1;
    g.is_finite().then_some(g)
}

/// A comparison of `other` with `base`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TwoSample {
    pub test: Test,
    /// Two-sided p-value of the chosen test.
    pub p: f64,
    /// The minimum detectable change as a fraction of the baseline's
    /// estimate ([`detectable_change`]); `None` when it cannot be computed.
    pub mdc: Option<f64>,
}

impl TwoSample {
    /// `None` when either side has fewer than two values.
    pub fn compare(base: &[f64], other: &[f64], estimator: Estimator) -> Option<TwoSample> {
        let (ea, eb) = (estimator.estimate(base)?, estimator.estimate(other)?);
        let test = Test::choose(base, other, estimator);
        let p = match test {
            Test::Welch | Test::Yuen => t_test(ea, eb).0,
            Test::RankSum => rank_sum_p(base, other)?,
        };
        Some(TwoSample {
            test,
            p,
            mdc: detectable_change(ea, eb),
        })
    }

    pub fn significant(&self) -> bool {
        self.p < ALPHA
    }
}

/// Welch's t on two estimates: (two-sided p, Welch–Satterthwaite df).
/// With no spread on either side the samples either agree exactly (p 1) or
/// differ for certain (p 0).
pub fn t_test(a: Estimate, b: Estimate) -> (f64, f64) {
    let (va, vb) = (a.se.powi(2), b.se.powi(2));
    let diff = a.center - b.center;
    if va + vb == 0.0 {
        return (if diff == 0.0 { 1.0 } else { 0.0 }, f64::NAN);
    }
    let df = welch_df(a, b);
    let t = diff / (va + vb).sqrt();
    let p = match StudentsT::new(0.0, 1.0, df) {
        Ok(d) => (2.0 * (1.0 - d.cdf(t.abs()))).clamp(0.0, 1.0),
        Err(_) => f64::NAN,
    };
    (p, df)
}

fn welch_df(a: Estimate, b: Estimate) -> f64 {
    let (va, vb) = (a.se.powi(2), b.se.powi(2));
    (va + vb).powi(2) / (va.powi(2) / a.df + vb.powi(2) / b.df)
}

/// The smallest true change a two-sided test at [`ALPHA`] would find with
/// probability [`POWER`], as a fraction of the baseline's estimate:
/// (t₁₋α/₂ + t_power) · √(se_a² + se_b²) ÷ |a|, with Welch's degrees of
/// freedom. It is what `~` means: no change of this size or more was found.
/// `None` when the baseline's estimate is 0 or not finite.
pub fn detectable_change(base: Estimate, other: Estimate) -> Option<f64> {
    if base.center == 0.0 || !base.center.is_finite() || !other.center.is_finite() {
        return None;
    }
    let se = (base.se.powi(2) + other.se.powi(2)).sqrt();
    if se == 0.0 {
        return Some(0.0);
    }
    let df = welch_df(base, other);
    let d = StudentsT::new(0.0, 1.0, df).ok()?;
    let k = d.inverse_cdf(1.0 - ALPHA / 2.0) + d.inverse_cdf(POWER);
    let m = k * se / base.center.abs();
    m.is_finite().then_some(m)
}

/// Two-sided p-value of the Wilcoxon–Mann–Whitney rank-sum test: exact
/// for samples of at most [`EXACT_MAX`] each without ties, else the normal
/// approximation with the tie correction and a continuity correction.
/// `None` when either side is empty.
pub fn rank_sum_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let (m, n) = (a.len(), b.len());
    if m == 0 || n == 0 || a.iter().chain(b).any(|v| v.is_nan()) {
        return None;
    }
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|v| (*v, true))
        .chain(b.iter().map(|v| (*v, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    // Mid-ranks, and Σ(t³ − t) over groups of ties.
    let (mut rank_a, mut ties) = (0.0, 0.0);
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let mid = (i + j) as f64 / 2.0 + 1.0;
        rank_a += mid * all[i..=j].iter().filter(|x| x.1).count() as f64;
        ties += t.powi(3) - t;
        i = j + 1;
    }
    let u = rank_a - (m * (m + 1)) as f64 / 2.0;
    let (mf, nf) = (m as f64, n as f64);
    if ties == 0.0 && m <= EXACT_MAX && n <= EXACT_MAX {
        let dist = u_distribution(m, n);
        let total: f64 = dist.iter().sum();
        let k = u.round() as usize;
        let low: f64 = dist[..=k].iter().sum::<f64>() / total;
        let high: f64 = dist[k..].iter().sum::<f64>() / total;
        return Some((2.0 * low.min(high)).min(1.0));
    }
    let mean = mf * nf / 2.0;
    let nn = mf + nf;
    let var = mf * nf / 12.0 * ((nn + 1.0) - ties / (nn * (nn - 1.0)));
    if var <= 0.0 {
        return Some(1.0);
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    let normal = Normal::new(0.0, 1.0).ok()?;
    Some((2.0 * (1.0 - normal.cdf(z))).clamp(0.0, 1.0))
}

/// Largest sample (each side) whose rank-sum p-value is computed exactly.
pub const EXACT_MAX: usize = 20;

/// Number of arrangements giving each U = 0 … m·n for samples of m and n
/// without ties: f(m, n, u) = f(m − 1, n, u − n) + f(m, n − 1, u).
fn u_distribution(m: usize, n: usize) -> Vec<f64> {
    // prev[j] holds f(i − 1, j, ·); built up row by row.
    let max = m * n;
    let mut prev: Vec<Vec<f64>> = (0..=n)
        .map(|_| {
            let mut v = vec![0.0; max + 1];
            v[0] = 1.0;
            v
        })
        .collect();
    for i in 1..=m {
        let mut cur: Vec<Vec<f64>> = Vec::with_capacity(n + 1);
        let mut zero = vec![0.0; max + 1];
        zero[0] = 1.0;
        cur.push(zero);
        for j in 1..=n {
            let mut v = vec![0.0; max + 1];
            for (u, slot) in v.iter_mut().enumerate().take(i * j + 1) {
                let from_a = if u >= j { prev[j][u - j] } else { 0.0 };
                *slot = from_a + cur[j - 1][u];
            }
            cur.push(v);
        }
        prev = cur;
    }
    prev.swap_remove(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Summary;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-12)
    }

    /// A small deterministic generator (xorshift64*) and Box–Muller normals,
    /// so the simulations below are the same on every machine.
    struct Rng(u64);
    impl Rng {
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
            ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }
        fn normal(&mut self) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        }
    }

    #[test]
    fn rank_sum_matches_tables() {
        // No overlap, 5 against 5: the exact two-sided p is 2/252.
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [6.0, 7.0, 8.0, 9.0, 10.0];
        assert!(close(rank_sum_p(&a, &b).unwrap(), 2.0 / 252.0, 1e-9));
        assert!(close(rank_sum_p(&b, &a).unwrap(), 2.0 / 252.0, 1e-9));
        // 3 against 3 cannot go below 2/20.
        assert!(close(
            rank_sum_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap(),
            0.1,
            1e-9
        ));
        // Interleaved: nothing.
        assert_eq!(
            rank_sum_p(&[1.0, 4.0, 5.0, 8.0], &[2.0, 3.0, 6.0, 7.0]).unwrap(),
            1.0
        );
        // Ties (1.06, 1.29): the normal approximation, worked by counting
        // pairs (U = 58, Σ(t³ − t) = 12, z = 1.503), p = 0.1329.
        let x = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30];
        let y = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.15, 1.29];
        let p = rank_sum_p(&x, &y).unwrap();
        assert!(close(p, 0.1329, 0.01), "{p}");
        assert_eq!(rank_sum_p(&[], &[1.0]), None);
    }

    #[test]
    fn u_distribution_counts_arrangements() {
        let d = u_distribution(2, 2);
        assert_eq!(d, vec![1.0, 1.0, 2.0, 1.0, 1.0]);
        assert_eq!(u_distribution(5, 5).iter().sum::<f64>(), 252.0);
    }

    /// `net.tcp_rr conns=1` on one CPU, eight trials (tx/s ÷ 1000), one of
    /// them during a host spell at 0.16 of the others (issue 24).
    const SPELL: [f64; 8] = [52.1, 50.8, 53.4, 8.3, 51.6, 52.9, 50.2, 51.9];
    const CLEAN: [f64; 8] = [52.1, 50.8, 53.4, 51.2, 51.6, 52.9, 50.2, 51.9];

    #[test]
    fn a_host_spell_makes_a_case_heavy_tailed() {
        assert!(looks_normal(&CLEAN));
        assert!(!looks_normal(&SPELL));
        assert_eq!(Test::choose(&CLEAN, &CLEAN, Estimator::Mean), Test::Welch);
        assert_eq!(Test::choose(&CLEAN, &CLEAN, Estimator::Trimmed), Test::Yuen);
        assert_eq!(
            Test::choose(&CLEAN, &SPELL, Estimator::Trimmed),
            Test::RankSum
        );
        // A long latency tail: skewed beyond the rule's bound.
        let tail = [1.0, 1.1, 1.0, 1.2, 1.05, 1.1, 1.0, 1.6, 2.2, 1.0];
        assert!(skewness(&tail).unwrap() > MAX_SKEW);
        assert!(!looks_normal(&tail));
        // Identical values, or too few to say: normal enough.
        assert!(looks_normal(&[2.0, 2.0, 2.0]));
        assert!(looks_normal(&[1.0, 9.0]));
    }

    #[test]
    fn the_spell_blows_up_the_mean_and_not_the_trimmed_mean() {
        let mean = Summary::of(&SPELL, 95.0);
        let trimmed = Summary::trimmed(&SPELL, 95.0);
        let clean = Summary::of(&CLEAN, 95.0);
        // The mean moves by 10 % and its interval is ten times the clean one.
        assert!(mean.mean < 0.91 * clean.mean, "{mean:?}");
        assert!(mean.width_pct() > 10.0 * clean.width_pct(), "{mean:?}");
        // The trimmed mean stays within 1 % and its interval within 2× of
        // the clean mean's.
        assert!(close(trimmed.mean, clean.mean, 0.01), "{trimmed:?}");
        assert!(trimmed.width_pct() < 2.0 * clean.width_pct(), "{trimmed:?}");
        // So the spell's case converges at the quick rule's 10 % under the
        // trimmed mean and not under the mean.
        let w = crate::stats::StopRule::QUICK.width_pct;
        assert!(trimmed.width_pct() < w && mean.width_pct() > w);
        // A comparison of the clean case with the spell's: the mean's
        // detectable change is near half the value, the trimmed mean's a
        // few per cent.
        let m = TwoSample::compare(&CLEAN, &SPELL, Estimator::Mean).unwrap();
        let t = TwoSample::compare(&CLEAN, &SPELL, Estimator::Trimmed).unwrap();
        assert!(m.mdc.unwrap() > 0.3, "{m:?}");
        assert!(t.mdc.unwrap() < 0.05, "{t:?}");
        assert_eq!(t.test, Test::RankSum);
        assert!(!t.significant(), "{t:?}");
    }

    #[test]
    fn trimmed_mean_by_hand() {
        // n = 10: two trimmed each side; the middle six average 5.5.
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 100.0];
        let s = Summary::trimmed(&v, 95.0);
        assert!(close(s.mean, 5.5, 1e-12));
        // Winsorized: 3,3,3,4,5,6,7,8,8,8 → mean 5.5, var 4.7222.
        assert!(close(s.sd, 4.7222f64.sqrt(), 1e-4), "{s:?}");
        // se = sqrt(9 · 4.7222 / (6 · 5)) = 1.1902; t(5) = 2.5706.
        assert!(close(s.half_width(), 2.5706 * 1.19024, 1e-4), "{s:?}");
        // Four values trim nothing: the mean and its interval.
        assert_eq!(
            Summary::trimmed(&[1.0, 2.0, 3.0, 4.0], 95.0),
            Summary::of(&[1.0, 2.0, 3.0, 4.0], 95.0)
        );
    }

    /// Clean normal trials: both intervals cover the true value about 95 %
    /// of the time, and the rule picks a t-test for most samples.
    #[test]
    fn coverage_on_clean_normal_trials_stays_near_95() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for n in [5usize, 8, 12, 30] {
            let reps = 4000;
            let (mut cover_mean, mut cover_trim, mut t_tests) = (0, 0, 0);
            for _ in 0..reps {
                let v: Vec<f64> = (0..n).map(|_| 100.0 + 5.0 * rng.normal()).collect();
                let m = Summary::of(&v, 95.0);
                let t = Summary::trimmed(&v, 95.0);
                cover_mean += usize::from(m.ci_low <= 100.0 && 100.0 <= m.ci_high);
                cover_trim += usize::from(t.ci_low <= 100.0 && 100.0 <= t.ci_high);
                t_tests += usize::from(looks_normal(&v));
            }
            let (cm, ct) = (
                cover_mean as f64 / reps as f64,
                cover_trim as f64 / reps as f64,
            );
            assert!((0.93..=0.97).contains(&cm), "n {n}: mean {cm}");
            assert!((0.93..=0.975).contains(&ct), "n {n}: trimmed {ct}");
            assert!(
                t_tests as f64 / reps as f64 > 0.85,
                "n {n}: {t_tests} of {reps}"
            );
        }
    }

    /// Trials with one wrecked by a spell (0.16 of the value): the mean's
    /// interval explodes and misses, the trimmed mean's does not.
    #[test]
    fn one_spell_in_every_sample() {
        let mut rng = Rng(42);
        let (n, reps) = (10usize, 2000);
        let (mut wide_mean, mut wide_trim, mut cover_trim) = (0.0, 0.0, 0);
        for _ in 0..reps {
            let mut v: Vec<f64> = (0..n).map(|_| 100.0 + 3.0 * rng.normal()).collect();
            v[3] *= 0.16;
            let m = Summary::of(&v, 95.0);
            let t = Summary::trimmed(&v, 95.0);
            wide_mean += m.width_pct() / reps as f64;
            wide_trim += t.width_pct() / reps as f64;
            cover_trim += usize::from(t.ci_low <= 100.0 && 100.0 <= t.ci_high);
        }
        assert!(wide_mean > 30.0, "{wide_mean}");
        assert!(wide_trim < 8.0, "{wide_trim}");
        assert!(cover_trim as f64 / reps as f64 > 0.9, "{cover_trim}");
    }

    #[test]
    fn detectable_change_by_hand() {
        // Two sides of 5 at mean 100, sd 20: se² = 80 + 80, Welch df = 8,
        // t(0.975, 8) = 2.306, t(0.8, 8) = 0.889 → 3.195 · 12.65 = 40.4 %.
        let e = Estimate {
            center: 100.0,
            se: 20.0 / 5f64.sqrt(),
            df: 4.0,
        };
        let m = detectable_change(e, e).unwrap();
        assert!(close(m, 0.404, 0.01), "{m}");
        // Five trials at 20 % CV hide a 25 % change (issue 24).
        assert!(m > 0.25);
        // No spread: any change shows.
        let z = Estimate { se: 0.0, ..e };
        assert_eq!(detectable_change(z, z), Some(0.0));
        assert_eq!(detectable_change(Estimate { center: 0.0, ..e }, e), None);
    }

    #[test]
    fn t_test_agrees_with_welch() {
        let (a, b) = ([1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 3.0, 4.0, 5.0, 9.0]);
        let w = crate::stats::Welch::test(&a, &b).unwrap();
        let (p, df) = t_test(
            Estimator::Mean.estimate(&a).unwrap(),
            Estimator::Mean.estimate(&b).unwrap(),
        );
        assert!(close(p, w.p, 1e-12) && close(df, w.df, 1e-12));
    }
}
