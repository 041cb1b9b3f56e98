//! Taking the host's part out of a case's spread (docs/host.md, "Others
//! on the trial's CPUs"). Under a noisy neighbour a workload that waits on
//! other threads and sockets measures the neighbour too: `net.tcp_rr` on
//! two CPUs of the 2-vCPU VM spread by 4.8 % over 40 trials while others
//! took 17–34 % of its CPUs, at r = −0.91 between the two. Its phases last
//! 20–60 s, so a five-minute study sees a handful of them, and no number
//! of trials narrows a mean over five phases. Every trial records what the
//! host took (others' CPU time, the line round trip between its CPUs, steal
//! time), so the part of the spread that followed them can be fitted and
//! taken out: a least-squares regression of the trials' log figures on the
//! measures they followed, each trial moved along the fit to the trials'
//! mean of each measure. What is left is the spread at the conditions the
//! run had, which the decisions table's interval then describes — a
//! figure known to ±2 % *at* the share others took in that run, said
//! beside it, not at any share.

use crate::stats::{pearson, t_quantile, Estimate, Estimator, Follows};

/// A line round trip above this is the probe's own: one side was
/// preempted during its bounces. The placements seen on the VMs read
/// 30–65, 90–110 and 400–600 ns; under the noisy neighbour the probe read
/// up to 4.3 µs between trials that ran as those at 400 ns did.
pub const LINE_CAP_NS: f64 = 1000.0;

/// A trial's host measures in [`HostMeasure::ALL`]'s order, `None` where
/// it has none.
pub type Measures = [Option<f64>; 3];

/// The host measures of a trial's accounting (`None` for a trial without
/// one): what the runner, the store and the tables fit and name alike.
pub fn measures(a: Option<&crate::model::CpuAccounting>) -> Measures {
    let finite = |x: Option<f64>| x.filter(|x| x.is_finite());
    match a {
        Some(a) => [
            finite(a.others_pct),
            finite(a.line_ns),
            finite(Some(a.steal_pct)),
        ],
        None => [None; 3],
    }
}

/// A host measure each trial records (`CpuAccounting`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostMeasure {
    /// The share (%) of the trial's CPUs other tasks ran.
    Others,
    /// The round trip (ns) of a cache line between two of its CPUs.
    Line,
    /// The hypervisor's steal time (%).
    Steal,
}

impl HostMeasure {
    /// In the order a trial's measures are given to [`HostFit::of`].
    pub const ALL: [HostMeasure; 3] = [HostMeasure::Others, HostMeasure::Line, HostMeasure::Steal];

    /// Whether the measure moved enough over the trials to explain a
    /// spread: a share by 5 points, the line by 1.5×. [`Follows`] asks it
    /// before it names a NOT CONVERGED case's host, the fit before a
    /// measure may enter.
    pub(crate) fn moved(self, low: f64, high: f64) -> bool {
        match self {
            HostMeasure::Others => high - low >= Follows::MIN_OTHERS_RANGE_PCT,
            HostMeasure::Steal => high - low >= Follows::MIN_STEAL_RANGE_PCT,
            HostMeasure::Line => low > 0.0 && high >= Follows::MIN_LINE_RATIO * low,
        }
    }

    /// The regressor of a log figure: for a share p taken from the CPUs,
    /// −ln(1 − p), since a throughput goes as the CPU left (1 − p) and a
    /// latency as its inverse, both straight lines in it; for the line,
    /// the logarithm of its round trip, at most [`LINE_CAP_NS`].
    fn regressor(self, x: f64) -> Option<f64> {
        let r = match self {
            HostMeasure::Others | HostMeasure::Steal => {
                (x >= 0.0).then(|| -(1.0 - x.min(99.0) / 100.0).ln())?
            }
            HostMeasure::Line => (x > 0.0).then(|| x.min(LINE_CAP_NS).ln())?,
        };
        r.is_finite().then_some(r)
    }

    /// The measure at a regressor's value: what a mean regressor stands
    /// for (a share, a round trip).
    fn measure(self, r: f64) -> f64 {
        match self {
            HostMeasure::Others | HostMeasure::Steal => 100.0 * (1.0 - (-r).exp()),
            HostMeasure::Line => r.exp(),
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            HostMeasure::Others => "others' share of its CPUs",
            HostMeasure::Line => "the line between its CPUs",
            HostMeasure::Steal => "steal time",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            HostMeasure::Others | HostMeasure::Steal => "%",
            HostMeasure::Line => " ns",
        }
    }
}

/// A case's trials with what followed the host taken out.
#[derive(Clone, Debug, PartialEq)]
pub struct HostFit {
    /// The measures fitted, each with how the figures followed it alone.
    pub by: Vec<(HostMeasure, Follows)>,
    /// Each trial's figure moved along the fit to the trials' mean of
    /// every measure fitted: the mean of their logarithms is the raw
    /// figures'.
    pub adjusted: Vec<f64>,
    /// The share of the log figures' variance the measures explain.
    pub r2: f64,
    /// The conditions the adjusted figures are at, each measure fitted
    /// as `by`: the measure at the trials' mean regressor (for a share,
    /// 1 − the geometric mean of the CPU left; for the line, the
    /// geometric mean of its capped round trips).
    pub at: Vec<f64>,
    /// The adjusted figures with their spread about the mean logarithm
    /// scaled by √((n−1)/(n−1−k))·t(n−1−k)/t(n−1), k the measures fitted:
    /// so that any interval built from them as n trials (the run rule's,
    /// the decisions table's) is the fit's, which spent k degrees of
    /// freedom on the slopes. What the runner judges and the tables print.
    pub judged: Vec<f64>,
}

impl HostFit {
    /// Fewest residual degrees of freedom a fit may leave: below this its
    /// t quantile costs more than the fit takes out.
    const MIN_DF: usize = 3;

    /// The fit of `values` (trial i's figure) on the measures they
    /// followed, `measures[i]` being trial i's in [`HostMeasure::ALL`]'s
    /// order (`None` where it has none). Forward selection on the log
    /// figures: among the measures every trial has and that moved
    /// ([`Follows`]' ranges), the one that what is left of the figures
    /// follows most closely enters — the first at |r| ≥ 0.5, as the
    /// tables name a host, each next where its partial correlation is
    /// beyond chance at 1 % — so a case whose vCPUs moved apart partway
    /// through is fitted on the neighbour and then on the placement,
    /// which the neighbour's spread hid. Each measure's `r` is the one
    /// it entered at. `None` where none enters, where a figure is not
    /// positive and finite, or where too few trials are left to fit.
    pub fn of(values: &[f64], measures: &[Measures], confidence_pct: f64) -> Option<HostFit> {
        if values.len() != measures.len() || values.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
            return None;
        }
        let n = values.len();
        let y: Vec<f64> = values.iter().map(|v| v.ln()).collect();
        // Each measure every trial has and that moved: its raw values'
        // range and its regressor.
        let candidates: Vec<(HostMeasure, (f64, f64), Vec<f64>)> = HostMeasure::ALL
            .iter()
            .enumerate()
            .filter_map(|(k, m)| {
                let raw: Vec<f64> = measures
                    .iter()
                    .map(|t| t[k].filter(|x| x.is_finite()))
                    .collect::<Option<_>>()?;
                let low = raw.iter().copied().fold(f64::INFINITY, f64::min);
                let high = raw.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                if !m.moved(low, high) {
                    return None;
                }
                let x: Vec<f64> = raw.iter().map(|x| m.regressor(*x)).collect::<Option<_>>()?;
                Some((*m, (low, high), x))
            })
            .collect();
        let mut chosen: Vec<usize> = Vec::new();
        let mut by = Vec::new();
        let mut adjusted = y.clone();
        loop {
            // Residual degrees of freedom with one more measure in.
            let df = n as f64 - chosen.len() as f64 - 2.0;
            if df < Self::MIN_DF as f64 {
                break;
            }
            let next = candidates
                .iter()
                .enumerate()
                .filter(|(i, _)| !chosen.contains(i))
                .filter_map(|(i, (m, (low, high), x))| {
                    let r = pearson(x, &adjusted)?;
                    Some((
                        i,
                        *m,
                        Follows {
                            low: *low,
                            high: *high,
                            r,
                        },
                    ))
                })
                .max_by(|a, b| a.2.r.abs().total_cmp(&b.2.r.abs()));
            let Some((i, m, f)) = next else { break };
            // The first measure as the tables name a host (|r| ≥ 0.5);
            // the next ones where what is left follows them beyond
            // chance (the partial correlation's t test at 1 %): once
            // the neighbour is out, a placement step that moved the rest
            // by 0.4 is no accident over 50 trials.
            let enters = if chosen.is_empty() {
                f.r.abs() >= Follows::MIN_ABS_R
            } else {
                let t = f.r.abs() * (df / (1.0 - f.r * f.r).max(f64::MIN_POSITIVE)).sqrt();
                t > t_quantile(99.0, df)
            };
            if !enters {
                break;
            }
            let mut with = chosen.clone();
            with.push(i);
            let columns: Vec<&[f64]> = with.iter().map(|&c| candidates[c].2.as_slice()).collect();
            let Some(fit) = least_squares(&y, &columns) else {
                break;
            };
            chosen = with;
            by.push((m, f));
            adjusted = fit;
        }
        if by.is_empty() {
            return None;
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let my = mean(&y);
        let ss = |v: &[f64]| v.iter().map(|x| (x - my).powi(2)).sum::<f64>();
        let (ss_tot, ss_res) = (ss(&y), ss(&adjusted));
        let r2 = if ss_tot > 0.0 {
            (1.0 - ss_res / ss_tot).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let (nf, k) = (n as f64, chosen.len() as f64);
        let scale = ((nf - 1.0) / (nf - 1.0 - k)).sqrt() * t_quantile(confidence_pct, nf - 1.0 - k)
            / t_quantile(confidence_pct, nf - 1.0);
        Some(HostFit {
            by,
            adjusted: adjusted.iter().map(|v| v.exp()).collect(),
            r2,
            at: chosen
                .iter()
                .map(|&c| candidates[c].0.measure(mean(&candidates[c].2)))
                .collect(),
            judged: adjusted
                .iter()
                .map(|v| (my + scale * (v - my)).exp())
                .collect(),
        })
    }

    /// The fit where it narrows the interval `width` gives of the trials
    /// (the run rule's, by its estimator): where it does not — a measure
    /// that explains little, fitted on few trials — the trials' own
    /// interval stands.
    pub fn narrowing(
        values: &[f64],
        measures: &[Measures],
        confidence_pct: f64,
        width: impl Fn(&[f64]) -> f64,
    ) -> Option<HostFit> {
        Self::of(values, measures, confidence_pct).filter(|f| width(&f.judged) < width(values))
    }

    /// `estimator`'s estimate of the judged figures: the fit's interval.
    pub fn estimate(&self, estimator: Estimator) -> Option<Estimate> {
        estimator.estimate(&self.judged)
    }
}

/// `y` with its least-squares fit on `columns` (and a constant) taken
/// out at each column's mean: y_i − Σ_j b_j (x_ji − x̄_j), whose mean is
/// y's. `None` where the columns are collinear.
fn least_squares(y: &[f64], columns: &[&[f64]]) -> Option<Vec<f64>> {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let my = mean(y);
    let yc: Vec<f64> = y.iter().map(|v| v - my).collect();
    let xc: Vec<Vec<f64>> = columns
        .iter()
        .map(|c| {
            let m = mean(c);
            c.iter().map(|x| x - m).collect()
        })
        .collect();
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let k = xc.len();
    let mut a: Vec<Vec<f64>> = (0..k)
        .map(|i| {
            let mut row: Vec<f64> = (0..k).map(|j| dot(&xc[i], &xc[j])).collect();
            row.push(dot(&xc[i], &yc));
            row
        })
        .collect();
    let b = solve(&mut a)?;
    Some(
        (0..y.len())
            .map(|i| y[i] - (0..k).map(|j| b[j] * xc[j][i]).sum::<f64>())
            .collect(),
    )
}

/// Gaussian elimination with partial pivoting of an augmented k × (k + 1)
/// system; `None` where it is singular (two measures that moved together).
fn solve(a: &mut [Vec<f64>]) -> Option<Vec<f64>> {
    let k = a.len();
    // A pivot this small next to its column's own sum of squares is a
    // measure that the others already explain.
    let diag: Vec<f64> = (0..k).map(|i| a[i][i].abs()).collect();
    for col in 0..k {
        let p = (col..k).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        a.swap(col, p);
        let pivot = a[col][col].abs();
        if pivot.is_nan() || pivot <= 1e-9 * diag[col].max(f64::MIN_POSITIVE) {
            return None;
        }
        let top = a[col].clone();
        for row in a.iter_mut().skip(col + 1) {
            let f = row[col] / top[col];
            for (x, t) in row.iter_mut().zip(&top).skip(col) {
                *x -= f * t;
            }
        }
    }
    let mut x = vec![0.0; k];
    for r in (0..k).rev() {
        let s: f64 = (r + 1..k).map(|c| a[r][c] * x[c]).sum();
        x[r] = (a[r][k] - s) / a[r][r];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::SplitMix64;

    fn unit(rng: &mut SplitMix64) -> f64 {
        ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn cv(v: &[f64]) -> f64 {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt() / m
    }

    /// A throughput that goes as the CPU others left it, ±1 % of its own.
    fn neighboured(n: usize, seed: u64) -> (Vec<f64>, Vec<[Option<f64>; 3]>) {
        let mut rng = SplitMix64::new(seed);
        (0..n)
            .map(|_| {
                let others = 10.0 + 30.0 * unit(&mut rng);
                let own = 1.0 + 0.02 * (unit(&mut rng) - 0.5);
                (
                    1e5 * (1.0 - others / 100.0) * own,
                    [Some(others), Some(50.0), Some(0.0)],
                )
            })
            .unzip()
    }

    #[test]
    fn the_spread_others_made_is_taken_out_and_the_level_kept() {
        let (v, m) = neighboured(20, 7);
        let f = HostFit::of(&v, &m, 95.0).unwrap();
        assert_eq!(f.by.len(), 1);
        assert_eq!(f.by[0].0, HostMeasure::Others);
        assert!(f.by[0].1.r < -0.9, "{:?}", f.by);
        assert!(
            cv(&v) > 0.08 && cv(&f.adjusted) < 0.01,
            "{} {}",
            cv(&v),
            cv(&f.adjusted)
        );
        assert!(f.r2 > 0.95);
        let gm = |x: &[f64]| x.iter().map(|v| v.ln()).sum::<f64>() / x.len() as f64;
        assert!((gm(&v) - gm(&f.adjusted)).abs() < 1e-12);
        let left: f64 = m
            .iter()
            .map(|t| (1.0 - t[0].unwrap() / 100.0).ln())
            .sum::<f64>()
            / 20.0;
        assert!(
            (f.at[0] - 100.0 * (1.0 - left.exp())).abs() < 1e-9,
            "{:?}",
            f.at
        );
        // The judged figures' own t interval is the fit's, whose slope
        // took a degree of freedom: 19 trials' df, 18's width.
        let e = f.estimate(Estimator::Mean).unwrap();
        assert_eq!(e.df, 19.0);
        let logs: Vec<f64> = f.adjusted.iter().map(|v| v.ln()).collect();
        let ml = logs.iter().sum::<f64>() / 20.0;
        let ss: f64 = logs.iter().map(|l| (l - ml).powi(2)).sum();
        let fit_half = t_quantile(95.0, 18.0) * (ss / 18.0 / 20.0).sqrt();
        let jl: Vec<f64> = f.judged.iter().map(|v| v.ln()).collect();
        let js: f64 = jl.iter().map(|l| (l - ml).powi(2)).sum();
        let judged_half = t_quantile(95.0, 19.0) * (js / 19.0 / 20.0).sqrt();
        assert!(
            (fit_half - judged_half).abs() < 1e-12 * fit_half.max(1.0),
            "{fit_half} {judged_half}"
        );
    }

    #[test]
    fn two_measures_are_fitted_together() {
        // Others as above, and the vCPUs moved apart for the last third:
        // the line went from 50 to 400 ns and the figures halved, a step
        // that hides most of the neighbour: the line enters first.
        let (mut v, mut m) = neighboured(30, 11);
        for i in 20..30 {
            v[i] *= 0.5;
            m[i][1] = Some(400.0);
        }
        let f = HostFit::of(&v, &m, 95.0).unwrap();
        let fitted: Vec<HostMeasure> = f.by.iter().map(|b| b.0).collect();
        assert_eq!(fitted, [HostMeasure::Line, HostMeasure::Others]);
        assert!(cv(&f.adjusted) < 0.01, "{}", cv(&f.adjusted));
        assert!(f.judged.len() == 30 && cv(&f.judged) < 0.012);
    }

    #[test]
    fn a_fit_that_does_not_narrow_is_not_used() {
        // Five trials that followed the neighbour only loosely: the
        // slope's degree of freedom costs more than it takes out.
        let v = [100.0, 80.0, 100.0, 92.0, 92.0];
        let m: Vec<[Option<f64>; 3]> = [10.0, 30.0, 25.0, 12.0, 14.0]
            .iter()
            .map(|o| [Some(*o), None, None])
            .collect();
        let width = |x: &[f64]| crate::stats::Summary::by(Estimator::Mean, x, 95.0).width_pct();
        let f = HostFit::of(&v, &m, 95.0).unwrap();
        assert!(width(&f.judged) >= width(&v));
        assert_eq!(HostFit::narrowing(&v, &m, 95.0, width), None);
        let (v, m) = neighboured(12, 9);
        assert!(HostFit::narrowing(&v, &m, 95.0, width).is_some());
    }

    #[test]
    fn collinear_measures_do_not_solve() {
        let mut a = vec![vec![1.0, 2.0, 3.0], vec![2.0, 4.0, 6.0]];
        assert_eq!(solve(&mut a), None);
        let mut a = vec![vec![2.0, 1.0, 5.0], vec![1.0, 3.0, 10.0]];
        let x = solve(&mut a).unwrap();
        assert!(
            (x[0] - 1.0).abs() < 1e-12 && (x[1] - 3.0).abs() < 1e-12,
            "{x:?}"
        );
    }

    #[test]
    fn nothing_to_take_out_where_the_trials_followed_nothing() {
        let mut rng = SplitMix64::new(3);
        let v: Vec<f64> = (0..20).map(|_| 100.0 + unit(&mut rng)).collect();
        // Others moved, independently of the figures.
        let m: Vec<[Option<f64>; 3]> = (0..20)
            .map(|_| [Some(40.0 * unit(&mut rng)), None, Some(0.0)])
            .collect();
        assert_eq!(HostFit::of(&v, &m, 95.0), None);
        // A trial without the measure leaves it out of the fit.
        let (v, mut m) = neighboured(20, 5);
        m[3][0] = None;
        assert_eq!(HostFit::of(&v, &m, 95.0), None);
        // Too few trials to fit and keep three degrees of freedom.
        let (v, m) = neighboured(4, 5);
        assert_eq!(HostFit::of(&v, &m, 95.0), None);
        let (mut v, m) = neighboured(20, 5);
        v[0] = 0.0;
        assert_eq!(HostFit::of(&v, &m, 95.0), None);
    }

    proptest::proptest! {
        #[test]
        fn the_fit_keeps_the_trials_geometric_mean_and_narrows_them(seed in 0u64..1000, n in 8usize..40) {
            let (v, m) = neighboured(n, seed);
            if let Some(f) = HostFit::of(&v, &m, 95.0) {
                let gm = |x: &[f64]| x.iter().map(|v| v.ln()).sum::<f64>() / x.len() as f64;
                proptest::prop_assert!((gm(&v) - gm(&f.adjusted)).abs() < 1e-9);
                let var = |x: &[f64]| { let l: Vec<f64> = x.iter().map(|v| v.ln()).collect(); let m = l.iter().sum::<f64>() / l.len() as f64; l.iter().map(|v| (v - m).powi(2)).sum::<f64>() };
                // Least squares never leaves more than it started with.
                proptest::prop_assert!(var(&f.adjusted) <= var(&v) * (1.0 + 1e-9));
                proptest::prop_assert!((gm(&v) - gm(&f.judged)).abs() < 1e-9);
                proptest::prop_assert!(var(&f.judged) >= var(&f.adjusted));
                proptest::prop_assert!((0.0..=1.0).contains(&f.r2));
            }
        }
    }
}
