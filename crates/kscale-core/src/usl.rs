//! Gunther's Universal Scalability Law, fitted to throughput measured on a
//! few CPU counts so that scalability can be planned past the machine at
//! hand (docs/method.md):
//!
//! X(N) = λN / (1 + σ(N − 1) + κN(N − 1))
//!
//! σ is contention (serialisation), κ coherency (crosstalk). With the
//! relative capacity C(N) = X(N)/X(1), the law becomes linear in σ and κ:
//! N/C(N) − 1 = σ(N − 1) + κN(N − 1), which is fitted by least squares
//! through the origin, with both coefficients kept non-negative.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct UslFit {
    pub sigma: f64,
    pub kappa: f64,
    /// Throughput at one CPU (the measured X(1)).
    pub lambda: f64,
    /// Coefficient of determination of the fitted throughput.
    pub r2: f64,
}

impl UslFit {
    /// Fits (CPU count, throughput) points. Needs a point at N = 1 and at
    /// least three distinct counts.
    pub fn fit(points: &[(f64, f64)]) -> Option<UslFit> {
        let x1 = points.iter().find(|(n, _)| *n == 1.0).map(|p| p.1)?;
        let mut counts: Vec<f64> = points.iter().map(|p| p.0).collect();
        counts.sort_by(f64::total_cmp);
        counts.dedup();
        if counts.len() < 3
            || x1.is_nan()
            || x1 <= 0.0
            || points
                .iter()
                .any(|(n, x)| n.is_nan() || *n < 1.0 || x.is_nan() || *x <= 0.0)
        {
            return None;
        }
        let (mut s11, mut s12, mut s22, mut s1y, mut s2y) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for &(n, x) in points {
            let c = x / x1;
            let y = n / c - 1.0;
            let a = n - 1.0;
            let b = n * (n - 1.0);
            s11 += a * a;
            s12 += a * b;
            s22 += b * b;
            s1y += a * y;
            s2y += b * y;
        }
        let det = s11 * s22 - s12 * s12;
        let (mut sigma, mut kappa) = if det.abs() > 1e-12 {
            ((s1y * s22 - s2y * s12) / det, (s2y * s11 - s1y * s12) / det)
        } else {
            (s1y / s11, 0.0)
        };
        if sigma < 0.0 {
            sigma = 0.0;
            kappa = (s2y / s22).max(0.0);
        }
        if kappa < 0.0 {
            kappa = 0.0;
            sigma = (s1y / s11).max(0.0);
        }
        let mut fit = UslFit {
            sigma,
            kappa,
            lambda: x1,
            r2: f64::NAN,
        };
        let mean = points.iter().map(|p| p.1).sum::<f64>() / points.len() as f64;
        let ss_tot: f64 = points.iter().map(|p| (p.1 - mean).powi(2)).sum();
        let ss_res: f64 = points
            .iter()
            .map(|p| (p.1 - fit.predict(p.0)).powi(2))
            .sum();
        fit.r2 = if ss_tot > 0.0 {
            1.0 - ss_res / ss_tot
        } else {
            1.0
        };
        Some(fit)
    }

    pub fn predict(&self, n: f64) -> f64 {
        self.lambda * n / (1.0 + self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0))
    }

    /// The CPU count where throughput peaks, √((1 − σ)/κ); `None` when the
    /// curve never turns down (κ = 0) or contention alone caps it (σ ≥ 1).
    pub fn peak(&self) -> Option<f64> {
        (self.kappa > 0.0 && self.sigma < 1.0).then(|| ((1.0 - self.sigma) / self.kappa).sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn synth(sigma: f64, kappa: f64, lambda: f64, ns: &[f64]) -> Vec<(f64, f64)> {
        let f = UslFit {
            sigma,
            kappa,
            lambda,
            r2: 1.0,
        };
        ns.iter().map(|&n| (n, f.predict(n))).collect()
    }

    #[test]
    fn recovers_known_coefficients() {
        let pts = synth(0.05, 0.002, 1000.0, &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0]);
        let f = UslFit::fit(&pts).unwrap();
        assert!((f.sigma - 0.05).abs() < 1e-9, "{f:?}");
        assert!((f.kappa - 0.002).abs() < 1e-9, "{f:?}");
        assert!((f.r2 - 1.0).abs() < 1e-9);
        let peak = f.peak().unwrap();
        assert!((peak - (0.95f64 / 0.002).sqrt()).abs() < 1e-6);
        assert!(
            (f.predict(64.0)
                - UslFit {
                    sigma: 0.05,
                    kappa: 0.002,
                    lambda: 1000.0,
                    r2: 1.0
                }
                .predict(64.0))
            .abs()
                < 1e-6
        );
    }

    #[test]
    fn linear_scaling_has_no_peak() {
        let pts: Vec<(f64, f64)> = [1.0, 2.0, 4.0].iter().map(|&n| (n, 100.0 * n)).collect();
        let f = UslFit::fit(&pts).unwrap();
        assert!(f.sigma.abs() < 1e-12 && f.kappa.abs() < 1e-12, "{f:?}");
        assert_eq!(f.peak(), None);
    }

    #[test]
    fn contention_only() {
        let pts = synth(0.2, 0.0, 50.0, &[1.0, 2.0, 3.0, 4.0]);
        let f = UslFit::fit(&pts).unwrap();
        assert!(
            (f.sigma - 0.2).abs() < 1e-9 && f.kappa.abs() < 1e-12,
            "{f:?}"
        );
    }

    #[test]
    fn refuses_too_little_data() {
        assert!(UslFit::fit(&[(1.0, 10.0), (2.0, 19.0)]).is_none());
        assert!(
            UslFit::fit(&[(2.0, 10.0), (4.0, 19.0), (8.0, 30.0)]).is_none(),
            "needs N = 1"
        );
        assert!(UslFit::fit(&[(1.0, 10.0), (2.0, 0.0), (4.0, 30.0)]).is_none());
    }

    proptest! {
        #[test]
        fn noisy_fit_is_close(sigma in 0.0f64..0.3, kappa in 0.0f64..0.01, noise in prop::collection::vec(-0.01f64..0.01, 6)) {
            let ns = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0];
            let pts: Vec<(f64, f64)> = synth(sigma, kappa, 100.0, &ns)
                .into_iter().zip(&noise).map(|((n, x), e)| (n, if n == 1.0 { x } else { x * (1.0 + e) })).collect();
            let f = UslFit::fit(&pts).unwrap();
            prop_assert!(f.sigma >= 0.0 && f.kappa >= 0.0);
            // Predictions stay within a few per cent of the truth inside the measured range.
            let truth = UslFit { sigma, kappa, lambda: 100.0, r2: 1.0 };
            for n in ns {
                prop_assert!((f.predict(n) / truth.predict(n) - 1.0).abs() < 0.05, "n={} fit={:?}", n, f);
            }
        }
    }
}
