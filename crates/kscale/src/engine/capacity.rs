//! `run --capacity`: SPECweb99's reported number, searched rather than
//! swept (docs/families/web.md). For a workload whose definition names a
//! capacity param (`conns`), find the largest value at which the primary
//! metric still equals it — every connection conforms — by bracketing
//! (doubling or halving from the starting value) and then bisecting. Each
//! step is a whole case under the workload's run rule (SPECweb99's three
//! trials and their median), stored like any other; the answer is printed
//! and stored as a note on the case measured at it.

use super::args::RunOptions;
use super::peers::PeerSet;
use super::plan::PlanEntry;
use super::runner;
use anyhow::{Context, Result};
use kscale_core::ParamKind;
use kscale_store::{CaseStatus, Store};
use kscale_workloads::WorkloadDef;
use std::collections::BTreeMap;

/// Bisection stops when the bracket is this fine: within 2 % of the
/// capacity (and one unit). A finer answer costs a trial set per halving
/// and is below what run-to-run noise can tell apart.
const RESOLUTION: f64 = 0.02;

/// The searched param of a workload, or why it has none.
pub fn param_of(w: &WorkloadDef) -> Option<&'static str> {
    w.capacity.filter(|p| {
        w.param(p)
            .is_some_and(|d| matches!(d.kind, ParamKind::Int { .. }))
    })
}

/// The plan reduced to one starting case per search: the first value of
/// the capacity param for each workload, other params and CPU set.
pub fn seeds(plan: &[PlanEntry]) -> Vec<PlanEntry> {
    let mut out: Vec<PlanEntry> = Vec::new();
    for e in plan {
        let Some(p) = kscale_workloads::find(&e.workload).and_then(param_of) else {
            continue;
        };
        let same = |o: &PlanEntry| {
            o.workload == e.workload
                && o.cpus_name == e.cpus_name
                && o.params
                    .iter()
                    .all(|(k, v)| k == p || e.params.get(k) == Some(v))
        };
        if !out.iter().any(same) {
            out.push(e.clone());
        }
    }
    out
}

/// What one search found.
#[derive(Debug, PartialEq, Eq)]
pub struct Found {
    /// The largest value that conformed (0: not even the smallest).
    pub capacity: u64,
    /// The smallest value that did not (None: the param's maximum held).
    pub fails_at: Option<u64>,
    /// Every value measured, in order, and whether it conformed.
    pub steps: Vec<(u64, bool)>,
}

/// The search itself, over a `conforms(value)` oracle: bracket from
/// `start` by doubling (or halving), then bisect to [`RESOLUTION`].
pub fn search(
    start: u64,
    min: u64,
    max: u64,
    mut conforms: impl FnMut(u64) -> Result<bool>,
) -> Result<Found> {
    let mut steps = Vec::new();
    let mut probe = |v: u64, steps: &mut Vec<(u64, bool)>| -> Result<bool> {
        let ok = conforms(v)?;
        steps.push((v, ok));
        Ok(ok)
    };
    let start = start.clamp(min.max(1), max);
    let (mut lo, mut hi);
    if probe(start, &mut steps)? {
        lo = start;
        hi = None;
        while lo < max {
            let next = lo.saturating_mul(2).min(max);
            if probe(next, &mut steps)? {
                lo = next;
            } else {
                hi = Some(next);
                break;
            }
        }
    } else {
        hi = Some(start);
        lo = 0;
        let mut cur = start;
        while cur / 2 >= min.max(1) {
            cur /= 2;
            if probe(cur, &mut steps)? {
                lo = cur;
                break;
            }
            hi = Some(cur);
        }
    }
    while let Some(h) = hi {
        let fine = ((lo as f64 * RESOLUTION) as u64).max(1);
        if h - lo <= fine || lo == 0 {
            break;
        }
        let mid = lo + (h - lo) / 2;
        if probe(mid, &mut steps)? {
            lo = mid;
        } else {
            hi = Some(mid);
        }
    }
    Ok(Found {
        capacity: lo,
        fails_at: hi,
        steps,
    })
}

/// Runs every search of `seeds` in the run, appending each step's case to
/// the plan and letting the runner measure it; prints and stores each
/// answer.
pub fn run(
    store: &Store,
    run_id: i64,
    opts: &mut RunOptions,
    seeds: Vec<PlanEntry>,
    progress: bool,
    mut peers: Option<&mut PeerSet>,
) -> Result<()> {
    for seed in seeds {
        let w = kscale_workloads::find(&seed.workload)
            .with_context(|| format!("unknown workload {}", seed.workload))?;
        let param = param_of(w).with_context(|| format!("{} has no capacity search", w.id()))?;
        let (min, max) = match w.param(param).map(|d| d.kind) {
            Some(ParamKind::Int { min, max }) => (min, max),
            _ => (1, u64::MAX),
        };
        let start: u64 = seed
            .params
            .get(param)
            .and_then(|v| v.parse().ok())
            .unwrap_or(min.max(1));
        let primary = w.primary().name;
        let mut cases: BTreeMap<u64, i64> = BTreeMap::new();
        let found = search(start, min, max, |v| {
            let mut e = seed.clone();
            e.params.insert(param.to_string(), v.to_string());
            if !opts.plan.contains(&e) {
                opts.plan.push(e.clone());
            }
            runner::execute(store, run_id, opts, progress, peers.as_deref_mut())?;
            let data = store.load_run(run_id)?;
            let case = data
                .cases
                .iter()
                .find(|c| {
                    c.key.workload == e.workload
                        && c.key.params == e.params
                        && c.key.cpus == e.cpus_name
                })
                .context("the search's case is not in the store")?;
            cases.insert(v, case.id);
            // A failed case (the server gave up) does not conform.
            Ok(case.status == CaseStatus::Done
                && case.summary(primary, 95.0).mean >= v as f64 - 1e-9)
        })?;
        let others: Vec<String> = seed
            .params
            .iter()
            .filter(|(k, _)| k.as_str() != param)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let steps: Vec<String> = found
            .steps
            .iter()
            .map(|(v, ok)| format!("{v} {}", if *ok { "yes" } else { "no" }))
            .collect();
        let bound = match found.fails_at {
            Some(f) => format!("not at {f}"),
            None => format!("up to the maximum, {max}"),
        };
        let line = format!(
            "capacity: {} {param} with {primary} = {param}, {bound} — {} {} on cpus {}; \
             steps: {}",
            found.capacity,
            w.id(),
            others.join(" "),
            seed.cpus_name,
            steps.join(", ")
        );
        eprintln!("kscale: {line}");
        // Stored with the case measured at the capacity (or the first step
        // when nothing conformed).
        let at = cases
            .get(&found.capacity)
            .or_else(|| cases.values().next())
            .copied();
        let data = store.load_run(run_id)?;
        if let Some(c) = at.and_then(|id| data.cases.iter().find(|c| c.id == id)) {
            let mut notes = c.notes.clone();
            notes.push(line);
            store.finish_case(
                c.id,
                c.status,
                c.converged,
                c.error.as_deref(),
                c.iterations,
                &notes,
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(cap: u64, start: u64, max: u64) -> Found {
        search(start, 1, max, |v| Ok(v <= cap)).unwrap()
    }

    #[test]
    fn brackets_then_bisects_to_the_capacity() {
        for (cap, start) in [(812, 50), (812, 5000), (50, 50), (1, 800), (3000, 1)] {
            let f = find(cap, start, 100_000);
            let fine = ((cap as f64 * RESOLUTION) as u64).max(1);
            assert!(
                f.capacity <= cap && cap - f.capacity <= fine,
                "{cap} {start}: {f:?}"
            );
            let fails = f.fails_at.unwrap();
            assert!(fails > cap && fails - f.capacity <= fine, "{f:?}");
            // Every step agrees with the oracle, and none is repeated.
            assert!(f.steps.iter().all(|(v, ok)| (*v <= cap) == *ok));
            let mut vs: Vec<u64> = f.steps.iter().map(|s| s.0).collect();
            vs.sort_unstable();
            vs.dedup();
            assert_eq!(vs.len(), f.steps.len(), "{f:?}");
        }
    }

    #[test]
    fn nothing_conforming_and_everything_conforming() {
        let none = search(64, 1, 1000, |_| Ok(false)).unwrap();
        assert_eq!((none.capacity, none.fails_at), (0, Some(1)));
        let all = search(64, 1, 1000, |_| Ok(true)).unwrap();
        assert_eq!((all.capacity, all.fails_at), (1000, None));
    }

    #[test]
    fn an_error_stops_the_search() {
        assert!(search(8, 1, 100, |_| anyhow::bail!("server died")).is_err());
    }
}
