//! `kscale cpus`: the machine's topology and, for each CPU configuration,
//! the CPUs it would use and where a macro workload's load would go —
//! the plan of a study, checked before it runs. Nothing is measured.

use crate::error::user;
use crate::output::{outln, print, Format, Json};
use anyhow::Result;
use kscale_core::cpus::{format_cpulist, resolve};
use kscale_core::{CpuOrder, Topology};
use std::collections::BTreeMap;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kscale cpus                                  this machine and what `--cpus sweep` takes
  kscale cpus --cpus 1,2,4,8 --cpu-order spread
  KSCALE_SYSFS=/tmp/big-sys kscale cpus        plan for the machine a copied /sys describes")]
pub struct Args {
    /// CPU configurations, as `kscale run --cpus` takes them (default `sweep`).
    #[arg(long, value_name = "LIST")]
    cpus: Vec<String>,
    /// Which CPUs a count takes: `compact` (default), `spread` or `smt`.
    #[arg(long, value_name = "ORDER", default_value = "compact", value_parser = crate::engine::args::parse_cpu_order)]
    cpu_order: CpuOrder,
    /// Output format: terminal or json.
    #[arg(long, value_enum, default_value_t, hide_possible_values = true)]
    format: Format,
}

pub use crate::engine::args::usable;

pub fn run(args: Args) -> Result<ExitCode> {
    let format = args
        .format
        .accepted("cpus", &[Format::Terminal, Format::Json])?;
    // A copied tree describes another machine: this process's mask says
    // nothing about it, so its plan uses every CPU the tree has online.
    let topo = if kscale_sys::topology::foreign() {
        kscale_sys::topology::machine()
            .map_err(|e| user(e.to_string()))?
            .clone()
    } else {
        usable()?
    };
    let specs = if args.cpus.is_empty() {
        vec!["sweep".to_string()]
    } else {
        args.cpus.clone()
    };
    let configs = resolve(&specs, &topo, args.cpu_order)?;
    let avail = topo.ids();
    let source = kscale_sys::topology::root();
    match format {
        Format::Json => {
            let v = serde_json::json!({
                "sysfs": source,
                "cpus": avail,
                "packages": topo.packages(),
                "nodes": topo.nodes(),
                "llcs": topo.llcs(),
                "cores": topo.cores(),
                "threads_per_core": topo.threads_per_core(),
                "cpu_order": args.cpu_order,
                "configurations": configs.iter().map(|c| {
                    let w = topo.locate(&c.cpus);
                    let load = topo.load_cpus(&avail, &c.cpus);
                    serde_json::json!({
                        "name": c.name,
                        "cpus": c.cpus,
                        "cores": w.cores,
                        "threads_per_core_used": w.threads_per_core_used,
                        "llcs": w.llcs,
                        "nodes": w.nodes,
                        "load_cpus": load.cpus,
                        "load_shares": load.shared,
                    })
                }).collect::<Vec<_>>(),
            });
            print(&Json.document(&v)?)?;
        }
        // csv and md were refused above.
        Format::Terminal | Format::Csv | Format::Md => {
            outln!(
                "{}: {} CPUs kscale may use, {} package{}, {} node{}, {} LLC{}, {} cores, {} thread{} per core",
                source.display(),
                avail.len(),
                topo.packages(),
                plural(topo.packages()),
                topo.nodes().len(),
                plural(topo.nodes().len()),
                topo.llcs(),
                plural(topo.llcs()),
                topo.cores(),
                topo.threads_per_core(),
                plural(topo.threads_per_core()),
            )?;
            outln!()?;
            for line in columns(&topology_rows(&topo)) {
                outln!("{line}")?;
            }
            outln!()?;
            outln!("Configurations (--cpu-order {}):", args.cpu_order)?;
            let mut rows = vec![vec![
                "configuration".to_string(),
                "CPUs".into(),
                "macro load on".into(),
            ]];
            for c in &configs {
                let load = topo.load_cpus(&avail, &c.cpus);
                let mut on = format_cpulist(&load.cpus);
                if let Some(what) = load.shared {
                    on += &format!(" (shares {what})");
                }
                rows.push(vec![c.name.clone(), format_cpulist(&c.cpus), on]);
            }
            for line in columns(&rows) {
                outln!("{line}")?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A row per node: its packages, LLCs (how many cores each), cores, CPUs.
fn topology_rows(topo: &Topology) -> Vec<Vec<String>> {
    let mut rows = vec![vec![
        "node".to_string(),
        "packages".into(),
        "LLCs".into(),
        "cores".into(),
        "CPUs".into(),
    ]];
    for node in topo.nodes() {
        let mine: Vec<_> = topo.cpus.iter().filter(|p| p.node == node).collect();
        let mut packages: Vec<usize> = mine.iter().map(|p| p.package).collect();
        packages.sort_unstable();
        packages.dedup();
        let mut llc_cores: BTreeMap<usize, std::collections::BTreeSet<usize>> = BTreeMap::new();
        for p in &mine {
            llc_cores.entry(p.llc).or_default().insert(p.core);
        }
        let sizes: Vec<usize> = llc_cores.values().map(|c| c.len()).collect();
        let llcs = if sizes.iter().all(|&s| s == sizes[0]) {
            format!("{} × {} core{}", sizes.len(), sizes[0], plural(sizes[0]))
        } else {
            sizes
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join("+")
                + " cores"
        };
        let cores: usize = sizes.iter().sum();
        let cpus: Vec<usize> = mine.iter().map(|p| p.cpu).collect();
        rows.push(vec![
            node.to_string(),
            format_cpulist(&packages),
            llcs,
            cores.to_string(),
            format_cpulist(&cpus),
        ]);
    }
    rows
}

/// Left-aligned columns two spaces apart.
fn columns(rows: &[Vec<String>]) -> Vec<String> {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|r| {
            let mut line = String::new();
            for (i, cell) in r.iter().enumerate() {
                if i + 1 == r.len() {
                    line += cell;
                } else {
                    line += &format!("{cell:<w$}  ", w = widths[i]);
                }
            }
            line
        })
        .collect()
}
