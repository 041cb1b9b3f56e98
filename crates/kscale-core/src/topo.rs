//! Where CPUs are (docs/placement.md, "CPU placement"): the machine's cores, SMT
//! siblings, last-level caches (LLCs) and NUMA nodes, the placement policies
//! that turn "N CPUs" into a set that means the same on every machine, and
//! where a macro workload's load goes so that it does not share a core with
//! the server it measures.
//!
//! Pure: `kscale-sys` reads the description from sysfs, tests build it by
//! hand or from fixture trees.

use crate::cpus::format_cpulist;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One online CPU and the domains it belongs to. Cores and LLCs are named by
/// their lowest CPU, which identifies them machine-wide without trusting
/// `core_id` (repeated in every package) or cache ids (absent on older
/// kernels).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuPlace {
    pub cpu: usize,
    pub package: usize,
    pub die: usize,
    /// The lowest CPU of its SMT sibling set.
    pub core: usize,
    /// The lowest CPU sharing its last-level cache.
    pub llc: usize,
    pub node: usize,
}

/// A machine's CPUs, sorted by id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    pub cpus: Vec<CpuPlace>,
}

/// How `--cpus N` chooses its N CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuOrder {
    /// One thread per core, filling an LLC, then the next LLC of the same
    /// node, then the next node; SMT siblings only once every core has one.
    #[default]
    Compact,
    /// One thread per core, across nodes and LLCs first.
    Spread,
    /// Every thread of a core before the next core, otherwise as `compact`.
    Smt,
}

impl CpuOrder {
    pub const NAMES: &'static str = "compact, spread, smt";

    pub fn parse(s: &str) -> Option<CpuOrder> {
        match s.trim() {
            "compact" => Some(CpuOrder::Compact),
            "spread" => Some(CpuOrder::Spread),
            "smt" => Some(CpuOrder::Smt),
            _ => None,
        }
    }
}

impl fmt::Display for CpuOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CpuOrder::Compact => "compact",
            CpuOrder::Spread => "spread",
            CpuOrder::Smt => "smt",
        })
    }
}

/// Where a set of CPUs is: what a configuration's name says after its count.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Where {
    pub cores: usize,
    /// The most threads the set takes on one core (1: no SMT sibling shares).
    pub threads_per_core_used: usize,
    /// Cores of which the set takes more than one thread.
    pub smt_cores: usize,
    pub llcs: usize,
    pub nodes: Vec<usize>,
    pub packages: usize,
}

impl Where {
    /// `4 cores, 1 LLC, node 0`, `4 cores × 2 SMT, 1 LLC, node 0`,
    /// `3 cores (1 × 2 SMT), 2 LLCs, nodes 0-1`.
    pub fn label(&self) -> String {
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut s = plural(self.cores, "core", "cores");
        if self.threads_per_core_used > 1 {
            if self.smt_cores == self.cores {
                s += &format!(" × {} SMT", self.threads_per_core_used);
            } else {
                s += &format!(" ({} × {} SMT)", self.smt_cores, self.threads_per_core_used);
            }
        }
        s += &format!(", {}", plural(self.llcs, "LLC", "LLCs"));
        s += &if self.nodes.len() == 1 {
            format!(", node {}", self.nodes[0])
        } else {
            format!(", nodes {}", format_cpulist(&self.nodes))
        };
        if self.packages > self.nodes.len().max(1) {
            s += &format!(", {} packages", self.packages);
        }
        s
    }
}

/// A local load's CPUs and, when they had to share with the server, what.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadPlan {
    pub cpus: Vec<usize>,
    /// Set when the load shares CPUs or cores with the measured CPUs.
    pub shared: Option<String>,
}

/// One node's cores grouped by LLC, as the policies walk them.
struct NodeTree {
    llcs: Vec<Vec<Vec<usize>>>,
}

impl Topology {
    pub fn new(mut cpus: Vec<CpuPlace>) -> Topology {
        cpus.sort_by_key(|c| c.cpu);
        cpus.dedup_by_key(|c| c.cpu);
        Topology { cpus }
    }

    /// What kscale knows when sysfs says nothing: every CPU its own core, all
    /// in one LLC, package and node — the id order of the seeds.
    pub fn flat(cpus: &[usize]) -> Topology {
        Topology::default().within(cpus)
    }

    pub fn ids(&self) -> Vec<usize> {
        self.cpus.iter().map(|c| c.cpu).collect()
    }

    pub fn place(&self, cpu: usize) -> Option<&CpuPlace> {
        self.cpus
            .binary_search_by_key(&cpu, |c| c.cpu)
            .ok()
            .map(|i| &self.cpus[i])
    }

    /// The part of the machine kscale may use: the CPUs of `available` (its
    /// affinity mask). A CPU sysfs did not describe becomes its own core in
    /// one LLC and node 0 with the other undescribed ones.
    pub fn within(&self, available: &[usize]) -> Topology {
        let unknown_llc = available
            .iter()
            .copied()
            .filter(|&c| self.place(c).is_none())
            .min()
            .unwrap_or(0);
        Topology::new(
            available
                .iter()
                .map(|&cpu| {
                    self.place(cpu).cloned().unwrap_or(CpuPlace {
                        cpu,
                        package: 0,
                        die: 0,
                        core: cpu,
                        llc: unknown_llc,
                        node: 0,
                    })
                })
                .collect(),
        )
    }

    fn distinct(&self, f: impl Fn(&CpuPlace) -> usize) -> BTreeSet<usize> {
        self.cpus.iter().map(f).collect()
    }

    pub fn cores(&self) -> usize {
        self.distinct(|c| c.core).len()
    }

    pub fn llcs(&self) -> usize {
        self.distinct(|c| c.llc).len()
    }

    pub fn nodes(&self) -> Vec<usize> {
        self.distinct(|c| c.node).into_iter().collect()
    }

    pub fn packages(&self) -> usize {
        self.distinct(|c| c.package).len()
    }

    /// The most SMT threads one core has.
    pub fn threads_per_core(&self) -> usize {
        let mut per: BTreeMap<usize, usize> = BTreeMap::new();
        for c in &self.cpus {
            *per.entry(c.core).or_default() += 1;
        }
        per.values().copied().max().unwrap_or(0)
    }

    /// Where `cpus` are; CPUs the topology does not know are ignored.
    pub fn locate(&self, cpus: &[usize]) -> Where {
        let places: Vec<&CpuPlace> = cpus.iter().filter_map(|&c| self.place(c)).collect();
        let mut per_core: BTreeMap<usize, usize> = BTreeMap::new();
        for p in &places {
            *per_core.entry(p.core).or_default() += 1;
        }
        let set = |f: fn(&CpuPlace) -> usize| places.iter().map(|p| f(p)).collect::<BTreeSet<_>>();
        Where {
            cores: per_core.len(),
            threads_per_core_used: per_core.values().copied().max().unwrap_or(0),
            smt_cores: per_core.values().filter(|&&n| n > 1).count(),
            llcs: set(|p| p.llc).len(),
            nodes: set(|p| p.node).into_iter().collect(),
            packages: set(|p| p.package).len(),
        }
    }

    /// Nodes, their LLCs and those LLCs' cores (each core's CPUs sorted),
    /// the biggest first at each level so that the first k cores span as
    /// few LLCs and nodes as k cores can; ties go to the lower id.
    fn tree(&self) -> Vec<NodeTree> {
        let mut m: BTreeMap<usize, BTreeMap<usize, BTreeMap<usize, Vec<usize>>>> = BTreeMap::new();
        for c in &self.cpus {
            m.entry(c.node)
                .or_default()
                .entry(c.llc)
                .or_default()
                .entry(c.core)
                .or_default()
                .push(c.cpu);
        }
        let mut nodes: Vec<(usize, NodeTree)> = m
            .into_iter()
            .map(|(id, llcs)| {
                let mut llcs: Vec<(usize, Vec<Vec<usize>>)> = llcs
                    .into_iter()
                    .map(|(lid, cores)| (lid, cores.into_values().collect()))
                    .collect();
                llcs.sort_by_key(|(lid, cores)| (std::cmp::Reverse(cores.len()), *lid));
                (
                    id,
                    NodeTree {
                        llcs: llcs.into_iter().map(|(_, c)| c).collect(),
                    },
                )
            })
            .collect();
        nodes.sort_by_key(|(id, n)| {
            let cores: usize = n.llcs.iter().map(Vec::len).sum();
            (std::cmp::Reverse(cores), *id)
        });
        nodes.into_iter().map(|(_, n)| n).collect()
    }

    /// Every CPU in the policy's order: `--cpus N` takes the first N, so a
    /// count's set contains every smaller count's.
    pub fn order(&self, how: CpuOrder) -> Vec<usize> {
        let tree = self.tree();
        let cores: Vec<Vec<usize>> = match how {
            CpuOrder::Compact | CpuOrder::Smt => tree
                .into_iter()
                .flat_map(|n| n.llcs.into_iter().flatten())
                .collect(),
            CpuOrder::Spread => {
                let per_node: Vec<Vec<Vec<usize>>> =
                    tree.into_iter().map(|n| interleave(n.llcs)).collect();
                interleave(per_node)
            }
        };
        if how == CpuOrder::Smt {
            return cores.into_iter().flatten().collect();
        }
        let depth = cores.iter().map(Vec::len).max().unwrap_or(0);
        (0..depth)
            .flat_map(|t| cores.iter().filter_map(move |c| c.get(t).copied()))
            .collect()
    }

    /// `sweep`'s counts: 1, 2, 4 … and each boundary the compact order
    /// crosses — one LLC's cores, one node's cores, all cores, all threads.
    pub fn sweep(&self) -> Vec<usize> {
        let total = self.cpus.len();
        let tree = self.tree();
        let mut v: BTreeSet<usize> = BTreeSet::new();
        let mut n = 1;
        while n < total {
            v.insert(n);
            n *= 2;
        }
        if let Some(first) = tree.first() {
            v.extend(first.llcs.first().map(Vec::len));
            v.insert(first.llcs.iter().map(Vec::len).sum());
        }
        v.insert(self.cores());
        v.insert(total);
        v.into_iter().filter(|&n| n >= 1 && n <= total).collect()
    }

    /// CPUs for a macro workload's local load (docs/placement.md, "Where the
    /// load runs"): `available` minus the server's `config`, without any
    /// CPU whose core the server uses, on the server's nodes when they have
    /// as many such CPUs as the server has. Only when no such CPU is left
    /// does the load share cores (SMT siblings) or, when the configuration
    /// takes every CPU, the CPUs themselves — and says which.
    pub fn load_cpus(&self, available: &[usize], config: &[usize]) -> LoadPlan {
        let topo = self.within(available);
        let in_config: BTreeSet<usize> = config.iter().copied().collect();
        let free: Vec<usize> = topo
            .ids()
            .into_iter()
            .filter(|c| !in_config.contains(c))
            .collect();
        if free.is_empty() {
            return LoadPlan {
                cpus: topo.ids(),
                shared: Some("the measured CPUs: the configuration takes every CPU".into()),
            };
        }
        let server_cores: BTreeSet<usize> = config
            .iter()
            .filter_map(|&c| topo.place(c).map(|p| p.core))
            .collect();
        let server_nodes: BTreeSet<usize> = config
            .iter()
            .filter_map(|&c| topo.place(c).map(|p| p.node))
            .collect();
        let core_of = |c: usize| topo.place(c).map(|p| p.core);
        let clean: Vec<usize> = free
            .iter()
            .copied()
            .filter(|&c| core_of(c).is_some_and(|k| !server_cores.contains(&k)))
            .collect();
        if clean.is_empty() {
            return LoadPlan {
                shared: Some(format!(
                    "cores with the measured CPUs: CPUs {} are their SMT siblings, \
                     and the configuration takes a thread of every core",
                    format_cpulist(&free)
                )),
                cpus: free,
            };
        }
        let near: Vec<usize> = clean
            .iter()
            .copied()
            .filter(|&c| {
                topo.place(c)
                    .is_some_and(|p| server_nodes.contains(&p.node))
            })
            .collect();
        LoadPlan {
            cpus: if near.len() >= config.len() {
                near
            } else {
                clean
            },
            shared: None,
        }
    }
}

/// Round-robin over groups: the first of each, then the second of each…
fn interleave<T>(groups: Vec<Vec<T>>) -> Vec<T> {
    let mut its: Vec<std::vec::IntoIter<T>> = groups.into_iter().map(Vec::into_iter).collect();
    let mut out = Vec::new();
    loop {
        let before = out.len();
        for it in its.iter_mut() {
            out.extend(it.next());
        }
        if out.len() == before {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `packages` × `llcs` × `cores` × `smt`, one node per package, numbered
    /// like Linux on x86 by default: all first threads, then all second ones.
    fn machine(packages: usize, llcs: usize, cores: usize, smt: usize) -> Topology {
        let per_thread = packages * llcs * cores;
        let mut v = Vec::new();
        for t in 0..smt {
            for p in 0..packages {
                for l in 0..llcs {
                    for c in 0..cores {
                        let core = (p * llcs + l) * cores + c;
                        v.push(CpuPlace {
                            cpu: t * per_thread + core,
                            package: p,
                            die: 0,
                            core,
                            llc: (p * llcs + l) * cores,
                            node: p,
                        });
                    }
                }
            }
        }
        Topology::new(v)
    }

    #[test]
    fn compact_fills_an_llc_then_a_node_then_siblings() {
        let m = machine(2, 2, 2, 2); // 16 CPUs, 8 cores
        assert_eq!(
            m.order(CpuOrder::Compact),
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
        );
        assert_eq!(m.order(CpuOrder::Smt)[..6], [0, 8, 1, 9, 2, 10]);
        assert_eq!(m.order(CpuOrder::Spread)[..8], [0, 4, 2, 6, 1, 5, 3, 7]);
        assert_eq!(m.locate(&[0, 1]).label(), "2 cores, 1 LLC, node 0");
        assert_eq!(m.locate(&[0, 8]).label(), "1 core × 2 SMT, 1 LLC, node 0");
        assert_eq!(
            m.locate(&[0, 8, 4]).label(),
            "2 cores (1 × 2 SMT), 2 LLCs, nodes 0-1"
        );
        assert_eq!(m.sweep(), [1, 2, 4, 8, 16]);
        assert_eq!(machine(2, 1, 3, 2).sweep(), [1, 2, 3, 4, 6, 8, 12]);
    }

    #[test]
    fn the_biggest_llc_comes_first_under_a_mask() {
        // CPUs 0-1 of LLC 0 are not ours: LLC 2 has 2 cores, LLC 0 one.
        let m = machine(1, 2, 2, 1).within(&[1, 2, 3]);
        assert_eq!(m.order(CpuOrder::Compact), [2, 3, 1]);
        // An undescribed CPU is a core of its own.
        let f = Topology::flat(&[0, 1, 2]);
        assert_eq!(f.order(CpuOrder::Compact), [0, 1, 2]);
        assert_eq!(f.locate(&[0, 1, 2]).label(), "3 cores, 1 LLC, node 0");
    }

    #[test]
    fn load_avoids_the_servers_cores_and_stays_on_its_node() {
        let m = machine(2, 1, 4, 2); // cores 0-7, siblings +8; node 0 = 0-3,8-11
        let all = m.ids();
        let p = m.load_cpus(&all, &[0]);
        assert_eq!(p.cpus, [1, 2, 3, 9, 10, 11]);
        assert_eq!(p.shared, None);
        // Node 0 has 3 free cores for a 4-CPU server: the load goes wide.
        let p = m.load_cpus(&all, &[0, 1, 2, 3]);
        assert_eq!(p.cpus, [4, 5, 6, 7, 12, 13, 14, 15]);
        // A thread of every core: only the siblings are left.
        let p = m.load_cpus(&all, &[0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(p.cpus, (8..16).collect::<Vec<_>>());
        assert!(p.shared.unwrap().contains("SMT siblings"));
        let p = m.load_cpus(&all, &all);
        assert_eq!(p.cpus, all);
        assert!(p.shared.unwrap().contains("every CPU"));
    }

    #[test]
    fn orders_parse() {
        for o in [CpuOrder::Compact, CpuOrder::Spread, CpuOrder::Smt] {
            assert_eq!(CpuOrder::parse(&o.to_string()), Some(o));
        }
        assert_eq!(CpuOrder::parse("dense"), None);
    }
}
