//! Decisions (docs/method.md, "Decisions: a family's geometric mean and
//! scalability with intervals"): a family's answer is its geometric mean
//! over its cases and its scalability, and a per-case interval does not say
//! how well that answer is known. Both are means of logarithms, so their
//! intervals are built in log space from each case's estimate, standard
//! error and degrees of freedom, and combined across cases by the delta
//! method with Welch–Satterthwaite degrees of freedom.

use crate::model::Direction;
use crate::stats::{t_quantile, Estimate};

/// Degrees of freedom beyond which the t quantile is taken as the normal
/// one: statrs inverts the t distribution by iteration, and at this many
/// the two agree to five digits.
const NORMAL_DF: f64 = 1e6;

/// One case's contribution to a family's figure: the logarithm of its value,
/// the standard error of that logarithm and its degrees of freedom.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogEstimate {
    pub log: f64,
    pub se: f64,
    pub df: f64,
}

impl LogEstimate {
    /// A case's reported value with the estimate of its counted trials.
    /// The value is what the case's table prints (a trimmed mean, a median
    /// of N, a merged percentile), so that the family's figure here is the
    /// table's; its relative standard error comes from the estimate
    /// (delta method: se(ln x) ≈ se(x)/x). `None` for a value or an
    /// estimate that is not positive and finite: a logarithm needs one.
    pub fn of_value(value: f64, e: Estimate) -> Option<LogEstimate> {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        let spread = e.se.is_finite() && e.se >= 0.0;
        if !(ok(value) && ok(e.center) && spread && ok(e.df)) {
            return None;
        }
        Some(LogEstimate {
            log: value.ln(),
            se: e.se / e.center,
            df: e.df,
        })
    }

    /// A case's speed-up of `other` over `base`: the ratio of the two
    /// estimates (each [`LogEstimate::of_value`], so the ratio of the
    /// values its table prints), oriented so that above 0 is faster
    /// (inverted where lower is better), its standard error both sides'
    /// in quadrature and its degrees of freedom theirs by
    /// Welch–Satterthwaite. Combined over a family's cases
    /// ([`Interval::combine`]) it is exactly the ratio of the family's two
    /// geometric means, with their errors.
    ///
    /// Not from trials paired by position: a budget measures each case as
    /// long as its own need asks, so the k-th trials of two configurations
    /// are not of one round and pairing them cancels no drift, while it
    /// drops every trial past the shorter side's. Read both ways, nine
    /// quick studies' `mem` scalability was decided in 2 from the pairs
    /// and in 7 from the estimates (docs/method.md, "Scalability"). A drift both sides share widens each side's
    /// interval, so the ratio's is then conservative, never short.
    pub fn speedup(base: LogEstimate, other: LogEstimate, direction: Direction) -> LogEstimate {
        let log = match direction {
            Direction::Higher => other.log - base.log,
            Direction::Lower => base.log - other.log,
        };
        let (vb, vo) = (base.se * base.se, other.se * other.se);
        let var = vb + vo;
        let df = if var > 0.0 {
            var * var / (vb * vb / base.df + vo * vo / other.df)
        } else {
            base.df + other.df
        };
        LogEstimate {
            log,
            se: var.sqrt(),
            df,
        }
    }
}

/// A family's figure with its interval: the exponential of the mean of its
/// cases' logarithms, and of that mean ± t·se.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    pub value: f64,
    pub low: f64,
    pub high: f64,
    /// Standard error of the mean logarithm.
    pub se_log: f64,
    /// Welch–Satterthwaite degrees of freedom (infinite when no case has
    /// any spread).
    pub df: f64,
}

impl Interval {
    /// The combination of the cases' log estimates, each counting once:
    /// log GM = Σ log_i / k, se = √(Σ se_i²) / k, and
    /// df = (Σ se_i²)² / Σ (se_i⁴ / df_i). `None` with no case.
    pub fn combine(cases: &[LogEstimate], confidence_pct: f64) -> Option<Interval> {
        if cases.is_empty() {
            return None;
        }
        let k = cases.len() as f64;
        let mean = cases.iter().map(|c| c.log).sum::<f64>() / k;
        let var: f64 = cases.iter().map(|c| c.se * c.se).sum();
        let se = var.sqrt() / k;
        let df = if var > 0.0 {
            var * var / cases.iter().map(|c| c.se.powi(4) / c.df).sum::<f64>()
        } else {
            f64::INFINITY
        };
        let t = if df.is_finite() && df < NORMAL_DF {
            t_quantile(confidence_pct, df)
        } else {
            t_quantile(confidence_pct, NORMAL_DF)
        };
        Some(Interval {
            value: mean.exp(),
            low: (mean - t * se).exp(),
            high: (mean + t * se).exp(),
            se_log: se,
            df,
        })
    }

    /// The full width (upper − lower) as a percentage of the value, as the
    /// run rules measure a case's interval.
    pub fn width_pct(&self) -> f64 {
        100.0 * (self.high - self.low) / self.value
    }

    /// Whether the figure is known as well as the run asked of each case:
    /// its full width at most `width_pct` % of the value, read as a case's
    /// rule reads its own (2·t·se / mean, which the delta method makes
    /// 2·t·se_log): the log width ln(high / low). Read on the exponentiated
    /// ends (2·sinh(t·se_log)), a family of one case that met its rule at
    /// 9.997 % was 10.004 % wide, and its cell undecided.
    pub fn decided(&self, width_pct: f64) -> bool {
        100.0 * (self.high / self.low).ln() <= width_pct
    }

    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }
}

/// The highest count a capacity answer can stand for, where `capacity`
/// conformed and `fails_at`, the smallest step above it, did not
/// (docs/families/web.md, "Capacity"): counts are whole, so one below the
/// failing step. Read as the failing step itself, a quick study's bracket
/// of 2,666 conforming and 2,933 failing (a bisection's midpoint) was
/// 10.02 % wide and its cell undecided at 10 %, though no count it could
/// still hold lies 10 % above 2,666. The one rule the capacity search
/// stops by and the decisions table reads its bracket by.
pub fn capacity_at_most(capacity: f64, fails_at: f64) -> f64 {
    (fails_at - 1.0).max(capacity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::SplitMix64;
    use crate::stats::Estimator;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-12)
    }

    /// A standard normal draw (Box–Muller).
    fn normal(rng: &mut SplitMix64) -> f64 {
        let u = |r: &mut SplitMix64| ((r.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let (a, b) = (u(rng), u(rng));
        (-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()
    }

    #[test]
    fn one_case_is_its_own_log_interval() {
        // ln 100 ± t(4)·0.02: the case's relative se carried over.
        let e = Estimate {
            center: 100.0,
            se: 2.0,
            df: 4.0,
        };
        let c = LogEstimate::of_value(100.0, e).unwrap();
        let i = Interval::combine(&[c], 95.0).unwrap();
        assert!(close(i.value, 100.0, 1e-12));
        assert_eq!(i.df, 4.0);
        let t = t_quantile(95.0, 4.0);
        assert!(close(i.low, 100.0 * (-t * 0.02f64).exp(), 1e-12), "{i:?}");
        assert!(close(i.high, 100.0 * (t * 0.02f64).exp(), 1e-12), "{i:?}");
        // About 2·2.776·2 % wide.
        assert!(close(i.width_pct(), 11.1, 1e-2), "{}", i.width_pct());
        assert!(!i.decided(10.0) && i.decided(12.0));
        // A case whose own interval met a 10 % rule decides its family's
        // cell alone: 2·t·se / mean = 9.997 %.
        let se = 100.0 * 0.09997 / (2.0 * t);
        let e = Estimate { se, ..e };
        let i = Interval::combine(&[LogEstimate::of_value(100.0, e).unwrap()], 95.0).unwrap();
        assert!(i.width_pct() > 10.0 && i.decided(10.0), "{}", i.width_pct());
    }

    #[test]
    fn combination_by_hand() {
        // Values 1 and 4: GM 2. Relative se 0.03 and 0.04 on 9 and 4 df:
        // se = √(0.0009 + 0.0016)/2 = 0.025;
        // df = 0.0025² / (0.03⁴/9 + 0.04⁴/4) = 6.25e-6 / 7.3e-7 ≈ 8.56.
        let a = LogEstimate::of_value(
            1.0,
            Estimate {
                center: 1.0,
                se: 0.03,
                df: 9.0,
            },
        )
        .unwrap();
        let b = LogEstimate::of_value(
            4.0,
            Estimate {
                center: 4.0,
                se: 0.16,
                df: 4.0,
            },
        )
        .unwrap();
        let i = Interval::combine(&[a, b], 95.0).unwrap();
        assert!(close(i.value, 2.0, 1e-12));
        assert!(close(i.se_log, 0.025, 1e-12), "{i:?}");
        assert!(close(i.df, 6.25e-6 / 7.3e-7, 1e-9), "{i:?}");
        let t = t_quantile(95.0, i.df);
        assert!(close(i.high, 2.0 * (t * 0.025f64).exp(), 1e-12));
        // The relative se follows the estimate, not the reported value: a
        // median of 4.2 with a mean of 4 and se 0.16 is still 4 %.
        let m = LogEstimate::of_value(
            4.2,
            Estimate {
                center: 4.0,
                se: 0.16,
                df: 4.0,
            },
        )
        .unwrap();
        assert!(close(m.se, 0.04, 1e-12) && close(m.log, 4.2f64.ln(), 1e-12));
    }

    #[test]
    fn no_spread_is_a_point_and_nothing_is_none() {
        let c = LogEstimate::of_value(
            5.0,
            Estimate {
                center: 5.0,
                se: 0.0,
                df: 2.0,
            },
        )
        .unwrap();
        let i = Interval::combine(&[c, c], 95.0).unwrap();
        assert_eq!((i.low, i.high), (i.value, i.value));
        assert!(i.df.is_infinite() && i.decided(0.0));
        assert_eq!(Interval::combine(&[], 95.0), None);
        let e = Estimate {
            center: 1.0,
            se: 0.1,
            df: 3.0,
        };
        assert_eq!(LogEstimate::of_value(0.0, e), None);
        assert_eq!(LogEstimate::of_value(f64::NAN, e), None);
        assert_eq!(
            LogEstimate::of_value(1.0, Estimate { center: -1.0, ..e }),
            None
        );
    }

    fn log_of(values: &[f64], estimator: Estimator) -> LogEstimate {
        let e = estimator.estimate(values).unwrap();
        LogEstimate::of_value(e.center, e).unwrap()
    }

    #[test]
    fn a_speedup_is_oriented_so_above_one_is_faster() {
        // A throughput doubled, a latency halved: both a speed-up of 2.
        let m = Estimator::Mean;
        let tp = LogEstimate::speedup(
            log_of(&[10.0, 11.0, 9.0], m),
            log_of(&[20.0, 22.0, 18.0], m),
            Direction::Higher,
        );
        let lat = LogEstimate::speedup(
            log_of(&[2.0, 2.2, 1.8], m),
            log_of(&[1.0, 1.1, 0.9], m),
            Direction::Lower,
        );
        for c in [tp, lat] {
            assert!(close(c.log, 2f64.ln(), 1e-12), "{c:?}");
            // Each side's relative se is 0.0577: √2 of it, on 4 df
            // (two sides of 2 df and equal errors).
            assert!(close(c.se, 0.1 / 3f64.sqrt() * 2f64.sqrt(), 1e-9), "{c:?}");
            assert!(close(c.df, 4.0, 1e-9), "{c:?}");
        }
    }

    #[test]
    fn a_family_speedup_is_the_ratio_of_its_geometric_means() {
        let m = Estimator::Mean;
        let one = [vec![1.0, 1.1, 0.9, 1.05], vec![40.0, 44.0, 38.0]];
        let all = [vec![1.9, 2.1, 2.0], vec![30.0, 31.0, 33.0, 29.0, 32.0]];
        let gm = |v: &[Vec<f64>]| {
            Interval::combine(&v.iter().map(|x| log_of(x, m)).collect::<Vec<_>>(), 95.0).unwrap()
        };
        let (g1, ga) = (gm(&one), gm(&all));
        let sc: Vec<LogEstimate> = one
            .iter()
            .zip(&all)
            .map(|(b, o)| LogEstimate::speedup(log_of(b, m), log_of(o, m), Direction::Higher))
            .collect();
        let i = Interval::combine(&sc, 95.0).unwrap();
        assert!(close(i.value, ga.value / g1.value, 1e-12), "{i:?}");
        // The two means' errors in quadrature.
        let se = (g1.se_log.powi(2) + ga.se_log.powi(2)).sqrt();
        assert!(close(i.se_log, se, 1e-12), "{i:?}");
        // No spread on either side: a point, on every degree of freedom.
        let flat = LogEstimate {
            log: 0.0,
            se: 0.0,
            df: 2.0,
        };
        let p = LogEstimate::speedup(flat, flat, Direction::Lower);
        assert_eq!((p.se, p.df), (0.0, 4.0));
    }

    /// The intervals are 95 % intervals: over many simulated runs of a
    /// family they hold the true figure about 95 times in 100, for the
    /// geometric mean (independent cases, unequal spreads and trial counts)
    /// and for the scalability (unequal trial counts on its two sides, as a
    /// budget leaves them); and where a drift the two sides share is added,
    /// the scalability's interval covers more, not less.
    /// A normal quantile in place of t covers the geometric mean 91.8 % of
    /// the time, and fails it.
    #[test]
    fn intervals_cover_the_truth_about_95_in_100() {
        let mut rng = SplitMix64::new(0x05ee_d31d);
        let truth = [1.0, 7.5, 40.0, 0.3];
        let cv = [0.02, 0.05, 0.01, 0.08];
        let trials = [3, 5, 8, 12];
        let speedup = [1.9, 1.2, 0.8, 1.5];
        let gm_true = (truth.iter().map(|x: &f64| x.ln()).sum::<f64>() / 4.0).exp();
        let sc_true = (speedup.iter().map(|x: &f64| x.ln()).sum::<f64>() / 4.0).exp();
        let runs = 2000;
        for estimator in [Estimator::Mean, Estimator::Trimmed] {
            let (mut gm_in, mut sc_in, mut sc_d_in) = (0, 0, 0);
            for _ in 0..runs {
                let mut gm = Vec::new();
                let mut sc = Vec::new();
                let mut sc_d = Vec::new();
                for i in 0..truth.len() {
                    // Normal trials (a mean of many iterations is); the
                    // configuration with more CPUs took a trial fewer or
                    // more, as its own need asked; with a drift, the
                    // configurations' trials of a round share it.
                    let (mut one, mut all, mut one_d, mut all_d) =
                        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                    let n_all = trials[i] + i % 3;
                    for k in 0..n_all {
                        let drift = (0.1 * normal(&mut rng)).exp();
                        let (a, b) = (normal(&mut rng), normal(&mut rng));
                        if k < trials[i] {
                            one.push(truth[i] * (1.0 + cv[i] * a));
                            one_d.push(truth[i] * drift * (1.0 + cv[i] * a));
                        }
                        all.push(truth[i] * speedup[i] * (1.0 + cv[i] * b));
                        all_d.push(truth[i] * speedup[i] * drift * (1.0 + cv[i] * b));
                    }
                    // The geometric mean's own trials, without a drift: one
                    // shared by every case is not the sampling error its
                    // interval is about.
                    let flat: Vec<f64> = (0..trials[i])
                        .map(|_| truth[i] * (1.0 + cv[i] * normal(&mut rng)))
                        .collect();
                    let e = estimator.estimate(&flat).unwrap();
                    gm.push(LogEstimate::of_value(e.center, e).unwrap());
                    let speed = |b: &[f64], o: &[f64]| {
                        LogEstimate::speedup(
                            log_of(b, estimator),
                            log_of(o, estimator),
                            Direction::Higher,
                        )
                    };
                    sc.push(speed(&one, &all));
                    sc_d.push(speed(&one_d, &all_d));
                }
                gm_in += usize::from(Interval::combine(&gm, 95.0).unwrap().contains(gm_true));
                sc_in += usize::from(Interval::combine(&sc, 95.0).unwrap().contains(sc_true));
                sc_d_in += usize::from(Interval::combine(&sc_d, 95.0).unwrap().contains(sc_true));
            }
            for (what, n) in [("geometric mean", gm_in), ("scalability", sc_in)] {
                let cover = n as f64 / runs as f64;
                assert!(
                    (0.93..=0.975).contains(&cover),
                    "{estimator:?} {what}: {cover}"
                );
            }
            let cover = sc_d_in as f64 / runs as f64;
            assert!(
                cover >= 0.95,
                "{estimator:?} scalability under a drift: {cover}"
            );
        }
    }

    #[test]
    fn a_wider_rule_decides_more() {
        let c = LogEstimate {
            log: 0.0,
            se: 0.02,
            df: 10.0,
        };
        let i = Interval::combine(&[c], 95.0).unwrap();
        let j = Interval::combine(&[c], 99.0).unwrap();
        assert!(j.width_pct() > i.width_pct());
        assert!(i.decided(10.0) && !i.decided(5.0));
    }
}
