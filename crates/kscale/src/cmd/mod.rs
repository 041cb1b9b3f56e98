//! One file per sub-command, plus what they share: opening the store and
//! describing the registry to the report crate.

pub mod changes;
pub mod check;
pub mod compare;
pub mod completions;
pub mod cpus;
pub mod doctor;
pub mod export;
pub mod fleet;
pub mod history;
pub mod import;
pub mod list;
pub mod man;
pub mod peer;
pub mod profile;
pub mod report;
pub mod results;
pub mod run;
pub mod scale;
pub mod show;
pub mod study;
pub mod tune;
pub mod vm;
pub mod vm_init;
pub mod web;
pub mod worker;

use crate::error::user;
use crate::output::{Format, Json};
use anyhow::Result;
use kscale_core::ParamKind;
use kscale_report::{
    Catalog, ChartSpec, MetricInfo, ParamInfo, ParamScale, VariantsSpec, WorkloadInfo,
};
use kscale_store::Store;
use std::path::{Path, PathBuf};

pub use crate::output::use_color;

/// `--db`, else `$KSCALE_DB`, else `$XDG_DATA_HOME/kscale/kscale.db`
/// (`~/.local/share/kscale/kscale.db`).
pub fn db_path(flag: Option<PathBuf>) -> PathBuf {
    if let Some(p) = flag {
        return p;
    }
    if let Some(p) = std::env::var_os("KSCALE_DB").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("kscale").join("kscale.db")
}

/// Opens the store for writing, creating it if needed.
pub fn open_store(flag: Option<PathBuf>) -> Result<Store> {
    Ok(Store::open(&db_path(flag))?)
}

/// Opens an existing store for reading; a missing file is the user's mistake,
/// not an empty result. (A PostgreSQL URL is opened as given.)
pub fn open_existing(flag: Option<PathBuf>) -> Result<Store> {
    let p = db_path(flag);
    if !p.exists() && !p.to_str().is_some_and(kscale_store::is_url) {
        return Err(user(format!(
            "no database at {} (run `kscale run` first, or pass --db PATH)",
            p.display()
        )));
    }
    Ok(Store::open(&p)?)
}

/// The registry as the report crate sees it.
pub struct Registry;

impl Catalog for Registry {
    fn workload(&self, id: &str) -> Option<WorkloadInfo> {
        let w = kscale_workloads::find(id)?;
        let f = kscale_workloads::family(w.family)?;
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Some(WorkloadInfo {
            id: w.id(),
            family: f.name.into(),
            family_title: f.title.into(),
            title: w.title.into(),
            params: w
                .params
                .iter()
                .map(|p| ParamInfo {
                    name: p.name.into(),
                    scale: match p.kind {
                        ParamKind::Size { .. } => ParamScale::Bytes,
                        ParamKind::Count { .. } => ParamScale::Count,
                        ParamKind::Int { .. } | ParamKind::Seconds { .. } => ParamScale::Number,
                        ParamKind::Choice(_)
                        | ParamKind::Str
                        | ParamKind::Addr
                        | ParamKind::Url => ParamScale::Label,
                    },
                })
                .collect(),
            metrics: w
                .metrics
                .iter()
                .map(|m| MetricInfo {
                    name: m.name.into(),
                    unit: m.unit.into(),
                })
                .collect(),
            geomean_over: w.geomean_over.map(String::from),
            charts: w
                .charts
                .iter()
                .map(|c| ChartSpec {
                    x: c.x.into(),
                    log_x: c.log_x,
                    metrics: strings(c.metrics),
                    series: strings(c.series),
                })
                .collect(),
            variants: w.variants.map(|v| VariantsSpec {
                title: v.title.into(),
                param: v.param.into(),
                heading: v.heading.into(),
                metrics: v
                    .metrics
                    .iter()
                    .map(|(m, h)| (m.to_string(), h.to_string()))
                    .collect(),
                baseline: v.baseline.into(),
                note: v.note.into(),
            }),
        })
    }
    fn family_order(&self) -> Vec<String> {
        kscale_workloads::REGISTRY
            .iter()
            .map(|f| f.name.to_string())
            .collect()
    }
}

/// Prints a command's result: `value` as JSON with `--format json`, else
/// its `tables` in the text format asked for.
pub fn print_result(
    value: &impl serde::Serialize,
    tables: &[kscale_report::Table],
    format: Format,
) -> Result<()> {
    let text = match format {
        Format::Json => Json.document(value)?,
        _ => format.exporter().tables(tables),
    };
    crate::output::print(&text)
}
