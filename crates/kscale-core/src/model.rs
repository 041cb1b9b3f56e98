use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Which way is better. Stored with every result so that a comparison never
/// has to consult a registry that may have changed since the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Lower,
    Higher,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Lower => "lower",
            Direction::Higher => "higher",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "lower" => Some(Direction::Lower),
            "higher" => Some(Direction::Higher),
            _ => None,
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A metric as declared by a workload. The first metric of a workload is its
/// primary one; the others are recorded alongside.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MetricDef {
    pub name: &'static str,
    pub unit: &'static str,
    pub direction: Direction,
    pub kind: MetricKind,
}

/// Where a metric's value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricKind {
    /// One value per trial; the result is their mean with its confidence
    /// interval (or their median under a median-of-N run rule).
    Value,
    /// A quantile `q` (0–1) of the trial's nanosecond histogram `hist`,
    /// converted to the metric's unit by multiplying by `per_ns`. Each trial
    /// stores its own quantile, but the result is the quantile of the merged
    /// histogram of the counted trials (docs/macro.md).
    Quantile {
        #[serde(skip)]
        hist: &'static str,
        q: f64,
        per_ns: f64,
    },
}

impl MetricDef {
    pub const fn lower(name: &'static str, unit: &'static str) -> Self {
        MetricDef {
            name,
            unit,
            direction: Direction::Lower,
            kind: MetricKind::Value,
        }
    }
    pub const fn higher(name: &'static str, unit: &'static str) -> Self {
        MetricDef {
            name,
            unit,
            direction: Direction::Higher,
            kind: MetricKind::Value,
        }
    }
    /// A latency quantile (lower is better) of histogram `hist`, in `unit`,
    /// where one `unit` is `1 / per_ns` nanoseconds (µs: `per_ns = 1e-3`).
    pub const fn quantile(
        name: &'static str,
        unit: &'static str,
        hist: &'static str,
        q: f64,
        per_ns: f64,
    ) -> Self {
        MetricDef {
            name,
            unit,
            direction: Direction::Lower,
            kind: MetricKind::Quantile { hist, q, per_ns },
        }
    }
    /// The histogram this metric is read from, if any.
    pub fn histogram(&self) -> Option<&'static str> {
        match self.kind {
            MetricKind::Quantile { hist, .. } => Some(hist),
            MetricKind::Value => None,
        }
    }
}

/// How a workload's trials become its result (stored with every case, so a
/// result never depends on a registry that may have changed since).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunRule {
    /// Repeat until the Student-t confidence interval of the mean is narrow
    /// enough (the run's `--ci`), between `--min-trials` and `--max-trials`;
    /// the result is the mean.
    Converge,
    /// Exactly N counted trials; the result is their median (SPECweb99's
    /// rule, "3 runs, the median reported").
    MedianOf(usize),
}

impl RunRule {
    /// The name stored with a case: `mean` or `median`.
    pub fn estimator(&self) -> &'static str {
        match self {
            RunRule::Converge => "mean",
            RunRule::MedianOf(_) => "median",
        }
    }

    /// The estimator whose standard error says how well a case's result
    /// is known, the run measuring under `run`'s: a converging case's
    /// own; a median of N's, the 20 % trimmed mean's (docs/method.md,
    /// "Host spells and the estimator"). A median is not moved by one
    /// wrecked window, so its error must not be either: a quick study's
    /// web answer of 3,200 conns on one CPU, its ten windows at 3,200
    /// but for one that conformed 2,069 in a host spell, read ±17 % by
    /// the mean's interval and took every window its share held trying
    /// to settle it. Below five windows it is the mean.
    pub fn spread_estimator(&self, run: crate::stats::Estimator) -> crate::stats::Estimator {
        match self {
            RunRule::Converge => run,
            RunRule::MedianOf(_) => crate::stats::Estimator::Trimmed,
        }
    }
}

/// The CPU time one role process of a macro workload used during a trial's
/// measured window (docs/macro.md): the server confined to the CPU
/// configuration, each load generator on the CPUs it was given.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RoleCpu {
    /// `server` or `load`.
    pub role: String,
    /// `local`, or the peer (`HOST:PORT`) that ran it.
    pub host: String,
    /// User + system seconds of the role's threads and reaped children.
    pub cpu_s: f64,
    /// Length of the measured window.
    pub window_s: f64,
    /// CPUs the role process was allowed to run on.
    pub cpus: usize,
}

impl RoleCpu {
    /// Share of the role's CPUs it kept busy (0–1).
    pub fn utilization(&self) -> f64 {
        if self.window_s <= 0.0 || self.cpus == 0 {
            return 0.0;
        }
        self.cpu_s / (self.window_s * self.cpus as f64)
    }
}

/// A load generator that keeps this share of its CPUs busy is taken to be the
/// bottleneck: the figure may be the client's limit, not the system's.
pub const LOAD_BOUND_UTILIZATION: f64 = 0.90;

/// Is a result load-bound? Each load host's utilisation is averaged over the
/// counted trials; one host at or above [`LOAD_BOUND_UTILIZATION`] is enough,
/// because the slowest client paces a closed-loop benchmark.
pub fn load_bound<'a>(trials: impl IntoIterator<Item = &'a [RoleCpu]>) -> bool {
    let mut by_host: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    for roles in trials {
        for r in roles.iter().filter(|r| r.role == "load") {
            let e = by_host.entry(r.host.as_str()).or_default();
            e.0 += r.utilization();
            e.1 += 1;
        }
    }
    by_host
        .values()
        .any(|(sum, n)| *n > 0 && sum / *n as f64 >= LOAD_BOUND_UTILIZATION)
}

/// All metric values of one trial, keyed by metric name.
pub type TrialValues = BTreeMap<String, f64>;

/// Identifies a case inside a run: workload, its concrete params and the CPU
/// configuration it ran on.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CaseKey {
    pub workload: String,
    pub params: BTreeMap<String, String>,
    pub cpus: String,
}

/// The value a capacity search's answer case holds in its searched param
/// (`conns=capacity`): the case whose figure is the capacity, beside the
/// search's steps, each a case at one value (docs/families/web.md,
/// "Capacity").
pub const CAPACITY: &str = "capacity";

impl CaseKey {
    /// The param a capacity search's answer case searched; `None` for any
    /// other case.
    pub fn searched(&self) -> Option<&str> {
        self.params
            .iter()
            .find(|(_, v)| v.as_str() == CAPACITY)
            .map(|(k, _)| k.as_str())
    }

    /// Whether this case is a step of the search `answer` answers, on any
    /// CPU configuration: same workload and params but the searched one.
    /// Tables show the answer and leave its steps to its note.
    pub fn is_step_of(&self, answer: &CaseKey) -> bool {
        let Some(p) = answer.searched() else {
            return false;
        };
        self.workload == answer.workload
            && self.params.get(p).is_some_and(|v| v != CAPACITY)
            && self.params.len() == answer.params.len()
            && self
                .params
                .iter()
                .all(|(k, v)| k == p || answer.params.get(k) == Some(v))
    }

    /// Whether any of `keys` is a capacity answer this case is a step of.
    pub fn is_step_in<'a>(&self, mut keys: impl Iterator<Item = &'a CaseKey>) -> bool {
        keys.any(|a| self.is_step_of(a))
    }

    pub fn family(&self) -> &str {
        self.workload.split('.').next().unwrap_or(&self.workload)
    }

    /// `procs=2 size=16k`, in the workload's param order when given.
    pub fn params_label(&self, order: &[&str]) -> String {
        let mut keys: Vec<&String> = self.params.keys().collect();
        keys.sort_by_key(|k| order.iter().position(|o| o == k).unwrap_or(usize::MAX));
        keys.iter()
            .map(|k| format!("{}={}", k, self.params[*k]))
            .collect::<Vec<_>>()
            .join(" ")
    }

    pub fn params_json(&self) -> String {
        serde_json::to_string(&self.params).unwrap_or_else(|_| "{}".into())
    }
}

/// Where the CPUs of a trial's configuration spent the trial (docs/method.md),
/// from /proc/stat; context switches and interrupts are system-wide counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuAccounting {
    pub user_pct: f64,
    pub system_pct: f64,
    pub idle_pct: f64,
    pub irq_pct: f64,
    pub softirq_pct: f64,
    pub steal_pct: f64,
    pub ctxt: u64,
    pub intr: u64,
    pub seconds: f64,
    /// Round trip in ns of a cache line between two of the trial's CPUs,
    /// the mean of a probe just before and one just after it; `None` for a
    /// trial on one CPU, a failed probe, or a run from before kscale
    /// measured it (docs/host.md, "vCPU placement").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_ns: Option<f64>,
    /// Share (%) of the trial's CPUs' time — its own and its load's — that
    /// tasks other than the trial's ran: a noisy neighbour, another
    /// program. `None` for a trial with peers, or from before kscale
    /// measured it (docs/host.md, "Others on the trial's CPUs").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_pct: Option<f64>,
    /// Nanoseconds of a fixed user-space loop on the trial's own thread
    /// (short independent chains, each ended by a loop exit the branch
    /// predictor must foresee), the mean of a reading just before and one
    /// just after it: the pace the host let that thread's core keep around
    /// the trial. It runs no kernel code, so a slower kernel path cannot
    /// move it, while the host's spells move it with the case
    /// (docs/verdicts.md, "The pace beside each trial"). A key of its own:
    /// the single dependent chain older runs stored as `pace_ns` read
    /// another scale and missed the spells, so those runs read as unpaced.
    /// `None` for a macro trial or an older run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_pace_ns: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(host: &str, cpu_s: f64) -> RoleCpu {
        RoleCpu {
            role: "load".into(),
            host: host.into(),
            cpu_s,
            window_s: 2.0,
            cpus: 1,
        }
    }

    fn key(conns: &str, rate: &str, cpus: &str) -> CaseKey {
        CaseKey {
            workload: "web.nginx".into(),
            params: [("conns", conns), ("rate", rate)]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cpus: cpus.into(),
        }
    }

    #[test]
    fn a_capacity_answer_and_its_steps() {
        let answer = key(CAPACITY, "400", "1");
        assert_eq!(answer.searched(), Some("conns"));
        assert_eq!(key("800", "400", "1").searched(), None);
        // Steps on every configuration, not another rate, not the answer.
        assert!(key("800", "400", "1").is_step_of(&answer));
        assert!(key("3200", "400", "all").is_step_of(&answer));
        assert!(!key("800", "0", "1").is_step_of(&answer));
        assert!(!answer.is_step_of(&answer));
        assert!(!key("800", "400", "1").is_step_of(&key("800", "400", "1")));
        let mut other = key("800", "400", "1");
        other.workload = "web.own".into();
        assert!(!other.is_step_of(&answer));
        assert!(key("800", "400", "1").is_step_in([&other.clone(), &answer].into_iter()));
    }

    #[test]
    fn load_bound_rule() {
        let server = RoleCpu {
            role: "server".into(),
            host: "local".into(),
            cpu_s: 2.0,
            window_s: 2.0,
            cpus: 1,
        };
        // A saturated server is the point of the benchmark, not a flag.
        let t1 = vec![server.clone(), load("local", 1.0)];
        assert!(!load_bound([t1.as_slice()]));
        // 95 % and 89 % average to 92 %: load-bound.
        let a = vec![load("local", 1.9)];
        let b = vec![load("local", 1.78)];
        assert!(load_bound([a.as_slice(), b.as_slice()]));
        // One saturated peer among idle ones is enough.
        let c = vec![load("10.0.0.2:9", 0.2), load("10.0.0.3:9", 1.85)];
        assert!(load_bound([c.as_slice()]));
        // Exactly at the threshold counts.
        let d = vec![load("local", 1.8)];
        assert!(load_bound([d.as_slice()]));
        assert!(!load_bound(std::iter::empty::<&[RoleCpu]>()));
        let z = RoleCpu::default();
        assert_eq!(z.utilization(), 0.0);
    }

    #[test]
    fn quantile_metrics_name_their_histogram() {
        let m = MetricDef::quantile("p99", "µs", "latency", 0.99, 1e-3);
        assert_eq!(m.histogram(), Some("latency"));
        assert_eq!(m.direction, Direction::Lower);
        assert_eq!(MetricDef::higher("tps", "1/s").histogram(), None);
        assert_eq!(RunRule::MedianOf(3).estimator(), "median");
    }
}
