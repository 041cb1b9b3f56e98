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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricDef {
    pub name: &'static str,
    pub unit: &'static str,
    pub direction: Direction,
}

impl MetricDef {
    pub const fn lower(name: &'static str, unit: &'static str) -> Self {
        MetricDef {
            name,
            unit,
            direction: Direction::Lower,
        }
    }
    pub const fn higher(name: &'static str, unit: &'static str) -> Self {
        MetricDef {
            name,
            unit,
            direction: Direction::Higher,
        }
    }
}

/// One metric's value in one trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricValue {
    pub name: String,
    pub value: f64,
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

impl CaseKey {
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

/// Where the CPUs of a trial's configuration spent the trial (SPEC §6),
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
}
