//! Tables and reports. Results are first laid out as a format-neutral
//! [`Table`]; renderers turn it into terminal, Markdown or CSV text, so every
//! view (show, compare, scale, HTML) shares one layout.

pub mod compare;
pub mod format;
pub mod html;
pub mod impls;
pub mod profile;
pub mod results;
pub mod scale;
pub mod svg;
pub mod table;

pub use format::sig;
pub use table::{Cell, Row, RowKind, Table, Tone};

/// What the report needs to know about a workload, supplied by the binary
/// from its registry (the report crate does not depend on workload code).
#[derive(Clone, Debug)]
pub struct WorkloadInfo {
    pub id: String,
    pub family: String,
    pub family_title: String,
    pub title: String,
    pub param_order: Vec<String>,
    pub geomean_over: Option<String>,
}

/// Looks up workload metadata; unknown workloads (e.g. from a newer kscale)
/// fall back to their id.
pub trait Catalog {
    fn workload(&self, id: &str) -> Option<WorkloadInfo>;
    /// Family names in display order.
    fn family_order(&self) -> Vec<String>;
}
