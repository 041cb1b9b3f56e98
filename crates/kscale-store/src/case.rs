//! A stored case as the readers see it: its status, metrics and trials, and
//! what they make of them (its summary by the run's estimator, its host
//! fit, its CPU accounting, its merged histograms).

use crate::{parse_utc, MetricRow, QuantileOf, TrialRow};
use kscale_core::model::CpuAccounting;
use kscale_core::profile::Profile;
use kscale_core::{CaseKey, Estimator, RunRule, Summary};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseStatus {
    Pending,
    Done,
    Failed,
    /// Not measured because the machine cannot run it (a program is not
    /// installed); `error` holds the reason. Views show it and leave it out
    /// of ratios and geometric means.
    Skipped,
}

impl CaseStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CaseStatus::Pending => "pending",
            CaseStatus::Done => "done",
            CaseStatus::Failed => "failed",
            CaseStatus::Skipped => "skipped",
        }
    }
    pub(crate) fn parse(s: &str) -> CaseStatus {
        match s {
            "done" => CaseStatus::Done,
            "failed" => CaseStatus::Failed,
            "skipped" => CaseStatus::Skipped,
            _ => CaseStatus::Pending,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaseData {
    pub id: i64,
    pub seq: i64,
    pub key: CaseKey,
    pub cpus: Vec<usize>,
    pub status: CaseStatus,
    /// Whether the CI converged; `None` for cases not run to convergence
    /// (failed ones, and median-of-N cases).
    pub converged: Option<bool>,
    /// The run rule the case was measured under.
    #[serde(default = "converge")]
    pub rule: RunRule,
    /// The estimator of a converging case's result: the run's
    /// (`--estimator`, stored in its options' rule), the mean for runs
    /// stored before there was a choice.
    #[serde(default)]
    pub estimator: Estimator,
    pub error: Option<String>,
    pub iterations: Option<u64>,
    pub notes: Vec<String>,
    pub metrics: Vec<MetricRow>,
    pub trials: Vec<TrialRow>,
    /// Profiles of the case's profiled trial (`--profile`), one per event.
    #[serde(default)]
    pub profiles: Vec<Profile>,
}

fn converge() -> RunRule {
    RunRule::Converge
}

impl CaseData {
    pub fn metric(&self, name: &str) -> Option<&MetricRow> {
        self.metrics.iter().find(|m| m.name == name)
    }
    /// Did the case finish by its run rule: converged, or (median of N)
    /// measured its N trials? Tables mark the others.
    pub fn settled(&self) -> bool {
        match self.rule {
            RunRule::Converge => self.converged == Some(true),
            RunRule::MedianOf(n) => self.status == CaseStatus::Done && self.values_len() >= n,
        }
    }

    fn values_len(&self) -> usize {
        self.trials.iter().filter(|t| !t.warmup).count()
    }

    /// The metric a view asked for (`--metric NAME`), else the primary one.
    pub fn metric_or_primary(&self, name: Option<&str>) -> Option<&MetricRow> {
        match name {
            Some(n) => self.metric(n),
            None => self.primary(),
        }
    }

    pub fn primary(&self) -> Option<&MetricRow> {
        self.metrics
            .iter()
            .find(|m| m.primary)
            .or(self.metrics.first())
    }
    /// Seconds from its first counted trial's start to its last one's end:
    /// how many moments of the machine its result averages over
    /// ([`kscale_core::noise::moments`]). 0 with no counted trial.
    pub fn span_s(&self) -> f64 {
        let times: Vec<(i64, f64)> = self
            .trials
            .iter()
            .filter(|t| !t.warmup)
            .filter_map(|t| Some((parse_utc(&t.started_at)?, t.wall_s)))
            .collect();
        let (Some(first), Some(last)) = (
            times.iter().map(|t| t.0).min(),
            times.iter().max_by_key(|t| t.0),
        ) else {
            return 0.0;
        };
        (last.0 - first) as f64 + last.1
    }

    /// The counted (non-warm-up) values of one metric, in trial order.
    pub fn values(&self, metric: &str) -> Vec<f64> {
        self.trials
            .iter()
            .filter(|t| !t.warmup)
            .filter_map(|t| t.values.get(metric).copied())
            .collect()
    }
    /// The result of one metric, by the case's run rule: the mean and its
    /// Student-t interval, or the trimmed mean and its Yuen interval, by the
    /// case's estimator; under a median-of-N rule the median, its interval
    /// the range of the trials; for a percentile metric the quantile of the
    /// merged histogram of the counted trials (a mean of p99s is not a p99),
    /// its interval the trials' interval moved to that centre.
    pub fn summary(&self, metric: &str, confidence_pct: f64) -> Summary {
        self.summary_and_fit(metric, confidence_pct).0
    }

    /// [`CaseData::summary`] with the host fit its interval came from,
    /// where one did ([`CaseData::host_fit`]), for a table that marks it
    /// or builds on it without fitting again.
    pub fn summary_and_fit(
        &self,
        metric: &str,
        confidence_pct: f64,
    ) -> (Summary, Option<kscale_core::hostfit::HostFit>) {
        let values = self.values(metric);
        let mut s = match self.rule {
            RunRule::Converge => Summary::by(self.estimator, &values, confidence_pct),
            RunRule::MedianOf(_) => Summary::median_of(&values),
        };
        // Where the host's part was fitted out, the interval is the fit's
        // about the trials' own figure (docs/host.md, "Others on the
        // trial's CPUs").
        let fit = self.host_fit(metric, confidence_pct);
        if let Some(f) = &fit {
            let j = Summary::by(self.estimator, &f.judged, confidence_pct);
            s.ci_low = s.mean - (j.mean - j.ci_low);
            s.ci_high = s.mean + (j.ci_high - j.mean);
        }
        if let Some(q) = self.metric(metric).and_then(|m| m.quantile.as_ref()) {
            if let Some(v) = self.merged_quantile(q) {
                let shift = v - s.mean;
                s.ci_low += shift;
                s.ci_high += shift;
                s.mean = v;
            }
        }
        (s, fit)
    }

    /// The run's level of `metric` as a comparison between runs reads it:
    /// the plain mean of the counted trials, or a percentile metric's
    /// merged quantile; `None` without a counted value. Not the case's
    /// estimator: on a VM a run's trials are a mixture of the host's
    /// phases, not one level with outliers, and trimming keeps the phase
    /// most trials sat in, so trimmed runs spread more from run to run
    /// (docs/verdicts.md, "A run's level").
    pub fn level(&self, metric: &str) -> Option<f64> {
        if let Some(q) = self.metric(metric).and_then(|m| m.quantile.as_ref()) {
            return self.merged_quantile(q);
        }
        let v = self.values(metric);
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// The merged histogram of the counted trials.
    pub fn merged_histogram(&self, name: &str) -> Option<hdrhistogram::Histogram<u64>> {
        kscale_core::hist::merge_encoded(
            self.trials
                .iter()
                .filter(|t| !t.warmup)
                .filter_map(|t| t.histograms.get(name).map(String::as_str)),
        )
        .ok()
        .flatten()
    }

    fn merged_quantile(&self, q: &QuantileOf) -> Option<f64> {
        let h = self.merged_histogram(&q.hist)?;
        kscale_core::hist::quantile_ns(&h, q.q).map(|ns| ns * q.per_ns)
    }

    /// Was the load generator the bottleneck ([`kscale_core::load_bound`])?
    pub fn load_bound(&self) -> bool {
        kscale_core::load_bound(
            self.trials
                .iter()
                .filter(|t| !t.warmup)
                .map(|t| t.roles.as_slice()),
        )
    }
    /// The mean pace of the counted trials' cores (a user-space loop timed
    /// beside each trial, `CpuAccounting::chain_pace_ns`), where every counted
    /// trial recorded one.
    pub fn pace_ns(&self) -> Option<f64> {
        let p: Option<Vec<f64>> = self
            .trials
            .iter()
            .filter(|t| !t.warmup)
            .map(|t| {
                t.accounting
                    .as_ref()?
                    .chain_pace_ns
                    .filter(|p| p.is_finite() && *p > 0.0)
            })
            .collect();
        let p = p.filter(|p| !p.is_empty())?;
        Some(p.iter().sum::<f64>() / p.len() as f64)
    }
    /// Whether the counted trials' `metric` followed the hypervisor's steal
    /// time ([`kscale_core::Follows::steal`]), over the trials that recorded it.
    pub fn steal_link(&self, metric: &str) -> Option<kscale_core::Follows> {
        kscale_core::Follows::over(
            self.counted_with(metric, |a| Some(a.steal_pct)),
            kscale_core::Follows::steal,
        )
    }
    /// Whether they followed the host's placement of the vCPUs, the line
    /// round trip between two of the case's CPUs
    /// ([`kscale_core::Follows::line`]).
    pub fn line_link(&self, metric: &str) -> Option<kscale_core::Follows> {
        kscale_core::Follows::over(
            self.counted_with(metric, |a| a.line_ns),
            kscale_core::Follows::line,
        )
    }
    /// Whether they followed the share of their CPUs other tasks ran
    /// ([`kscale_core::Follows::others`]).
    pub fn others_link(&self, metric: &str) -> Option<kscale_core::Follows> {
        kscale_core::Follows::over(
            self.counted_with(metric, |a| a.others_pct),
            kscale_core::Follows::others,
        )
    }
    /// The counted trials' `metric` with what followed the host taken out
    /// ([`kscale_core::hostfit::HostFit`]), over the same trials as
    /// [`CaseData::values`], for a case run to convergence whose interval
    /// the fit narrows (as the runner judged it); `None` otherwise.
    pub fn host_fit(
        &self,
        metric: &str,
        confidence_pct: f64,
    ) -> Option<kscale_core::hostfit::HostFit> {
        if self.rule != RunRule::Converge {
            return None;
        }
        let (values, measures): (Vec<f64>, Vec<kscale_core::hostfit::Measures>) = self
            .trials
            .iter()
            .filter(|t| !t.warmup)
            .filter_map(|t| {
                Some((
                    *t.values.get(metric)?,
                    kscale_core::hostfit::measures(t.accounting.as_ref()),
                ))
            })
            .unzip();
        let width = |x: &[f64]| Summary::by(self.estimator, x, confidence_pct).width_pct();
        kscale_core::hostfit::HostFit::narrowing(&values, &measures, confidence_pct, width)
    }
    /// The counted trials' `metric`, each with one measure of its
    /// accounting (`None` where it has none).
    fn counted_with(
        &self,
        metric: &str,
        measure: impl Fn(&CpuAccounting) -> Option<f64>,
    ) -> Vec<(f64, Option<f64>)> {
        self.trials
            .iter()
            .filter(|t| !t.warmup)
            .filter_map(|t| {
                Some((
                    *t.values.get(metric)?,
                    t.accounting.as_ref().and_then(&measure),
                ))
            })
            .collect()
    }
    /// Mean CPU accounting over the counted trials that recorded it, with
    /// context switches and interrupts per second.
    pub fn accounting(&self) -> Option<CpuAccounting> {
        let a: Vec<&CpuAccounting> = self
            .trials
            .iter()
            .filter(|t| !t.warmup)
            .filter_map(|t| t.accounting.as_ref())
            .collect();
        if a.is_empty() {
            return None;
        }
        let n = a.len() as f64;
        let mean = |f: fn(&CpuAccounting) -> f64| a.iter().map(|x| f(x)).sum::<f64>() / n;
        let secs: f64 = a.iter().map(|x| x.seconds).sum();
        Some(CpuAccounting {
            user_pct: mean(|x| x.user_pct),
            system_pct: mean(|x| x.system_pct),
            idle_pct: mean(|x| x.idle_pct),
            irq_pct: mean(|x| x.irq_pct),
            softirq_pct: mean(|x| x.softirq_pct),
            steal_pct: mean(|x| x.steal_pct),
            ctxt: a.iter().map(|x| x.ctxt).sum(),
            intr: a.iter().map(|x| x.intr).sum(),
            seconds: secs,
            line_ns: {
                let l: Vec<f64> = a.iter().filter_map(|x| x.line_ns).collect();
                (!l.is_empty()).then(|| l.iter().sum::<f64>() / l.len() as f64)
            },
            others_pct: {
                let o: Vec<f64> = a.iter().filter_map(|x| x.others_pct).collect();
                (!o.is_empty()).then(|| o.iter().sum::<f64>() / o.len() as f64)
            },
            chain_pace_ns: {
                let p: Vec<f64> = a.iter().filter_map(|x| x.chain_pace_ns).collect();
                (!p.is_empty()).then(|| p.iter().sum::<f64>() / p.len() as f64)
            },
        })
    }
}
