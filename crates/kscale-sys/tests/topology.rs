//! Placement on machines we do not have: the fixture sysfs trees under
//! tests/fixtures/sysfs (written by scripts/gen-sysfs-fixtures) read by the
//! real parser, then the policies of kscale-core on them.

use kscale_core::cpus::{base_name, format_cpulist, resolve};
use kscale_core::topo::{CpuOrder, Topology};
use kscale_sys::topology::read;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;

const FIXTURES: [&str; 5] = [
    "xeon-2s-smt2",
    "epyc-1s-8llc-smt2",
    "arm64-80c",
    "vm-4vcpu-smt",
    "vm-2vcpu",
];

fn fixtures() -> &'static Vec<(&'static str, Topology)> {
    static F: OnceLock<Vec<(&'static str, Topology)>> = OnceLock::new();
    F.get_or_init(|| {
        FIXTURES
            .iter()
            .map(|n| {
                let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/fixtures/sysfs")
                    .join(n);
                (*n, read(&dir).unwrap_or_else(|e| panic!("{n}: {e:#}")))
            })
            .collect()
    })
}

fn topo(name: &str) -> &'static Topology {
    &fixtures().iter().find(|(n, _)| *n == name).unwrap().1
}

fn first(t: &Topology, order: CpuOrder, n: usize) -> String {
    let mut v = t.order(order)[..n].to_vec();
    v.sort_unstable();
    format_cpulist(&v)
}

/// `name: cpulist` of each configuration `--cpus spec` gives.
fn plan(t: &Topology, spec: &str, order: CpuOrder) -> Vec<String> {
    resolve(&[spec.to_string()], t, order)
        .unwrap()
        .into_iter()
        .map(|c| format!("{}: {}", c.name, format_cpulist(&c.cpus)))
        .collect()
}

fn load(t: &Topology, config: &str) -> (String, Option<String>) {
    let cpus = kscale_core::cpus::parse_cpulist(config).unwrap();
    let p = t.load_cpus(&t.ids(), &cpus);
    (format_cpulist(&p.cpus), p.shared)
}

#[test]
fn xeon_two_sockets_numbered_alternately() {
    let t = topo("xeon-2s-smt2");
    assert_eq!(
        plan(t, "1,2,4,8", CpuOrder::Compact),
        [
            "1 (1 core, 1 LLC, node 0): 0",
            "2 (2 cores, 1 LLC, node 0): 0,2",
            "4 (4 cores, 1 LLC, node 0): 0,2,4,6",
            "8 (8 cores, 1 LLC, node 0): 0,2,4,6,8,10,12,14",
        ]
    );
    assert_eq!(first(t, CpuOrder::Spread, 4), "0-3");
    assert_eq!(first(t, CpuOrder::Smt, 4), "0,2,24,26");
    assert_eq!(t.sweep(), [1, 2, 4, 8, 12, 16, 24, 32, 48]);
    let sweep = plan(t, "sweep", CpuOrder::Compact);
    assert_eq!(
        sweep[4],
        "12 (12 cores, 1 LLC, node 0): 0,2,4,6,8,10,12,14,16,18,20,22"
    );
    assert_eq!(
        sweep[5],
        "16 (16 cores, 2 LLCs, nodes 0-1): 0-8,10,12,14,16,18,20,22"
    );
    assert!(
        sweep[6].starts_with("24 (24 cores, 2 LLCs, nodes 0-1): 0-23"),
        "{}",
        sweep[6]
    );
    assert!(
        sweep[7].starts_with("32 (24 cores (8 × 2 SMT), 2 LLCs, nodes 0-1)"),
        "{}",
        sweep[7]
    );
    assert!(
        sweep[8].starts_with("all (24 cores × 2 SMT, 2 LLCs, nodes 0-1): 0-47"),
        "{}",
        sweep[8]
    );
    // The load stays on the server's node, off its cores…
    assert_eq!(
        load(t, "0,2,4,6").0,
        "8,10,12,14,16,18,20,22,32,34,36,38,40,42,44,46"
    );
    // …crosses to the other node when its own has only the siblings left…
    assert_eq!(
        load(t, "0,2,4,6,8,10,12,14,16,18,20,22"),
        (
            "1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33,35,37,39,41,43,45,47".into(),
            None
        )
    );
    // …and shares cores only when every core is taken.
    let (cpus, shared) = load(t, "0-23");
    assert_eq!(cpus, "24-47");
    assert!(shared.unwrap().contains("SMT siblings"));
}

#[test]
fn epyc_eight_llcs_siblings_n_and_n_plus_64() {
    let t = topo("epyc-1s-8llc-smt2");
    assert_eq!(
        plan(t, "8,16", CpuOrder::Compact),
        [
            "8 (8 cores, 1 LLC, node 0): 0-7",
            "16 (16 cores, 2 LLCs, node 0): 0-15"
        ]
    );
    assert_eq!(first(t, CpuOrder::Spread, 8), "0,8,16,24,32,40,48,56");
    assert_eq!(first(t, CpuOrder::Smt, 4), "0-1,64-65");
    assert_eq!(t.sweep(), [1, 2, 4, 8, 16, 32, 64, 128]);
    assert_eq!(
        plan(t, "64,96", CpuOrder::Compact),
        [
            "64 (64 cores, 8 LLCs, node 0): 0-63",
            "96 (64 cores (32 × 2 SMT), 8 LLCs, node 0): 0-95"
        ]
    );
    assert_eq!(load(t, "0-7"), ("8-63,72-127".into(), None));
    assert_eq!(load(t, "0-63").0, "64-127");
}

#[test]
fn arm64_eighty_cores_without_smt() {
    let t = topo("arm64-80c");
    assert_eq!(t.threads_per_core(), 1);
    assert_eq!(
        plan(t, "4", CpuOrder::Compact),
        ["4 (4 cores, 4 LLCs, node 0): 0-3"]
    );
    assert_eq!(first(t, CpuOrder::Spread, 4), "0-3");
    assert_eq!(first(t, CpuOrder::Smt, 4), "0-3");
    assert_eq!(t.sweep(), [1, 2, 4, 8, 16, 32, 64, 80]);
    assert_eq!(load(t, "0-3"), ("4-79".into(), None));
    let (cpus, shared) = load(t, "0-79");
    assert_eq!(cpus, "0-79");
    assert!(shared.unwrap().contains("every CPU"));
}

#[test]
fn cloud_vm_two_cores_of_two_siblings() {
    let t = topo("vm-4vcpu-smt");
    // Two CPUs are two cores, not one core's two siblings.
    assert_eq!(
        plan(t, "2", CpuOrder::Compact),
        ["2 (2 cores, 1 LLC, node 0): 0,2"]
    );
    assert_eq!(first(t, CpuOrder::Spread, 2), "0,2");
    assert_eq!(
        plan(t, "2", CpuOrder::Smt),
        ["2 (1 core × 2 SMT, 1 LLC, node 0): 0-1"]
    );
    assert_eq!(t.sweep(), [1, 2, 4]);
    assert_eq!(
        plan(t, "sweep", CpuOrder::Compact),
        [
            "1 (1 core, 1 LLC, node 0): 0",
            "2 (2 cores, 1 LLC, node 0): 0,2",
            "all (2 cores × 2 SMT, 1 LLC, node 0): 0-3"
        ]
    );
    assert_eq!(load(t, "0"), ("2-3".into(), None));
    let (cpus, shared) = load(t, "0,2");
    assert_eq!(cpus, "1,3");
    assert!(shared.unwrap().contains("CPUs 1,3 are their SMT siblings"));
}

#[test]
fn this_two_vcpu_vm() {
    let t = topo("vm-2vcpu");
    assert_eq!(
        plan(t, "sweep", CpuOrder::Compact),
        [
            "1 (1 core, 1 LLC, node 0): 0",
            "all (2 cores, 1 LLC, node 0): 0-1"
        ]
    );
    assert_eq!(load(t, "0"), ("1".into(), None));
}

/// Every name says what its set is: the count (or `all`) and the place,
/// recomputed here from the raw domains rather than through `locate`.
#[test]
fn every_name_matches_its_set() {
    for (name, t) in fixtures() {
        for order in [CpuOrder::Compact, CpuOrder::Spread, CpuOrder::Smt] {
            let odd = (t.cpus.len() / 2 + 1).min(t.cpus.len()).to_string();
            for c in resolve(&["sweep".into(), odd, "0-1".into()], t, order).unwrap() {
                let base = base_name(&c.name);
                if base == "0-1" {
                    assert_eq!(c.cpus, [0, 1]);
                } else if base == "all" {
                    assert_eq!(c.cpus, t.ids(), "{name} {}", c.name);
                } else {
                    assert_eq!(
                        base.parse::<usize>().unwrap(),
                        c.cpus.len(),
                        "{name} {}",
                        c.name
                    );
                }
                let places: Vec<_> = c.cpus.iter().map(|&k| t.place(k).unwrap()).collect();
                let cores: BTreeSet<usize> = places.iter().map(|p| p.core).collect();
                let llcs: BTreeSet<usize> = places.iter().map(|p| p.llc).collect();
                let nodes: BTreeSet<usize> = places.iter().map(|p| p.node).collect();
                let core_word = if cores.len() == 1 { "core" } else { "cores" };
                assert!(
                    c.name
                        .starts_with(&format!("{base} ({} {core_word}", cores.len())),
                    "{name} {}",
                    c.name
                );
                let llc_word = if llcs.len() == 1 { "LLC" } else { "LLCs" };
                assert!(
                    c.name.contains(&format!(", {} {llc_word}, ", llcs.len())),
                    "{}",
                    c.name
                );
                let node_part = if nodes.len() == 1 {
                    format!("node {}", nodes.first().unwrap())
                } else {
                    format!(
                        "nodes {}",
                        format_cpulist(&nodes.iter().copied().collect::<Vec<_>>())
                    )
                };
                assert!(c.name.contains(&node_part), "{}", c.name);
                assert_eq!(
                    c.cpus.len() > cores.len(),
                    c.name.contains("SMT"),
                    "{}",
                    c.name
                );
            }
        }
    }
}

/// Macro load never shares a core with the server while a free core exists.
#[test]
fn load_never_shares_a_core_while_one_is_free() {
    for (name, t) in fixtures() {
        let core = |c: usize| t.place(c).unwrap().core;
        for order in [CpuOrder::Compact, CpuOrder::Spread, CpuOrder::Smt] {
            let walk = t.order(order);
            for n in 1..=walk.len() {
                let config = &walk[..n];
                let server: BTreeSet<usize> = config.iter().map(|&c| core(c)).collect();
                let plan = t.load_cpus(&t.ids(), config);
                let free_core = t.ids().iter().any(|&c| !server.contains(&core(c)));
                if free_core {
                    assert!(plan.shared.is_none(), "{name} {order} {n}");
                    assert!(
                        plan.cpus.iter().all(|&c| !server.contains(&core(c))),
                        "{name} {order} {n}"
                    );
                } else {
                    assert!(plan.shared.is_some(), "{name} {order} {n}");
                }
            }
        }
    }
}

proptest! {
    /// For every fixture, N and affinity mask: N distinct usable CPUs;
    /// compact takes no sibling while a core is free and spans no more
    /// LLCs than N cores need.
    #[test]
    fn compact_is_compact(fixture in 0..FIXTURES.len(), n in 1usize..200, mask in proptest::collection::vec(any::<bool>(), 128), masked in any::<bool>()) {
        let full = &fixtures()[fixture].1;
        let avail: Vec<usize> = full.ids().into_iter().filter(|&c| !masked || mask[c % 128] || c == 0).collect();
        let t = full.within(&avail);
        let n = 1 + (n - 1) % avail.len();
        let set = &t.order(CpuOrder::Compact)[..n];
        let distinct: BTreeSet<usize> = set.iter().copied().collect();
        prop_assert_eq!(distinct.len(), n);
        prop_assert!(set.iter().all(|c| avail.contains(c)));
        let mut per_core: BTreeMap<usize, usize> = BTreeMap::new();
        for &c in set {
            *per_core.entry(t.place(c).unwrap().core).or_default() += 1;
        }
        let cores = t.cores();
        if n <= cores {
            prop_assert!(per_core.values().all(|&k| k == 1), "a sibling while a core is free");
        } else {
            prop_assert_eq!(per_core.len(), cores);
        }
        let mut llc_cores: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        for p in &t.cpus {
            llc_cores.entry(p.llc).or_default().insert(p.core);
        }
        let mut sizes: Vec<usize> = llc_cores.values().map(BTreeSet::len).collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        let want = n.min(cores);
        let needed = sizes.iter().scan(0, |s, k| { *s += k; Some(*s) }).position(|s| s >= want).unwrap() + 1;
        let used: BTreeSet<usize> = set.iter().map(|&c| t.place(c).unwrap().llc).collect();
        prop_assert!(used.len() <= needed, "{} LLCs for {} CPUs, {} would do", used.len(), n, needed);
    }
}
