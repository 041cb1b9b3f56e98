//! Turning `run` targets, params and CPU configurations into the ordered list
//! of cases a run will measure. The plan is stored with the run so that
//! `--resume` repeats exactly the same cases even if defaults change.

use crate::error::user;
use anyhow::Result;
use kscale_core::params::cartesian;
use kscale_core::{CpuConfig, ParamError, ParamKind};
use kscale_workloads::{suites, WorkloadDef, REGISTRY};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanEntry {
    pub workload: String,
    pub params: BTreeMap<String, String>,
    pub cpus_name: String,
    pub cpus: Vec<usize>,
    /// Its place in the run's order, where that is not its place in the
    /// plan: a noise-planned study's cases keep the places they had in the
    /// whole plan, so that a case taken back after the pilot is stored, and
    /// tabled, among its sweep's neighbours (engine::gauge::fit_to_noise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
}

/// A case a noise-planned study left out before its first trial
/// (engine::gauge::fit_to_noise), with its rank there: after the pilot, the
/// run takes back the cases the budget has room for at the spread the
/// kept ones showed, lowest rank first (docs/planning.md, "Taking cases
/// back").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeldCase {
    pub rank: u32,
    pub entry: PlanEntry,
}

/// The lines that name `held` cases, one per workload with the param
/// values left out: what the study says before its run and stores in its
/// `left_out`, and what the run rewrites when it takes some back.
pub fn held_lines<'a>(held: impl IntoIterator<Item = &'a PlanEntry>) -> Vec<String> {
    let mut lines: Vec<(String, Vec<String>)> = Vec::new();
    for e in held {
        let label = e
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        match lines.iter_mut().find(|l| l.0 == e.workload) {
            Some(l) => {
                if !l.1.contains(&label) {
                    l.1.push(label)
                }
            }
            None => lines.push((e.workload.clone(), vec![label])),
        }
    }
    lines
        .into_iter()
        .map(|(w, ps)| format!("{w} {}", ps.join(", ")).trim_end().to_string())
        .collect()
}

impl PlanEntry {
    /// The case this entry is stored as.
    pub fn key(&self) -> kscale_core::CaseKey {
        kscale_core::CaseKey {
            workload: self.workload.clone(),
            params: self.params.clone(),
            cpus: self.cpus_name.clone(),
        }
    }
}

/// An entry at `--quick`'s lengths: each param the default plan does
/// not sweep (a window's `duration`, web's `fileset`) takes its quick
/// value, so that a budgeted study's sweep cases are measured as its
/// decided cases are (docs/planning.md, "Decisions first").
pub fn at_quick_lengths(mut e: PlanEntry) -> PlanEntry {
    if let Some(w) = kscale_workloads::find(&e.workload) {
        for p in w.params {
            if let ([_], [q]) = (p.values(false), p.values(true)) {
                e.params.insert(p.name.to_string(), q.to_string());
            }
        }
    }
    e
}

/// A budgeted study's plan when its whole sweep does not fit: `kept`,
/// the quick study's cases, measured first, and the cases of `full` (the
/// default plan) they leave, held for the run to take back after its
/// pilot (docs/planning.md, "Decisions first"). Every capacity search of
/// `full` is kept: a search is bounded by its share, not by the cases'
/// time. Each entry gets its place in the merged order, so a case taken
/// back is stored among its sweep's neighbours; the held ones are ranked
/// along their sweeps. Returns the kept plan and the held cases.
pub fn decisions_first(
    kept: Vec<PlanEntry>,
    full: &[PlanEntry],
) -> (Vec<PlanEntry>, Vec<HeldCase>) {
    let mut merged: Vec<PlanEntry> = Vec::new();
    for e in full.iter().cloned().map(at_quick_lengths) {
        if !merged.iter().any(|m| m.key() == e.key()) {
            merged.push(e);
        }
    }
    // A kept case the default plan has no place for goes after its
    // workload's last one.
    for k in &kept {
        if merged.iter().any(|m| m.key() == k.key()) {
            continue;
        }
        let at = merged
            .iter()
            .rposition(|m| m.workload == k.workload)
            .map_or(merged.len(), |i| i + 1);
        merged.insert(at, k.clone());
    }
    let ranks = ranks(&merged);
    let mut plan = Vec::new();
    let mut held = Vec::new();
    for (i, (mut e, rank)) in merged.into_iter().zip(ranks).enumerate() {
        e.seq = Some(i as i64);
        if searched(&e) || kept.iter().any(|k| k.key() == e.key()) {
            plan.push(e);
        } else {
            held.push(HeldCase { rank, entry: e });
        }
    }
    (plan, held)
}

/// A quick study's plan, its sweeps held: each workload's representative
/// (rank under 1000, [`ranks`]: the middle of its sweep) is kept, with
/// every capacity search and every median-of-N case, and the sweep's other
/// converging cases are held for the run to take back after its pilot
/// (docs/planning.md, "Decisions first"). A sweep of two is kept whole:
/// its second case is the comparison the workload makes (chat's threads
/// against epoll, net's 4 connections against 16), not a point along a
/// curve, and held it waited behind the micro sweeps' cheaper cases until
/// the budget was gone. Every entry keeps its place in the plan. Returns
/// the held cases.
pub fn hold_sweeps(plan: &mut Vec<PlanEntry>) -> Vec<HeldCase> {
    let ranks = ranks(plan.iter());
    let converging = |e: &PlanEntry| {
        kscale_workloads::find(&e.workload)
            .is_some_and(|w| w.rule == kscale_core::RunRule::Converge)
    };
    let sweep_of = |w: &str| {
        let mut sets: Vec<&BTreeMap<String, String>> = Vec::new();
        for e in plan.iter().filter(|e| e.workload == w) {
            if !sets.contains(&&e.params) {
                sets.push(&e.params);
            }
        }
        sets.len()
    };
    let long: Vec<bool> = plan.iter().map(|e| sweep_of(&e.workload) > 2).collect();
    let mut held = Vec::new();
    let mut kept = Vec::new();
    for (i, ((mut e, rank), long)) in std::mem::take(plan)
        .into_iter()
        .zip(ranks)
        .zip(long)
        .enumerate()
    {
        e.seq.get_or_insert(i as i64);
        if long && rank >= 1000 && converging(&e) && !searched(&e) {
            held.push(HeldCase { rank, entry: e });
        } else {
            kept.push(e);
        }
    }
    *plan = kept;
    held
}

/// Each family's representative case, (workload, params): its first
/// workload's, at the middle of its sweep (rank 0, [`ranks`]), one per
/// family whatever the CPU configurations.
pub fn family_representatives(plan: &[PlanEntry]) -> Vec<(String, BTreeMap<String, String>)> {
    let mut out: Vec<(String, BTreeMap<String, String>)> = Vec::new();
    for (e, rank) in plan.iter().zip(ranks(plan.iter())) {
        let key = (e.workload.clone(), e.params.clone());
        if rank == 0 && !out.contains(&key) {
            out.push(key);
        }
    }
    out
}

/// How late each entry is kept when a study cannot measure all of them
/// (docs/planning.md, "Planning to the noise"), in plan order. The entries
/// of one workload with the same params share a rank; along a workload's
/// sweep the middle is 0, then its ends, then midpoints
/// ([`kscale_core::noise::sweep_ranks`]), times 1000; a family's n-th
/// workload adds n, so that among the representatives the family's first
/// workload's is kept last and every family keeps one case (rank 0).
pub fn ranks<'a>(entries: impl IntoIterator<Item = &'a PlanEntry>) -> Vec<u32> {
    let entries: Vec<&PlanEntry> = entries.into_iter().collect();
    let mut groups: Vec<(&str, &BTreeMap<String, String>)> = Vec::new();
    let group: Vec<usize> = entries
        .iter()
        .map(|e| {
            groups
                .iter()
                .position(|g| g.0 == e.workload && g.1 == &e.params)
                .unwrap_or_else(|| {
                    groups.push((&e.workload, &e.params));
                    groups.len() - 1
                })
        })
        .collect();
    let mut workloads: Vec<&str> = groups.iter().map(|g| g.0).collect();
    workloads.dedup();
    let mut rank_of = vec![0u32; groups.len()];
    let mut families: Vec<&str> = Vec::new();
    for w in workloads {
        let family = w.split('.').next().unwrap_or(w);
        let nth = families.iter().filter(|f| **f == family).count() as u32;
        families.push(family);
        let mine: Vec<usize> = (0..groups.len()).filter(|&g| groups[g].0 == w).collect();
        for (g, r) in mine.iter().zip(kscale_core::noise::sweep_ranks(mine.len())) {
            rank_of[*g] = r * 1000 + nth;
        }
    }
    group.into_iter().map(|g| rank_of[g]).collect()
}

fn known_targets() -> String {
    let fams: Vec<&str> = REGISTRY.iter().map(|f| f.name).collect();
    format!(
        "families {}; `kscale list` shows every workload",
        fams.join(", ")
    )
}

/// Workloads named by targets (workload ids or family names) and an optional
/// suite (its `--quick` selection when `quick`), in order, each once.
pub fn resolve_targets(
    targets: &[String],
    suite: Option<&str>,
    quick: bool,
) -> Result<Vec<&'static WorkloadDef>> {
    let mut names: Vec<String> = Vec::new();
    // `--suite micro,macro` runs both, in that order.
    for s in suite.iter().flat_map(|s| s.split(',')).map(str::trim) {
        let s = suites::find(s).ok_or_else(|| {
            let all: Vec<&str> = suites::SUITES.iter().map(|s| s.name).collect();
            user(format!("unknown suite `{s}` (suites: {})", all.join(", ")))
        })?;
        names.extend(s.targets(quick).iter().map(|t| t.to_string()));
    }
    names.extend(targets.iter().cloned());
    if names.is_empty() {
        return Err(user(
            "nothing to run: give a workload, a family or --suite NAME (see `kscale list`)",
        ));
    }
    let mut out: Vec<&'static WorkloadDef> = Vec::new();
    for name in &names {
        let found: Vec<&'static WorkloadDef> = if let Some(w) = kscale_workloads::find(name) {
            vec![w]
        } else if let Some(f) = kscale_workloads::family(name) {
            // A family's `--quick` run is its quick set (all, for most), and
            // a family stands for what runs on its own: a workload that
            // drives an external server runs when named or given --target.
            f.workloads
                .iter()
                .filter(|w| (!quick || w.quick) && !drives_external(w))
                .collect()
        } else {
            return Err(user(format!(
                "unknown workload or family `{name}` ({})",
                known_targets()
            )));
        };
        for w in found {
            if !out.iter().any(|o| std::ptr::eq(*o, w)) {
                out.push(w);
            }
        }
    }
    Ok(out)
}

/// A `--param` override: the param's name and its values.
pub type Override = (String, Vec<String>);

/// A workload that drives a server outside kscale: it has a URL param.
pub fn drives_external(w: &WorkloadDef) -> bool {
    w.params
        .iter()
        .any(|p| matches!(p.kind, kscale_core::ParamKind::Url))
}

/// `run TARGETS --target URL`: the named workloads, and those of the named
/// families, that drive an external server, and the override giving each
/// of their URL params the URL.
pub fn resolve_external(
    targets: &[String],
    url: &str,
) -> Result<(Vec<&'static WorkloadDef>, Override)> {
    let mut out: Vec<&'static WorkloadDef> = Vec::new();
    for name in targets {
        let found: Vec<&'static WorkloadDef> =
            match (kscale_workloads::find(name), kscale_workloads::family(name)) {
                (Some(w), _) => vec![w],
                (None, Some(f)) => f.workloads.iter().collect(),
                (None, None) => {
                    return Err(user(format!(
                        "unknown workload or family `{name}` ({})",
                        known_targets()
                    )))
                }
            };
        out.extend(found.into_iter().filter(|w| drives_external(w)));
    }
    let Some(param) = out.first().and_then(|w| {
        w.params
            .iter()
            .find(|p| matches!(p.kind, kscale_core::ParamKind::Url))
    }) else {
        let ext: Vec<String> = kscale_workloads::workloads()
            .filter(|w| drives_external(w))
            .map(|w| w.id())
            .collect();
        return Err(user(format!(
            "--target {url}: none of {} drives an external server (those that do: {})",
            if targets.is_empty() {
                "the targets".to_string()
            } else {
                targets.join(", ")
            },
            ext.join(", ")
        )));
    };
    let url = param.validate(&out[0].id(), url)?;
    Ok((out, (param.name.to_string(), vec![url])))
}

/// Parses `--param NAME=VALUE[,VALUE…]`.
pub fn parse_param(s: &str) -> Result<(String, Vec<String>)> {
    let (name, values) = s
        .split_once('=')
        .ok_or_else(|| user(format!("bad --param `{s}`: expected NAME=VALUE[,VALUE…]")))?;
    let name = name.trim();
    let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
    if name.is_empty() || values.iter().any(String::is_empty) {
        return Err(user(format!(
            "bad --param `{s}`: expected NAME=VALUE[,VALUE…]"
        )));
    }
    Ok((name.to_string(), values))
}

/// Expands workloads into cases: the cartesian product of each workload's
/// param values (defaults, `--quick` sweeps, or `--param` overrides), each on
/// every CPU configuration.
pub fn expand(
    workloads: &[&'static WorkloadDef],
    overrides: &[(String, Vec<String>)],
    quick: bool,
    configs: &[CpuConfig],
) -> Result<Vec<PlanEntry>> {
    for (name, _) in overrides {
        if !workloads.iter().any(|w| w.param(name).is_some()) {
            let ids: Vec<String> = workloads.iter().map(|w| w.id()).collect();
            let known: Vec<String> = workloads
                .iter()
                .flat_map(|w| w.params.iter().map(|p| p.name.to_string()))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            return Err(ParamError::Unknown {
                workload: ids.join(", "),
                param: name.clone(),
                known: if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                },
            }
            .into());
        }
    }
    let mut out = Vec::new();
    for w in workloads {
        let mut lists = Vec::new();
        for p in w.params {
            let values: Vec<String> = match overrides.iter().rev().find(|(n, _)| n == p.name) {
                Some((_, vs)) => vs
                    .iter()
                    .map(|v| p.validate(&w.id(), v))
                    .collect::<Result<_, _>>()?,
                None => p.values(quick).iter().map(|v| v.to_string()).collect(),
            };
            lists.push((p.name.to_string(), values));
        }
        for params in cartesian(&lists) {
            for c in configs {
                out.push(PlanEntry {
                    workload: w.id(),
                    params: params.clone(),
                    cpus_name: c.name.clone(),
                    cpus: c.cpus.clone(),
                    seq: None,
                });
            }
        }
    }
    Ok(out)
}

// What a capacity search plans from: the searches are a client of the
// planner (engine::capacity runs them), so their shape lives here.

/// The searched param of a workload, or why it has none.
pub fn param_of(w: &WorkloadDef) -> Option<&'static str> {
    w.capacity.filter(|p| {
        w.param(p)
            .is_some_and(|d| matches!(d.kind, ParamKind::Int { .. }))
    })
}

/// Whether a plan entry's workload has a capacity to search: what a run
/// with `capacity` searches rather than measures as planned.
pub fn searched(e: &PlanEntry) -> bool {
    kscale_workloads::find(&e.workload)
        .and_then(param_of)
        .is_some()
}

/// The plan reduced to one starting case per search: for each workload,
/// other params and CPU set, the largest value of the capacity param —
/// the sweep's value nearest a capacity it was chosen to show.
pub fn seeds(plan: &[PlanEntry]) -> Vec<PlanEntry> {
    let mut out: Vec<PlanEntry> = Vec::new();
    for e in plan {
        let Some(p) = kscale_workloads::find(&e.workload).and_then(param_of) else {
            continue;
        };
        let value = |o: &PlanEntry| o.params.get(p).and_then(|v| v.parse::<u64>().ok());
        let key = e.key();
        match out.iter_mut().find(|o| same_search(&o.key(), &key, p)) {
            Some(o) if value(e) > value(o) => *o = e.clone(),
            Some(_) => {}
            None => out.push(e.clone()),
        }
    }
    out
}

/// Whether two cases are one capacity search's: the same workload, CPU set
/// and params but `param`, the searched one, whose values are its steps
/// (and its answer's `capacity`). A search's seed, its steps and its answer
/// are matched by this one rule, so the plan and a resumed run's store
/// agree on which cases a search owns.
pub fn same_search(a: &kscale_core::CaseKey, b: &kscale_core::CaseKey, param: &str) -> bool {
    fn others<'a>(
        k: &'a kscale_core::CaseKey,
        param: &'a str,
    ) -> impl Iterator<Item = (&'a String, &'a String)> + 'a {
        k.params.iter().filter(move |(n, _)| n.as_str() != param)
    }
    a.workload == b.workload && a.cpus == b.cpus && others(a, param).eq(others(b, param))
}

/// The reasons the plan's cases give that their figures cannot settle in
/// `dir` (each workload's `caveat`), one line per workload.
fn unsettled(plan: &[PlanEntry], dir: &std::path::Path) -> Vec<String> {
    let mut plan = plan.to_vec();
    leave_unsettled(&mut plan, dir)
}

/// The one line saying where a run (`who`: "the study", "the run")
/// measures and why: the workloads that cannot settle in `dir`, and the
/// first one's reason up to its explanation (`DIR is on ext4 without a
/// journal (DEV)`).
pub fn moved_line(
    dir: &std::path::Path,
    place: &std::path::Path,
    why: &[String],
    who: &str,
) -> String {
    let names: Vec<&str> = why
        .iter()
        .filter_map(|l| l.split_once(": ").map(|(w, _)| w))
        .collect();
    let reason = why
        .first()
        .and_then(|l| l.split_once(": "))
        .map(|(_, r)| r.split(": ").next().unwrap_or(r))
        .map(|r| {
            r.strip_prefix(&format!("{} is ", dir.display()))
                .unwrap_or(r)
        })
        .unwrap_or("");
    format!(
        "{} cannot settle in {} ({reason}): {who} works in {}, where they settle (--dir names another place)",
        names.join(", "),
        dir.display(),
        place.display()
    )
}

/// The machine's usual scratch places a run or study whose directory
/// nobody named may measure its file cases in ([`settling_dir`]), in the
/// order it tries them; every run also removes there what killed runs
/// left.
pub fn settling_places() -> [std::path::PathBuf; 3] {
    [
        std::path::PathBuf::from("/dev/shm"),
        std::env::temp_dir(),
        std::path::PathBuf::from("/var/tmp"),
    ]
}

/// Where a run or study whose directory nobody named measures the cases that
/// cannot settle in `dir` (fs.create and fileserver on ext4 without a
/// journal): the first of the machine's usual scratch places (`/dev/shm`,
/// the temporary directory, `/var/tmp`) that none of the plan's cases
/// objects to, that kscale can write, and that has room for a file set.
/// `None` when every case settles in `dir`, or when no such place exists
/// (the study then leaves them out, as before). The run's scratch
/// directory is made inside the place chosen and removed with the run, so
/// nothing is mounted and nothing outlives it.
pub fn settling_dir(
    plan: &[PlanEntry],
    dir: &std::path::Path,
) -> Option<(std::path::PathBuf, Vec<String>)> {
    /// What a file set and `fs.create`'s kept files may take.
    const ROOM_BYTES: u64 = 1 << 30;
    const ROOM_INODES: u64 = 200_000;
    let why = unsettled(plan, dir);
    if why.is_empty() {
        return None;
    }
    settling_places()
        .into_iter()
        .filter(|d| d.is_dir() && d.as_path() != dir)
        .find(|d| {
            unsettled(plan, d).is_empty()
                && nix::sys::statvfs::statvfs(d.as_path()).is_ok_and(|st| {
                    st.blocks_available().saturating_mul(st.fragment_size()) >= ROOM_BYTES
                        && st.files_available() >= ROOM_INODES
                })
                && tempfile::Builder::new()
                    .prefix(".kscale-probe-")
                    .tempdir_in(d)
                    .is_ok()
        })
        .map(|d| (d, why))
}

/// Takes out of `plan` the cases whose workload says their figures cannot
/// settle in `dir` (its `caveat`: fs.create and fileserver on ext4 without
/// a journal), and returns one line per workload, the workload and the
/// reason. A study under a budget calls it before its plan: `run` keeps
/// such cases and only says the caveat, since a user who names a case
/// asked for it.
pub fn leave_unsettled(plan: &mut Vec<PlanEntry>, dir: &std::path::Path) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut said = std::collections::BTreeSet::new();
    plan.retain(|e| {
        let Some(w) = kscale_workloads::find(&e.workload) else {
            return true;
        };
        let Some(why) = (w.caveat)(&kscale_core::Params(e.params.clone()), dir) else {
            return true;
        };
        if said.insert(e.workload.clone()) {
            lines.push(format!("{}: {why}", e.workload));
        }
        false
    });
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_parse() {
        assert_eq!(
            parse_param("size=4k,8k").unwrap(),
            ("size".into(), vec!["4k".into(), "8k".into()])
        );
        assert!(parse_param("size").is_err());
        assert!(parse_param("=4").is_err());
        assert!(parse_param("size=4k,").is_err());
    }

    #[test]
    fn targets() {
        assert!(resolve_targets(&[], None, false).is_err());
        assert!(resolve_targets(&["nope".into()], None, false).is_err());
        assert!(resolve_targets(&[], Some("nope"), false).is_err());
        assert!(resolve_targets(&[], Some("micro,nope"), false).is_err());
        let both = resolve_targets(&[], Some("micro,macro"), false).unwrap();
        assert_eq!(both[0].family, "syscall");
        assert!(both.iter().any(|w| w.family == "net"));
        // --quick takes one workload of each macro family, the whole micro
        // suite (its params' quick sweeps keep it short).
        let quick = resolve_targets(&[], Some("micro,macro"), true).unwrap();
        let fams = |ws: &[&WorkloadDef]| {
            let mut f: Vec<&str> = ws.iter().map(|w| w.family).collect();
            f.dedup();
            f
        };
        assert_eq!(fams(&quick), fams(&both));
        assert!(quick.len() < both.len());
        assert_eq!(
            quick.iter().filter(|w| w.family == "syscall").count(),
            both.iter().filter(|w| w.family == "syscall").count()
        );
        let w = resolve_targets(&["syscall.null".into(), "syscall".into()], None, false).unwrap();
        assert_eq!(w[0].id(), "syscall.null");
        assert_eq!(w.iter().filter(|w| w.id() == "syscall.null").count(), 1);
    }

    /// One CPU and two: a study's configurations on a 2-CPU machine.
    fn one_and_all() -> Vec<CpuConfig> {
        vec![
            CpuConfig {
                name: "1".into(),
                cpus: vec![0],
            },
            CpuConfig {
                name: "all".into(),
                cpus: vec![0, 1],
            },
        ]
    }

    #[test]
    fn expansion_interleaves_configs_per_case() {
        let w = resolve_targets(&["syscall.null".into()], None, false).unwrap();
        let cfgs = one_and_all();
        let p = expand(&w, &[], true, &cfgs).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].cpus_name, "1");
        assert!(expand(&w, &[("bogus".into(), vec!["1".into()])], true, &cfgs).is_err());
    }

    #[test]
    fn a_search_owns_the_cases_that_differ_only_in_its_param() {
        let k = |cpus: &str, params: &[(&str, &str)]| kscale_core::CaseKey {
            workload: "web.nginx".into(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cpus: cpus.into(),
        };
        let seed = k("1", &[("conns", "800"), ("duration", "2")]);
        for step in ["50", "12800", kscale_core::CAPACITY] {
            assert!(same_search(
                &k("1", &[("conns", step), ("duration", "2")]),
                &seed,
                "conns"
            ));
        }
        assert!(!same_search(
            &k("all", &[("conns", "800"), ("duration", "2")]),
            &seed,
            "conns"
        ));
        assert!(!same_search(
            &k("1", &[("conns", "800"), ("duration", "3")]),
            &seed,
            "conns"
        ));
        assert!(!same_search(&k("1", &[("conns", "800")]), &seed, "conns"));
        let more = k(
            "1",
            &[("conns", "800"), ("duration", "2"), ("keepalive", "on")],
        );
        assert!(!same_search(&more, &seed, "conns"));
        assert!(!same_search(&seed, &more, "conns"));
        let mut other = seed.clone();
        other.workload = "web.own".into();
        assert!(!same_search(&other, &seed, "conns"));
    }

    /// A budgeted study's decisions come first: the quick plan is kept at
    /// its lengths, every search of the default plan too, and the
    /// default sweep's other cases are held at the quick lengths, each
    /// once, each with a place in one order.
    #[test]
    fn decisions_first_keeps_the_quick_plan_and_holds_the_sweep() {
        let cfgs = one_and_all();
        let targets = ["net.tcp_rr".to_string(), "web".to_string()];
        let plan_of = |quick| {
            expand(
                &resolve_targets(&targets, None, quick).unwrap(),
                &[],
                quick,
                &cfgs,
            )
        };
        let full = plan_of(false).unwrap();
        let quick = plan_of(true).unwrap();
        let quick: Vec<PlanEntry> = quick.into_iter().filter(|e| !searched(e)).collect();
        let (plan, held) = decisions_first(quick.clone(), &full);
        // Every quick case is kept, and every search of the default plan.
        for q in &quick {
            assert!(plan.iter().any(|p| p.key() == q.key()), "{:?}", q.key());
        }
        let own = plan.iter().filter(|e| e.workload == "web.own").count();
        assert!(own > 0 && plan.iter().filter(|e| searched(e)).count() >= own);
        assert!(held.iter().all(|h| !searched(&h.entry)));
        // The held cases are the default sweep's others, at quick lengths.
        let window = |e: &PlanEntry| e.params.get("duration").cloned();
        assert!(held
            .iter()
            .all(|h| window(&h.entry).as_deref() == Some("0.5")));
        assert!(held
            .iter()
            .all(|h| !plan.iter().any(|p| p.key() == h.entry.key())));
        let conns: Vec<&str> = held
            .iter()
            .filter_map(|h| h.entry.params.get("conns").map(|s| s.as_str()))
            .collect();
        assert!(!conns.is_empty());
        // One order: every place taken once.
        let mut seqs: Vec<i64> = plan
            .iter()
            .chain(held.iter().map(|h| &h.entry))
            .filter_map(|e| e.seq)
            .collect();
        assert_eq!(seqs.len(), plan.len() + held.len());
        seqs.sort();
        seqs.dedup();
        assert_eq!(seqs.len(), plan.len() + held.len());
        // Nothing of the default plan is lost.
        for f in full.iter().cloned().map(at_quick_lengths) {
            assert!(
                plan.iter()
                    .chain(held.iter().map(|h| &h.entry))
                    .any(|e| e.key() == f.key()),
                "{:?}",
                f.key()
            );
        }
    }

    /// A quick study measures each workload's representative first: the
    /// middle of its sweep on every configuration, its other sizes held
    /// with their places, a workload without a sweep kept whole.
    #[test]
    fn a_quick_plan_holds_its_sweeps_behind_their_representatives() {
        let cfgs = one_and_all();
        let targets = ["syscall.null".to_string(), "mem.frd".to_string()];
        let mut plan = expand(
            &resolve_targets(&targets, None, true).unwrap(),
            &[],
            true,
            &cfgs,
        )
        .unwrap();
        let whole = plan.clone();
        let held = hold_sweeps(&mut plan);
        let sizes = |es: Vec<&PlanEntry>| -> Vec<String> {
            es.iter()
                .filter_map(|e| e.params.get("size").cloned())
                .collect()
        };
        assert_eq!(
            plan.iter().filter(|e| e.workload == "syscall.null").count(),
            2
        );
        let kept = sizes(plan.iter().filter(|e| e.workload == "mem.frd").collect());
        assert_eq!(kept, ["8m", "8m"], "{plan:?}");
        let mut back = sizes(held.iter().map(|h| &h.entry).collect());
        back.sort();
        assert_eq!(back, ["0.5m", "0.5m", "64m", "64m"]);
        assert!(held.iter().all(|h| h.rank >= 1000));
        // Every entry keeps its place in the whole plan.
        for e in plan.iter().chain(held.iter().map(|h| &h.entry)) {
            let i = e.seq.unwrap() as usize;
            assert_eq!(whole[i].key(), e.key());
        }
    }

    /// A sweep of two cases is the workload's comparison (chat's threads
    /// against epoll): a quick study measures both from the start.
    #[test]
    fn a_quick_plan_keeps_a_sweep_of_two_whole() {
        let targets = ["mem.frd".to_string()];
        let mut plan = expand(
            &resolve_targets(&targets, None, true).unwrap(),
            &[],
            true,
            &one_and_all(),
        )
        .unwrap();
        for mode in ["threads", "epoll"] {
            for c in one_and_all() {
                plan.push(PlanEntry {
                    workload: "chat.relay".into(),
                    params: [("mode".to_string(), mode.to_string())].into(),
                    cpus_name: c.name,
                    cpus: c.cpus,
                    seq: None,
                });
            }
        }
        let held = hold_sweeps(&mut plan);
        let modes: Vec<&str> = plan
            .iter()
            .filter_map(|e| e.params.get("mode").map(String::as_str))
            .collect();
        assert_eq!(modes.len(), 4, "{plan:?}");
        assert!(modes.contains(&"threads") && modes.contains(&"epoll"));
        assert!(held.iter().all(|h| h.entry.workload == "mem.frd"));
        assert_eq!(held.len(), 4);
    }

    /// A quick study profiles one case a family: its first workload's
    /// representative, on each CPU configuration.
    #[test]
    fn each_family_has_one_representative() {
        let targets: Vec<String> = ["syscall.null", "syscall.read", "mem.frd", "mem.fwr"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let plan = expand(
            &resolve_targets(&targets, None, true).unwrap(),
            &[],
            true,
            &one_and_all(),
        )
        .unwrap();
        let reps = family_representatives(&plan);
        let names: Vec<(&str, Option<&str>)> = reps
            .iter()
            .map(|(w, p)| (w.as_str(), p.get("size").map(String::as_str)))
            .collect();
        assert_eq!(names, [("syscall.null", None), ("mem.frd", Some("8m"))]);
    }
}
