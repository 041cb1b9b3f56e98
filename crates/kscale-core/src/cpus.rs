//! CPU configurations (docs/method.md): the sets of CPUs a case may run on.
//!
//! `--cpus` takes a comma-separated list of counts (`1,2,4`), `all` and
//! `sweep`, or — when the value contains a range — one explicit CPU set in
//! the kernel's cpulist syntax (`0-3,8`). The option may be repeated. Which
//! CPUs a count takes is `--cpu-order`'s (see [`crate::topo`]).

use crate::topo::{CpuOrder, Topology};
use serde::{Deserialize, Serialize};
use thiserror::Error;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuConfig {
    /// How the user named it and where its CPUs are: `1 (1 core, 1 LLC,
    /// node 0)`, `all (…)`, `0-1 (…)`; runs stored before names carried
    /// their place have the bare `1`, `all`, `0-1` ([`base_name`]).
    pub name: String,
    pub cpus: Vec<usize>,
}

impl CpuConfig {
    pub fn count(&self) -> usize {
        self.cpus.len()
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum CpuSpecError {
    #[error("bad CPU list `{spec}`: {why} (accepted: counts like 1,2,4, `all`, `sweep`, or a set like 0-3,8)")]
    Malformed { spec: String, why: String },
    #[error("CPU list `{spec}` names CPU {cpu}, which this machine does not offer (available: {available})")]
    Missing {
        spec: String,
        cpu: usize,
        available: String,
    },
    #[error("CPU count {count} in `{spec}` exceeds the {available} CPUs available")]
    TooMany {
        spec: String,
        count: usize,
        available: usize,
    },
}

/// Parses the kernel's cpulist syntax: `0-3,8,10-11`.
pub fn parse_cpulist(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.trim().split(',') {
        let part = part.trim();
        if part.is_empty() {
            return None;
        }
        if let Some((a, b)) = part.split_once('-') {
            let a: usize = a.trim().parse().ok()?;
            let b: usize = b.trim().parse().ok()?;
            if b < a || b - a > 1 << 16 {
                return None;
            }
            out.extend(a..=b);
        } else {
            out.push(part.parse().ok()?);
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// Formats CPUs in cpulist syntax, compressing runs.
pub fn format_cpulist(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// The part of a configuration's name that says which configuration it is
/// (`4`, `all`, `0-3`) without where its CPUs are: runs from before names
/// carried their place, and runs on machines of another shape, match on it.
pub fn base_name(name: &str) -> &str {
    name.split_once(" (").map_or(name, |(b, _)| b).trim()
}

/// Resolves `--cpus` values against the part of the machine kscale may use
/// (`topo`, already bounded by its affinity mask): counts and `sweep` take
/// the first CPUs of `order`'s walk, explicit sets are taken as given, and
/// every name says where its CPUs are, e.g. `4 (4 cores, 1 LLC, node 0)`.
/// Configurations naming the same set are kept once, first name wins.
pub fn resolve(
    specs: &[String],
    topo: &Topology,
    order: CpuOrder,
) -> Result<Vec<CpuConfig>, CpuSpecError> {
    let avail = topo.ids();
    let walk = topo.order(order);
    let all_name = format_cpulist(&avail);
    let mut out: Vec<CpuConfig> = Vec::new();
    let push = |base: String, mut cpus: Vec<usize>, out: &mut Vec<CpuConfig>| {
        cpus.sort_unstable();
        if !out.iter().any(|o| o.cpus == cpus) {
            out.push(CpuConfig {
                name: format!("{base} ({})", topo.locate(&cpus).label()),
                cpus,
            });
        }
    };
    let count = |n: usize| {
        if n == avail.len() {
            "all".to_string()
        } else {
            n.to_string()
        }
    };
    let specs: Vec<String> = if specs.is_empty() {
        vec!["all".into()]
    } else {
        specs.to_vec()
    };
    for spec in &specs {
        let malformed = |why: &str| CpuSpecError::Malformed {
            spec: spec.clone(),
            why: why.into(),
        };
        let s = spec.trim();
        if s.is_empty() {
            return Err(malformed("it is empty"));
        }
        if s.contains('-') {
            let set = parse_cpulist(s).ok_or_else(|| malformed("not a valid CPU set"))?;
            if let Some(&cpu) = set.iter().find(|c| avail.binary_search(c).is_err()) {
                return Err(CpuSpecError::Missing {
                    spec: spec.clone(),
                    cpu,
                    available: all_name.clone(),
                });
            }
            push(format_cpulist(&set), set, &mut out);
            continue;
        }
        for item in s.split(',') {
            let item = item.trim();
            match item {
                "all" => push("all".into(), avail.clone(), &mut out),
                "sweep" => {
                    for n in topo.sweep() {
                        push(count(n), walk[..n].to_vec(), &mut out);
                    }
                }
                "" => return Err(malformed("it has an empty item")),
                _ => {
                    let n: usize = item.parse().map_err(|_| {
                        malformed(&format!("`{item}` is not a count, `all` or `sweep`"))
                    })?;
                    if n == 0 {
                        return Err(malformed("a CPU count must be at least 1"));
                    }
                    if n > avail.len() {
                        return Err(CpuSpecError::TooMany {
                            spec: spec.clone(),
                            count: n,
                            available: avail.len(),
                        });
                    }
                    push(n.to_string(), walk[..n].to_vec(), &mut out);
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(c: &[CpuConfig]) -> Vec<String> {
        c.iter()
            .map(|c| format!("{}:{}", c.name, format_cpulist(&c.cpus)))
            .collect()
    }

    #[test]
    fn cpulist_roundtrip() {
        assert_eq!(parse_cpulist("0-3,8"), Some(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_cpulist("2,1,1"), Some(vec![1, 2]));
        assert_eq!(parse_cpulist("3-1"), None);
        assert_eq!(parse_cpulist("0-"), None);
        assert_eq!(parse_cpulist("a"), None);
        assert_eq!(parse_cpulist("1,,2"), None);
        assert_eq!(format_cpulist(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
    }

    fn flat(avail: &[usize]) -> Topology {
        Topology::flat(avail)
    }

    fn res(specs: &[&str], avail: &[usize]) -> Result<Vec<CpuConfig>, CpuSpecError> {
        let specs: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
        resolve(&specs, &flat(avail), CpuOrder::Compact)
    }

    #[test]
    fn counts_all_sweep() {
        let avail: Vec<usize> = (0..8).collect();
        let c = res(&["1,2,all"], &avail).unwrap();
        assert_eq!(
            names(&c),
            [
                "1 (1 core, 1 LLC, node 0):0",
                "2 (2 cores, 1 LLC, node 0):0-1",
                "all (8 cores, 1 LLC, node 0):0-7"
            ]
        );
        let bases = |c: &[CpuConfig]| {
            c.iter()
                .map(|c| base_name(&c.name).to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            bases(&res(&["sweep"], &avail).unwrap()),
            ["1", "2", "4", "all"]
        );
        assert_eq!(
            bases(&res(&["sweep"], &[0, 1, 2, 3, 4, 5]).unwrap()),
            ["1", "2", "4", "all"]
        );
        // Same set named twice is kept once.
        assert_eq!(bases(&res(&["2,all"], &[0, 1]).unwrap()), ["2"]);
        assert_eq!(bases(&res(&[], &[0, 1]).unwrap()), ["all"]);
        assert_eq!(base_name("4 (4 cores, 1 LLC, node 0)"), "4");
        assert_eq!(base_name("all"), "all");
    }

    #[test]
    fn explicit_sets() {
        let avail = [0, 1, 2, 3];
        let c = res(&["0-1", "1-3"], &avail).unwrap();
        assert_eq!(
            names(&c),
            [
                "0-1 (2 cores, 1 LLC, node 0):0-1",
                "1-3 (3 cores, 1 LLC, node 0):1-3"
            ]
        );
        let e = res(&["0-5"], &avail).unwrap_err();
        assert!(matches!(e, CpuSpecError::Missing { cpu: 4, .. }), "{e}");
    }

    #[test]
    fn bad_lists() {
        let avail = [0, 1];
        for bad in ["", "x", "1,,2", "0", "two", "3-1", "1-x"] {
            assert!(res(&[bad], &avail).is_err(), "{bad}");
        }
        assert!(matches!(
            res(&["4"], &avail),
            Err(CpuSpecError::TooMany { .. })
        ));
    }
}
