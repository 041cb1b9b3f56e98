//! Tables and reports. Results are first laid out as a format-neutral
//! [`Table`]; renderers turn it into terminal, Markdown or CSV text, so every
//! view (show, compare, scale, HTML) shares one layout.

pub mod compare;
pub mod decision;
pub mod format;
pub mod history;
pub mod html;
pub mod machine;
pub mod profile;
pub mod results;
pub mod scale;
pub mod staircase;
pub mod svg;
pub mod table;
pub mod variants;

pub use format::sig;
pub use table::{Cell, Row, RowKind, Table, Tone};

/// What the report needs to know about a workload, supplied by the binary
/// from its registry (the report crate does not depend on workload code and
/// names no family, param or metric itself: everything family-specific —
/// which param a chart runs along, which metrics it draws, which param's
/// variants a table compares — arrives here).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkloadInfo {
    pub id: String,
    pub family: String,
    pub family_title: String,
    pub title: String,
    /// The workload's params in declaration order.
    pub params: Vec<ParamInfo>,
    /// Declared metrics, the primary first.
    pub metrics: Vec<MetricInfo>,
    /// Tables add geometric-mean rows over this param.
    pub geomean_over: Option<String>,
    pub charts: Vec<ChartSpec>,
    pub variants: Option<VariantsSpec>,
}

/// How a param's values read as numbers on an axis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ParamScale {
    /// A byte count written `512`, `4k`, `0.5m`.
    Bytes,
    /// A plain number (an integer, seconds).
    Number,
    /// A count where `ncpus` means the CPUs of the case's configuration.
    Count,
    /// Words or addresses: not a number.
    #[default]
    Label,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParamInfo {
    pub name: String,
    pub scale: ParamScale,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricInfo {
    pub name: String,
    pub unit: String,
}

/// A chart of metrics against a param (see `ChartDef` in kscale-workloads).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChartSpec {
    pub x: String,
    pub log_x: bool,
    /// One chart each; empty = the primary metric.
    pub metrics: Vec<String>,
    /// Params whose values get lines; empty = every varying param.
    pub series: Vec<String>,
}

/// A table comparing one param's values (see `VariantsDef`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VariantsSpec {
    pub title: String,
    pub param: String,
    pub heading: String,
    /// (metric, column heading); the first is compared with the baseline.
    pub metrics: Vec<(String, String)>,
    pub baseline: String,
    pub note: String,
}

impl WorkloadInfo {
    /// A stand-in named by the id, for workloads this kscale does not know
    /// (a run stored by another version).
    pub fn unknown(id: &str) -> WorkloadInfo {
        let family = id.split('.').next().unwrap_or(id).to_string();
        WorkloadInfo {
            id: id.to_string(),
            family_title: family.clone(),
            family,
            title: id.to_string(),
            ..Default::default()
        }
    }
    pub fn param_order(&self) -> Vec<&str> {
        self.params.iter().map(|p| p.name.as_str()).collect()
    }
    pub fn param(&self, name: &str) -> Option<&ParamInfo> {
        self.params.iter().find(|p| p.name == name)
    }
    /// The declared unit of a metric.
    pub fn unit(&self, metric: &str) -> Option<&str> {
        self.metrics
            .iter()
            .find(|m| m.name == metric)
            .map(|m| m.unit.as_str())
    }
}

/// Looks up workload metadata.
pub trait Catalog {
    fn workload(&self, id: &str) -> Option<WorkloadInfo>;
    /// Family names in display order.
    fn family_order(&self) -> Vec<String>;
    /// The catalogue's entry, or [`WorkloadInfo::unknown`].
    fn info(&self, id: &str) -> WorkloadInfo {
        self.workload(id)
            .unwrap_or_else(|| WorkloadInfo::unknown(id))
    }
}
